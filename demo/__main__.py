"""``python -m demo``: the demo crawl (:mod:`demo.crawl`)."""

from demo.crawl import main

if __name__ == "__main__":
    raise SystemExit(main())
