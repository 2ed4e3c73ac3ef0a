"""Readable, varied, deterministic prose for the demo web's pages.

Every text is a function of its seed string only (``random.Random(str)`` hashes
the string with SHA-512), so the demo web serves the same bytes on every run
and on every machine, and ETags stay stable.
"""

from __future__ import annotations

import random
import unicodedata
from dataclasses import dataclass

_PLACES = [
    "old mill", "harbour wall", "market square", "railway bridge", "community hall",
    "riverside path", "library garden", "north meadow", "bus depot", "allotments",
    "primary school", "covered market", "lighthouse", "town museum", "swimming baths",
]
_GROUPS = [
    "allotment society", "astronomy club", "parish council", "cycling club",
    "history group", "choir", "rowing club", "repair café", "walking group",
    "chess club", "beekeepers' association", "youth orchestra", "book circle",
]
_THINGS = [
    "orchard", "footbridge", "reading room", "cycle lane", "bandstand", "tide gauge",
    "telescope", "seed library", "wildflower verge", "clock tower", "timetable",
    "bread oven", "notice board", "bird hide", "weather station",
]
_PEOPLE = [
    "Ada Whitlock", "Samir Haddad", "Maren Olsen", "Tomás Ruiz", "Grace Okafor",
    "Ines Duarte", "Pieter de Vries", "Hannah Lindqvist", "Kofi Mensah", "Yuki Tanaka",
    "Elena Petrova", "Rhys Morgan", "Aoife Byrne", "Lukas Brandt", "Priya Nair",
]
_ROLES = [
    "the club's secretary", "a volunteer", "a retired engineer", "the head teacher",
    "a local baker", "the museum's curator", "a long-time resident", "the treasurer",
    "a visiting student", "the harbour master",
]
_ADJ = [
    "new", "restored", "long-awaited", "modest", "ambitious", "temporary", "shared",
    "quiet", "popular", "experimental", "weatherproof", "second-hand",
]
_OPINION = [
    "overdue", "a pleasant surprise", "exactly what the street needed", "a good start",
    "more work than anyone expected", "worth the wait", "a small but real change",
]
_WEEKDAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]
MONTHS = [
    "January", "February", "March", "April", "May", "June", "July", "August",
    "September", "October", "November", "December",
]
_VERBS_PRESENT = [
    "plans", "opens", "restores", "celebrates", "debates", "maps", "rebuilds",
    "measures", "repaints", "welcomes",
]
_SUBJECTS = [
    "tide tables", "old maps", "bread", "bicycles", "bees", "night skies", "bridges",
    "rain gauges", "folk songs", "clocks", "hedgerows", "ferries", "printing presses",
]

_SENTENCES = [
    "On {weekday}, members of the {group} met at the {place} to talk about the {adj} {thing}.",
    "{person}, {role}, said the {thing} was {opinion}.",
    "The {adj} {thing} near the {place} should be ready by {month}, weather permitting.",
    "About {n} people came along, more than the organisers had chairs for.",
    "Nobody could quite agree on the colour, so the {thing} will stay grey for now.",
    "The work was paid for by a raffle, a cake sale and a grant of {n}0 pounds.",
    "Volunteers will meet every {weekday} morning at the {place}; no experience is needed.",
    "{person} has kept a notebook of the {subject} near the {place} for {n} years.",
    "The {group} thanked the neighbours who lent tools, ladders and a great deal of patience.",
    "A second phase, which would extend the {thing} towards the {place}, is still being discussed.",
    "Children from the primary school drew the plans, and some of their ideas survived.",
    "The old {thing} had stood there since before anyone could remember.",
    "Opening hours are posted on the notice board at the {place}.",
    "Questions can be left with {person} at the {place} on {weekday} afternoons.",
    "The minutes of the meeting will be read out at the next gathering in {month}.",
    "Rain stopped play twice, but the {group} finished the job before dark.",
    "\"We did it slowly, and we did it once,\" said {person}.",
    "There is a small exhibition about {subject} in the entrance of the {place} until {month}.",
    "The council confirmed that the path past the {place} stays open during the work.",
    "Anyone with old photographs of the {place} is asked to bring them along.",
    "The {group} meets on the first {weekday} of every month.",
    "It took {n} weekends, {n} flasks of tea and one borrowed van.",
    "Next year the {group} hopes to add {a_adj} {thing} beside the {place}.",
    "Visitors are asked to keep dogs on a lead near the {thing}.",
    "The forecast promised sunshine; the {place} got hail, then a rainbow.",
    "{person} brought a thermos and a folding table, and the meeting moved outside.",
    "Plans for the {thing} were first drawn up in {month}, on the back of an envelope.",
    "Some residents worry about parking near the {place}, and the {group} has promised a survey.",
    "The {group} now counts {n} members, the youngest of them nine years old.",
    "A plaque explaining the history of the {thing} is being written by {person}.",
    "Last winter the {place} flooded twice, which is why the {thing} now stands on stilts.",
    "Tea, biscuits and strong opinions were served in equal measure.",
    "According to {person}, the trick with {subject} is patience and a good notebook.",
    "The project's accounts, all {n} pages of them, are open to anyone who asks.",
    "A spare key to the {thing} hangs behind the counter of the {place}.",
    "Students from the college measured the {place} with a tape, a drone and a lot of chalk.",
    "If the trial goes well, the {adj} {thing} will become permanent in {month}.",
    "The {group} is looking for someone who can fix a {thing} and explain how they did it.",
    "Photographs from the opening day are pinned up in the window of the {place}.",
    "{person} remembers the days when the {place} stood next to a coal yard.",
    "Work pauses in {month}, when the swifts nest under the eaves of the {place}.",
    "There will be a guided walk from the {place} to the {thing} on {weekday} evening.",
    "Everyone agreed that the {thing} looked smaller than it had on paper.",
    "The final bill came to a little under {n}00 pounds, most of it for timber.",
    "Late in the afternoon a brass band appeared, uninvited and very welcome.",
]

_TITLES = [
    "{Group} {verb} {adj} {thing}",
    "{A_adj} {thing} for the {place}",
    "What the {group} learned about {subject}",
    "{Group} {verb} the {thing} at the {place}",
    "Notes from the {place}: {subject} in {month}",
    "The {thing} by the {place}, one year on",
]


@dataclass(frozen=True)
class Article:
    slug: str
    title: str
    paragraphs: tuple[str, ...]
    author: str
    month: int  # 1..12
    day: int  # 1..28
    year: int


def _topic(rng: random.Random) -> dict[str, str]:
    """What one text is mostly about: its sentences come back to these."""
    return {"place": rng.choice(_PLACES), "group": rng.choice(_GROUPS),
            "thing": rng.choice(_THINGS), "subject": rng.choice(_SUBJECTS)}


def _fill(rng: random.Random, template: str, topic: dict[str, str]) -> str:
    def pick(key: str, choices: list[str]) -> str:
        return topic[key] if rng.random() < 0.7 else rng.choice(choices)

    group = pick("group", _GROUPS)
    adj = rng.choice(_ADJ)
    values = {
        "place": pick("place", _PLACES),
        "group": group,
        "Group": group[0].upper() + group[1:],
        "thing": pick("thing", _THINGS),
        "person": rng.choice(_PEOPLE),
        "role": rng.choice(_ROLES),
        "adj": adj,
        "a_adj": ("an " if adj[0] in "aeiou" else "a ") + adj,
        "A_adj": ("An " if adj[0] in "aeiou" else "A ") + adj,
        "opinion": rng.choice(_OPINION),
        "weekday": rng.choice(_WEEKDAYS),
        "month": rng.choice(MONTHS),
        "verb": rng.choice(_VERBS_PRESENT),
        "subject": pick("subject", _SUBJECTS),
        "n": str(rng.randint(3, 60)),
    }
    return template.format(**values)


def paragraphs(seed: str, count: int = 5, topic: dict[str, str] | None = None) -> tuple[str, ...]:
    """``count`` paragraphs of 3 to 6 sentences, fixed by ``seed``.

    >>> paragraphs("x", 2) == paragraphs("x", 2)
    True
    """
    rng = random.Random(seed)
    topic = topic or _topic(rng)
    out = []
    for _ in range(count):
        picked = rng.sample(_SENTENCES, rng.randint(3, 6))
        out.append(" ".join(_fill(rng, s, topic) for s in picked))
    return tuple(out)


def title(seed: str, topic: dict[str, str] | None = None) -> str:
    rng = random.Random("title:" + seed)
    return _fill(rng, rng.choice(_TITLES), topic or _topic(rng))


def article(seed: str, index: int, year: int = 2025) -> Article:
    """Article number ``index`` of the collection ``seed``; its slug is unique in it."""
    rng = random.Random(f"article:{seed}:{index}")
    topic = _topic(rng)
    head = title(f"{seed}:{index}", topic)
    ascii_head = unicodedata.normalize("NFKD", head).encode("ascii", "ignore").decode()
    words = "".join(c if c.isalnum() else "-" for c in ascii_head.lower()).split("-")
    slug = "-".join(w for w in words if w)[:48].rstrip("-") + f"-{index}"
    return Article(
        slug=slug,
        title=head,
        paragraphs=paragraphs(f"{seed}:{index}", rng.randint(4, 7), topic),
        author=rng.choice(_PEOPLE),
        month=rng.randint(1, 12),
        day=rng.randint(1, 28),
        year=year,
    )
