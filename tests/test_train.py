"""The training code of the bundled model: glyph targets, and one CPU run end to end."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import torch
from tokenizers import Tokenizer

from hpd_core.loader import load_engine
from hpd_core.train.__main__ import bundled_config
from hpd_core.train.data import GLYPH_CLASSES, glyph_targets

TOKENIZER = Path(__file__).resolve().parent.parent / "assets" / "hpd-tiny" / "tokenizer.json"


def test_glyph_targets_put_each_character_in_its_cell_and_half():
    config = bundled_config(Tokenizer.from_file(str(TOKENIZER)))  # 640-px tile: 40 x 40 cells of 16 px
    page = (768, 1024)
    sx, sy = page[0] / 640, page[1] / 640

    def at(x, y, ch):  # tile px -> page px
        return (x * sx, y * sy, ord(ch))

    glyphs = np.array([at(20, 40, "A"), at(30, 40, "b"), at(639, 639, "é"), at(700, 10, "z")], np.float32)
    targets = glyph_targets(glyphs, page, config)
    assert targets.shape == (1600, 2)
    assert targets[2 * 40 + 1].tolist() == [ord("A") - 32, ord("b") - 32]  # row 2, col 1: left, right
    assert targets[39 * 40 + 39].tolist() == [0, GLYPH_CLASSES - 1]        # non-ASCII: the "other" class
    assert int((targets > 0).sum()) == 3                                     # off the page: dropped


def test_training_runs_on_cpu_and_writes_a_loadable_checkpoint(tmp_path):
    out = tmp_path / "run"
    subprocess.run([sys.executable, "-m", "hpd_core.train", "--out", str(out), "--stages", "lines:60",
                    "--small", "--workers", "0", "--batch", "2", "--max-steps", "3", "--glyph-weight", "1",
                    "--pointer-weight", "1", "--mtp-weight", "0.5", "--mtp-k", "3", "--log-every", "1",
                    "--tokenizer", str(TOKENIZER)], check=True, capture_output=True, timeout=300)
    rows = [json.loads(line) for line in (out / "log.jsonl").read_text().splitlines()]
    steps = [r for r in rows if "step" in r]
    assert [r["step"] for r in steps] == [1, 2, 3]
    losses = ("loss", "child", "glyph", "ptr_here", "ptr_next", "mtp")
    assert all(np.isfinite([r[name] for name in losses]).all() for r in steps)
    assert any("image_test" in r for r in rows) and rows[-1] == {"event": "saved", "stage": "lines"}
    engine = load_engine(str(out / "hpd-tiny"))
    assert engine.info.parameters > 0 and engine.config.max_dynamic_patch == 1
    assert engine.model.lm.lm_head.weight.dtype == torch.float32


def test_pointer_cells_hold_the_characters_of_their_token():
    """Every image cell a token's pointer target names holds one of the token's characters, for
    text blocks and for table cells (whose tags are not drawn and get no cells)."""
    from hpd_core.synth import SynthConfig, render_page
    from hpd_core.tokenizer import HPDTokenizer
    from hpd_core.train.data import child_tokens, glyph_cells

    raw = Tokenizer.from_file(str(TOKENIZER))
    config = bundled_config(raw)
    tok = HPDTokenizer(raw, config)
    tables = SynthConfig.dense(label_weights=(("table", 1.0), ("text", 1.0)), font_size_range=(20.0, 26.0))
    checked, in_tables = 0, 0
    for page in (render_page(3, SynthConfig.lines()), render_page(4, SynthConfig.lines()), render_page(5, tables)):
        at = {}  # cell -> the characters whose centres lie in it
        for cell, code in zip(glyph_cells(page.glyphs, page.image.size, config)[0], page.glyphs[:, 2]):
            at.setdefault(int(cell), set()).add(chr(int(code)))
        branches = child_tokens(page, tok, config)
        assert len(branches) == len(page.children_texts)
        for (ids, cells), text in zip(branches, page.children_texts):
            assert ids == tok.encode(text) and len(cells) == len(ids)
            for token, where in zip(ids, cells):
                piece = raw.decode([token])
                chars = {c for c in piece if not c.isspace()}
                assert bool(where) == bool(chars) or text.startswith("<table>")  # tags have no cells
                for cell in where:
                    assert chars & at[cell], (piece, where)
                checked += 1
                in_tables += bool(where) and text.startswith("<table>")
    assert checked > 100 and in_tables > 20
