"""hpd-eval end to end: synthetic pages and JSON ground truth, on a tiny checkpoint and a stub."""

import csv
import json

import pymupdf
import pytest

from hpd_tools import evaluate
from hpd_core.engine import EngineInfo
from hpd_tools.evaluate import EVAL_SEED, main
from hpd_core.grammar import format_assembled
from hpd_core.result import ParseResult, Stats
from hpd_training.synth import SynthConfig, render_page
from tests.tiny import write_checkpoint

SCORES = ("edit_distance", "precision", "recall", "f1", "label_accuracy", "reading_order", "teds")


@pytest.fixture(scope="module")
def model(tmp_path_factory) -> str:
    return str(write_checkpoint(tmp_path_factory.mktemp("ckpt"), seed=0, noise=0.5))


def read_rows(out) -> list[dict]:
    with open(out / "pages.csv", newline="") as f:
        return list(csv.DictReader(f))


def assert_unit_range(record: dict) -> None:
    for name in SCORES:
        value = record[name]
        if value not in (None, ""):
            assert 0.0 <= float(value) <= 1.0, (name, value)


def test_the_synthetic_pages_type_size_is_described_in_the_presets_unit_and_their_fonts_by_family():
    """Classic presets lay pages out at 72 dpi (a point is a pixel); `document` and `letter` at 150 dpi, so
    their sizes are points; theirs are set in the document families this machine has, which the
    description names (another machine's families draw other pages from the same seeds)."""
    from hpd_training.synth.fonts import document_families
    families = f"in {len(document_families())} families ({', '.join(document_families())})"
    for preset, unit in (("dense", "font size 14-17 px"), ("document", "font size 8-12 pt at 150 dpi " + families),
                         ("letter", "font size 9-13 pt at 150 dpi " + families)):
        args = evaluate.build_parser().parse_args(["--synth", "1", "--synth-config", preset])
        assert unit in evaluate.load_samples(args)[1], preset
    args = evaluate.build_parser().parse_args(["--synth", "1", "--synth-config", "dense"])
    assert "families" not in evaluate.load_samples(args)[1]


def test_synthetic_pages_are_parsed_and_scored_in_unit_range(model, tmp_path):
    out = tmp_path / "eval"
    assert main(["--model", model, "--synth", "2", "--max-new-tokens", "40", "--out", str(out)]) == 0
    rows = read_rows(out)
    seeds = [EVAL_SEED, EVAL_SEED + 1]
    assert [r["page"] for r in rows] == [f"synth-{s}" for s in seeds]
    for row, seed in zip(rows, seeds):
        assert int(row["gt_blocks"]) == len(render_page(seed, SynthConfig.dense()).blocks)
        assert int(row["tokens"]) > 0
        assert_unit_range(row)
    summary = json.loads((out / "summary.json").read_text())["summary"]
    assert summary["pages"] == 2
    assert_unit_range(summary)
    assert summary["tau"] >= 1 and all(float(r["tau"]) >= 1 for r in rows)
    assert "| f1 |" in (out / "summary.md").read_text() and "| tau |" in (out / "summary.md").read_text()
    assert all(float(r["length_ratio"]) > 0 for r in rows) and "Output length: median" in (out / "summary.md").read_text()
    two_columns = [r["unread_column"] for r in rows if r["unread_column"]]  # "True" / "False"; "" for one column
    assert summary["columns"] == {"pages": len(two_columns), "unread": two_columns.count("True")}
    said = f"Two columns: {two_columns.count('True')} of the {len(two_columns)} pages" in (out / "summary.md").read_text()
    assert said == bool(two_columns)  # said where there are such pages


def test_lengths_flag_runaway_pages_against_the_median_and_against_their_own_truth():
    # page 4 ran 5x the median but only as long as its truth (a long page read right); page 3 is
    # of median length and 4x its truth (runaway on a short page)
    rows = [{"tokens": 100, "length_ratio": 1.0}, {"tokens": 100, "length_ratio": 0.9},
            {"tokens": 110, "length_ratio": 4.0}, {"tokens": 500, "length_ratio": 1.1}]
    assert evaluate.lengths(rows) == {"median_tokens": 105.0, "max_tokens_over_median": 500 / 105,
                                      "pages_over_median": 1, "max_length_ratio": 4.0, "pages_over_length": 1}


def test_tau_counts_every_branch_step_of_every_page():
    # 20 drafts accepted over 10 + 30 steps: 1.5 (not the mean of the pages' 3.0 and 1.0)
    pages = [Stats(branch_steps=10, accepted_tokens=20), Stats(branch_steps=30)]
    assert evaluate.mean_accepted_length(pages) == 1.5
    assert evaluate.mean_accepted_length([Stats()]) is None


def test_json_ground_truth_is_matched_by_file_name_and_page_number(model, tmp_path):
    synth = render_page(EVAL_SEED, SynthConfig.simple())
    synth.image.save(tmp_path / "scan.png")
    pdf = pymupdf.open()
    for _ in range(2):
        pdf.new_page(width=200, height=260).insert_text((20, 40), "Hello", fontsize=14)
    pdf.save(tmp_path / "doc.pdf")
    blocks = [{"label": b.label, "bbox": list(b.bbox), "text": b.text} for b in synth.blocks]
    truth = {"scan.png": blocks, "doc.pdf#2": {"blocks": [{"label": "text", "bbox": [20, 20, 300, 80],
                                                           "text": "Hello"}]}}
    (tmp_path / "truth.json").write_text(json.dumps(truth))
    out = tmp_path / "eval"
    assert main(["--model", model, "--gt", str(tmp_path / "truth.json"), "--inputs", str(tmp_path / "scan.png"),
                 str(tmp_path / "doc.pdf"), "--max-new-tokens", "40", "--out", str(out)]) == 0
    rows = read_rows(out)
    assert [r["page"] for r in rows] == ["scan.png", "doc.pdf#2"]  # doc.pdf page 1 has no ground truth
    assert [int(r["gt_blocks"]) for r in rows] == [len(synth.blocks), 1]
    for row in rows:
        assert_unit_range(row)


class Oracle:
    """A stub engine that 'predicts' given blocks for every page."""
    info = EngineInfo("oracle", "", "cpu", "float32", 0, False)

    def __init__(self, blocks):
        self.blocks = blocks

    def parse(self, image, options):
        return ParseResult(format_assembled(self.blocks), self.blocks, "", Stats(), image.size)


def test_scores_compare_prediction_and_hpd_parse_style_ground_truth(tmp_path, monkeypatch):
    synth = render_page(EVAL_SEED + 7, SynthConfig.dense())
    synth.image.save(tmp_path / "page.png")
    w, h = synth.image.size
    # an hpd-parse page JSON: "bbox" in pixels, "bbox_1000" on the grid (the one that is used)
    truth = {"page.png": {"blocks": [{"label": b.label, "bbox": b.page_bbox(w, h), "bbox_1000": b.bbox,
                                      "text": b.text} for b in synth.blocks]}}
    (tmp_path / "truth.json").write_text(json.dumps(truth))
    args = ["--gt", str(tmp_path / "truth.json"), "--inputs", str(tmp_path / "page.png")]

    monkeypatch.setattr(evaluate, "engine_of", lambda model, options: Oracle(synth.blocks))
    assert main([*args, "--out", str(tmp_path / "exact")]) == 0
    exact = json.loads((tmp_path / "exact" / "summary.json").read_text())["summary"]
    assert exact["edit_distance"] == 0 and exact["f1"] == 1 and exact["label_accuracy"] == 1
    assert exact["reading_order"] == 0

    monkeypatch.setattr(evaluate, "engine_of", lambda model, options: Oracle(synth.blocks[:-1]))
    assert main([*args, "--out", str(tmp_path / "missing")]) == 0
    missing = json.loads((tmp_path / "missing" / "summary.json").read_text())["summary"]
    n = len(synth.blocks)
    assert missing["precision"] == 1 and missing["recall"] == pytest.approx((n - 1) / n)


def test_bad_ground_truth_is_a_usage_error(tmp_path, capsys):
    (tmp_path / "truth.json").write_text(json.dumps({"other.png": []}))
    render_page(EVAL_SEED, SynthConfig.simple()).image.save(tmp_path / "page.png")
    assert main(["--gt", str(tmp_path / "truth.json"), "--inputs", str(tmp_path / "page.png")]) == 2
    assert "no entry 'page.png'" in capsys.readouterr().err
    assert main(["--gt", str(tmp_path / "truth.json")]) == 2


def test_paired_scores_are_differences_page_by_page_with_their_standard_error():
    # lower is better for edit distances, higher for F1; page c is only in this run, d only in the baseline
    rows = [{"page": "a", "text_edit_distance": 0.2, "word_f1": 0.9}, {"page": "b", "text_edit_distance": 0.5,
            "word_f1": 0.6}, {"page": "c", "text_edit_distance": 0.0, "word_f1": 1.0}]
    baseline = [{"page": "a", "text_edit_distance": "0.4", "word_f1": "0.7"},
                {"page": "b", "text_edit_distance": "0.4", "word_f1": ""}, {"page": "d", "text_edit_distance": "1"}]
    got = evaluate.paired(rows, baseline)
    assert (got["pages"], got["only_here"], got["only_baseline"]) == (2, 1, 1)
    edit = got["text_edit_distance"]
    assert edit["difference"] == pytest.approx(((0.2 - 0.4) + (0.5 - 0.4)) / 2)
    assert edit["standard_error"] == pytest.approx(0.15)  # stdev(-0.2, 0.1) = 0.212, over sqrt 2
    assert (edit["better"], edit["worse"]) == (1, 1) and edit["mean"] == pytest.approx(0.35)
    words = got["word_f1"]  # page b has no baseline word F1: one pair
    assert (words["pages"], words["difference"], words["standard_error"], words["better"]) == (1, pytest.approx(0.2), None, 1)
    assert "f1" not in got and "tau" not in got


def test_a_baseline_run_is_compared_page_by_page_and_a_foreign_one_is_refused(model, tmp_path, capsys):
    args = ["--model", model, "--synth", "2", "--max-new-tokens", "40"]
    assert main([*args, "--out", str(tmp_path / "before")]) == 0
    assert main([*args, "--out", str(tmp_path / "after"), "--baseline", str(tmp_path / "before")]) == 0
    paired = json.loads((tmp_path / "after" / "summary.json").read_text())["summary"]["paired"]
    assert paired["pages"] == 2 and paired["edit_distance"]["difference"] == 0  # the same model decodes the same
    assert "Page by page against" in (tmp_path / "after" / "summary.md").read_text()
    capsys.readouterr()
    assert main([*args, "--seed", "7", "--out", str(tmp_path / "other"), "--baseline", str(tmp_path / "before")]) == 2
    assert "scored none of these pages" in capsys.readouterr().err and not (tmp_path / "other").exists()
    assert main([*args, "--baseline", str(tmp_path / "nowhere")]) == 2
    assert "no pages.csv there" in capsys.readouterr().err
