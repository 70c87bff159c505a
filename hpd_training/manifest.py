"""The manifest of the TeX Live pages: every page chosen, its package, split, kind of document,
body type size, and whether `pagelayout.extract` takes it (or why not).

Selection, deterministic (`texlive.stable_hash` orders everything):
- train: of the first TRAIN_PACKAGES training packages in hash order, per package its first
  TRAIN_PDFS PDFs, per PDF its first TRAIN_PAGES pages, in
  hash order (several pages of one PDF share its fonts in the bundle: ~25 KB a page, not ~60).
- eval (held-out packages only): per PDF its first EVAL_CANDIDATES pages in hash order; of the
  pages taken, per kind up to EVAL_QUOTA[kind] pages, at most EVAL_PER_PDF per PDF and
  EVAL_PER_PACKAGE per package, in hash order; a kind short of its quota leaves the rest to
  "manual". These pages have `evaluate` set.

    python -m hpd_training.texlive manifest --out data/texlive   # writes data/texlive/manifest.json
"""

from __future__ import annotations

import json
import time
from collections import Counter
from dataclasses import asdict, dataclass, replace
from multiprocessing import Pool
from pathlib import Path

import pymupdf

from hpd_training.dockind import kind_of
from hpd_training.pagelayout import Rejected, extract
from hpd_training.texlive import Package, packages, stable_hash

# every training package (1,966 in Debian 12), every PDF of each (at most 210: glossaries-extra), every page
# of each (at most 1,611): far more than one 55 MB bundle holds (~11-35 KB a page); bundles are carried one
# a call (`bundle --skip`). The bundles were written from shorter manifests of the same hash orders, whose
# pages this one keeps: 1-4 (sessions 12-15) from one of one PDF and 6 pages a package, 5-10 (sessions
# 24-27) from one of two PDFs and 12 pages, 11-14 (session 33) from one of four PDFs and 24 pages, 15-19
# (session 34) from one of eight PDFs and 48 pages, 20-24 and the two-column bundle (session 35) from one of
# every PDF and 96 pages; `pages_within` picks their pages out again, and later bundles skip them
TRAIN_PACKAGES, TRAIN_PDFS, TRAIN_PAGES = 2000, 256, 2048
EVAL_CANDIDATES, EVAL_PER_PDF, EVAL_PER_PACKAGE = 3, 2, 4
EVAL_QUOTA = {"manual": 40, "paper-1col": 15, "paper-2col": 15, "thesis": 10, "letter": 10, "slides": 10,
              "poster": 6}
NAME = "manifest.json"


@dataclass(frozen=True)
class Document:
    pdf: str          # relative to the data folder
    package: str
    split: str        # train | eval
    kind: str         # dockind.KINDS, or "unreadable"
    pages: int


@dataclass(frozen=True)
class PageRecord:
    pdf: str
    page: int         # 0-based
    package: str
    split: str
    kind: str
    status: str       # "ok", or the Rejected reason
    body_size: float = 0.0   # pt
    columns: int = 0
    blocks: int = 0
    labels: str = ""  # "text:12 title:3 ..." of the page's blocks
    seconds: float = 0.0     # extract() on one core
    evaluate: bool = False   # in the held-out evaluation set


@dataclass(frozen=True)
class Manifest:
    pages: list[PageRecord]

    def summary(self) -> str:
        ok = [p for p in self.pages if p.status == "ok"]
        lines = [f"{len(self.pages)} pages read, {len(ok)} taken"]
        for split in ("train", "eval"):
            taken = [p for p in ok if p.split == split]
            lines.append(f"{split}: {len({p.package for p in taken})} packages, {len({p.pdf for p in taken})} PDFs, "
                         f"{len(taken)} pages; kinds {dict(Counter(p.kind for p in taken))}")
        chosen = [p for p in ok if p.evaluate]
        lines.append(f"evaluation set: {len(chosen)} pages of {len({p.package for p in chosen})} packages; "
                     f"kinds {dict(Counter(p.kind for p in chosen))}")
        lines.append(f"rejected: {dict(Counter(p.status for p in self.pages if p.status != 'ok'))}")
        seconds = sorted(p.seconds for p in self.pages)
        lines.append(f"extract seconds per page: median {seconds[len(seconds) // 2]:.3f}, "
                     f"mean {sum(seconds) / len(seconds):.3f}")
        return "\n".join(lines)


def chosen_pdfs(pkgs: list[Package]) -> list[tuple[str, str, str]]:
    """(pdf, package, split) of the PDFs to read: TRAIN_PDFS of each of the first TRAIN_PACKAGES
    training packages (hash order of names), every held-out PDF; PDFs of a package in hash order
    of their paths."""
    out = []
    train = sorted((p for p in pkgs if p.split == "train"), key=lambda p: stable_hash(p.name))[:TRAIN_PACKAGES]
    for p in sorted(train + [p for p in pkgs if p.split == "eval"], key=lambda p: p.name):
        pdfs = sorted(p.pdfs, key=stable_hash)
        out += [(pdf, p.name, p.split) for pdf in (pdfs[:TRAIN_PDFS] if p.split == "train" else pdfs)]
    return out


def page_order(pdf: str, count: int) -> list[int]:
    return sorted(range(count), key=lambda n: stable_hash(f"{pdf}#{n}"))


def read_pdf(data: Path, pdf: str, package: str, split: str) -> tuple[Document, list[PageRecord]]:
    """The document's kind and its first TRAIN_PAGES (train) or EVAL_CANDIDATES (eval) pages in
    hash order, each read by `extract` (one open of the file)."""
    try:
        doc = pymupdf.open(data / pdf)
        info = Document(pdf, package, split, kind_of(doc, pdf, package), doc.page_count)
    except Exception:  # noqa: BLE001 - a broken PDF is recorded, not fatal
        return Document(pdf, package, split, "unreadable", 0), []
    with doc:
        take = TRAIN_PAGES if split == "train" else EVAL_CANDIDATES
        return info, [read_page(doc, info, n) for n in page_order(pdf, doc.page_count)[:take]]


def read_page(pdf: pymupdf.Document, doc: Document, number: int) -> PageRecord:
    base = PageRecord(doc.pdf, number, doc.package, doc.split, doc.kind, "ok")
    start = time.process_time()
    try:
        layout = extract(pdf[number])
    except Rejected as err:
        return replace(base, status=err.reason)
    except Exception:  # noqa: BLE001 - MuPDF errors on a broken page are a reason, not a crash
        return replace(base, status="error")
    seconds = time.process_time() - start
    counts = Counter(b.label for b in layout.blocks)
    return replace(base, body_size=layout.body_size, columns=layout.columns, blocks=len(layout.blocks),
                   labels=" ".join(f"{k}:{v}" for k, v in sorted(counts.items())), seconds=round(seconds, 4))


def choose_evaluation(pages: list[PageRecord]) -> list[PageRecord]:
    """Sets `evaluate` on the held-out pages of the evaluation set (module docstring)."""
    ok = sorted((p for p in pages if p.split == "eval" and p.status == "ok"),
                key=lambda p: stable_hash(f"{p.pdf}#{p.page}"))
    per_pdf: Counter = Counter()
    per_package: Counter = Counter()
    chosen: set[tuple[str, int]] = set()
    quota = dict(EVAL_QUOTA)
    for kind in [k for k in quota if k != "manual"] + ["manual"]:
        taken = 0
        for p in ok:
            if p.kind != kind or taken >= quota[kind] or per_pdf[p.pdf] >= EVAL_PER_PDF \
                    or per_package[p.package] >= EVAL_PER_PACKAGE:
                continue
            chosen.add((p.pdf, p.page))
            per_pdf[p.pdf] += 1
            per_package[p.package] += 1
            taken += 1
        if kind != "manual":
            quota["manual"] += quota[kind] - taken
    return [replace(p, evaluate=(p.pdf, p.page) in chosen) for p in pages]


def _read(args) -> tuple[Document, list[PageRecord]]:
    return read_pdf(*args)


def build(data: Path, workers: int = 2) -> Manifest:
    jobs = [(data, *chosen) for chosen in chosen_pdfs(packages(data))]
    if workers > 1:
        with Pool(workers) as pool:
            read = pool.map(_read, jobs, chunksize=4)
    else:
        read = list(map(_read, jobs))
    docs = [d for d, _ in read]
    manifest = Manifest(choose_evaluation([p for _, pages in read for p in pages]))
    write(data / NAME, manifest, docs)
    return manifest


def write(path: Path, manifest: Manifest, docs: list[Document]) -> None:
    body = {"documents": [asdict(d) for d in docs], "pages": [asdict(p) for p in manifest.pages],
            "summary": manifest.summary()}
    path.write_text(json.dumps(body, ensure_ascii=False, indent=0), encoding="utf-8")


def load(path: Path) -> Manifest:
    body = json.loads(path.read_text(encoding="utf-8"))
    return Manifest([PageRecord(**p) for p in body["pages"]])


def pages_within(path: Path, pdfs: int, pages: int) -> list[PageRecord]:
    """The training pages a manifest of `pdfs` PDFs a package and `pages` pages a PDF (the same hash
    orders) would hold, out of the longer one at `path`: the first PDFs by the manifest's documents (a
    PDF that could not be opened has no pages but is still one), the first pages of each by
    `page_order`."""
    body = json.loads(path.read_text(encoding="utf-8"))
    docs = [Document(**d) for d in body["documents"] if d["split"] == "train"]
    by_package: dict[str, list[Document]] = {}
    for doc in docs:
        by_package.setdefault(doc.package, []).append(doc)
    first = {doc.pdf: set(page_order(doc.pdf, doc.pages)[:pages]) for group in by_package.values()
             for doc in sorted(group, key=lambda d: stable_hash(d.pdf))[:pdfs]}
    records = (PageRecord(**p) for p in body["pages"])
    return [p for p in records if p.page in first.get(p.pdf, ())]
