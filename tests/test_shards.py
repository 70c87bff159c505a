"""Real training pages packed into carried parts (`train.shards`), on PDFs the test draws."""

from __future__ import annotations

import json

import pymupdf

from hpd_training.train.shards import pack, source, training_pages


def write_pdfs(folder):
    for d in range(3):
        doc = pymupdf.open()
        for n in range(3):
            doc.new_page(width=300, height=400).insert_text((40, 60), f"doc {d} page {n} " + "x" * 200, fontsize=9)
        doc.save(folder / f"d{d}.pdf")
    pages = [{"pdf": f"d{d}.pdf", "page": n, "split": "eval" if d == 2 else "train",
              "status": "ok" if (d, n) != (0, 1) else "table"} for d in range(3) for n in range(3)]
    (folder / "manifest.json").write_text(json.dumps({"pages": pages}))


def read(page: pymupdf.Page) -> str:
    text = page.get_text()
    if "doc 1 page 2" in text:
        raise ValueError("rejected")
    return text


def test_parts_hold_each_taken_training_page_once_as_a_one_page_pdf_within_the_size(tmp_path):
    write_pdfs(tmp_path)
    pages = training_pages(tmp_path / "manifest.json")
    assert sorted(pages) == [("d0.pdf", 0), ("d0.pdf", 2), ("d1.pdf", 0), ("d1.pdf", 1), ("d1.pdf", 2)]
    counts = pack(pages, tmp_path, tmp_path / "real", mb=0.0025, parts=5, read=read)
    files = sorted((tmp_path / "real").glob("part-*/*.pdf"))
    assert sum(counts) == len(files) == 4 and len(counts) >= 2   # the rejected page is left out
    for part in (tmp_path / "real").glob("part-*"):
        index = json.loads((part / "index.json").read_text())
        sizes = [(part / e["file"]).stat().st_size for e in index]
        assert len(index) == 1 or sum(sizes) <= 2500
        for entry in index:
            with pymupdf.open(part / entry["file"]) as doc:
                assert doc.page_count == 1 and f"doc {entry['pdf'][1]} page {entry['page']}" in doc[0].get_text()


def test_source_draws_every_page_from_the_seeds_a_stage_gives_it(tmp_path):
    write_pdfs(tmp_path)
    pack(training_pages(tmp_path / "manifest.json"), tmp_path, tmp_path / "real", mb=1, parts=1, read=read)
    pages = source(tmp_path / "real", read=read)
    even = [pages(seed) for seed in range(1_000_000, 1_000_200, 2)]  # a stage of two sources: every other seed
    assert len(set(even)) == 4 and pages(1_000_002) == even[1]
