"""Builds the committed text data of the synthetic documents, once, offline.

    python -m hpd_training.synth.harvest   # writes data/corpus.txt, data/words.txt, data/names.txt

corpus.txt: English prose paragraphs, one per line, printable ASCII, harvested from text that
ships with Python and its packages: the Python Language Reference (`pydoc_data.topics`), the
long descriptions of the installed distributions (their READMEs and changelogs) and the
docstrings of the standard library. words.txt: the most frequent plain words of that corpus.
names.txt: authors' names from the distributions' metadata. Run-time code only reads the files.
"""

from __future__ import annotations

import ast
import random
import re
import sys
import sysconfig
from collections import Counter
from importlib import metadata
from pathlib import Path

import pydoc_data.topics

DATA = Path(__file__).with_name("data")
CORPUS_BYTES = 950_000
N_WORDS = 5000

_ASCII = str.maketrans({"\u2018": "'", "\u2019": "'", "\u201c": '"', "\u201d": '"', "\u2013": "-",
                        "\u2014": " - ", "\u2026": "...", "\u00a0": " ", "\u00e9": "e"})
_MARKUP = [
    (re.compile(r"!?\[([^\]]*)\]\([^)]*\)"), r"\1"),      # markdown links and images
    (re.compile(r"`([^`<]*?)\s*<[^>]*>`_+"), r"\1"),       # rst links
    (re.compile(r":[a-z:]+:`~?([^`]*)`"), r"\1"),          # rst roles
    (re.compile(r"\*\*([^*]+)\*\*|__([^_]+)__"), r"\1\2"),  # bold
    (re.compile(r"`+([^`]*)`+"), r"\1"),                   # literals
    (re.compile(r"(?<!\w)\*([^*\s][^*]*)\*(?!\w)"), r"\1"),  # emphasis
    (re.compile(r"\s+"), " "),
]
_CODE_LIKE = re.compile(r"[{}<>|\\#@$=_&]|\(\)|::|\.\.|http|www\.|\.py\b|\bdef\b|\bimport\b")


def clean(paragraph: str) -> str | None:
    """The paragraph as one line of plain ASCII prose, or None if it is not prose."""
    text = paragraph.translate(_ASCII)
    for pattern, repl in _MARKUP:
        text = pattern.sub(repl, text)
    text = text.strip()
    words = text.split()
    if not text.isascii() or not text.isprintable() or len(words) < 12:
        return None
    if not text[0].isupper() or text[-1] not in ".!?" or _CODE_LIKE.search(text):
        return None
    plain = sum(w.strip(".,;:!?\"'()").isalpha() for w in words)
    return text if plain >= 0.85 * len(words) else None


def paragraphs(doc: str) -> list[str]:
    """Blank-line separated, unindented paragraphs of `doc` (indented ones are code)."""
    out = []
    for chunk in re.split(r"\n\s*\n", doc):
        lines = chunk.split("\n")
        if any(line.startswith((" " * 3, "\t", ">>>", "#", "=", "-", "*", "|", "..")) for line in lines):
            continue
        text = clean(" ".join(lines))
        if text:
            out.append(text)
    return out


def documents() -> list[list[str]]:
    docs = [paragraphs(text) for text in pydoc_data.topics.topics.values()]
    for dist in metadata.distributions():
        docs.append(paragraphs(dist.metadata.get_payload() or ""))
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    for path in sorted(stdlib.glob("*.py")) + sorted(stdlib.glob("*/*.py")):
        if "test" in path.parts[-2:] or path.name.startswith("test"):
            continue
        try:
            tree = ast.parse(path.read_text(encoding="utf-8"))
        except (SyntaxError, UnicodeDecodeError):
            continue
        nodes = [tree] + [n for n in ast.walk(tree)
                          if isinstance(n, (ast.FunctionDef, ast.ClassDef, ast.AsyncFunctionDef))]
        docs.append([p for n in nodes for p in paragraphs(ast.get_docstring(n) or "")])
    return [d for d in docs if d]


def names() -> list[str]:
    pattern = re.compile(r"^[A-Z][a-z]+(?: [A-Z]\.)?(?: [A-Z][a-z]+){1,2}$")
    found = set()
    for dist in metadata.distributions():
        for field in ("Author", "Maintainer", "Author-email", "Maintainer-email"):
            for part in re.split(r",|\band\b", dist.metadata.get(field) or ""):
                name = re.sub(r"<[^>]*>|\"", "", part).strip()
                if pattern.match(name):
                    found.add(name)
    return sorted(found)


def main() -> None:
    docs = documents()
    random.Random(0).shuffle(docs)
    seen, corpus, size = set(), [], 0
    for doc in docs:
        for para in doc:
            if para not in seen and size + len(para) + 1 <= CORPUS_BYTES:
                seen.add(para)
                corpus.append(para)
                size += len(para) + 1
    counts = Counter(w.lower() for p in corpus for w in re.findall(r"[A-Za-z]+", p))
    words = [w for w, _ in counts.most_common() if 2 <= len(w) <= 14][:N_WORDS]
    DATA.mkdir(exist_ok=True)
    (DATA / "corpus.txt").write_text("\n".join(corpus) + "\n", encoding="ascii")
    (DATA / "words.txt").write_text("\n".join(sorted(words)) + "\n", encoding="ascii")
    (DATA / "names.txt").write_text("\n".join(names()) + "\n", encoding="ascii")
    print(f"{len(corpus)} paragraphs, {size} bytes; {len(words)} words", file=sys.stderr)


if __name__ == "__main__":
    main()
