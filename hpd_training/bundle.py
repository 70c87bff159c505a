"""The training bundle: the training split's taken pages as small PDFs, to carry to the GPU box.

Per source PDF one file with only its taken pages (`Document.select`, saved with garbage
collection, deflate and object streams), the rarer kinds first (all but manuals: papers,
theses, letters, slides), each in order of bytes a page (then hash order), until MAX_BYTES
(`--max-mb`): the smallest first put 1,841 pages of 351 packages in 40 MB where
hash order put 1,227 of 249 (the cost: fewer pages with photographs and many fonts); a file
over MAX_BYTES_PER_PAGE a page is left out. Beside
them `bundle.json` lists each page: file, page in the file, source PDF and page, package, kind,
body size.

    python -m hpd_training.texlive bundle --out data/texlive --to data/texlive-train
    python -m hpd_training.texlive evalset --out data/texlive --to data/texlive-eval   # write_evaluation
    python -m hpd_training.texlive sample --from data/texlive-train --to data/texlive-seen  # write_sample
    python -m hpd_training.texlive check --from data/texlive-train20   # check_bundle, before a device call
    # then, on the training machine:
    from hpd_training.bundle import load_bundle, training_page
    entries = load_bundle(folder); page = training_page(folder, entries[0])  # a RealPage
"""

from __future__ import annotations

import json
import multiprocessing
import os
import random
import re
import sys
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import pymupdf

from hpd_training import dockind
from hpd_training.manifest import EVAL_QUOTA, NAME, Manifest, PageRecord, load, pages_within, write
from hpd_training.pagelayout import Rejected
from hpd_training.realpage import DPI, RealPage, real_page
from hpd_training.texlive import stable_hash

MAX_BYTES = 39_500_000  # the PDFs; with bundle.json the folder stays under 40 MB
MAX_BYTES_PER_PAGE = 100_000
INDEX = "bundle.json"


@dataclass(frozen=True)
class BundlePage:
    file: str          # relative to the bundle folder
    page: int          # 0-based, in `file`
    source: str        # PDF relative to the TeX Live data folder
    source_page: int
    package: str
    kind: str
    body_size: float


def _file_name(source: str, package: str, taken: set[str]) -> str:
    """pdfs/PACKAGE--STEM.pdf, or with a hash of the source path where a package has two sources of
    one stem (tabriz-thesis: latex/ and xelatex/), which would write one file over the other; the
    name joins `taken`."""
    stem = re.sub(r"[^A-Za-z0-9._-]", "_", f"{package}--{Path(source).stem}")[:120]
    name = f"pdfs/{stem}.pdf"
    if name in taken:
        name = f"pdfs/{stem}--{stable_hash(source) % 16**8:08x}.pdf"
    if name in taken:
        raise ValueError(f"{source}: its file name {name} is taken")
    taken.add(name)
    return name


def selected_pages(pdf: Path, pages: list[int]) -> bytes:
    """A small PDF of `pages` (0-based, in this order) of `pdf`: garbage-collected, deflated, object streams."""
    with pymupdf.open(pdf) as doc:
        doc.select(pages)
        return doc.tobytes(garbage=4, deflate=True, use_objstms=1)


def write_bundle(data: Path, to: Path, max_bytes: int = MAX_BYTES, skip: Sequence[Path] = (),
                 within: tuple[int, int] | None = None, columns: int | None = None,
                 kinds: frozenset[str] | None = None) -> str:
    """Writes the bundle of at most `max_bytes`, without the pages of the bundles in `skip` (a
    second bundle to carry in another call), of the pages a shorter manifest of `within` (PDFs a
    package, pages a PDF) holds where given (the bundles written before the manifest grew), and
    of the pages set in `columns` columns (`dockind.columns`) and of documents of `kinds`
    (`dockind.kind_of`) where given (bundles to raise their share by naming them again in
    `--real-data`); returns a summary line."""
    taken = {(e.source, e.source_page) for folder in skip for e in load_bundle(folder)}
    listed = pages_within(data / NAME, *within) if within else load(data / NAME).pages
    pages = [p for p in listed if p.split == "train" and p.status == "ok" and (p.pdf, p.page) not in taken
             and (kinds is None or p.kind in kinds)]
    by_pdf: dict[str, list] = {}
    for p in pages:
        by_pdf.setdefault(p.pdf, []).append(p)
    (to / "pdfs").mkdir(parents=True, exist_ok=True)
    blobs = []  # (bytes a page, source, its records, the small PDF)
    for pdf, records in by_pdf.items():
        records = sorted(records, key=lambda p: p.page)
        if columns is not None:
            with pymupdf.open(data / pdf) as doc:
                records = [p for p in records if dockind.columns(doc[p.page]) == columns]
            if not records:
                continue
        blob = selected_pages(data / pdf, [p.page for p in records])
        blobs.append((records[0].kind == "manual", len(blob) / len(records), stable_hash(pdf), pdf, records, blob))
    total, entries, skipped, names = 0, [], 0, set()
    for _, per_page, _, pdf, records, blob in sorted(blobs, key=lambda b: b[:3]):
        if per_page > MAX_BYTES_PER_PAGE or total + len(blob) > max_bytes:
            skipped += 1
            continue
        name = _file_name(pdf, records[0].package, names)
        (to / name).write_bytes(blob)
        total += len(blob)
        entries += [BundlePage(name, i, pdf, p.page, p.package, p.kind, p.body_size) for i, p in enumerate(records)]
    (to / INDEX).write_text(json.dumps([asdict(e) for e in entries], indent=0), encoding="utf-8")
    kinds = dict(Counter(e.kind for e in entries))
    return (f"{len(entries)} pages of {len({e.package for e in entries})} packages in "
            f"{len({e.file for e in entries})} files, {total / 1e6:.1f} MB; {skipped} PDFs left out; kinds {kinds}")


def write_evaluation(data: Path, to: Path) -> str:
    """The evaluation pages (`evaluate` set) as small PDFs under `to` with their own manifest, so
    `hpd-eval --real to/manifest.json` runs without the 1.7 GB corpus; returns a summary line."""
    chosen = [p for p in load(data / NAME).pages if p.evaluate]
    by_pdf: dict[str, list] = {}
    for p in chosen:
        by_pdf.setdefault(p.pdf, []).append(p)
    (to / "pdfs").mkdir(parents=True, exist_ok=True)
    records, total, names = [], 0, set()
    for pdf, group in sorted(by_pdf.items()):
        group = sorted(group, key=lambda p: p.page)
        blob = selected_pages(data / pdf, [p.page for p in group])
        name = _file_name(pdf, group[0].package, names)
        (to / name).write_bytes(blob)
        total += len(blob)
        records += [replace(p, pdf=name, page=i) for i, p in enumerate(group)]
    write(to / NAME, Manifest(records), [])
    return f"{len(records)} evaluation pages in {len(by_pdf)} files, {total / 1e6:.1f} MB"


def write_sample(folder: Path, to: Path, pages: int = 32) -> str:
    """`pages` pages of a training bundle as small PDFs under `to` with their own manifest, for
    `hpd-eval --real to/manifest.json`: with a bundle the model trained on, how it reads pages it
    has seen; with one it has not, unseen pages of the training split (docs/training.md, session
    24). Kinds in the held-out set's shares (EVAL_QUOTA, a kind short of pages leaves the rest to
    "manual"), one page a source PDF, in hash order; returns a summary line."""
    entries = sorted(load_bundle(folder), key=lambda e: stable_hash(f"{e.source}#{e.source_page}"))
    quota = {k: round(pages * v / sum(EVAL_QUOTA.values())) for k, v in EVAL_QUOTA.items()}
    quota["manual"] += pages - sum(quota.values())
    chosen: dict[str, BundlePage] = {}  # source PDF -> its page
    for kind in [k for k in quota if k != "manual"] + ["manual"]:
        taken = 0
        for e in entries:
            if taken < quota[kind] and e.kind == kind and e.source not in chosen:
                chosen[e.source] = e
                taken += 1
        if kind != "manual":
            quota["manual"] += quota[kind] - taken
    (to / "pdfs").mkdir(parents=True, exist_ok=True)
    by_file: dict[str, list[BundlePage]] = {}
    for e in chosen.values():
        by_file.setdefault(e.file, []).append(e)
    records = []
    for file, group in sorted(by_file.items()):
        group.sort(key=lambda e: e.page)
        (to / file).write_bytes(selected_pages(folder / file, [e.page for e in group]))
        records += [PageRecord(file, i, e.package, "train", e.kind, "ok", e.body_size, evaluate=True)
                    for i, e in enumerate(group)]
    write(to / NAME, Manifest(records), [])
    return f"{len(records)} pages of {folder} in {len(by_file)} files; kinds {dict(Counter(r.kind for r in records))}"


@dataclass(frozen=True)
class BundleCheck:
    folder: Path
    ok: int
    rejected: int
    failed: list[str]   # "FILE page N: Error: message"

    def summary(self) -> str:
        return (f"{self.folder}: {self.ok} pages ok, {self.rejected} rejected, {len(self.failed)} failed"
                + "".join(f"\n  {line}" for line in self.failed))


def check_bundle(folder: Path, model: Path, workers: int = 1, progress: bool = False) -> BundleCheck:
    """Turns every page of the bundle into a training sample as `hpd_training.train` does (the
    fork prompt and the `plain` one, with the tokenizer and tiles of the checkpoint in `model`) and
    names each page that raises: one such page stops a run's data loader and with it the device
    call (docs/training.md, session 37). Pages the rules reject now are counted apart (the source
    draws another). `progress`: a line on stderr every 500 pages."""
    entries = load_bundle(folder)
    jobs = [(folder, e) for e in entries]
    outcomes: list[str] = []
    with multiprocessing.Pool(workers, _load_checker, (model,)) as pool:
        for out in pool.imap(_check_page, jobs, chunksize=8):
            outcomes.append(out)
            if progress and len(outcomes) % 500 == 0:
                print(f"{folder}: {len(outcomes)} of {len(jobs)} pages checked", file=sys.stderr, flush=True)
    failed = [f"{e.file} page {e.page}: {out}" for e, out in zip(entries, outcomes) if out not in ("ok", "rejected")]
    return BundleCheck(folder, outcomes.count("ok"), outcomes.count("rejected"), failed)


_checker: tuple = ()  # (config, tokenizer) of this process, set by _load_checker


def _load_checker(model: Path) -> None:
    global _checker
    from hpd_core.config import HPDConfig
    from hpd_core.tokenizer import HPDTokenizer
    config = HPDConfig.load(model / "config.json")
    _checker = config, HPDTokenizer.load(model, config)


def _check_page(job: tuple[Path, BundlePage]) -> str:
    from hpd_training.train.data import Stage, sample
    config, tok = _checker
    try:
        page = training_page(*job)
    except Rejected:
        return "rejected"
    try:
        for plain in (0.0, 1.0):
            sample(0, Stage((lambda _: page,), 1, 0.0, plain_fraction=plain), config, tok)
    except Exception as err:  # the point: name whatever would stop a training run
        return f"{type(err).__name__}: {err}"
    return "ok"


def load_bundle(folder: Path) -> list[BundlePage]:
    return [BundlePage(**e) for e in json.loads((folder / INDEX).read_text(encoding="utf-8"))]


def training_page(folder: Path, entry: BundlePage, dpi: float = DPI) -> RealPage:
    """The page as a training sample; raises pagelayout.Rejected (not for pages the manifest took)."""
    with pymupdf.open(folder / entry.file) as doc:
        return real_page(doc[entry.page], dpi)


def source(folders: Path | str) -> Callable[[int], RealPage]:
    """`--real-source hpd_training.bundle:source --real-data FOLDER[:FOLDER...]`: seed -> a page of
    the bundles (folders joined by os.pathsep), drawn by a hash of the seed (stages take their
    sources by seed modulo their count, so the seed's low digits are not uniform); a page the
    rules reject now is replaced by the next draw."""
    entries = [(Path(f), e) for f in str(folders).split(os.pathsep) for e in load_bundle(Path(f))]

    def page(seed: int) -> RealPage:
        draw = random.Random(f"real:{seed}")
        for _ in range(8):
            try:
                return training_page(*entries[draw.randrange(len(entries))])
            except Rejected:
                continue
        raise RuntimeError(f"eight pages of {folders} in a row were rejected")

    return page
