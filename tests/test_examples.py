"""The example documents in assets/: the synthetic ones are the pages hpd_training.examples says they are and
the bundled hpd-tiny reads them (its transcription is measurably close to their ground truth); the real
TeX Live pages are listed for hpd-tiny-docs, which reads them within issue 17's text edit distance of 0.05."""


import numpy as np
import pytest

from app.examples import FOLDER
from hpd_training.examples import DPI, PAGES, PDF
from hpd_core import load_engine
from hpd_core.documents import load_pages
from hpd_core.grammar import parse_blocks
from hpd_tools.metrics import aggregate, evaluate_page, score_text
from hpd_core.options import ParseOptions
from hpd_training.synth import render_page


def examples():
    """(file name, page image as the app loads it, its synthetic page with the ground truth)."""
    for name, seed, config in PAGES:
        yield name, load_pages(FOLDER / name)[0].image, render_page(seed, config)
    name, seeds, config = PDF
    for page, seed in zip(load_pages(FOLDER / name, dpi=DPI), seeds):
        yield f"{name} p{page.number}", page.image, render_page(seed, config)


@pytest.fixture(scope="module")
def parsed():
    engine = load_engine(None)
    out = []
    for name, image, truth in examples():
        result = engine.parse(image, ParseOptions(batch_children=True))
        out.append((name, image, truth, evaluate_page(result.blocks, truth.blocks), result))
    return out


def test_example_files_are_their_synthetic_pages(parsed):
    for name, image, truth, _, _ in parsed:
        assert image.size == truth.image.size, name
        diff = np.abs(np.asarray(image, np.int16) - np.asarray(truth.image, np.int16))
        assert diff.mean() < 2.0, name  # PNG: identical; PDF: 64-colour images, re-rendered


def test_each_child_carries_the_header_its_fork_ends(parsed):
    """A child's label and box are those of the last block the layout branch wrote before the child's
    <FORK> (the layout text decoded up to the fork position), kept by the layout branch as it writes."""
    engine = load_engine(None)
    for name, _, _, _, result in parsed:
        layout, children = result.branches[0], result.branches[1:]
        assert len(children) >= 3, name
        for child in children:
            written = engine.tokenizer.decode(list(layout.token_ids[:child.position - result.stats.prompt_tokens]))
            header = parse_blocks(written)[-1]
            assert (child.label, child.bbox) == (header.label, header.bbox), (name, child.branch)


def test_bundled_model_reads_the_examples(parsed):
    # Measured with the r15 weights (docs/training.md): edit distance 0-0.0023 per page, 0.0008 over
    # all characters, F1 1.0 (a candidate that split a paragraph of synth-report.png, 0.31 there,
    # failed this test and was not bundled); the r12 weights scored 0.001-0.007 (0.0026), the r9
    # weights 0.008-0.063 (0.030), F1 0.98, the r6 weights 0.42-0.84 (0.72), F1 0.82, and the
    # weights before the model read 0.82-1.00 (0.94).
    # Found 2026-12-01/02: one paragraph of synth-report.png is a near-tie that the vision tower's
    # rounding decides. Read as above with bf16 vision on an Intel CPU with AMX; split at a line
    # (0.308: one extra block, the title, list and other text right) with fp32 vision (and in
    # float64) on a CPU without bf16 instructions, and with bf16 vision on an AMD EPYC with
    # AVX512-BF16 but no AMX (2026-12-02, also at the commit before that day's engine changes).
    # That page is held to either reading; every other page to the strict one.
    scores = {name: s for name, _, _, s, _ in parsed}
    split = {"synth-report.png"}
    for name, s in scores.items():
        if name in split:
            assert s.edit_distance < 0.31 and s.fn == 0 and s.fp <= 1, (name, s)
        else:
            assert s.edit_distance < 0.03, (name, s.edit_distance)
    summary = aggregate([s for name, s in scores.items() if name not in split])
    assert summary.edit_distance < 0.01 and summary.f1 > 0.95, summary
    assert scores["synth-notes.png"].edit_distance < 0.01  # short lines of large type: its best case


# ---- the real pages, read by hpd-tiny-docs ---------------------------------------------------------

REAL = ("texlive-ndsu-thesis.pdf", "texlive-prtec.pdf")  # pages of held-out TeX Live documents (SOURCES.md)


@pytest.fixture(scope="module")
def read_real():
    """{file: (the app's page image, the text layer's page, the page's text scores)}."""
    import pymupdf
    from hpd_training.realpage import real_page

    engine = load_engine("hpd-tiny-docs")
    out = {}
    for name in REAL:
        with pymupdf.open(FOLDER / name) as doc:
            truth = real_page(doc[0], engine.info.render_dpi)
        truth_words = [w for b in truth.layout.blocks if b.trained for w in b.words]
        image = load_pages(FOLDER / name, dpi=engine.info.render_dpi)[0].image
        out[name] = (image, truth, score_text(engine.parse(image, ParseOptions(batch_children=True)).blocks, truth_words))
    return out


def test_the_real_examples_are_listed_for_the_model_that_reads_them():
    from app.examples import examples as listed
    assert [e.path.name for e in listed(model="hpd-tiny-docs")] == list(REAL)
    assert not {e.path.name for e in listed(model="hpd-tiny")} & set(REAL)
    assert {e.path.name for e in listed()} >= set(REAL)


def test_hpd_tiny_docs_reads_the_real_examples_within_issue_17s_edit_distance(read_real):
    # Issue 17: the examples parse at text edit distance <= 0.05 (`hpd-eval --real`'s measure: the page's
    # text against its text layer, `metrics.score_text`). The bundled r62 weights (docs/training.md,
    # session 41) on a 2-core AMD EPYC (bf16 vision): ndsu-thesis 0.025 (word F1 0.939), prtec 0.012 (0.973).
    for name, (image, truth, scores) in read_real.items():
        assert image.size == truth.image.size, name  # the app renders the page the text layer was taken from
        assert scores.edit_distance <= 0.05, (name, scores)
