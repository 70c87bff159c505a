"""Training samples: synthetic pages rendered in DataLoader workers, packed for the tree mask."""

from __future__ import annotations

import itertools
import math
import random
import re
from dataclasses import dataclass

import numpy as np
import torch
from torch.utils.data import IterableDataset, get_worker_info

from hpd_core.config import HPDConfig
from hpd_core.grammar import has_content
from hpd_core.preprocess import preprocess
from hpd_training.synth import SynthConfig, render_page
from hpd_training.synth.config import DENSE_LARGE_TYPE, LARGE_TYPE
from hpd_training.synth.page import SynthPage
from hpd_core.tokenizer import INSTRUCTIONS, HPDTokenizer
from hpd_training.train.packing import Packed, collate, pack

GLYPH_CLASSES = 96  # 0: no glyph; 1-94: printable ASCII 33-126; 95: any other character
POINTER_CELLS = 12  # image cells kept per token as its pointer target


@dataclass(frozen=True)
class Stage:
    synths: tuple[SynthConfig, ...]  # page kinds, taken in turn by seed
    batch: int
    lr: float
    plain_fraction: float = 0.1   # share of samples with the `plain` prompt (one flat trajectory)

    def synth(self, seed: int) -> SynthConfig:
        return self.synths[seed % len(self.synths)]


LINES = SynthConfig.lines()
DENSE = SynthConfig.dense(font_size_range=DENSE_LARGE_TYPE)
SPARSE = SynthConfig.sparse()


STAGES = {
    # one short paragraph somewhere on the page: learn to read where the ink is
    "one": Stage((SynthConfig.simple(n_blocks=1, font_size_range=LARGE_TYPE, paragraph_words=(3, 14)),), 48, 1e-3),
    # pages full of random words (no language shortcut): the most reading per image
    "read": Stage((SynthConfig(min_blocks=2, max_blocks=6, font_size_range=LARGE_TYPE, real_text_fraction=0.0,
                              label_weights=(("text", 1.0),), doc_title_prob=0.0, caption_prob=0.0, header_prob=0.0,
                              footer_prob=0.0, page_number_prob=0.0, two_column_prob=0.2, paragraph_words=(30, 120)),),
                  32, 1e-3),
    # many short blocks (one or two lines of random words each): many reading targets per page,
    # each a block whose box points at one line
    "lines": Stage((LINES,), 32, 1e-3),
    # a few text-like blocks: learn to find the block a child is about
    "few": Stage((SynthConfig(min_blocks=2, max_blocks=5, font_size_range=LARGE_TYPE, header_prob=0.2,
                             footer_prob=0.2, page_number_prob=0.3, two_column_prob=0.3,
                             label_weights=(("title", 1.0), ("text", 4.0), ("list", 1.0), ("table", 0.5),
                                            ("formula", 0.3), ("image", 0.5)), paragraph_words=(8, 40)),), 32, 8e-4),
    # full pages with every label and more realistic text
    "dense": Stage((DENSE,), 24, 6e-4),
    # half `lines`, half `dense`: keep reading while learning every label and realistic text
    "mix": Stage((LINES, DENSE), 28, 8e-4),
    # a third `lines`, two thirds `dense`: once reading holds, most of the remaining edits are dense
    # pages' missed and extra blocks
    "mixd": Stage((LINES, DENSE, DENSE), 28, 8e-4),
    # `mixd` with half of its `lines` pages sparse ones instead (1-5 blocks, white space): the r12
    # weights, trained on full pages only, split the paragraphs of sparse pages into extra blocks
    "mixv": Stage((LINES, SPARSE, DENSE, DENSE, DENSE, DENSE), 28, 8e-4),
}


Sample = tuple[torch.Tensor, Packed, torch.Tensor]  # pixels, packed sequence, glyph targets


def sample(seed: int, stage: Stage, config: HPDConfig, tok: HPDTokenizer) -> Sample:
    page = render_page(seed, stage.synth(seed))
    pixels = preprocess(page.image, config)
    glyphs = glyph_targets(page.glyphs, page.image.size, config)
    image_tokens = pixels.shape[0] * config.tokens_per_tile
    end = [tok.special.im_end]
    if random.Random(f"prompt:{seed}").random() < stage.plain_fraction:
        prompt = tok.prompt_ids(INSTRUCTIONS["plain"], image_tokens)
        return pixels, pack(prompt, tok.encode(page.assembled_text) + end, [], fork=tok.special.fork,
                            child=tok.special.child), glyphs
    prompt = tok.prompt_ids(INSTRUCTIONS["fork"], image_tokens)
    children = child_tokens(page, tok, config)
    return pixels, pack(prompt, tok.encode(page.parent_text) + end, [ids + end for ids, _ in children],
                        fork=tok.special.fork, child=tok.special.child,
                        cells=[cells + [()] for _, cells in children]), glyphs


def glyph_cells(glyphs: np.ndarray, page_size: tuple[int, int], config: HPDConfig
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """For glyph centres [N, 3] (page px): the image token whose cell holds each centre (the tile
    is a grid of n x n cells, row-major as the LM sees them), the half of the cell (0 left, 1
    right), and whether it lies on the tile. Only for one-tile models, where the whole page is
    squeezed into the tile."""
    if config.max_dynamic_patch != 1:
        raise ValueError("glyph targets need a one-tile model (max_dynamic_patch = 1)")
    n = math.isqrt(config.tokens_per_tile)
    cell = config.force_image_size / n
    x = glyphs[:, 0] * config.force_image_size / page_size[0]
    y = glyphs[:, 1] * config.force_image_size / page_size[1]
    col, row = np.floor(x / cell).astype(np.int64), np.floor(y / cell).astype(np.int64)
    inside = (col >= 0) & (col < n) & (row >= 0) & (row < n)
    return row * n + col, (x - col * cell >= cell / 2).astype(np.int64), inside


def glyph_targets(glyphs: np.ndarray, page_size: tuple[int, int], config: HPDConfig) -> torch.Tensor:
    """[tokens_per_tile, 2] classes: the character whose centre lies in the left / right half of
    each image token's cell, or 0."""
    cell, slot, inside = glyph_cells(glyphs, page_size, config)
    code = glyphs[:, 2].astype(np.int64)
    classes = np.where((code >= 33) & (code <= 126), code - 32, GLYPH_CLASSES - 1)
    out = np.zeros((config.tokens_per_tile, 2), dtype=np.int64)
    out[cell[inside], slot[inside]] = classes[inside]
    return torch.from_numpy(out)


Branch = tuple[list[int], list[tuple[int, ...]]]  # tokens, and per token the image cells holding it
_TAG = re.compile(r"<[^>]*>")  # table markup


def child_tokens(page: SynthPage, tok: HPDTokenizer, config: HPDConfig) -> list[Branch]:
    """Per content branch (fork order): its tokens (without <|im_end|>) and, per token, the image
    cells that hold the token's characters (the target of the pointer loss). A table's tags are
    not drawn: only its cell text is; branches whose drawn characters do not spell their text
    (formulas) get no cells: empty tuples."""
    elements = iter((e, g) for e, g in zip(page.layout.elements, page.element_glyphs) if has_content(e.label))
    out = []
    for text in page.children_texts:
        glyphs = next(g for e, g in elements if e.text == text)  # blocks are the elements with ink, in order
        encoding = tok.tokenizer.encode(text, add_special_tokens=False)
        tags = {i for m in _TAG.finditer(text) for i in range(m.start(), m.end())}
        chars = [i for i, ch in enumerate(text) if not ch.isspace() and i not in tags]
        if "".join(text[i] for i in chars) != "".join(map(chr, glyphs[:, 2].astype(np.int64))):
            out.append((encoding.ids, [()] * len(encoding.ids)))
            continue
        cell, _, inside = glyph_cells(glyphs, page.image.size, config)
        cell_of_char = {c: int(cell[g]) for g, c in enumerate(chars) if inside[g]}
        cells = [tuple(dict.fromkeys(cell_of_char[i] for i in range(a, b) if i in cell_of_char))[:POINTER_CELLS]
                 for a, b in encoding.offsets]
        out.append((encoding.ids, cells))
    return out


class Pages(IterableDataset):
    """Endless fresh pages, none rendered twice: DataLoader worker w of n on rank r of `world`
    (data-parallel training; a single process is rank 0 of 1) is worker g = r * n + w of
    world * n, and renders seeds first + g, first + g + world * n, ..."""

    def __init__(self, stage: Stage, config: HPDConfig, tok: HPDTokenizer, first_seed: int, rank: int = 0,
                 world: int = 1):
        self.stage, self.config, self.tok, self.first_seed = stage, config, tok, first_seed
        self.rank, self.world = rank, world

    def __iter__(self):
        info = get_worker_info()
        worker, workers = (info.id, info.num_workers) if info else (0, 1)
        for seed in itertools.count(self.first_seed + self.rank * workers + worker, self.world * workers):
            yield sample(seed, self.stage, self.config, self.tok)


def batch_of(items: list[Sample], pad_id: int) -> dict[str, torch.Tensor]:
    out = collate([p for _, p, _ in items], pad_id)
    out["pixels"] = torch.cat([px for px, _, _ in items])
    out["glyphs"] = torch.stack([g for _, _, g in items])  # [B, tokens_per_tile, 2]
    return out
