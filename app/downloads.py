"""Result files offered for download, named safely after the uploaded document.

The document's Markdown and the pages' JSON records are hpd-parse's (`hpd_tools.cli`), so a
download equals what the CLI writes for the same pages and options.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Sequence
from pathlib import Path, PurePath

from hpd_core.documents import Page
from hpd_core.result import ParseResult
from hpd_tools.cli import document_markdown, page_record

MAX_STEM = 80
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def safe_stem(name: str | None, numbers: Sequence[int]) -> str:
    """`report-p2` for "../../Report (final).pdf", page 2 (`report-p2-5` for pages 2 to 5): only the
    last path component's stem, letters, digits, `.`, `_`, `-`; never empty, never hidden, at most
    MAX_STEM characters before the page numbers."""
    base = PurePath((name or "").replace("\\", "/")).name
    stem = _UNSAFE.sub("_", base.rsplit(".", 1)[0] if "." in base.lstrip(".") else base)
    stem = stem.strip("._-")[:MAX_STEM] or "document"
    pages = f"{numbers[0]}" if len(numbers) == 1 else f"{numbers[0]}-{numbers[-1]}"
    return f"{stem}-p{pages}"


def write_downloads(folder: Path, name: str | None, pages: Sequence[Page],
                    results: Sequence[ParseResult]) -> tuple[Path, Path]:
    """(.md, .json) of the parsed `pages` (in order, one result each) in a fresh subfolder of
    `folder`: the document's Markdown, and {"source", "pages": [one record per page]}."""
    assert pages and len(pages) == len(results)
    out = folder / uuid.uuid4().hex
    out.mkdir(parents=True)
    stem = safe_stem(name, [p.number for p in pages])
    markdown, data = out / f"{stem}.md", out / f"{stem}.json"
    markdown.write_text(document_markdown(r.markdown for r in results), encoding="utf-8")
    records = [page_record(name or "", p, r) for p, r in zip(pages, results)]
    data.write_text(json.dumps({"source": name or "", "pages": records}, ensure_ascii=False, indent=2),
                    encoding="utf-8")
    return markdown, data
