"""hpd-eval --real: held-out pages of a TeX Live manifest, scored against their text layers."""

from __future__ import annotations

import json

import pymupdf

from hpd_tools import evaluate
from hpd_core.grammar import Block
from hpd_training.manifest import Manifest, PageRecord, write
from hpd_training.realpage import real_page
from tests.test_evaluate import Oracle


def make_manifest(tmp_path) -> tuple:
    doc = pymupdf.open()
    page = doc.new_page(width=612, height=792)
    page.insert_text((72, 100), "A Title of Some Size", fontsize=18, fontname="tibo")
    page.insert_textbox(pymupdf.Rect(72, 120, 540, 300), "Body text in ten point type, " * 12,
                        fontsize=10, fontname="tiro")
    page.insert_text((72, 320), "small print at seven points", fontsize=7, fontname="tiro")
    doc.save(tmp_path / "doc.pdf")
    records = [PageRecord("doc.pdf", 0, "pkg", "eval", "paper-1col", "ok", evaluate=True),
               PageRecord("doc.pdf", 0, "pkg", "train", "manual", "ok")]
    write(tmp_path / "manifest.json", Manifest(records), [])
    return real_page(doc[0], 150).blocks


def test_real_pages_read_exactly_score_zero_distance_and_every_word_by_size(tmp_path, monkeypatch):
    truth = make_manifest(tmp_path)
    monkeypatch.setattr(evaluate, "engine_of", lambda model, options: Oracle(truth))
    assert evaluate.main(["--real", str(tmp_path / "manifest.json"), "--dpi", "150", "--out", str(tmp_path / "o")]) == 0
    real = json.loads((tmp_path / "o" / "summary.json").read_text())["summary"]["real"]
    assert set(real) == {"all", "paper-1col"} and real["all"]["pages"] == 1  # only the evaluate page
    assert real["all"]["text_edit_distance"] == 0 and real["all"]["word_f1"] == 1 and real["all"]["block_f1"] == 1
    assert real["all"]["read <9 pt"] == 1 and real["all"]["read >=14 pt"] == 1 and real["all"]["words <9 pt"] == 5
    assert "| paper-1col | 1 |" in (tmp_path / "o" / "summary.md").read_text()


def test_a_prediction_missing_the_small_print_reads_no_small_words(tmp_path, monkeypatch):
    truth = make_manifest(tmp_path)
    pred = [b for b in truth if "small print" not in b.text] + [Block("formula", (0, 0, 1, 1), "x^2")]
    monkeypatch.setattr(evaluate, "engine_of", lambda model, options: Oracle(pred))
    assert evaluate.main(["--real", str(tmp_path / "manifest.json"), "--out", str(tmp_path / "o")]) == 0
    real = json.loads((tmp_path / "o" / "summary.json").read_text())["summary"]["real"]["all"]
    assert real["read <9 pt"] == 0 and real["read 9-11.5 pt"] == 1 and 0 < real["text_edit_distance"] < 0.2
