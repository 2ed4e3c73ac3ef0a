"""The crawl's own signals, sent through Scrapy's signal manager (``crawler.signals``).

- :data:`page_store_state`: the page store's database went away or came back. Sent
  on the reactor thread with ``state`` (``full``: the writes waiting have reached
  POLITE_STORE_BUFFER; ``room``: below it again; ``ok``: the database answers again;
  ``down``: it did not answer for POLITE_STORE_GIVE_UP, the store gave up) and ``why``
  (in words). :class:`polite_crawler.extensions.storewatch.StoreWatch` pauses, resumes
  and closes the crawl on it; the store knows nothing of the engine.
"""

from __future__ import annotations

page_store_state = object()
