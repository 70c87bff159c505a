"""Real training pages carried to the GPU machine: the manifest's training pages cut into one-page
PDFs, packed into folders `part-1`, `part-2`, ... of at most `--mb` MB, one folder carried per
device call (docs/training.md); on the machine the folders accumulate and `source` reads them all:

    python -m hpd_training.train.shards --manifest data/texlive/manifest.json --data data/texlive \\
        --out .carry/real --mb 55 --parts 2
    python -m hpd_training.train ... --stages real:450 --real-source hpd_training.train.shards:source \
        --real-data .carry/real

Pages are taken in a hash order of (pdf, page), so every part mixes packages; a page goes in only
when the real-page reader (`hpd_training.realpage.real_page`) takes its one-page PDF.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
from collections.abc import Callable
from pathlib import Path

import pymupdf

from hpd_training.train.data import PageSource, TrainingPage

Reader = Callable[[pymupdf.Page], TrainingPage]  # raises for a page it cannot read


def real_reader() -> Reader:
    from hpd_training.realpage import real_page  # the TeX Live pages' module

    return real_page


def training_pages(manifest: Path) -> list[tuple[str, int]]:
    """(pdf, page) of the manifest's taken training pages, in hash order."""
    pages = json.loads(manifest.read_text(encoding="utf-8"))["pages"]
    chosen = [(p["pdf"], p["page"]) for p in pages if p["split"] == "train" and p["status"] == "ok"]
    return sorted(chosen, key=lambda p: hashlib.sha256(f"{p[0]}:{p[1]}".encode()).hexdigest())


def one_page_pdf(doc: pymupdf.Document, number: int) -> bytes:
    out = pymupdf.open()
    out.insert_pdf(doc, from_page=number, to_page=number)
    return out.tobytes(garbage=4, deflate=True)


def pack(pages: list[tuple[str, int]], data: Path, out: Path, mb: float, parts: int, read: Reader) -> list[int]:
    """Writes out/part-K/NNNNNN.pdf and out/part-K/index.json (source pdf and page of each);
    returns the pages per part. A page `read` rejects is left out."""
    counts, part, size, index = [], 1, 0, []

    def close() -> None:
        (out / f"part-{part}" / "index.json").write_text(json.dumps(index, indent=0), encoding="utf-8")
        counts.append(len(index))

    for pdf, number in pages:
        try:
            with pymupdf.open(data / pdf) as doc:
                blob = one_page_pdf(doc, number)
            with pymupdf.open("pdf", blob) as single:
                read(single[0])
        except Exception:  # noqa: BLE001 - a page that does not survive the cut or the reader is left out
            continue
        if index and size + len(blob) > mb * 1e6:
            close()
            part, size, index = part + 1, 0, []
            if part > parts:
                return counts
        folder = out / f"part-{part}"
        folder.mkdir(parents=True, exist_ok=True)
        name = f"{len(index):06d}.pdf"
        (folder / name).write_bytes(blob)
        index.append({"file": name, "pdf": pdf, "page": number})
        size += len(blob)
    if index:
        close()
    return counts


def source(folder: Path, read: Reader | None = None) -> PageSource:
    """`--real-source hpd_training.train.shards:source --real-data FOLDER`: seed -> the page of a
    one-page PDF of FOLDER's parts, drawn by a hash of the seed (stages take their sources by seed
    modulo their count, so the seed's low digits are not uniform)."""
    files = sorted(p for p in Path(folder).glob("part-*/*.pdf"))
    if not files:
        raise ValueError(f"no part-*/*.pdf under {folder}")
    read = read or real_reader()

    def page(seed: int) -> TrainingPage:
        with pymupdf.open(files[random.Random(f"real:{seed}").randrange(len(files))]) as doc:
            return read(doc[0])

    return page


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--manifest", type=Path, required=True)
    ap.add_argument("--data", type=Path, required=True, help="the folder the manifest's pdf paths are relative to")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--mb", type=float, default=55.0, help="size of a part (what one device call carries)")
    ap.add_argument("--parts", type=int, default=2)
    args = ap.parse_args(argv)
    counts = pack(training_pages(args.manifest), args.data, args.out, args.mb, args.parts, real_reader())
    print(json.dumps({"pages_per_part": counts}))


if __name__ == "__main__":
    main()
