"""Output files of the front doors: safe names, atomic writes, printable paths."""

from __future__ import annotations

import os
import re
from pathlib import Path


def safe_name(stem: str) -> str:
    """A file-name-safe version of `stem`: word characters and '-' only (no dots, no separators)."""
    return re.sub(r"[^\w-]+", "_", stem).strip("_-")[:80] or "document"


def write_atomic(path: Path, text: str) -> None:
    """Write `text` to a temporary file beside `path`, then rename it over `path`."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def printable(path: Path) -> str:
    """`path` as text that encodes as UTF-8: bytes of a non-UTF-8 name shown as \\xff escapes."""
    return os.fsencode(path).decode("utf-8", "backslashreplace")
