"""Builds the general-text data of document-like synthetic pages, once, offline, from Debian.

    apt-get install man-db wamerican wbritish   # plus whatever packages' docs are installed
    python -m hpd_training.synth.debian             # writes data/{general,dictionary,people}.txt.xz

general.txt.xz: English prose and technical paragraphs, one per line, in CHARSET (ASCII plus
typographic quotes, dashes and Latin-1 letters), from Debian's plain-text documentation: the
licences in /usr/share/common-licenses, the README/NEWS files and changelogs of the installed
packages under /usr/share/doc, and manual pages rendered to text (`man -P cat`). dictionary.txt.xz:
the words of Debian's `wamerican` and `wbritish` word lists (SCOWL), letters only; capitalised
ones are names of people and places. people.txt.xz: maintainers' names (first and last) from the
changelogs' trailer lines. No PDFs. data/SOURCES.md keeps the licence notes. The output
depends on the packages installed where it runs; run-time code only reads the files.
"""

from __future__ import annotations

import gzip
import lzma
import os
import random
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

DATA = Path(__file__).with_name("data")
# Every character of the general text, all in every font used; no accented capitals (their ink
# would rise above the ASCII ink extent that line boxes are measured by).
CHARSET = frozenset(chr(c) for c in range(32, 127)) | frozenset(
    "\u2018\u2019\u201c\u201d\u2013\u2014\u00e9\u00e8\u00ea\u00eb\u00e1\u00e0\u00e2\u00e4\u00ed"
    "\u00ef\u00f3\u00f4\u00f6\u00fa\u00fc\u00e7\u00f1\u00df\u00d7\u00b0\u00b1\u00a7\u2022")
SOURCE_BYTES = {"licenses": 500_000, "docs": 1_700_000, "man": 1_800_000}
PER_DOCUMENT = 30_000  # chars from one file at most, so that no package dominates
PER_CHANGELOG = 4_000  # Debian changelogs repeat themselves ("Team upload.", "Bump Standards-Version")
MAN_PAGES = 1200  # every k-th page of sections 1, 5, 7 and 8, sorted by path
MAN_PER_PREFIX = 3  # pages of one command family (name up to the first "_", "-" or ".")
_WORDLISTS = (Path("/usr/share/dict/american-english"), Path("/usr/share/dict/british-english"))
_NORMAL = str.maketrans({"\u00a0": " ", "\u2010": "-", "\u2011": "-", "\u2212": "-", "\t": " ",
                         "\u2026": "...", "\ufb01": "fi", "\ufb02": "fl"})
_SPACES = re.compile(r"\s+")
_MARKUP = re.compile(r"^[=*#\-_~+|]{3,}|[=*#\-_~]{4,}")  # underlines, rules, tables


def clean(paragraph: str, min_words: int = 8) -> str | None:
    """The paragraph as one line in CHARSET that reads as prose or technical text, else None."""
    text = _SPACES.sub(" ", paragraph.translate(_NORMAL)).strip()
    words = text.split()
    if len(words) < min_words or not set(text) <= CHARSET or _MARKUP.search(text):
        return None
    if not (text[0].isupper() or text[0].isdigit() or text[0] in "\"'(\u201c") or text[-1] not in ".!?:)":
        return None
    plain = sum(w.strip(".,;:!?\"'()[]\u2018\u2019\u201c\u201d").isalpha() for w in words)
    return text if plain >= 0.7 * len(words) and max(map(len, words)) <= 40 else None


def paragraphs(doc: str) -> Iterator[str]:
    """Blank-line separated paragraphs; a paragraph with a line indented more than its first
    line (code, tables, option lists) is dropped."""
    for chunk in re.split(r"\n\s*\n", doc):
        lines = [line.rstrip() for line in chunk.split("\n") if line.strip()]
        if not lines:
            continue
        lead = len(lines[0]) - len(lines[0].lstrip())
        if any(len(line) - len(line.lstrip()) > lead + 1 for line in lines[1:]) or lead > 8:
            continue
        text = clean(" ".join(lines))
        if text:
            yield text


def man_paragraphs(text: str) -> Iterator[str]:
    """A manual page rendered one paragraph a line (wide MANWIDTH): every line is a paragraph."""
    for line in text.splitlines():
        cleaned = clean(line, min_words=6)
        if cleaned:
            yield cleaned


def _read(path: Path) -> str:
    raw = gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()
    return raw.decode("utf-8", errors="replace")


def _capped(paras: Iterator[str], limit: int) -> Iterator[str]:
    size = 0
    for para in paras:
        size += len(para) + 1
        if size > limit:
            return
        yield para


def licenses() -> Iterator[str]:
    for path in sorted(Path("/usr/share/common-licenses").iterdir()):
        if path.is_file() and not path.is_symlink():
            yield from paragraphs(_read(path))


def docs() -> Iterator[str]:
    pattern = re.compile(r"^(README|NEWS|changelog|FAQ|TODO)[\w.]*?(\.txt|\.md)?(\.gz)?$")
    for path in sorted(Path("/usr/share/doc").glob("*/*")):
        if path.is_file() and pattern.match(path.name) and path.stat().st_size < 2_000_000:
            text = _read(path)
            if path.name.startswith("changelog"):  # "  * Fix the thing." entries
                text = re.sub(r"^\s+[*-]\s+", "\n", text, flags=re.M)
                text = re.sub(r"^ -- .*$|^\S.*urgency=.*$", "", text, flags=re.M)
                text = re.sub(r"^\s+", "", text, flags=re.M)
            yield from _capped(paragraphs(text), PER_CHANGELOG if "Debian" in path.name else PER_DOCUMENT)


def man() -> Iterator[str]:
    pages, per_prefix = [], {}
    for path in sorted(p for s in ("man1", "man5", "man7", "man8")
                       for p in Path("/usr/share/man", s).glob("*") if p.is_file()):
        prefix = re.split(r"[_.-]", path.name)[0]  # gcloud_* alone has 16,000 pages
        per_prefix[prefix] = per_prefix.get(prefix, 0) + 1
        if per_prefix[prefix] <= MAN_PER_PREFIX:
            pages.append(path)
    env = dict(os.environ, MANWIDTH="4000", MAN_KEEP_FORMATTING="0", LANG="C.UTF-8")
    for path in pages[::max(1, len(pages) // MAN_PAGES)]:
        run = subprocess.run(["man", "-P", "cat", "-l", str(path)], capture_output=True, env=env,
                             timeout=60)
        text = re.sub(".\b", "", run.stdout.decode("utf-8", errors="replace"))
        yield from man_paragraphs(text)


def changelog_names() -> list[str]:
    """Maintainers' names from the trailer lines of changelogs (` -- First Last <mail>  date`)."""
    pattern = re.compile(r"^ -- ([A-Z][a-z]+(?: [A-Z][a-z]+){1,2}) <", re.M)
    found: set[str] = set()
    for path in sorted(Path("/usr/share/doc").glob("*/changelog.Debian.gz")):
        found.update(pattern.findall(_read(path)))
    return sorted(found)


def gather(source: Iterator[str], limit: int, seen: set[str]) -> list[str]:
    out, size = [], 0
    for para in source:
        if para not in seen and size + len(para) + 1 <= limit:
            seen.add(para)
            out.append(para)
            size += len(para) + 1
    return out


def dictionary() -> list[str]:
    words: set[str] = set()
    for path in _WORDLISTS:
        words.update(w for w in path.read_text(encoding="utf-8").split() if w.isascii() and w.isalpha())
    return sorted(words)


def main() -> None:
    seen: set[str] = set()
    picked = {name: gather(fn(), SOURCE_BYTES[name], seen)
              for name, fn in (("licenses", licenses), ("docs", docs), ("man", man))}
    corpus = [p for paras in picked.values() for p in paras]
    random.Random(0).shuffle(corpus)
    DATA.mkdir(exist_ok=True)
    text = "\n".join(corpus) + "\n"
    (DATA / "general.txt.xz").write_bytes(lzma.compress(text.encode(), preset=9 | lzma.PRESET_EXTREME))
    for name, lines in (("dictionary", dictionary()), ("people", changelog_names())):
        (DATA / f"{name}.txt.xz").write_bytes(lzma.compress(("\n".join(lines) + "\n").encode(), preset=9))
    for name, paras in picked.items():
        print(f"{name}: {len(paras)} paragraphs, {sum(map(len, paras))} chars", file=sys.stderr)


if __name__ == "__main__":
    main()
