"""Text of synthetic pages: real prose from a committed corpus, or random words and numbers.

Random text has no language to lean on (uniform words from a word list, numbers,
punctuation), so a model must read it from the pixels; real text has the predictability of
prose. Two sources (`source`): "python" (data/corpus.txt, Python's documentation, 5,000 words)
and "general" (data/general.txt.xz from Debian's plain-text docs, the 76,000 words and names of
Debian's word lists, with e-mail addresses, URLs, references, units and prices mixed in; see
`debian.py`). All functions draw from the caller's `random.Random` and return lists of words
(no spaces inside a word), so that joining them with single spaces gives the content.
"""

from __future__ import annotations

import functools
import lzma
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
    proper: tuple[str, ...] = ()  # names of people and places (general source)


@functools.lru_cache(maxsize=None)
def corpus(source: str = "python") -> Corpus:
    if source == "python":
        paragraphs = (_DATA / "corpus.txt").read_text(encoding="ascii").splitlines()
        return _corpus(paragraphs, _lines("words.txt"), _lines("names.txt"))
    dictionary = _xz_lines("dictionary.txt.xz")
    return _corpus(_xz_lines("general.txt.xz"), tuple(w for w in dictionary if w.islower()),
                   _xz_lines("people.txt.xz"), tuple(w for w in dictionary if w[0].isupper()))


def _corpus(paragraphs: list[str] | tuple[str, ...], vocabulary: tuple[str, ...],
            names: tuple[str, ...], proper: tuple[str, ...] = ()) -> Corpus:
    words: list[str] = []
    starts: list[int] = []
    for paragraph in paragraphs:
        for word in paragraph.split():
            if len(word) > _MAX_WORD:
                continue
            if not words or (words[-1][-1] in ".!?" and word[0].isupper()):
                starts.append(len(words))
            words.append(word)
    return Corpus(tuple(words), tuple(starts), vocabulary, names, proper)


def _lines(name: str) -> tuple[str, ...]:
    return tuple((_DATA / name).read_text(encoding="ascii").splitlines())


def _xz_lines(name: str) -> tuple[str, ...]:
    return tuple(lzma.decompress((_DATA / name).read_bytes()).decode("utf-8").splitlines())


def prose(rng: random.Random, n: int, source: str = "python") -> list[str]:
    """About n words of consecutive corpus text, from a sentence start to a sentence end;
    general text sometimes cites a reference ("[12]") or a section, table or figure."""
    c = corpus(source)
    start = c.starts[rng.randrange(len(c.starts) - 200)]
    out = list(c.words[start:start + n])
    for word in c.words[start + n:start + n + 30]:
        if out[-1][-1] in ".!?":
            break
        out.append(word)
    if source == "general" and len(out) > 4 and rng.random() < 0.25:
        at = rng.randrange(1, len(out) - 1)
        if out[at][-1].isalpha():
            out[at + 1:at + 1] = citation(rng)
    return out


def citation(rng: random.Random) -> list[str]:
    """A reference inside a sentence: [12], [3, 7], [4-6], (see Section 3.2), Table 4, Eq. (2)."""
    n = rng.randint(1, 60)
    kind = rng.randrange(6)
    if kind == 0:
        return [f"[{n}]"]
    if kind == 1:
        return [f"[{n},", f"{n + rng.randint(1, 20)}]"]
    if kind == 2:
        return [f"[{n}\u2013{n + rng.randint(1, 5)}]" if rng.random() < 0.5 else f"[{n}-{n + rng.randint(1, 5)}]"]
    if kind == 3:
        return ["(see", "Section", f"{rng.randint(1, 9)}.{rng.randint(1, 9)})"]
    if kind == 4:
        return [rng.choice(("(Table", "(Figure", "(Fig.")), f"{rng.randint(1, 12)})"]
    return ["in", "Eq.", f"({rng.randint(1, 30)})"]


def email(rng: random.Random) -> str:
    c = corpus("general")
    first, last, host = rng.choice(c.proper).lower(), rng.choice(c.vocabulary)[:10], rng.choice(c.vocabulary)[:10]
    return f"{rng.choice((first, first[0]))}.{last}@{host}.{rng.choice(('org', 'com', 'edu', 'net', 'de'))}"


def technical(rng: random.Random) -> list[str]:
    """One e-mail address, URL, quantity with a unit, price, time, version or citation."""
    kind = rng.randrange(8)
    c = corpus("general")
    word = lambda: rng.choice(c.vocabulary)[:10]
    if kind == 0:
        return [email(rng)]
    if kind == 1:
        path = "/".join(word() for _ in range(rng.randint(0, 2)))
        return [f"{rng.choice(('https://', 'http://', 'https://www.'))}{word()}.{rng.choice(('org', 'com', 'io'))}/{path}"]
    if kind == 2:
        unit = rng.choice(("mm", "cm", "m", "km", "kg", "g", "mg", "ms", "s", "Hz", "kHz", "MHz", "V",
                           "mA", "W", "kW", "MB", "GB", "\u00b0C", "K", "%", "dB", "ppm"))
        return [f"{rng.uniform(0, 1000):.{rng.randint(0, 2)}f}", unit]
    if kind == 3:
        return [rng.choice(("$", "USD ", "EUR ")).strip() + f"{rng.uniform(1, 20000):,.2f}"]
    if kind == 4:
        return [f"{rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}"]
    if kind == 5:
        return [f"v{rng.randint(0, 9)}.{rng.randint(0, 20)}.{rng.randint(0, 9)}"]
    if kind == 6:
        return [f"{rng.uniform(0, 50):.1f}\u00b1{rng.uniform(0, 5):.1f}"]
    return citation(rng)


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


def name(rng: random.Random, source: str = "python") -> str:
    c = corpus(source)
    if source == "python" or rng.random() < 0.3:
        return rng.choice(c.names)
    first = rng.choice(c.proper)
    return f"{first[0]}. {rng.choice(c.proper)}" if rng.random() < 0.3 else f"{first} {rng.choice(c.proper)}"


_STREETS = ("Street", "Road", "Avenue", "Lane", "Way", "Drive", "Place", "Square", "Court", "Close", "Hill",
            "Park", "Row", "Gardens")
_COUNTRIES = ("United Kingdom", "USA", "U.S.A.", "Germany", "Canada", "Australia", "Ireland", "New Zealand",
              "Switzerland", "The Netherlands", "France", "Sweden")
_HONORIFICS = ("Mr", "Mrs", "Ms", "Dr", "Prof.", "Mr.", "Mrs.", "Ms.", "Dr.")
_CLOSINGS = ("Yours sincerely,", "Sincerely,", "Sincerely yours,", "Yours faithfully,", "Best regards,",
             "Kind regards,", "With best wishes,", "Regards,", "Yours truly,", "Best wishes,", "Warm regards,")


def proper(rng: random.Random, source: str = "general") -> str:
    """A name of a person or place (the general source's; people's names for Python's)."""
    c = corpus(source)
    return rng.choice(c.proper or c.names)


def address(rng: random.Random, source: str = "general", sender: bool = False) -> list[list[str]]:
    """The lines of a postal address: a name (sometimes with an honorific), sometimes an
    organisation, a street with its number, a postcode and town in one of three countries' forms,
    sometimes a country; a sender's sometimes ends with a telephone number or e-mail address."""
    place = lambda: proper(rng, source)
    who = name(rng, source).split()
    lines = [[rng.choice(_HONORIFICS)] + who if rng.random() < 0.3 else who]
    if rng.random() < 0.5:
        lines.append(organisation(rng, source))
    street, number = [place(), rng.choice(_STREETS)], str(rng.randint(1, 250)) + rng.choice(("", "", "", "a", "b"))
    lines.append([number] + street if rng.random() < 0.6 else street + [number])
    letters = lambda n: "".join(rng.choice("ABCDEFGHJKLMNPRSTUWXYZ") for _ in range(n))
    form = rng.randrange(3)
    if form == 0:    # US: Town, ST 12345
        lines.append([place() + ",", letters(2), f"{rng.randint(1000, 99999):05d}"])
    elif form == 1:  # UK: Town AB1 2CD
        lines.append([place(), f"{letters(rng.randint(1, 2))}{rng.randint(1, 29)}", f"{rng.randint(1, 9)}{letters(2)}"])
    else:            # Germany, Switzerland, ...: 12345 Town
        lines.append([f"{rng.randint(1000, 99999)}", place()])
    if rng.random() < 0.25:
        lines.append(rng.choice(_COUNTRIES).split())
    if sender and source == "general" and rng.random() < 0.4:
        lines.append(rng.choice((["Tel."], ["Phone:"], ["Telephone"], [])) +
                     [f"+{rng.randint(1, 49)}", str(rng.randint(10, 999)), str(rng.randint(1000, 9999999))])
    if sender and source == "general" and rng.random() < 0.3:
        lines.append([email(rng)])
    return lines


def organisation(rng: random.Random, source: str = "general") -> list[str]:
    """"Northfield University", "Department of Geology", "Kemp & Riddle Ltd", ..."""
    c = corpus(source)
    place, word = lambda: proper(rng, source), lambda: rng.choice(c.vocabulary).capitalize()
    return rng.choice(([place(), "University"], ["University", "of", place()], ["Department", "of", word()],
                       [place(), rng.choice(("Ltd", "Inc.", "GmbH", "plc", "LLC", "AG"))],
                       [place(), "&", place()], [place(), word(), rng.choice(("Institute", "Society", "Group"))],
                       [word(), word(), rng.choice(("Services", "Systems", "Partners", "Press"))]))


def salutation(rng: random.Random, source: str = "general") -> list[str]:
    """"Dear Dr Okafor," and its kin."""
    first, last = proper(rng, source), proper(rng, source)
    return rng.choice((["Dear", rng.choice(_HONORIFICS), last + ","], ["Dear", first + ","],
                       ["Dear", first, last + ","], ["Dear", "Sir", "or", "Madam,"], ["Dear", "colleagues,"],
                       ["Hello", first + ","], ["To", "whom", "it", "may", "concern:"]))


def closing(rng: random.Random) -> list[str]:
    return rng.choice(_CLOSINGS).split()


def random_words(rng: random.Random, n: int, source: str = "python") -> list[str]:
    """n random words and numbers with sentence-like capitals and punctuation; general words
    include names and places, e-mail addresses, URLs, quantities and references."""
    c = corpus(source)
    vocab = c.vocabulary
    out: list[str] = []
    capital = True
    for _ in range(n):
        r = rng.random()
        if source == "general" and r < 0.08:
            out += [rng.choice(c.proper)] if rng.random() < 0.6 else technical(rng)
            capital = False
            continue
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


def words(rng: random.Random, real: bool, n: int, source: str = "python") -> list[str]:
    return prose(rng, n, source) if real else random_words(rng, n, source)


def phrase(rng: random.Random, real: bool, n: int, source: str = "python") -> list[str]:
    """n words without final punctuation, first one capitalised: titles, headers, labels."""
    out = words(rng, real, n, source)[:n]
    out[-1] = out[-1].rstrip(".,;:!?") or out[-1]
    if rng.random() < 0.3:
        out = [w.capitalize() if w.islower() and len(w) > 3 else w for w in out]
    out[0] = out[0][:1].upper() + out[0][1:]
    return out
