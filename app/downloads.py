"""Result files offered for download, named safely after the uploaded document."""

from __future__ import annotations

import json
import re
import uuid
from pathlib import Path, PurePath

from hpd_core.result import ParseResult

MAX_STEM = 80
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def safe_stem(name: str | None, page: int) -> str:
    """`report-p2` for "../../Report (final).pdf", page 2: only the last path component's stem,
    letters, digits, `.`, `_`, `-`; never empty, never hidden, at most MAX_STEM characters."""
    base = PurePath((name or "").replace("\\", "/")).name
    stem = _UNSAFE.sub("_", base.rsplit(".", 1)[0] if "." in base.lstrip(".") else base)
    stem = stem.strip("._-")[:MAX_STEM] or "document"
    return f"{stem}-p{page}"


def write_downloads(folder: Path, name: str | None, page: int, result: ParseResult) -> tuple[Path, Path]:
    """(.md, .json) of `result` in a fresh subfolder of `folder`."""
    out = folder / uuid.uuid4().hex
    out.mkdir(parents=True)
    stem = safe_stem(name, page)
    markdown, data = out / f"{stem}.md", out / f"{stem}.json"
    markdown.write_text(result.markdown + "\n", encoding="utf-8")
    data.write_text(json.dumps(result.to_dict(), ensure_ascii=False, indent=2), encoding="utf-8")
    return markdown, data
