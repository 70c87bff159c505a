"""The warm start of the four-tile, 4x4-shuffle model from a one-tile, 2x2-shuffle run (`train.widen`)."""

from __future__ import annotations

import dataclasses

import pytest
import torch
from PIL import Image
from tokenizers import Tokenizer

from hpd_core.checkpoint import load_model
from hpd_core.engine import Engine
from hpd_core.model import HPDModel
from hpd_core.model.vision import pixel_shuffle
from hpd_core.preprocess import grid_for
from hpd_core.tokenizer import HPDTokenizer
from hpd_training.train.__main__ import bundled_config, save_run
from hpd_training.train.widen import POSITIONS, main, widen_projector
from tests.test_train import TOKENIZER, tiled
from tests.tiny import random_like

C, H = 6, 10  # ViT width, LM width


def old_projector(seed: int) -> torch.nn.Sequential:
    gen = torch.Generator().manual_seed(seed)
    mlp1 = torch.nn.Sequential(torch.nn.LayerNorm(4 * C), torch.nn.Linear(4 * C, H), torch.nn.GELU(),
                               torch.nn.Linear(H, H)).double()
    with torch.no_grad():
        for name, p in mlp1.named_parameters():
            p.copy_(random_like("mlp1." + name, p, gen))
    return mlp1


def test_widened_projector_equals_the_old_one_when_the_four_sub_groups_are_equal():
    old = old_projector(0)
    new = widen_projector(old, C, 2, 4)
    # [tiles, 8, 8, C] patch features whose every 4x4 block is one 2x2 pattern repeated 2x2 times
    # (patch row 4R + 2a + p, col 4S + 2b + q: a feature of R, p, S, q alone)
    pattern = torch.randn(3, 2, 2, 2, 2, C, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    grid = pattern[:, :, None, :, :, None].expand(3, 2, 2, 2, 2, 2, 2, C).reshape(3, 8, 8, C)
    old_tokens = pixel_shuffle(grid, 2)  # [3, 4, 4, 4C]: (2R + a, 2S + b) are sub-group (a, b) of (R, S)
    assert torch.equal(old_tokens[:, ::2, ::2], old_tokens[:, 1::2, 1::2])
    with torch.no_grad():
        got = new(pixel_shuffle(grid, 4))          # [3, 2, 2, H]
        expected = old(old_tokens[:, ::2, ::2])
    assert torch.allclose(got, expected, rtol=0, atol=1e-12)


def test_widened_projector_is_the_old_one_on_the_mean_of_its_sub_groups_normalised_over_all_channels():
    old = old_projector(2)
    new = widen_projector(old, C, 2, 4)
    grid = torch.randn(2, 8, 8, C, generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    tokens = pixel_shuffle(grid, 4)                                   # [2, 2, 2, 16C]
    subgroups = pixel_shuffle(grid, 2).unflatten(1, (2, 2)).unflatten(3, (2, 2))  # [2, R, a, S, b, 4C]
    mean = subgroups.mean((2, 4))                                     # [2, R, S, 4C]
    mu = tokens.mean(-1, keepdim=True)
    var = tokens.var(-1, unbiased=False, keepdim=True)
    norm, first, _, second = old
    normed = (mean - mu) / torch.sqrt(var + norm.eps) * norm.weight + norm.bias
    with torch.no_grad():
        expected = second(torch.nn.functional.gelu(first(normed)))
        got = new(tokens)
    assert torch.allclose(got, expected, rtol=0, atol=1e-12)


def one_tile(config):
    """The r1-r15 layout `widen` starts from: one tile of twice the side, a 2x2 shuffle."""
    return tiled(config, 2 * config.vision_config.image_size, 1, downsample_ratio=0.5)


@pytest.mark.parametrize("tile,side", [(640, 2), (320, 4)])
def test_a_tile_grid_of_1600_tokens_fits_portrait_and_landscape_pages(tile, side):
    config = tiled(bundled_config(Tokenizer.from_file(str(TOKENIZER))), tile, side)
    assert side * side * config.tokens_per_tile == 1600 and config.shuffle_scale == 4
    for page in ((1275, 1650), (1650, 1275), (1240, 1754), (1754, 1240), (768, 1024)):  # letter, A4 at 150 DPI
        assert grid_for(page, config) == (side, side), page
    bundled = bundled_config(Tokenizer.from_file(str(TOKENIZER)))
    assert one_tile(bundled).tokens_per_tile == 1600  # widen's start, r1-r15: one 640-px tile, 2x2 shuffle


def test_widened_checkpoint_keeps_every_other_tensor_and_prompts_four_tiles(tmp_path):
    raw = Tokenizer.from_file(str(TOKENIZER))
    config = one_tile(bundled_config(raw, small=True))
    gen = torch.Generator().manual_seed(4)
    old = HPDModel(config)
    with torch.no_grad():
        for name, p in old.named_parameters():
            p.copy_(random_like(name, p, gen))
    save_run(old, tmp_path / "old", TOKENIZER)
    main(["--out", str(tmp_path / "new"), "--init", str(tmp_path / "old" / "hpd-tiny"),
          "--init-mtp", str(tmp_path / "old" / "hpd-tiny" / "P-MTP")])
    before = load_model(tmp_path / "old" / "hpd-tiny")
    after = load_model(tmp_path / "new" / "hpd-tiny")
    assert after.config == bundled_config(raw, small=True)
    a, b = before.state_dict(), after.state_dict()
    assert a.keys() == b.keys() and any(k.startswith("language_model.mtp.") for k in b)
    for key in a:
        if not key.startswith(("mlp1.0.", "mlp1.1.", POSITIONS)):
            assert torch.equal(a[key], b[key]), key
    g, n = before.config.vision_config.grid, after.config.vision_config.grid
    grid = a[POSITIONS][0, 1:].reshape(g, g, -1)[(g - n) // 2:(g + n) // 2, (g - n) // 2:(g + n) // 2]
    assert torch.equal(b[POSITIONS][0, 1:], grid.reshape(n * n, -1)) and torch.equal(b[POSITIONS][0, 0], a[POSITIONS][0, 0])
    assert b["mlp1.1.weight"].shape == (32, 16 * 32) and b["mlp1.0.weight"].shape == (16 * 32,)
    assert (tmp_path / "new" / "hpd-tiny" / "tokenizer.json").read_bytes() == TOKENIZER.read_bytes()
    ids, embeds, tiles = Engine(after, HPDTokenizer(raw, after.config)).prompt(Image.new("RGB", (1275, 1650), "white"))
    image_id = raw.token_to_id("<IMG_CONTEXT>")
    assert tiles == 16 and ids.count(image_id) == 16 * after.config.tokens_per_tile == 16
    assert embeds.shape == (len(ids), 32)
