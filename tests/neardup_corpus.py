"""A near-duplicate corpus built from a seed: news articles on one site template.

True variants of an article: another date, another byline, one sentence
changed, and date and byline together. True non-duplicates: different articles
on the same template (navigation, share line, related links and footer in the
text, as an imperfect extractor leaves them). Used by
tests/test_policy_simhash.py and bench/simhash_tuning.py.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August",
          "September", "October", "November", "December"]
FIRST = ["Anna", "Ben", "Clara", "David", "Emma", "Farid", "Grace", "Hugo", "Ines", "Jonas",
         "Karin", "Liam", "Maya", "Nils", "Olga", "Pablo", "Rosa", "Sven", "Tara", "Yusuf"]
LAST = ["Andersen", "Brown", "Costa", "Dubois", "Eriksen", "Fischer", "Garcia", "Hansen",
        "Ivanova", "Jensen", "Kowalski", "Larsen", "Moreau", "Nielsen", "Okafor", "Petersen"]
ROLES = ["Staff reporter", "Political editor", "Science correspondent", "Business desk"]
STOP = ["the", "of", "and", "to", "a", "in", "is", "that", "for", "it", "as", "was", "with",
        "on", "be", "by", "this", "are", "at", "from", "or", "have", "an", "they", "which",
        "not", "but", "had", "has", "were", "their", "been", "more", "will", "would", "its"]
_SYL = ["ba", "ce", "di", "fo", "gu", "ha", "ke", "li", "mo", "nu", "pa", "re", "si", "to",
        "va", "we", "xo", "yi", "za", "tor", "men", "ing", "ist", "ure", "al", "on", "ent"]


def _vocabulary(rng: random.Random, size: int = 4000) -> list[str]:
    seen: set[str] = set(STOP)
    out: list[str] = []
    while len(out) < size:
        w = "".join(rng.choice(_SYL) for _ in range(rng.randint(1, 4)))
        if w not in seen:
            seen.add(w)
            out.append(w)
    return out


@dataclass
class Variant:
    base: int  # index of the article it is a variant of
    kind: str  # "date", "byline", "sentence", "date+byline"
    text: str


@dataclass
class Corpus:
    articles: list[str] = field(default_factory=list)
    variants: list[Variant] = field(default_factory=list)


@dataclass
class _Article:
    title: str
    date: str
    byline: str
    sentences: list[str]
    related: list[str]


class _Writer:
    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.vocab = _vocabulary(self.rng)
        # Zipf-like word frequencies, stop words most frequent of all.
        self.words = STOP + self.vocab
        self.weights = [1.0 / (r + 1) for r in range(len(self.words))]
        self.date_style = 0

    def sentence(self) -> str:
        n = self.rng.randint(8, 26)
        ws = self.rng.choices(self.words, self.weights, k=n)
        if self.rng.random() < 0.3:  # numbers in the body: years, amounts, counts
            ws.insert(self.rng.randrange(n), str(self.rng.randint(2, 2030)))
        return " ".join(ws).capitalize() + "."

    def title(self) -> str:
        return " ".join(self.rng.choices(self.vocab, k=self.rng.randint(4, 9))).title()

    def date(self, style: int) -> str:
        y, m, d = self.rng.randint(2015, 2025), self.rng.randint(1, 12), self.rng.randint(1, 28)
        hh, mm = self.rng.randint(0, 23), self.rng.randint(0, 59)
        if style == 0:
            return f"Published {d} {MONTHS[m - 1]} {y}, {hh:02d}:{mm:02d}"
        if style == 1:
            return f"{MONTHS[m - 1]} {d}, {y}"
        return f"Updated {y}-{m:02d}-{d:02d}T{hh:02d}:{mm:02d}Z"

    def byline(self) -> str:
        return f"By {self.rng.choice(FIRST)} {self.rng.choice(LAST)}, {self.rng.choice(ROLES)}"

    def article(self) -> _Article:
        n_words = self.rng.randint(250, 1000)
        sentences: list[str] = []
        while sum(len(s.split()) for s in sentences) < n_words:
            sentences.append(self.sentence())
        self.date_style = (self.date_style + 1) % 3
        return _Article(self.title(), self.date(self.date_style), self.byline(), sentences,
                        [self.title() for _ in range(3)])


TEMPLATE_HEAD = "Home News World Business Sport Culture Opinion Weather Sign in Subscribe"
TEMPLATE_SHARE = "Share this article on Facebook Twitter LinkedIn or by email Print"
TEMPLATE_FOOT = (
    "Subscribe to our newsletter for the day's top stories in your inbox every morning. "
    "Copyright 2025 Example News Ltd. All rights reserved. Privacy policy Cookie settings "
    "Terms of use Contact us Advertise with us Careers Accessibility"
)


def render(a: _Article) -> str:
    paras = [" ".join(a.sentences[i : i + 4]) for i in range(0, len(a.sentences), 4)]
    return "\n".join([
        TEMPLATE_HEAD, a.title, a.date, a.byline, TEMPLATE_SHARE, *paras,
        "Related articles", *a.related, TEMPLATE_FOOT,
    ])


def build_corpus(n_articles: int = 200, seed: int = 8) -> Corpus:
    """``n_articles`` articles and four variants of each (deterministic for a seed)."""
    w = _Writer(seed)
    corpus = Corpus()
    for i in range(n_articles):
        a = w.article()
        corpus.articles.append(render(a))
        style = ["Published", "", "Updated"]
        s = next((k for k, p in enumerate(style) if p and a.date.startswith(p)), 1)
        date_variant = _Article(a.title, w.date(s), a.byline, a.sentences, a.related)
        byline_variant = _Article(a.title, a.date, w.byline(), a.sentences, a.related)
        changed = list(a.sentences)
        changed[w.rng.randrange(len(changed))] = w.sentence()
        sentence_variant = _Article(a.title, a.date, a.byline, changed, a.related)
        both = _Article(a.title, w.date(s), w.byline(), a.sentences, a.related)
        for kind, v in (("date", date_variant), ("byline", byline_variant),
                        ("sentence", sentence_variant), ("date+byline", both)):
            corpus.variants.append(Variant(i, kind, render(v)))
    return corpus
