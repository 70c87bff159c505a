"""Dynamic tiling and normalisation of a page image (docs/format.md §5).

The page is resized to the best (cols x rows) grid of `force_image_size` tiles, cut into tiles
row-major, and (when the grid has more than one tile) followed by a thumbnail of the whole page.
"""

from __future__ import annotations

import numpy as np
import torch
from PIL import Image

from hpd_core.config import HPDConfig

MEAN = np.array([0.485, 0.456, 0.406], dtype=np.float32)
STD = np.array([0.229, 0.224, 0.225], dtype=np.float32)

Grid = tuple[int, int]  # (cols, rows)


def candidate_grids(min_tiles: int, max_tiles: int) -> list[Grid]:
    """All (cols, rows) with min <= cols*rows <= max, sorted by (tiles, cols, rows)."""
    grids = {(c, r) for c in range(1, max_tiles + 1) for r in range(1, max_tiles + 1)
             if min_tiles <= c * r <= max_tiles}
    return sorted(grids, key=lambda g: (g[0] * g[1], g[0], g[1]))


def choose_grid(width: int, height: int, tile: int, grids: list[Grid]) -> Grid:
    """Grids within 0.2 of the aspect (else all), stably sorted by |area - tile area|;
    of the first three, the smallest aspect difference (first on ties)."""
    aspect, area = width / height, width * height

    def diff(g: Grid) -> float:
        return abs(aspect - g[0] / g[1])

    near = [g for g in grids if diff(g) <= 0.2] or grids
    near = sorted(near, key=lambda g: abs(area - tile * tile * g[0] * g[1]))
    return min(near[:3], key=diff)


def grid_for(image_size: tuple[int, int], cfg: HPDConfig) -> Grid:
    max_tiles = cfg.max_dynamic_patch + (1 if cfg.use_thumbnail and cfg.max_dynamic_patch != 1 else 0)
    return choose_grid(*image_size, cfg.force_image_size, candidate_grids(cfg.min_dynamic_patch, max_tiles))


def has_thumbnail(grid: Grid, cfg: HPDConfig) -> bool:
    """Whether a page on `grid` gets a thumbnail tile after the grid's: with `use_thumbnail`, when
    the grid has more than one tile."""
    cols, rows = grid
    return cfg.use_thumbnail and cols * rows != 1


def tiles(image: Image.Image, cfg: HPDConfig) -> list[Image.Image]:
    """The tiles of an RGB page, row-major, then the thumbnail when the grid has > 1 tile."""
    size = cfg.force_image_size
    cols, rows = grid = grid_for(image.size, cfg)
    resized = image.resize((size * cols, size * rows), Image.Resampling.BICUBIC)
    out = [resized.crop((c * size, r * size, (c + 1) * size, (r + 1) * size))
           for r in range(rows) for c in range(cols)]
    if has_thumbnail(grid, cfg):
        out.append(image.resize((size, size), Image.Resampling.BICUBIC))
    return out


def normalize(tile_images: list[Image.Image]) -> torch.Tensor:
    """RGB tiles -> [T, 3, S, S] float32, (px/255 - mean) / std."""
    arr = np.stack([np.asarray(t.convert("RGB"), dtype=np.float32) for t in tile_images]) / 255.0
    return torch.from_numpy(((arr - MEAN) / STD).transpose(0, 3, 1, 2).copy())


def tile_bytes(tile_images: list[Image.Image]) -> torch.Tensor:
    """RGB tiles -> [T, 3, S, S] uint8: what training's DataLoader workers hand over (a quarter of
    the float32 bytes); `normalize_bytes` finishes them on the GPU."""
    return torch.from_numpy(np.stack([np.asarray(t.convert("RGB")) for t in tile_images]).transpose(0, 3, 1, 2).copy())


def normalize_bytes(pixels: torch.Tensor) -> torch.Tensor:
    """`normalize` of `tile_bytes`' uint8 tiles, on their device: the same float32 values."""
    mean = torch.from_numpy(MEAN).to(pixels.device)[:, None, None]
    std = torch.from_numpy(STD).to(pixels.device)[:, None, None]
    return (pixels.float() / 255.0 - mean) / std


def preprocess(image: Image.Image, cfg: HPDConfig) -> torch.Tensor:
    return normalize(tiles(image.convert("RGB"), cfg))
