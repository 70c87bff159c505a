"""The TeX Live data pipeline on a fake corpus drawn here (no TeX Live files): split by package,
kinds of document, the manifest's deterministic selection, and the bundle's pages reading the
same as their sources."""

from __future__ import annotations

import json
import os
from dataclasses import replace

import numpy as np
import pymupdf
import pytest

from hpd_core.loader import BUNDLED
from hpd_training import bundle, dockind, manifest, texlive
from hpd_training.bundle import load_bundle, training_page, write_bundle, write_evaluation, write_sample
from hpd_training.manifest import PageRecord, build, choose_evaluation
from hpd_training.realpage import real_page
from hpd_training.texlive import DEBS, DOC_ROOT, packages, split_of

PROSE = "Words of a page of documentation, set in ten point type for the tests. " * 6


def pdf(path, pages: int = 3, width: float = 612, height: float = 792, first: str = PROSE, last: str = PROSE):
    doc = pymupdf.open()
    for n in range(pages):
        page = doc.new_page(width=width, height=height)
        text = first if n == 0 else last if n == pages - 1 else f"Page {n}. " + PROSE
        page.insert_textbox(pymupdf.Rect(40, 40, width - 40, height - 40), text, fontsize=10, fontname="tiro")
    path.parent.mkdir(parents=True, exist_ok=True)
    doc.save(path)


def kind(tmp_path, name="doc.pdf", package="pkg", **kw) -> str:
    pdf(tmp_path / name, **kw)
    with pymupdf.open(tmp_path / name) as doc:
        return dockind.kind_of(doc, name, package)


def test_split_is_by_package_name_a_tenth_held_out_and_three_tenths_of_publishers():
    names = [f"package{i}" for i in range(2000)]
    held = {n for n in names if split_of(n) == "eval"}
    publishers = {n for n in names if split_of(n, ("texlive-publishers-doc",)) == "eval"}
    assert 150 < len(held) < 250 and 500 < len(publishers) < 700 and held <= publishers
    assert {n for n in names if split_of(n, ("texlive-latex-extra-doc",)) == "eval"} == held


def test_packages_join_areas_by_folder_name(tmp_path):
    pdf(tmp_path / DOC_ROOT / "latex" / "base" / "a.pdf", pages=1)
    pdf(tmp_path / DOC_ROOT / "latex-dev" / "base" / "sub" / "b.pdf", pages=1)
    pdf(tmp_path / DOC_ROOT / "generic" / "other" / "c.pdf", pages=1)
    (tmp_path / DEBS).write_text(json.dumps({"other": ["texlive-publishers-doc"]}))
    found = packages(tmp_path)
    assert [(p.name, len(p.pdfs), p.debs) for p in found] == [("base", 2, ()), ("other", 1, ("texlive-publishers-doc",))]


def test_packages_refuse_a_data_folder_without_its_debian_listing(tmp_path):
    # Without debs.json (e.g. a manifest started while `fetch` still unpacks) the publishers'
    # packages would fall back to the 10 % split and held-out packages would be trained on.
    pdf(tmp_path / DOC_ROOT / "latex" / "base" / "a.pdf", pages=1)
    with pytest.raises(FileNotFoundError, match="debs.json"):
        packages(tmp_path)


@pytest.mark.parametrize("kw, expected", [
    ({"width": 364, "height": 273}, "slides"),
    ({"width": 1684, "height": 2384}, "poster"),
    ({"first": "Dear Ms Smith,\n" + PROSE}, "letter"),
    ({"name": "thesis-sample.pdf"}, "thesis"),
    ({"first": "Abstract\n" + PROSE, "last": "References\n[1] A. Author."}, "paper-1col"),
    ({"first": "Abstract\nThis package provides a package for package authors. " + PROSE,
      "last": "References"}, "manual"),
    ({}, "manual"),
])
def test_kinds_of_document(tmp_path, kw, expected):
    assert kind(tmp_path, **kw) == expected


def test_paper_set_in_two_columns_is_paper_2col(tmp_path):
    doc = pymupdf.open()
    for n in range(2):
        page = doc.new_page(width=612, height=792)
        head = "Abstract\n" if n == 0 else "References\n"
        for x0 in (50, 316):
            page.insert_textbox(pymupdf.Rect(x0, 60, x0 + 246, 700), head + PROSE * 3, fontsize=10, fontname="tiro")
    doc.save(tmp_path / "paper.pdf")
    with pymupdf.open(tmp_path / "paper.pdf") as doc:
        assert dockind.columns(doc[0]) == 2 and dockind.kind_of(doc, "paper.pdf", "pkg") == "paper-2col"


def record(pdf: str, page: int, package: str, kind: str) -> PageRecord:
    return PageRecord(pdf, page, package, "eval", kind, "ok")


def test_evaluation_set_keeps_quotas_and_per_pdf_limit_and_fills_short_kinds_with_manuals(monkeypatch):
    monkeypatch.setattr(manifest, "EVAL_QUOTA", {"manual": 3, "letter": 2})
    pages = [record(f"m{i}.pdf", n, f"pm{i}", "manual") for i in range(5) for n in range(3)]
    pages += [record("l.pdf", n, "pl", "letter") for n in range(3)]  # one letter PDF: 2 pages at most
    chosen = [p for p in choose_evaluation(pages) if p.evaluate]
    assert sum(p.kind == "letter" for p in chosen) == 2 and sum(p.kind == "manual" for p in chosen) == 3
    monkeypatch.setattr(manifest, "EVAL_PER_PDF", 1)
    chosen = [p for p in choose_evaluation(pages) if p.evaluate]
    assert sum(p.kind == "letter" for p in chosen) == 1 and sum(p.kind == "manual" for p in chosen) == 4
    assert choose_evaluation(pages) == choose_evaluation(list(pages))


def test_manifest_and_bundle_are_deterministic_and_bundle_pages_read_as_their_sources(tmp_path):
    names = [f"pkg{i}" for i in range(12)]
    for name in names:
        pdf(tmp_path / DOC_ROOT / "latex" / name / f"{name}.pdf", pages=8)
    pdf(tmp_path / DOC_ROOT / "latex" / "pkg0" / "blank.pdf", pages=1, first="")
    (tmp_path / DEBS).write_text("{}")
    first = build(tmp_path, workers=1)
    untimed = [replace(p, seconds=0.0) for p in first.pages]
    assert [replace(p, seconds=0.0) for p in build(tmp_path, workers=1).pages] == untimed  # all but timings
    body = json.loads((tmp_path / manifest.NAME).read_text())
    assert {p["split"] for p in body["pages"]} <= {"train", "eval"}
    assert all(p["split"] == split_of(p["package"]) for p in body["pages"])
    train = [p for p in first.pages if p.split == "train" and p.status == "ok"]
    assert train and all(sum(q.pdf == p.pdf for q in train) <= manifest.TRAIN_PAGES for p in train)

    summary = write_bundle(tmp_path, tmp_path / "bundle")
    entries = load_bundle(tmp_path / "bundle")
    assert len(entries) == len(train) and summary.startswith(f"{len(train)} pages")
    for entry in entries[:4]:
        ours = training_page(tmp_path / "bundle", entry)
        with pymupdf.open(tmp_path / entry.source) as doc:
            source = real_page(doc[entry.source_page])
        assert ours.blocks == source.blocks and np.array_equal(ours.glyphs, source.glyphs)

    half = write_bundle(tmp_path, tmp_path / "half", max_bytes=sum(
        f.stat().st_size for f in (tmp_path / "bundle" / "pdfs").iterdir()) // 2)
    rest = write_bundle(tmp_path, tmp_path / "rest", skip=[tmp_path / "half"])
    first, second = load_bundle(tmp_path / "half"), load_bundle(tmp_path / "rest")
    assert first and second and not {(e.source, e.source_page) for e in first} & \
        {(e.source, e.source_page) for e in second}, (half, rest)
    assert len(first) + len(second) == len(train)
    both = bundle.source(f"{tmp_path / 'half'}{os.pathsep}{tmp_path / 'rest'}")  # draws from either bundle
    drawn = {repr(both(seed).blocks) for seed in range(40)}
    for folder, entries in ((tmp_path / "half", first), (tmp_path / "rest", second)):
        assert drawn & {repr(training_page(folder, e).blocks) for e in entries}


def test_a_columns_bundle_holds_the_training_pages_set_in_two_columns_and_only_those(tmp_path):
    for name in (f"pkg{i}" for i in range(4)):
        pdf(tmp_path / DOC_ROOT / "latex" / name / f"{name}.pdf", pages=4)
    doc = pymupdf.open()  # pkg4: pages 1 and 3 set in two columns, 0 and 2 in one
    for n in range(4):
        page = doc.new_page(width=612, height=792)
        for x0, x1 in ((50, 296), (316, 562)) if n % 2 else ((50, 562),):
            page.insert_textbox(pymupdf.Rect(x0, 60, x1, 700), PROSE * 3, fontsize=10, fontname="tiro")
    (tmp_path / DOC_ROOT / "latex" / "pkg4").mkdir(parents=True)
    doc.save(tmp_path / DOC_ROOT / "latex" / "pkg4" / "pkg4.pdf")
    (tmp_path / DEBS).write_text("{}")
    train = {(p.pdf, p.page) for p in build(tmp_path, workers=1).pages if p.split == "train" and p.status == "ok"}
    two = {(pdf, page) for pdf, page in train if "pkg4" in pdf and page % 2}
    assert len(two) == 2
    write_bundle(tmp_path, tmp_path / "2col", columns=2)
    assert {(e.source, e.source_page) for e in load_bundle(tmp_path / "2col")} == two
    write_bundle(tmp_path, tmp_path / "1col", columns=1)
    assert {(e.source, e.source_page) for e in load_bundle(tmp_path / "1col")} == train - two


def test_the_bundle_check_turns_every_page_into_a_sample_and_names_the_pages_that_raise(tmp_path, monkeypatch):
    for name in (f"pkg{i}" for i in range(3)):
        pdf(tmp_path / DOC_ROOT / "latex" / name / f"{name}.pdf", pages=3)
    (tmp_path / DEBS).write_text("{}")
    build(tmp_path, workers=1)
    write_bundle(tmp_path, tmp_path / "bundle")
    entries = load_bundle(tmp_path / "bundle")
    model = BUNDLED["hpd-tiny-docs"][0]
    checked = bundle.check_bundle(tmp_path / "bundle", model)
    assert (checked.ok, checked.rejected, checked.failed) == (len(entries), 0, [])
    assert bundle.check_bundle(tmp_path / "bundle", model, workers=2) == checked

    page = bundle.training_page

    def with_a_lone_surrogate(folder, entry):  # what stopped r59: a text the tokenizer refuses
        out = page(folder, entry)
        if entry == entries[1]:
            out.blocks[0] = replace(out.blocks[0], text="\ud835")
        return out

    monkeypatch.setattr(bundle, "training_page", with_a_lone_surrogate)
    checked = bundle.check_bundle(tmp_path / "bundle", model)
    assert checked.ok == len(entries) - 1 and len(checked.failed) == 1
    assert checked.failed[0].startswith(f"{entries[1].file} page {entries[1].page}: TypeError")


def test_a_longer_manifest_keeps_its_pages_and_a_bundle_skips_an_earlier_bundles_pages(tmp_path, monkeypatch):
    for name in (f"pkg{i}" for i in range(8)):
        pdf(tmp_path / DOC_ROOT / "latex" / name / f"{name}.pdf", pages=8)
    (tmp_path / DEBS).write_text("{}")
    monkeypatch.setattr(manifest, "TRAIN_PAGES", 3)
    short = {(p.pdf, p.page) for p in build(tmp_path, workers=1).pages if p.split == "train"}
    write_bundle(tmp_path, tmp_path / "old")
    monkeypatch.setattr(manifest, "TRAIN_PAGES", 6)
    longer = [p for p in build(tmp_path, workers=1).pages if p.split == "train" and p.status == "ok"]
    assert short < {(p.pdf, p.page) for p in longer}  # the same hash order, taken further
    write_bundle(tmp_path, tmp_path / "new", skip=[tmp_path / "old"])
    old = {(e.source, e.source_page) for e in load_bundle(tmp_path / "old")}
    new = {(e.source, e.source_page) for e in load_bundle(tmp_path / "new")}
    assert old and new and not old & new and old | new == {(p.pdf, p.page) for p in longer}
    assert {s for s, _ in old} == {s for s, _ in new}  # new pages of the same PDFs


@pytest.mark.parametrize("within", [(1, 6), (2, 3)])
def test_a_shorter_manifests_pages_are_picked_out_of_the_longer_one(tmp_path, monkeypatch, within):
    # bundles 1-4 were written from a manifest of one PDF and 6 pages a package, 5-10 from one of two
    # PDFs and 12 pages: `bundle --within` writes them again from today's manifest; a PDF that cannot
    # be opened is still one of its package's first
    for i in range(6):
        for stem in ("a", "b", "c"):
            pdf(tmp_path / DOC_ROOT / "latex" / f"pkg{i}" / f"{stem}.pdf", pages=8)
        (tmp_path / DOC_ROOT / "latex" / f"pkg{i}" / "broken.pdf").write_bytes(b"not a PDF")
    (tmp_path / DEBS).write_text("{}")
    monkeypatch.setattr(manifest, "TRAIN_PDFS", within[0])
    monkeypatch.setattr(manifest, "TRAIN_PAGES", within[1])
    short = [replace(p, seconds=0.0) for p in build(tmp_path, workers=1).pages if p.split == "train"]
    monkeypatch.undo()
    longer = [p for p in build(tmp_path, workers=1).pages if p.split == "train"]
    assert len(longer) > len(short) > 0
    picked = [replace(p, seconds=0.0) for p in manifest.pages_within(tmp_path / manifest.NAME, *within)]
    key = lambda p: (p.pdf, p.page)  # noqa: E731
    assert sorted(picked, key=key) == sorted(short, key=key)
    assert len({p.pdf for p in short}) < within[0] * 6  # some package's first PDFs hold the broken one
    write_bundle(tmp_path, tmp_path / "short", within=within)
    assert {(e.source, e.source_page) for e in load_bundle(tmp_path / "short")} == \
        {(p.pdf, p.page) for p in short if p.status == "ok"}


def test_two_sources_of_one_stem_in_a_package_get_a_file_each(tmp_path):
    # tabriz-thesis ships latex/.../tabriz-thesis.pdf and xelatex/.../tabriz-thesis.pdf: one name
    # for both wrote the second over the first, and training asked the first's pages of it
    pdf(tmp_path / DOC_ROOT / "latex" / "pkg" / "doc.pdf", pages=5)
    pdf(tmp_path / DOC_ROOT / "xelatex" / "pkg" / "sub" / "doc.pdf", pages=2, first="Another document.")
    (tmp_path / DEBS).write_text("{}")
    build(tmp_path, workers=1)
    write_bundle(tmp_path, tmp_path / "bundle")
    entries = load_bundle(tmp_path / "bundle")
    assert len({e.source for e in entries}) == 2 and len({e.file for e in entries}) == 2
    for entry in entries:
        with pymupdf.open(tmp_path / "bundle" / entry.file) as ours, pymupdf.open(tmp_path / entry.source) as src:
            assert ours.page_count == sum(e.file == entry.file for e in entries)
            assert real_page(ours[entry.page]).blocks == real_page(src[entry.source_page]).blocks


def test_a_sample_of_a_bundle_reads_as_its_pages_one_a_pdf_in_the_held_out_kinds_shares(tmp_path):
    for i in range(10):
        pdf(tmp_path / DOC_ROOT / "latex" / f"pkg{i}" / f"pkg{i}.pdf", pages=4)
    (tmp_path / DEBS).write_text("{}")
    build(tmp_path, workers=1)
    write_bundle(tmp_path, tmp_path / "bundle")
    entries = load_bundle(tmp_path / "bundle")
    assert len({e.source for e in entries}) > 4
    write_sample(tmp_path / "bundle", tmp_path / "seen", pages=4)
    sample = manifest.load(tmp_path / "seen" / manifest.NAME).pages
    assert len(sample) == 4 and all(p.evaluate and p.split == "train" for p in sample)
    assert {p.kind for p in sample} == {"manual"}  # the synthetic PDFs are all manuals: the other kinds' share
    assert len({p.pdf for p in sample}) == 4  # a bundle file per source PDF: one page of each
    for record in sample:
        with pymupdf.open(tmp_path / "seen" / record.pdf) as ours, pymupdf.open(tmp_path / "bundle" / record.pdf) as src:
            assert ours.page_count == 1
            assert real_page(ours[record.page]).blocks in [real_page(page).blocks for page in src]


def test_evaluation_pages_copied_out_read_as_their_sources(tmp_path, monkeypatch):
    monkeypatch.setattr(manifest, "EVAL_QUOTA", {"manual": 3})
    names = [n for n in (f"pkg{i}" for i in range(60)) if split_of(n) == "eval"][:2]
    for name in names:
        pdf(tmp_path / DOC_ROOT / "latex" / name / f"{name}.pdf", pages=5)
    (tmp_path / DEBS).write_text("{}")
    chosen = [p for p in build(tmp_path, workers=1).pages if p.evaluate]
    assert len(chosen) == 3
    write_evaluation(tmp_path, tmp_path / "eval")
    copied = manifest.load(tmp_path / "eval" / manifest.NAME).pages
    assert [p.evaluate for p in copied] == [True] * 3
    for ours, source in zip(copied, sorted(chosen, key=lambda p: (p.pdf, p.page))):
        with pymupdf.open(tmp_path / "eval" / ours.pdf) as a, pymupdf.open(tmp_path / source.pdf) as b:
            assert real_page(a[ours.page]).blocks == real_page(b[source.page]).blocks


def test_within_is_pdfs_x_pages_and_anything_else_is_a_usage_error(capsys):
    assert texlive._within("2x12") == (2, 12)
    with pytest.raises(SystemExit) as exit_:
        texlive.main(["bundle", "--within", "2,12"])
    assert exit_.value.code == 2 and "'2,12' is not PDFSxPAGES" in capsys.readouterr().err


@pytest.mark.parametrize("command", ["check", "sample"])
def test_check_and_sample_of_a_folder_without_a_bundle_are_usage_errors(tmp_path, capsys, command):
    with pytest.raises(SystemExit) as exit_:
        texlive.main([command, "--from", str(tmp_path)])
    assert exit_.value.code == 2 and "a folder with a bundle.json" in capsys.readouterr().err


def test_a_kinds_bundle_holds_the_training_pages_of_documents_of_those_kinds_and_only_those(tmp_path):
    for name in (f"pkg{i}" for i in range(4)):
        pdf(tmp_path / DOC_ROOT / "latex" / name / f"{name}.pdf", pages=3)
    pdf(tmp_path / DOC_ROOT / "latex" / "pkg4" / "slides.pdf", pages=3, width=364, height=273)
    pdf(tmp_path / DOC_ROOT / "latex" / "pkg5" / "letter.pdf", pages=2, first="Dear Ms Smith,\n" + PROSE)
    (tmp_path / DEBS).write_text("{}")
    train = [p for p in build(tmp_path, workers=1).pages if p.split == "train" and p.status == "ok"]
    rare = {(p.pdf, p.page) for p in train if p.kind in ("slides", "letter")}
    assert {p.kind for p in train} == {"manual", "slides", "letter"} and len(rare) == 5
    write_bundle(tmp_path, tmp_path / "kinds", kinds=frozenset({"slides", "letter"}))
    assert {(e.source, e.source_page) for e in load_bundle(tmp_path / "kinds")} == rare
    assert texlive.main(["bundle", "--out", str(tmp_path), "--to", str(tmp_path / "cli"), "--kind", "letter"]) == 0
    assert {e.kind for e in load_bundle(tmp_path / "cli")} == {"letter"}
