"""Dynamic tiling and normalisation follow docs/format.md §5, with the real config (max 24 + thumbnail)."""

import numpy as np
import pytest
import torch
from PIL import Image

from hpd_core.config import HPDConfig
from hpd_core.preprocess import candidate_grids, grid_for, normalize, normalize_bytes, preprocess, tile_bytes, tiles

REAL = HPDConfig()


@pytest.mark.parametrize("size,grid", [((514, 64), (8, 1)), ((760, 865), (2, 2)), ((248, 193), (5, 4)),
                                       ((720, 1150), (2, 3))])
def test_grid_fixtures_of_the_spec(size, grid):
    assert grid_for(size, REAL) == grid


def test_no_grid_near_the_aspect_falls_back_to_all_grids():
    # Aspect 1000: no grid within 0.2, so all grids; the three closest in area are (1,1), (1,2),
    # (2,1), and of those (2,1) has the nearest aspect.
    assert grid_for((10000, 10), REAL) == (2, 1)


def test_candidate_grids_allow_25_tiles_sorted_by_tiles_cols_rows():
    grids = candidate_grids(1, 25)
    assert grids[:5] == [(1, 1), (1, 2), (2, 1), (1, 3), (3, 1)]
    assert max(c * r for c, r in grids) == 25 and (5, 5) in grids and (1, 25) in grids
    assert grids == sorted(grids, key=lambda g: (g[0] * g[1], g[0], g[1]))


def cells(cols: int, rows: int, size: int = 448) -> tuple[Image.Image, list[tuple[int, int, int]]]:
    """A page of exactly cols x rows tiles, each a distinct flat colour (row-major)."""
    colours = [(20 * i + 10, 255 - 20 * i, (97 * i) % 256) for i in range(cols * rows)]
    arr = np.zeros((rows * size, cols * size, 3), dtype=np.uint8)
    for i, colour in enumerate(colours):
        r, c = divmod(i, cols)
        arr[r * size:(r + 1) * size, c * size:(c + 1) * size] = colour
    return Image.fromarray(arr), colours


def test_tiles_are_row_major_then_the_whole_page_as_thumbnail():
    page, colours = cells(2, 3)
    assert grid_for(page.size, REAL) == (2, 3)
    out = tiles(page, REAL)
    assert len(out) == 7 and all(t.size == (448, 448) for t in out)
    for tile, colour in zip(out, colours):
        assert np.all(np.asarray(tile)[8:-8, 8:-8] == colour)  # cell interiors (resampling blurs edges)
    thumb = np.asarray(out[-1]).astype(int)
    # The thumbnail squeezes the 2x3 page into 448²: cell (c, r) lands at [r·149, c·224].
    for i, colour in enumerate(colours):
        r, c = divmod(i, 2)
        assert np.abs(thumb[r * 149 + 75, c * 224 + 112] - colour).max() <= 1


@pytest.mark.parametrize("size,count", [((448, 448), 1), ((300, 280), 1), ((2240, 2240), 26), ((514, 64), 9)])
def test_tile_count_is_grid_plus_thumbnail_unless_one_tile(size, count):
    out = tiles(Image.new("RGB", size, "gray"), REAL)
    assert len(out) == count


def test_tile_count_never_exceeds_26():
    sizes = [(w, h) for w in (64, 300, 1000, 3000, 9000) for h in (64, 300, 1000, 3000, 9000)]
    for size in sizes:
        cols, rows = grid_for(size, REAL)
        assert cols * rows <= 25
    assert max(len(tiles(Image.new("RGB", s, "gray"), REAL)) for s in [(9000, 9000), (3000, 3000)]) == 26


def test_normalisation_uses_imagenet_mean_and_std():
    pixels = normalize([Image.new("RGB", (448, 448), (255, 0, 128))])
    assert pixels.shape == (1, 3, 448, 448) and pixels.dtype == torch.float32
    expected = [(1 - 0.485) / 0.229, (0 - 0.456) / 0.224, (128 / 255 - 0.406) / 0.225]
    for channel, value in enumerate(expected):
        assert torch.allclose(pixels[0, channel], torch.tensor(value), atol=1e-6)


def test_preprocess_converts_to_rgb_and_stacks_tiles():
    page = Image.new("L", (896, 1344), 255)
    pixels = preprocess(page, REAL)
    assert pixels.shape == (7, 3, 448, 448)
    white = torch.tensor([(1 - m) / s for m, s in zip((0.485, 0.456, 0.406), (0.229, 0.224, 0.225))])
    assert torch.allclose(pixels.amax((2, 3)), white.expand(7, 3), atol=1e-5)
    assert torch.allclose(pixels.amin((2, 3)), white.expand(7, 3), atol=1e-5)


def test_uint8_tiles_normalised_later_equal_the_reference_normalisation():
    """Training hands uint8 tiles to the GPU and normalises there: the same float32 values."""
    rng = np.random.default_rng(0)
    page = Image.fromarray(rng.integers(0, 256, (900, 700, 3), dtype=np.uint8))
    cut = tiles(page, REAL)
    raw = tile_bytes(cut)
    assert raw.dtype == torch.uint8 and raw.shape == (len(cut), 3, 448, 448)
    assert torch.equal(normalize_bytes(raw), normalize(cut))
