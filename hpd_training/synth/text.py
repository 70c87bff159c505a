"""Text of synthetic pages: real prose from the committed corpus, or random words and numbers.

Random text has no language to lean on (uniform words from a 5,000-word list, numbers,
punctuation), so a model must read it from the pixels; real text has the predictability of
prose. All functions draw from the caller's `random.Random` and return lists of words
(no spaces inside a word), so that joining them with single spaces gives the content.
"""

from __future__ import annotations

import functools
import random
from dataclasses import dataclass
from pathlib import Path

_DATA = Path(__file__).with_name("data")
_MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August",
           "September", "October", "November", "December")
_MAX_WORD = 18  # longer corpus words (rare) are left out so every word fits a narrow column


@dataclass(frozen=True, eq=False)
class Corpus:
    words: tuple[str, ...]       # every corpus word in order, paragraphs concatenated
    starts: tuple[int, ...]      # indices into `words` where a sentence starts
    vocabulary: tuple[str, ...]  # words.txt: the frequent plain words
    names: tuple[str, ...]       # names.txt: people's names


@functools.lru_cache(maxsize=None)
def corpus() -> Corpus:
    words: list[str] = []
    starts: list[int] = []
    for paragraph in (_DATA / "corpus.txt").read_text(encoding="ascii").splitlines():
        for word in paragraph.split():
            if len(word) > _MAX_WORD:
                continue
            if not words or (words[-1][-1] in ".!?" and word[0].isupper()):
                starts.append(len(words))
            words.append(word)
    return Corpus(tuple(words), tuple(starts), _lines("words.txt"), _lines("names.txt"))


def _lines(name: str) -> tuple[str, ...]:
    return tuple((_DATA / name).read_text(encoding="ascii").splitlines())


def prose(rng: random.Random, n: int) -> list[str]:
    """About n words of consecutive corpus text, from a sentence start to a sentence end."""
    c = corpus()
    start = c.starts[rng.randrange(len(c.starts) - 200)]
    out = list(c.words[start:start + n])
    for word in c.words[start + n:start + n + 30]:
        if out[-1][-1] in ".!?":
            break
        out.append(word)
    return out


def number(rng: random.Random) -> str:
    kind = rng.randrange(7)
    if kind == 0:
        return f"{rng.randrange(100000):,}"
    if kind == 1:
        return f"{rng.uniform(-100, 1000):.{rng.randint(1, 3)}f}"
    if kind == 2:
        return f"{rng.uniform(0, 100):.1f}%"
    if kind == 3:
        return f"${rng.uniform(1, 50000):,.2f}"
    if kind == 4:
        return str(rng.randint(1900, 2030))
    return str(rng.randrange(10 ** rng.randint(1, 6)))


def date(rng: random.Random) -> str:
    y, m, d = rng.randint(1950, 2030), rng.randint(1, 12), rng.randint(1, 28)
    return rng.choice((f"{_MONTHS[m - 1]} {d}, {y}", f"{y}-{m:02d}-{d:02d}", f"{d:02d}/{m:02d}/{y}",
                       f"{d} {_MONTHS[m - 1][:3]} {y}"))


def name(rng: random.Random) -> str:
    return rng.choice(corpus().names)


def random_words(rng: random.Random, n: int) -> list[str]:
    """n random words and numbers with sentence-like capitals and punctuation."""
    vocab = corpus().vocabulary
    out: list[str] = []
    capital = True
    for _ in range(n):
        r = rng.random()
        word = number(rng) if r < 0.12 else rng.choice(vocab)
        if word[0].isalpha() and (capital or r > 0.88):
            word = word.upper() if r > 0.985 else word.capitalize()
        p = rng.random()
        punct = "," if p < 0.07 else "." if p < 0.13 else ";" if p < 0.14 else ":" if p < 0.15 else ""
        if 0.15 <= p < 0.17:
            word = f"({word})"
        out.append(word + punct)
        capital = punct == "."
    out[-1] = out[-1].rstrip(",;:") + ("" if out[-1][-1] in ".)" else ".")
    return out


def words(rng: random.Random, real: bool, n: int) -> list[str]:
    return prose(rng, n) if real else random_words(rng, n)


def phrase(rng: random.Random, real: bool, n: int) -> list[str]:
    """n words without final punctuation, first one capitalised: titles, headers, labels."""
    out = (prose(rng, n) if real else random_words(rng, n))[:n]
    out[-1] = out[-1].rstrip(".,;:!?") or out[-1]
    if rng.random() < 0.3:
        out = [w.capitalize() if w.islower() and len(w) > 3 else w for w in out]
    out[0] = out[0][:1].upper() + out[0][1:]
    return out
