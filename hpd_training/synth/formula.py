"""Display formulas: random LaTeX from a fixed pool, rasterised with matplotlib mathtext.

Formula i of the pool is always the same LaTeX in the same math font, so a page depends only
on its seed. mathtext takes ~10 ms a formula, so each is rendered once per process at a
reference size and area-averaged down to the size a page asks for (~0.1 ms).
"""

from __future__ import annotations

import functools
import random

import numpy as np
from matplotlib.font_manager import FontProperties
from matplotlib.mathtext import MathTextParser
from PIL import Image

GREEK = (r"\alpha", r"\beta", r"\gamma", r"\delta", r"\epsilon", r"\theta", r"\lambda", r"\mu",
         r"\pi", r"\rho", r"\sigma", r"\tau", r"\phi", r"\omega", r"\Gamma", r"\Delta",
         r"\Sigma", r"\Omega")
LETTERS = tuple("abcdfgknmptuvwxyz")
OPERATORS = ("+", "-", "+", r"\cdot")
RELATIONS = ("=", "=", "=", r"\leq", r"\geq", r"\approx", "<", r"\neq")
REFERENCE_SIZE = 64  # px
FONTSETS = ("dejavusans", "dejavuserif", "cm", "stix", "stixsans")


def _symbol(rng: random.Random) -> str:
    return rng.choice(GREEK) if rng.random() < 0.3 else rng.choice(LETTERS)


def _atom(rng: random.Random, depth: int) -> str:
    r = rng.random()
    if r < 0.2:
        return str(rng.randint(1, 99) if rng.random() < 0.8 else round(rng.uniform(0, 10), 2))
    base = _symbol(rng)
    if r < 0.4:
        return base
    if r < 0.55:
        return f"{base}_{{{rng.choice(('i', 'j', 'k', 'n', '0', '1', '2'))}}}"
    if r < 0.7:
        return f"{base}^{{{rng.choice(('2', '3', 'n', '-1', 'k'))}}}"
    if depth > 1:
        return f"{base}_{{{rng.choice('ijk')}}}^{{2}}"
    if r < 0.82:
        return rf"\frac{{{_expr(rng, depth + 1, 2)}}}{{{_expr(rng, depth + 1, 2)}}}"
    if r < 0.92:
        return rf"\sqrt{{{_expr(rng, depth + 1, 2)}}}"
    return f"\\left( {_expr(rng, depth + 1, 3)} \\right)"


def _expr(rng: random.Random, depth: int, max_terms: int) -> str:
    terms = [_atom(rng, depth) for _ in range(rng.randint(1, max_terms))]
    out = terms[0]
    for term in terms[1:]:
        out += f" {rng.choice(OPERATORS)} {term}"
    return out


def latex(index: int) -> str:
    """Formula `index` of the pool: bare LaTeX, no delimiters."""
    rng = random.Random(f"formula:{index}")
    lhs, rel = _symbol(rng), rng.choice(RELATIONS)
    kind = rng.random()
    if kind < 0.2:
        i = rng.choice("ijk")
        return rf"{lhs} {rel} \sum_{{{i}=1}}^{{n}} {_expr(rng, 1, 2)}"
    if kind < 0.3:
        return rf"{lhs} {rel} \int_{{0}}^{{1}} {_expr(rng, 1, 2)} \, d{rng.choice('xt')}"
    if kind < 0.4:
        return rf"\lim_{{n \to \infty}} {_expr(rng, 1, 2)} {rel} {_expr(rng, 1, 1)}"
    return f"{_expr(rng, 0, 2)} {rel} {_expr(rng, 0, 3)}"


def fontset(index: int) -> str:
    return FONTSETS[index % len(FONTSETS)]


@functools.lru_cache(maxsize=1)
def _parser() -> MathTextParser:
    return MathTextParser("agg")


@functools.lru_cache(maxsize=None)
def _reference(index: int) -> Image.Image:
    """Formula `index` rendered once at REFERENCE_SIZE px, cropped to its ink (L: 255 = ink)."""
    prop = FontProperties(size=REFERENCE_SIZE, math_fontfamily=fontset(index))
    ink = np.asarray(_parser().parse(f"${latex(index)}$", dpi=72, prop=prop).image)
    rows, cols = np.flatnonzero(ink.any(axis=1)), np.flatnonzero(ink.any(axis=0))
    return Image.fromarray(np.ascontiguousarray(ink[rows[0]:rows[-1] + 1, cols[0]:cols[-1] + 1]))


@functools.lru_cache(maxsize=8192)
def raster(index: int, size: int) -> np.ndarray:
    """Formula `index` at font size `size` px as ink coverage (area-averaged from the reference).

    Returns uint8 [H, W]: 0 = paper, 255 = full ink. Read-only (shared by the cache).
    """
    ref = _reference(index)
    scale = size / REFERENCE_SIZE
    shape = (max(1, round(ref.width * scale)), max(1, round(ref.height * scale)))
    out = np.asarray(ref.resize(shape, Image.Resampling.BOX))
    out.flags.writeable = False
    return out
