"""Close reasons that mean a crawl failed, and the exit status ``scrapy crawl`` gives each.

A crawl that stops because it could not do its work (its page store stayed away, the
process ran out of file descriptors, a rule left it nothing it may send) closes the
spider with one of these reasons; the crawl command maps the run's ``finish_reason``
to the status here instead of Scrapy's 0. A reason not listed ends the run with 0.
"""

from __future__ import annotations

#: The page store stayed unreachable past POLITE_STORE_DOWN_TIMEOUT (store.pages).
STORE_DOWN = "page_store_down"

#: The process ran out of file descriptors mid-crawl (EMFILE or ENFILE, anywhere in its
#: work): closed at the first such error (extensions.descriptors).
DESCRIPTORS_EXHAUSTED = "descriptors_exhausted"

#: The open-file limit cannot hold even a few requests in flight beside the crawl's own
#: files: closed as it opened, saying the limit and what it needs (policy.descriptors).
DESCRIPTORS_SHORT = "descriptors_short"

#: Nothing was sent at all: a rule of the crawler's own refused every request (the
#: address policy, the opt-out list, a site's remembered block, no POLITE_BOT_URL);
#: one line names the rule and its setting (extensions.nothingsent).
NOTHING_SENT = "nothing_sent"

#: finish_reason -> exit status of ``scrapy crawl``.
EXIT_STATUS: dict[str, int] = {
    STORE_DOWN: 1,
    NOTHING_SENT: 3,
    DESCRIPTORS_EXHAUSTED: 1,
    # Could not start, as the command's own refusals (2).
    DESCRIPTORS_SHORT: 2,
}


def exit_status(finish_reason: object) -> int:
    """The exit status of a crawl that closed with ``finish_reason`` (0 if not a failure).

    >>> exit_status("finished"), exit_status(STORE_DOWN), exit_status(None)
    (0, 1, 0)
    """
    return EXIT_STATUS.get(str(finish_reason), 0) if finish_reason is not None else 0
