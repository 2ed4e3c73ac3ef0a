"""Trap memory: trails, judgements kept in the state directory, expiry."""

from __future__ import annotations

from typing import Any

from polite_crawler.policy.traps import TrapMemory, extend_trail, trap_pages
from polite_crawler.store.traps import TrapBook

E = "http://e.org"


def test_a_calendar_trail_gives_its_pages_after_the_entry() -> None:
    trail: tuple[str, ...] = ()
    parent = f"{E}/calendar?m=1"
    for m in range(2, 6):
        child = f"{E}/calendar?m={m}"
        trail = extend_trail(parent, trail, child)
        parent = child
    assert trail == tuple(f"{E}/calendar?m={m}" for m in range(1, 5))
    # The entry (m=1, linked from an ordinary page) stays a page; the rest is the trap.
    assert trap_pages(trail, f"{E}/calendar?m=6") == [f"{E}/calendar?m={m}" for m in (2, 3, 4, 6)]
    # A link out of the pattern starts no trail.
    assert extend_trail(parent, trail, f"{E}/about") == ()


def test_memory_expires() -> None:
    mem = TrapMemory(ttl=100.0)
    assert mem.add(f"{E}/x", "depth", 1000.0)
    assert not mem.add(f"{E}/x", "depth", 1010.0)  # known already
    assert mem.remembered(f"{E}/x", 1099.0) == "depth"
    assert mem.remembered(f"{E}/x", 1200.0) is None  # expired: walked again
    assert mem.remembered(f"{E}/y", 1000.0) is None


def test_book_is_durable_and_forgets_what_expired(tmp_path: Any) -> None:
    path = tmp_path / "polite-traps.sqlite3"
    book = TrapBook(path, ttl=100.0)
    assert book.remember([f"{E}/a", f"{E}/b"], "repeated_segment", 1000.0).result() == 2
    assert book.remember([f"{E}/a"], "repeated_segment", 1001.0).result() == 0
    book.close()
    again = TrapBook(path, ttl=100.0)  # another crawl, another process
    assert again.remembered(f"{E}/a", 1050.0) == "repeated_segment"
    assert again.remembered(f"{E}/c", 1050.0) is None
    again.close()
    later = TrapBook(path, ttl=100.0)
    assert later.remembered(f"{E}/b", 1200.0) is None
    assert later.count() == 0  # expired rows are deleted when read
    later.close()


def test_book_keeps_session_token_templates(tmp_path: Any) -> None:
    # The template outlives the crawl that learnt it, for every token.
    path = tmp_path / "polite-traps.sqlite3"
    book = TrapBook(path, ttl=100.0)
    assert book.remember_template(f"{E}/s/{{id}}/", "session_token", 1000.0).result() == 1
    assert book.remember_template(f"{E}/s/{{id}}/", "session_token", 1001.0).result() == 0
    book.close()
    again = TrapBook(path, ttl=100.0)
    assert again.remembered(f"{E}/s/0123456789abcdef/page-4", 1050.0) == "session_token"
    assert again.remembered(f"{E}/page-4", 1050.0) is None
    again.close()
    from polite_crawler.store.traps import forget_traps

    assert forget_traps(path, E, timeout=1.0) == 1  # keyed by its origin
