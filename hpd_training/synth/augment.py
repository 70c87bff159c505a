"""Light scan-like degradations of a rendered page: contrast, blur, noise, JPEG.

Applied after the ground truth is read from the clean pixels, so boxes never depend on them.
All operations run in Pillow's C code (a few ms each on a 768 x 1024 page).
"""

from __future__ import annotations

import functools
import io
import random

import numpy as np
from PIL import Image, ImageChops, ImageFilter

from hpd_training.synth.config import SynthConfig

_TILE = 2048      # side of the cached noise tile, px
_TILE_SIGMA = 16  # its noise standard deviation around grey 128


def augment(pixels: np.ndarray, rng: random.Random, config: SynthConfig) -> Image.Image:
    """pixels: uint8 [H, W, 3] -> RGB image; every choice drawn from rng."""
    image = Image.fromarray(pixels)
    if rng.random() < config.contrast_prob:
        gain, paper = rng.uniform(0.75, 1.0), rng.uniform(235.0, 255.0)
        image = image.point([max(0, round(paper - (255 - v) * gain)) for v in range(256)] * 3)
    if rng.random() < config.blur_prob:
        image = image.filter(ImageFilter.BoxBlur(rng.uniform(0.3, 0.7)))
    if rng.random() < config.noise_prob:
        image = _add_noise(image, rng)
    if rng.random() < config.jpeg_prob:
        buffer = io.BytesIO()
        image.save(buffer, format="JPEG", quality=rng.randint(40, 90))
        image = Image.open(buffer).convert("RGB")
    return image


def _add_noise(image: Image.Image, rng: random.Random) -> Image.Image:
    """Grey gaussian noise, sigma 2-8: a random crop of a fixed noise tile, rescaled."""
    sigma = rng.uniform(2.0, 8.0)
    w, h = image.size
    tile = _noise_tile(max(_TILE, w, h))
    x, y = rng.randrange(tile.width - w + 1), rng.randrange(tile.height - h + 1)
    scale = sigma / _TILE_SIGMA
    noise = tile.crop((x, y, x + w, y + h)).point([round(128 + (v - 128) * scale) for v in range(256)])
    return ImageChops.add(image, Image.merge("RGB", (noise, noise, noise)), 1.0, -128)


@functools.lru_cache(maxsize=2)
def _noise_tile(side: int) -> Image.Image:
    z = np.random.default_rng(0).standard_normal((side, side), dtype=np.float32)
    return Image.fromarray((z * _TILE_SIGMA + 128).clip(0, 255).astype(np.uint8))
