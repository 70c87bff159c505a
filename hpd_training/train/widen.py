"""Warm start of the tiled model from a one-tile run: `python -m hpd_training.train.widen --out runs/w0`.

The one-tile model (r1-r15: a page squeezed into one 640-px tile, 2x2 pixel shuffle) becomes the
bundled layout of `bundled_config` (a 4x4 grid of 320-px tiles, 4x4 pixel shuffle): the same
1,600 image tokens a page, each of a quarter of the area. The ViT's position embeddings are
cropped to the centre 40 x 40 patches (`cropped_positions`); the LM and the draft head are copied
unchanged; `mlp1`'s LayerNorm and first Linear grow, from 4 C to 16 C
inputs, so that a new token is the old projector applied to the mean of the four old tokens
(2x2 sub-groups) it merges, the LayerNorm taking its statistics over all 16 C channels
(`test_widened_projector_*`: exact when the four sub-groups are equal).
"""

from __future__ import annotations

import argparse
import math
import dataclasses
from pathlib import Path

import torch
from torch import nn

from hpd_core.checkpoint import load_model
from hpd_core.config import HPDConfig
from hpd_core.model import HPDModel
from hpd_training.realpage import DPI
from hpd_training.train.__main__ import DOWNSAMPLE_RATIO, TILE_GRID, save_run

POSITIONS = "vision_model.embeddings.position_embedding"


def widened_config(cfg: HPDConfig) -> HPDConfig:
    """The same model at the bundled tile layout: TILE_GRID tiles of half the old tile (640 -> 320 px:
    the old tile's pixels on a canvas of twice its side), no thumbnail, DOWNSAMPLE_RATIO, read at
    the real pages' DPI."""
    tile = cfg.vision_config.image_size // 2
    vision = dataclasses.replace(cfg.vision_config, image_size=tile)
    return dataclasses.replace(cfg, vision_config=vision, force_image_size=tile, downsample_ratio=DOWNSAMPLE_RATIO,
                               min_dynamic_patch=TILE_GRID, max_dynamic_patch=TILE_GRID, use_thumbnail=False,
                               render_dpi=DPI)


def cropped_positions(positions: torch.Tensor, grid: int) -> torch.Tensor:
    """[1, 1 + g², D] position embeddings (CLS first, then a g x g patch grid) -> [1, 1 + grid², D]:
    CLS and the centre grid x grid patches. A crop, not a resize: neighbouring patches keep the
    position differences the ViT learned (the glyph geometry), only the page location is lost."""
    g = math.isqrt(positions.shape[1] - 1)
    start = (g - grid) // 2
    patches = positions[:, 1:].reshape(1, g, g, -1)[:, start:start + grid, start:start + grid]
    return torch.cat([positions[:, :1], patches.reshape(1, grid * grid, -1)], dim=1)


def old_channels(channels: int, old_scale: int, new_scale: int) -> torch.Tensor:
    """[C · new²]: for each channel of a new-scale token, the channel of the old-scale token (of
    the sub-group holding its patch) that carries the same patch feature. Pixel shuffle orders a
    token's channels (patch row di, patch col dj, feature c) as (di · s + dj) · C + c."""
    di, dj, c = torch.meshgrid(torch.arange(new_scale), torch.arange(new_scale), torch.arange(channels),
                               indexing="ij")
    return (((di % old_scale) * old_scale + dj % old_scale) * channels + c).flatten()


@torch.no_grad()
def widen_projector(old: nn.Sequential, channels: int, old_scale: int, new_scale: int) -> nn.Sequential:
    """`mlp1` for new_scale x new_scale tokens from the one for old_scale x old_scale: LayerNorm
    weight and bias repeated per sub-group, the first Linear's columns repeated and divided by the
    number of sub-groups (a mean), the rest copied."""
    index = old_channels(channels, old_scale, new_scale)
    groups = (new_scale // old_scale) ** 2
    norm, first, act, second = old
    new_norm = nn.LayerNorm(index.numel(), eps=norm.eps)
    new_norm.weight.copy_(norm.weight[index])
    new_norm.bias.copy_(norm.bias[index])
    new_first = nn.Linear(index.numel(), first.out_features)
    new_first.weight.copy_(first.weight[:, index] / groups)
    new_first.bias.copy_(first.bias)
    new_second = nn.Linear(second.in_features, second.out_features)
    new_second.load_state_dict(second.state_dict())
    return nn.Sequential(new_norm, new_first, act, new_second).to(first.weight.dtype)


def widen(old: HPDModel) -> HPDModel:
    """The four-tile model with the one-tile model's weights (`mlp1` widened)."""
    cfg = old.config
    new_cfg = widened_config(cfg)
    if new_cfg.shuffle_scale % cfg.shuffle_scale:
        raise ValueError(f"cannot widen a {cfg.shuffle_scale}x shuffle to {new_cfg.shuffle_scale}x")
    model = HPDModel(new_cfg, with_mtp=old.has_mtp)
    state = {k: v for k, v in old.state_dict().items() if not k.startswith("mlp1.")}
    state[POSITIONS] = cropped_positions(state[POSITIONS], new_cfg.vision_config.grid)
    missing, unexpected = model.load_state_dict(state, strict=False)
    assert not unexpected and all(k.startswith("mlp1.") for k in missing), (missing, unexpected)
    model.mlp1 = widen_projector(old.mlp1, cfg.vision_config.hidden_size, cfg.shuffle_scale, new_cfg.shuffle_scale)
    return model.to(old.mlp1[1].weight.dtype)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, required=True, help="run folder to write: hpd-tiny/ (its draft head in hpd-tiny/P-MTP/)")
    ap.add_argument("--init", type=Path, default=Path("assets/hpd-tiny"), help="the one-tile checkpoint")
    ap.add_argument("--init-mtp", type=Path, default=Path("P-MTP"), help="its draft head")
    args = ap.parse_args(argv)
    old = load_model(args.init, dtype=torch.float32, mtp_folder=args.init_mtp)
    save_run(widen(old), args.out, args.init / "tokenizer.json")


if __name__ == "__main__":
    main()
