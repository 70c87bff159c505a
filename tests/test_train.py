"""The training code of the bundled model: glyph targets, data-parallel training, and CPU runs end to end."""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch
import torch.distributed as dist
from PIL import Image
from tokenizers import Tokenizer

from hpd_core.checkpoint import MTP_PREFIX, load_model
from hpd_core.config import HPDConfig
from hpd_core.preprocess import grid_for, tiles
from hpd_core.loader import load_engine
from hpd_training.train import data, distributed
from hpd_training.train.__main__ import TILE_GRID, bundled_config, lr_factor, parse_span
from hpd_training.train.average import average_runs
from hpd_training.train.data import GLYPH_CLASSES, glyph_targets
from tests.tiny import write_checkpoint

ROOT = Path(__file__).resolve().parent.parent
TOKENIZER = ROOT / "assets" / "hpd-tiny" / "tokenizer.json"


def test_glyph_targets_of_one_tile_put_each_character_in_its_cell_and_half():
    one_tile = tiled(bundled_config(Tokenizer.from_file(str(TOKENIZER))), 640, 1, downsample_ratio=0.5)
    # r1-r15: 40 x 40 cells of 16 px
    page = (768, 1024)
    sx, sy = page[0] / 640, page[1] / 640

    def at(x, y, ch):  # tile px -> page px
        return (x * sx, y * sy, ord(ch))

    glyphs = np.array([at(20, 40, "A"), at(30, 40, "b"), at(639, 639, "é"), at(700, 10, "z")], np.float32)
    targets = glyph_targets(glyphs, page, one_tile)
    assert targets.shape == (1600, 2)
    assert targets[2 * 40 + 1].tolist() == [ord("A") - 32, ord("b") - 32]  # row 2, col 1: left, right
    assert targets[39 * 40 + 39].tolist() == [0, GLYPH_CLASSES - 1]        # non-ASCII: the "other" class
    assert int((targets > 0).sum()) == 3                                     # off the page: dropped


def tiled(config, tile: int, side: int, **more):
    """`config` with pages as side x side tiles of `tile` px (a 1280-px canvas for 640 x 2 and 320 x 4)."""
    vision = dataclasses.replace(config.vision_config, image_size=tile)
    return dataclasses.replace(config, vision_config=vision, force_image_size=tile, min_dynamic_patch=side * side,
                               max_dynamic_patch=side * side, use_thumbnail=False, **more)


@pytest.mark.parametrize("tile,side", [(640, 2), (320, 4)])
def test_glyph_targets_of_a_tile_grid_go_to_tile_cell_and_slot(tile, side):
    """side x side tiles of 32-px cells (4x4 shuffle of 8-px patches), each cell 8 slots: 4 columns
    of 8 px x 2 rows of 16, tiles and cells row-major."""
    config = tiled(bundled_config(Tokenizer.from_file(str(TOKENIZER))), tile, side)
    page, canvas, per_tile = (1275, 1650), tile * side, (tile // 32) ** 2  # a letter page at 150 DPI
    sx, sy = page[0] / canvas, page[1] / canvas

    def at(x, y, ch):  # canvas px -> page px
        return (x * sx, y * sy, ord(ch))

    glyphs = np.array([at(tile + 44, 18, "A"), at(10, tile + 10, "b"), at(canvas - 1, canvas - 1, "é"),
                       at(-5, 10, "z")], np.float32)
    targets = glyph_targets(glyphs, page, config)
    assert targets.shape == (side * side * per_tile, 8) and targets.shape[0] == 1600
    assert targets[per_tile + 1, 1 * 4 + 1] == ord("A") - 32  # tile (0, 1), cell (0, 1), slot row 1, column 1
    assert targets[side * per_tile, 1] == ord("b") - 32       # tile (1, 0), cell (0, 0), slot row 0, column 1
    assert targets[-1, 7] == GLYPH_CLASSES - 1                # last tile, last cell, last slot
    assert int((targets > 0).sum()) == 3                      # off the page: dropped


def test_a_thumbnail_tile_follows_the_grid_with_no_glyph_targets_and_the_grid_keeps_its_own():
    with_thumbnail = HPDConfig.load(ROOT / "assets" / "hpd-tiny-docs" / "config.json")  # since r42
    assert with_thumbnail.use_thumbnail  # up to 21 tiles (the format's +1)
    config = dataclasses.replace(with_thumbnail, use_thumbnail=False)  # 20 tiles: a 4 x 5 grid here
    page = (1275, 1650)
    assert grid_for(page, config) == grid_for(page, with_thumbnail) == (4, 5)
    glyphs = np.array([(400.0, 500.0, ord("A")), (1200.0, 1600.0, ord("z"))], np.float32)
    grid, both = glyph_targets(glyphs, page, config), glyph_targets(glyphs, page, with_thumbnail)
    image = Image.new("RGB", page, "white")
    assert both.shape[0] == len(tiles(image, with_thumbnail)) * config.tokens_per_tile == grid.shape[0] + 100
    assert torch.equal(both[:grid.shape[0]], grid) and int((grid > 0).sum()) == 2
    assert (both[grid.shape[0]:] == data.UNSEEN).all()  # the glyph loss skips the thumbnail


def test_the_pointer_loss_of_pages_with_different_tile_counts_is_each_pages_own():
    """With a thumbnail, a tall page takes 21 tiles beside a letter page's 20 (the format's +1): in
    one batch each page's pointer loss is what it is alone, weighed by its targets."""
    from hpd_core.model import HPDModel
    from hpd_core.tokenizer import HPDTokenizer
    from hpd_training.synth import SynthConfig
    from hpd_training.train.__main__ import init_weights, lm_losses, to_device

    raw = Tokenizer.from_file(str(TOKENIZER))
    config = dataclasses.replace(bundled_config(raw, small=True), min_dynamic_patch=20, max_dynamic_patch=20,
                                 use_thumbnail=True)
    tok = HPDTokenizer(raw, config)
    letter, tall = (SynthConfig.lines(width=w, aspect_range=(a, a)) for w, a in ((640, 1.3), (400, 2.3)))
    stage = data.Stage((letter, tall), 2, 1e-3, plain_fraction=0.0)
    items = [data.sample(seed, stage, config, tok) for seed in (0, 1)]
    assert [px.shape[0] for px, _, _ in items] == [21, 22]  # 4 x 5 and 3 x 7 tiles, each with a thumbnail
    torch.manual_seed(0)
    model = HPDModel(config).double()
    init_weights(model)

    def losses(batch_items):  # the pointer losses and, for each, how many tokens have targets
        batch = to_device(data.batch_of(batch_items, config.pad_token_id), "cpu", tok.special.image_context)
        batch["pixels"] = batch["pixels"].double()
        following = batch["cells"][..., 0] >= 0
        here = following[:, :-1] & (batch["segments"][:, 1:] == batch["segments"][:, :-1])
        return lm_losses(model, batch, pointer_weight=1.0), {"ptr_here": int(here.sum()),
                                                             "ptr_next": int(following.sum())}

    with torch.no_grad():
        (both, _), alone = losses(items), [losses([item]) for item in items]
    for name in ("ptr_here", "ptr_next"):
        expected = sum(float(out[name]) * n[name] for out, n in alone) / sum(n[name] for _, n in alone)
        assert all(n[name] > 10 for _, n in alone)
        assert float(both[name]) == pytest.approx(expected, rel=1e-6)  # the logits are float32


def test_a_detached_glyph_head_learns_and_sends_the_model_none_of_its_gradient():
    """The glyph head is new in every run: in its warm-up (`--glyph-warmup`) it reads detached image
    rows, so the model's gradient is the one without the head, to the bit, while the head's own is not zero."""
    from hpd_core.model import HPDModel
    from hpd_core.tokenizer import HPDTokenizer
    from hpd_training.synth import SynthConfig
    from hpd_training.train.__main__ import glyph_head, init_weights, lm_losses, to_device

    raw = Tokenizer.from_file(str(TOKENIZER))
    config = bundled_config(raw, small=True)
    tok = HPDTokenizer(raw, config)
    stage = data.Stage((SynthConfig.lines(),), 1, 1e-3, plain_fraction=0.0)
    batch = to_device(data.batch_of([data.sample(0, stage, config, tok)], config.pad_token_id), "cpu",
                      tok.special.image_context)
    batch["pixels"] = batch["pixels"].double()
    torch.manual_seed(0)
    model = HPDModel(config).double()
    init_weights(model)
    head = glyph_head(config).double()

    def grads(**glyph_args):
        model.zero_grad(set_to_none=True)
        head.zero_grad(set_to_none=True)
        lm_losses(model, batch, **glyph_args)["loss"].backward()
        return [p.grad.clone() if p.grad is not None else None for p in model.parameters()]

    def same(a, b):
        return all((x is None and y is None) or (x is not None and y is not None and torch.equal(x, y))
                   for x, y in zip(a, b))

    alone = grads()
    assert same(grads(glyphs=head, glyph_weight=1.0, glyphs_detached=True), alone)
    assert head.weight.grad is not None and head.weight.grad.abs().sum() > 0
    assert not same(grads(glyphs=head, glyph_weight=1.0), alone)  # attached, the head's loss moves the model


def test_training_runs_on_cpu_and_writes_a_loadable_checkpoint(tmp_path):
    out = tmp_path / "run"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    subprocess.run([sys.executable, "-m", "hpd_training.train", "--out", str(out), "--stages", "lines:60,real:60",
                    "--real-source", "tests.pages:source", "--small", "--workers", "0", "--batch", "2",
                    "--max-steps", "3", "--glyph-weight", "1", "--pointer-weight", "1", "--mtp-weight", "0.5",
                    "--mtp-k", "3", "--box-noise", "0.3", "--log-every", "1", "--tokenizer", str(TOKENIZER)],
                   check=True, capture_output=True, timeout=300, env=env)
    rows = [json.loads(line) for line in (out / "log.jsonl").read_text().splitlines()]
    steps = [r for r in rows if "step" in r]
    assert [(r["stage"], r["step"]) for r in steps] == [("lines", 1), ("lines", 2), ("lines", 3),
                                                         ("real", 1), ("real", 2), ("real", 3)]
    losses = ("loss", "child", "glyph", "ptr_here", "ptr_next", "mtp")
    assert all(np.isfinite([r[name] for name in losses]).all() for r in steps)
    assert sum("image_test" in r for r in rows) == 2
    assert rows[-1] == {"event": "saved", "stage": "real", "replicas_agree": True}
    engine = load_engine(str(out / "hpd-tiny"))  # the draft head inside, as in a bundled model's folder
    assert engine.info.parameters > 0 and engine.config.max_dynamic_patch == TILE_GRID
    assert engine.model.lm.lm_head.weight.dtype == torch.float32
    assert engine.model.has_mtp and (out / "hpd-tiny" / "P-MTP" / "config.json").is_file()


def test_pointer_cells_hold_the_characters_of_their_token():
    """Every image cell a token's pointer target names holds one of the token's characters, for
    text blocks and for table cells (whose tags are not drawn and get no cells)."""
    from hpd_training.synth import SynthConfig, render_page
    from hpd_core.tokenizer import HPDTokenizer
    from hpd_training.train.data import child_tokens, glyph_cells

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


def test_stages_take_synthetic_configs_and_page_sources_in_turn_by_seed():
    from hpd_training.synth import SynthConfig, render_page
    from hpd_training.synth.page import SynthPage
    from tests.pages import FakeRealPage, source

    stage = data.Stage((SynthConfig.lines(), source()), 2, 1e-3)
    assert isinstance(stage.page(7), FakeRealPage)  # odd seeds: the source's page
    got, same = stage.page(8), render_page(8, SynthConfig.lines())  # even: the config's page of the seed, as before
    assert isinstance(got, SynthPage) and got.image.tobytes() == same.image.tobytes() and got.blocks == same.blocks
    assert "real" not in data.stages() and data.stages(source())["real"].batch == 16


def test_a_tenth_of_the_real_stages_pages_are_landscape_and_most_take_the_turned_20_tile_grid():
    from tests.pages import source

    real = data.stages(source())["real"]
    seeds = range(240)
    documents = [real.page(s) for s in seeds
                 if real.sources[s % len(real.sources)] in (data.DOCUMENT, data.DOC_LANDSCAPE)]
    landscape = [p for p in documents if p.image.width > p.image.height]
    # one source in twelve is all landscape, DOCUMENT (one in twelve) a fifth of the time: ~10%
    assert 0.08 <= len(landscape) / len(seeds) <= 0.13
    config = HPDConfig.load(ROOT / "assets" / "hpd-tiny-docs" / "config.json")
    assert (config.min_dynamic_patch, config.max_dynamic_patch) == (20, 20)
    grids = [grid_for(p.image.size, config) for p in landscape]
    # 16:9 slides are more than 0.2 from every 20-tile grid's aspect, so the format's rule falls
    # back to the first grids of its order and takes the portrait one
    assert set(grids) == {(5, 4), (4, 5)} and grids.count((5, 4)) > len(grids) / 2
    assert grid_for((1275, 1650), config) == (4, 5) and grid_for((948, 534), config) == (4, 5)


def test_the_wide_real_stage_is_half_real_pages_and_about_two_fifths_landscape():
    from tests.pages import source

    real = source()
    wide = data.stages(real)["real-wide"]
    assert wide.sources[::2] == data.stages(real)["real"].sources[::2] == (real,) * 6
    pages = [wide.page(s) for s in range(120) if s % 2]  # the synthetic half (the fake real pages are portrait)
    landscape = sum(p.image.width > p.image.height for p in pages) / 120
    assert 0.3 <= landscape <= 0.45, landscape


def test_synthetic_pages_train_every_child_and_spell_all_but_formulas():
    from hpd_training.synth import SynthConfig, render_page

    page = render_page(8, SynthConfig.dense(font_size_range=(20.0, 26.0)))  # a page with a formula
    assert page.child_trained == [True] * len(page.children_texts)
    formulas = [b.label == "formula" for b in page.blocks if b.label not in ("image", "chart", "seal")]
    assert [g is None for g in page.child_glyphs] == formulas and any(formulas)


def test_untrained_children_keep_their_fork_but_get_no_loss_and_no_plain_prompt():
    from hpd_core.tokenizer import HPDTokenizer
    from hpd_training.train.packing import IGNORE
    from tests.pages import source

    raw = Tokenizer.from_file(str(TOKENIZER))
    config = bundled_config(raw, small=True)
    tok = HPDTokenizer(raw, config)
    stage = data.Stage((source(),), 1, 1e-3, plain_fraction=1.0)  # every page would be `plain`
    pixels, packed, glyphs = data.sample(11, stage, config, tok)
    page = stage.page(11)
    assert pixels.shape[0] == TILE_GRID and glyphs.shape == (TILE_GRID * config.tokens_per_tile, data.glyph_slots(config))
    assert packed.ids.count(tok.special.fork) == packed.ids.count(tok.special.child) == len(page.children_texts)
    assert not all(page.child_trained) and any(page.child_trained)
    for c, (text, on) in enumerate(zip(page.children_texts, page.child_trained)):
        labels = [lab for seg, lab in zip(packed.segments, packed.labels) if seg == c]
        assert labels == (tok.encode(text) + [tok.special.im_end] + [IGNORE] if on else [IGNORE])
    trained = sum(len(tok.encode(t)) + 1 for t, on in zip(page.children_texts, page.child_trained) if on)
    assert sum(k == 2 for k in packed.kinds) == trained


def test_the_image_test_gives_each_page_all_tiles_of_another_page():
    from hpd_training.train.__main__ import other_pages

    pixels = torch.arange(3 * 4).float().view(12, 1, 1, 1)  # 3 pages of 4 tiles: tile t of page p is 4p + t
    assert other_pages(pixels, 3).flatten().tolist() == [8, 9, 10, 11, 0, 1, 2, 3, 4, 5, 6, 7]


def test_pages_of_every_rank_and_worker_are_disjoint_and_cover_a_contiguous_range(monkeypatch):
    monkeypatch.setattr(data, "sample", lambda seed, *_: seed)
    firsts = {}
    for rank, worker in itertools.product(range(2), range(2)):
        monkeypatch.setattr(data, "get_worker_info", lambda: SimpleNamespace(id=worker, num_workers=2))
        firsts[rank, worker] = list(itertools.islice(data.Pages(data.STAGES["lines"], None, None, 100, rank, 2), 5))
    assert firsts[0, 0][:2] == [100, 104] and firsts[1, 1][:2] == [103, 107]
    assert sorted(itertools.chain(*firsts.values())) == list(range(100, 120))
    monkeypatch.setattr(data, "get_worker_info", lambda: None)  # num_workers=0, one process: every seed in turn
    assert list(itertools.islice(data.Pages(data.STAGES["lines"], None, None, 100), 3)) == [100, 101, 102]


def _data_parallel_rank(rank: int, world: int, folder: Path) -> None:
    """One of `world` gloo ranks: rank-dependent weights and gradients (and a param that only rank
    1 uses) through the data-parallel steps; what each rank ends with goes to folder/rank{r}.pt."""
    dist.init_process_group("gloo", init_method=f"file://{folder}/rendezvous", rank=rank, world_size=world)
    params = [torch.nn.Parameter(torch.full((3,), float(rank))) for _ in range(3)]
    differ = distributed.replicas_agree(params, world)
    distributed.broadcast_parameters(params, world)
    params[0].grad = torch.full((3,), rank + 1.0)
    params[1].grad = torch.arange(3.0) * (rank + 1)
    params[2].grad = torch.full((3,), 4.0) if rank == 1 else None
    distributed.average_gradients(params, world)
    torch.save({"weights": [p.detach() for p in params], "grads": [p.grad for p in params], "differ": differ,
                "agree": distributed.replicas_agree(params, world),
                "elapsed": distributed.max_over_ranks(10.0 + rank, world, "cpu")}, folder / f"rank{rank}.pt")
    dist.destroy_process_group()


def test_ranks_start_from_rank_0_weights_and_step_with_the_mean_gradient(tmp_path):
    torch.multiprocessing.spawn(_data_parallel_rank, args=(2, tmp_path), nprocs=2)
    for rank in range(2):
        got = torch.load(tmp_path / f"rank{rank}.pt")
        assert all(w.eq(0).all() for w in got["weights"])     # rank 0's
        mean = [torch.full((3,), 1.5), torch.arange(3.0) * 1.5, torch.full((3,), 2.0)]  # rank 0 had no grad: zeros
        assert all(torch.equal(g, m) for g, m in zip(got["grads"], mean))
        assert not got["differ"] and got["agree"]
        assert got["elapsed"] == 11.0                             # one clock: the latest rank's


def test_two_ranks_train_identical_replicas_and_rank_0_logs_and_saves(tmp_path):
    out = tmp_path / "run"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    run = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
                          "-m", "hpd_training.train", "--out", str(out), "--stages", "lines:120", "--small",
                          "--workers", "0", "--batch", "2", "--max-steps", "3", "--log-every", "1",
                          "--eval-pages", "0", "--glyph-weight", "1", "--seed-run", "1", "--tokenizer", str(TOKENIZER)],
                         capture_output=True, text=True, timeout=300, env=env)
    assert run.returncode == 0, run.stderr[-3000:]
    rows = [json.loads(line) for line in (out / "log.jsonl").read_text().splitlines()]
    assert rows[0]["event"] == "start" and rows[0]["world"] == 2
    assert [r["step"] for r in rows if "step" in r] == [1, 2, 3]  # logged once, by rank 0; all stop at 3
    assert rows[-1] == {"event": "saved", "stage": "lines", "replicas_agree": True}
    assert load_engine(str(out / "hpd-tiny")).info.parameters > 0


def test_averaged_runs_hold_the_mean_of_every_tensor_including_the_draft_head(tmp_path):
    runs = [tmp_path / name for name in ("a", "b")]
    for seed, run in enumerate(runs):
        write_checkpoint(run / "hpd-tiny", seed=seed, mtp_folder=run / "hpd-tiny" / "P-MTP")
    average_runs(runs, tmp_path / "mean")
    a, b, mean = (load_model(r / "hpd-tiny").state_dict() for r in (*runs, tmp_path / "mean"))
    assert any(k.startswith(MTP_PREFIX) for k in mean) and mean.keys() == a.keys()
    for key in mean:  # saved as bfloat16: the mean rounded to it
        assert torch.equal(mean[key], ((a[key] + b[key]) / 2).to(torch.bfloat16).float()), key
    assert (tmp_path / "mean" / "hpd-tiny" / "tokenizer.json").read_bytes() == \
        (runs[0] / "hpd-tiny" / "tokenizer.json").read_bytes()


def test_chained_lr_spans_follow_one_schedule_and_bad_spans_are_refused():
    whole = [lr_factor(1000, t / 30) for t in range(31)]
    thirds = [lr_factor(1000, t / 10, (k / 3, (k + 1) / 3)) for k in range(3) for t in range(11)]
    chained = thirds[:11] + thirds[12:22] + thirds[23:]  # each later stage's start is the last one's end
    assert chained == pytest.approx(whole)
    assert whole[0] == 1.0 and whole[-1] == pytest.approx(0.1)
    assert lr_factor(0, 0.0, (0.5, 1.0)) == pytest.approx(whole[15] / 50)  # a fresh optimizer warms up
    assert parse_span("0.25:0.5") == (0.25, 0.5)
    for bad in ("0.5:0.25", "0:1.5", "-0.1:0.5"):
        with pytest.raises(argparse.ArgumentTypeError):
            parse_span(bad)


def test_noised_boxes_keep_one_token_a_digit_stay_near_the_truth_and_are_inputs_only():
    """`--box-noise`: the layout branch sees some of its boxes moved (as greedy decoding's own boxes
    are off), and no label asks it to write a moved one; everything else packs as without noise."""
    import random
    import re

    from hpd_core.tokenizer import HPDTokenizer
    from hpd_training.synth import SynthConfig
    from hpd_training.train.packing import IGNORE

    raw = Tokenizer.from_file(str(TOKENIZER))
    config = bundled_config(raw, small=True)
    tok = HPDTokenizer(raw, config)
    text = ("<BLOCK>title [92,36,274,46]<FORK><BLOCK>text [515,234,909,1000]<FORK>"
            "<BLOCK>page_number [5,950,9,960]<FORK>")
    assert data.noised_parent(text, tok, random.Random(0), 0.0) == (tok.encode(text), set())
    truth = [tuple(map(int, b)) for b in re.findall(r"\[(\d+),(\d+),(\d+),(\d+)\]", text)]
    for seed in range(20):
        ids, noised = data.noised_parent(text, tok, random.Random(seed), 1.0)
        assert len(ids) == len(tok.encode(text))
        assert {i for i, (a, b) in enumerate(zip(ids, tok.encode(text))) if a != b} <= noised
        assert len(noised) == sum(len(",".join(map(str, box))) for box in truth)  # every box's digits and commas
        moved = [tuple(map(int, b)) for b in re.findall(r"\[(\d+),(\d+),(\d+),(\d+)\]", tok.decode(ids))]
        for box, was in zip(moved, truth):
            assert box[0] <= box[2] and box[1] <= box[3]
            assert all(abs(v - w) <= 2 * data.BOX_JITTER and len(str(v)) == len(str(w)) for v, w in zip(box, was))
    stage = data.Stage((SynthConfig.lines(),), 1, 1e-3, plain_fraction=0.0)
    (_, plain, _), (_, noisy, _) = (data.sample(7, dataclasses.replace(stage, box_noise=share), config, tok)
                                    for share in (0.0, 1.0))
    assert len(noisy.ids) == len(plain.ids) and noisy.ids != plain.ids
    untrained = [i for i, (a, b) in enumerate(zip(noisy.labels, plain.labels)) if a != b]
    assert untrained and all(noisy.labels[i] == IGNORE and noisy.kinds[i] == 0 for i in untrained)
    changed = [i for i, (a, b) in enumerate(zip(noisy.ids, plain.ids)) if a != b]
    assert all(noisy.labels[i - 1] == IGNORE for i in changed)  # no label is a moved digit
    assert noisy.segments == plain.segments and noisy.cells == plain.cells
