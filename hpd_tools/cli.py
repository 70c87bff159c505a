"""hpd-parse: PDFs and images -> Markdown + JSON per page, in batch.

    hpd-parse report.pdf scans/ -o out/ [--pages 1-3,7] [--no-mtp] [-k 6] [--batch-children]

Folders are searched recursively; a file is a document when its first bytes say PDF or image
(`documents.detect_kind`), or when its extension claims one (so a damaged `x.pdf` is reported,
not silently passed over). For each document OUTDIR gets:

    <doc>/page-0001.md     Markdown of page 1
    <doc>/page-0001.json   ParseResult.to_dict() plus "source" and "page"
    <doc>.md               the selected pages' Markdown, joined by PAGE_SEPARATOR

<doc> is the file's stem with unsafe characters replaced; inputs whose names would collide
get a short hash of their path appended. Files are written atomically (temp file + rename),
so an interrupted run leaves only whole files; a page whose .md and .json both exist is
skipped unless --overwrite (resume). A document that cannot be read is reported on stderr in
one line (the DocumentError message) and the others continue. Limits on documents
(documents.Limits: file size, pages per document, pixels) come from --max-file-bytes,
--max-pages, --max-page-pixels, --max-image-pixels, else from the HPD_MAX_* environment
variables, else the defaults; a document over --max-pages fails before any page is parsed.

Exit codes: 0 all documents parsed, 1 some failed, 2 usage error, 130 interrupted. The first
Ctrl-C stops the engine at its next decode round and keeps the pages already written; a
second one stops at once.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import signal
import sys
import threading
import time
from collections import Counter
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Iterator, Sequence

from tqdm import tqdm

from hpd_core.documents import (DEFAULT_DPI, DocumentError, Limits, count_pages, detect_kind, display_name,
                                iter_pages, parse_page_ranges)
from hpd_core.events import PageFinished, TokensAppended
from hpd_tools.backends import add_model_arguments, engine_of
from hpd_tools.files import printable, safe_name, write_atomic
from hpd_tools.forms import (UsageError, add_limit_arguments, add_option_arguments, limits_of,
                             options_from_args)

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130
DOC_SUFFIXES = frozenset({".pdf", ".png", ".jpg", ".jpeg", ".webp", ".tif", ".tiff", ".bmp"})
PAGE_SEPARATOR = "\n\n---\n\n"


@dataclass(frozen=True)
class Document:
    path: Path
    name: str  # output name, unique (case-insensitively) within the run


@dataclass(frozen=True)
class Plan:
    doc: Document
    pages: tuple[int, ...]  # selected page numbers, ascending
    todo: tuple[int, ...]   # the selected pages still to parse


@dataclass
class Tally:
    ok: int = 0
    failed: int = 0
    pages: int = 0
    skipped: int = 0
    tokens: int = 0
    started: float = field(default_factory=time.perf_counter)


# ---- arguments ----------------------------------------------------------------------------

def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="hpd-parse", description=__doc__.split("\n\n")[0])
    parser.add_argument("inputs", nargs="+", type=Path, help="PDF/image files or folders (searched recursively)")
    parser.add_argument("-o", "--out", type=Path, required=True, help="output folder")
    parser.add_argument("--pages", default="", help="pages of each document, e.g. 1-3,7 or 5- (default: all)")
    parser.add_argument("--password", help="password for encrypted PDFs")
    parser.add_argument("--overwrite", action="store_true", help="parse again pages that are already written")
    add_model_arguments(parser)
    add_option_arguments(parser)
    parser.add_argument("--dpi", type=float, default=None,
                        help=f"PDF render resolution (default: the model's, {DEFAULT_DPI} for most)")
    add_limit_arguments(parser)
    return parser


def check_page_spec(spec: str) -> None:
    """A malformed --pages is a usage error, not a per-document failure."""
    try:
        parse_page_ranges(spec, highest_number(spec))
    except DocumentError as err:
        raise UsageError(f"--pages: {err}") from err


def highest_number(spec: str) -> int:
    return max((int(n) for n in re.findall(r"\d+", spec)), default=1) or 1


# ---- documents and names ------------------------------------------------------------------

def find_documents(inputs: Sequence[Path], out: Path) -> list[Path]:
    """Input files as given, and the documents found in input folders (sorted, hidden files
    and the output folder left out), without duplicates."""
    found: dict[Path, Path] = {}
    for item in inputs:
        files = [item] if not item.is_dir() else [f for f in walk(item, out) if looks_like_document(f)]
        for f in files:
            found.setdefault(f.resolve(), f)
    return list(found.values())


def walk(folder: Path, out: Path) -> Iterator[Path]:
    skip = out.resolve()
    for root, dirs, files in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and Path(root, d).resolve() != skip)
        yield from (Path(root, f) for f in sorted(files) if not f.startswith("."))


def looks_like_document(path: Path) -> bool:
    if path.suffix.lower() in DOC_SUFFIXES:
        return True
    try:
        detect_kind(path)
        return True
    except DocumentError:
        return False


def name_documents(paths: Sequence[Path]) -> list[Document]:
    """Documents with output names, unique ignoring case: the stem; where stems collide, the
    name with its extension (report_pdf); where those collide too, plus a hash of the path."""
    names = [safe_name(p.stem) for p in paths]
    for widen in (lambda p, n: safe_name(p.name),
                  lambda p, n: f"{n}-{hashlib.sha1(os.fsencode(p.resolve())).hexdigest()[:8]}"):
        counts = Counter(n.lower() for n in names)
        names = [widen(p, n) if counts[n.lower()] > 1 else n for p, n in zip(paths, names)]
    return [Document(p, n) for p, n in zip(paths, names)]


def page_paths(out: Path, doc: Document, number: int) -> tuple[Path, Path]:
    stem = out / doc.name / f"page-{number:04d}"
    return stem.with_suffix(".md"), stem.with_suffix(".json")


def plan(doc: Document, out: Path, spec: str, password: str | None, overwrite: bool,
         limits: Limits = Limits()) -> Plan:
    """The pages of `doc` to parse. --pages is applied to each document; selected pages past
    its end are dropped; a selection with none left, or over `limits.max_pages`, is a DocumentError."""
    count = count_pages(doc.path, password, limits)
    name = display_name(doc.path)
    pages = tuple(n for n in parse_page_ranges(spec, max(count, highest_number(spec))) if n <= count)
    if not pages:
        raise DocumentError(f"{name!r} has {count} page{'s' * (count != 1)}; --pages {spec} selects none")
    if len(pages) > limits.max_pages:
        raise DocumentError(f"{name!r}: {len(pages):,} pages selected, over the limit of max_pages="
                            f"{limits.max_pages:,} per document; select fewer (e.g. --pages "
                            f"1-{limits.max_pages}) or raise --max-pages")
    todo = tuple(n for n in pages if overwrite or not all(p.is_file() for p in page_paths(out, doc, n)))
    return Plan(doc, pages, todo)


# ---- writing ------------------------------------------------------------------------------

def page_record(source: str, page, result) -> dict:
    """A parsed page as JSON: ParseResult.to_dict() plus "source" and "page" (a `documents.Page`),
    the page's own warnings (e.g. rendered at a lower DPI) before the result's."""
    record = {"source": source, "page": page.number, **result.to_dict()}
    record["warnings"] = [*page.warnings, *record["warnings"]]
    return record


def document_markdown(pages: Iterable[str]) -> str:
    """A document's Markdown: its pages' Markdown, each stripped, joined by PAGE_SEPARATOR."""
    return PAGE_SEPARATOR.join(p.strip() for p in pages) + "\n"


def write_page(out: Path, doc: Document, page, result) -> None:
    md, js = page_paths(out, doc, page.number)
    write_atomic(js, json.dumps(page_record(printable(doc.path), page, result), ensure_ascii=False, indent=1))
    write_atomic(md, result.markdown)


def write_document(out: Path, plan_: Plan) -> None:
    pages = (page_paths(out, plan_.doc, n)[0].read_text(encoding="utf-8") for n in plan_.pages)
    write_atomic(out / f"{plan_.doc.name}.md", document_markdown(pages))


# ---- parsing ------------------------------------------------------------------------------

@contextmanager
def ctrl_c_sets(cancel: threading.Event) -> Iterator[None]:
    """While active, the first SIGINT sets `cancel`; a second raises KeyboardInterrupt."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum, frame):
        if cancel.is_set():
            raise KeyboardInterrupt
        cancel.set()

    previous = signal.signal(signal.SIGINT, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def parse_page(engine, page, options, cancel: threading.Event, on_tokens) -> object:
    """ParseResult of one page, streaming so that `on_tokens(n)` sees tokens as they come."""
    for event in engine.stream(page, options, cancel):
        if isinstance(event, TokensAppended):
            on_tokens(len(event.token_ids))
        elif isinstance(event, PageFinished):
            return event.result
    raise AssertionError("the engine ended a page without PageFinished")


def run_document(engine, plan_: Plan, args, options, cancel: threading.Event, bar, tally: Tally) -> bool:
    """Parse and write the pages of one document; False if it was cancelled part-way."""
    def on_tokens(n: int) -> None:
        tally.tokens += n
        bar.set_postfix_str(f"{tally.tokens / (time.perf_counter() - tally.started):.0f} tok/s", refresh=False)

    pages = iter_pages(plan_.doc.path, plan_.todo, args.dpi, args.password, limits_of(args)) if plan_.todo else ()
    for page in pages:
        if cancel.is_set():
            return False
        for warning in page.warnings:
            bar.write(f"hpd-parse: warning: {printable(plan_.doc.path)}: {warning}", file=sys.stderr)
        result = parse_page(engine, page, options, cancel, on_tokens)
        if result.cancelled:
            return False
        write_page(args.out, plan_.doc, page, result)
        tally.pages += 1
        bar.update(1)
    write_document(args.out, plan_)
    return True


def run(args, cancel: threading.Event) -> int:
    options = options_from_args(args)
    limits = limits_of(args)
    check_page_spec(args.pages)
    if args.out.exists() and not args.out.is_dir():
        raise UsageError(f"--out {args.out} exists and is not a folder")
    tally = Tally()
    plans = []
    for doc in name_documents(find_documents(args.inputs, args.out)):
        try:
            plans.append(plan(doc, args.out, args.pages, args.password, args.overwrite, limits))
        except DocumentError as err:
            report(doc, err, tally)
    tally.skipped = sum(len(p.pages) - len(p.todo) for p in plans)
    engine = engine_of(args, options) if any(p.todo for p in plans) else None
    args.dpi = args.dpi or (engine.info.render_dpi if engine else DEFAULT_DPI)
    with tqdm(total=sum(len(p.todo) for p in plans), unit="page", file=sys.stderr, dynamic_ncols=True) as bar:
        for p in plans:
            try:
                if not run_document(engine, p, args, options, cancel, bar, tally):
                    break
                tally.ok += 1
            except DocumentError as err:
                report(p.doc, err, tally, bar)
    print(summary(tally, cancel.is_set()), file=sys.stderr)
    if cancel.is_set():
        return EXIT_INTERRUPTED
    return EXIT_FAILED if tally.failed else EXIT_OK


def report(doc: Document, err: Exception, tally: Tally, bar=None) -> None:
    tally.failed += 1
    line = f"hpd-parse: failed: {printable(doc.path)}: {err}"
    if bar is None:
        print(line, file=sys.stderr)
    else:
        bar.write(line, file=sys.stderr)


def summary(t: Tally, interrupted: bool) -> str:
    seconds = time.perf_counter() - t.started
    rate = t.tokens / seconds if seconds else 0.0
    head = "interrupted; " if interrupted else ""
    return (f"hpd-parse: {head}{t.ok} file{'s' * (t.ok != 1)} ok, {t.failed} failed; "
            f"{t.pages} page{'s' * (t.pages != 1)} parsed, {t.skipped} already done; "
            f"{seconds:.1f} s, {t.tokens:,} tokens, {rate:.0f} tokens/s")


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)  # exits with 2 on bad arguments
    cancel = threading.Event()
    try:
        with ctrl_c_sets(cancel):
            return run(args, cancel)
    except UsageError as err:
        parser.print_usage(sys.stderr)
        print(f"hpd-parse: error: {err}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("hpd-parse: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED


if __name__ == "__main__":
    sys.exit(main())
