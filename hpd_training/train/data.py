"""Training samples: pages (synthetic, rendered in DataLoader workers, or real) packed for the tree mask."""

from __future__ import annotations

import itertools
import random
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import numpy as np
import torch
from PIL import Image
from torch.utils.data import IterableDataset, get_worker_info

from hpd_core.config import HPDConfig
from hpd_core.grammar import Block, drawn_positions
from hpd_core.preprocess import grid_for, has_thumbnail, tile_bytes, tiles
from hpd_training.synth import SynthConfig, render_page
from hpd_training.synth.config import DENSE_LARGE_TYPE, LANDSCAPE_SIZES, LARGE_TYPE
from hpd_core.tokenizer import INSTRUCTIONS, HPDTokenizer
from hpd_training.train.packing import Packed, collate, pack

GLYPH_CLASSES = 96  # 0: no glyph; 1-94: printable ASCII 33-126; 95: any other character
UNSEEN = -1  # a glyph target the probe is not trained on: the thumbnail's slots, neither inked nor blank
POINTER_CELLS = 12  # image cells kept per token as its pointer target


class TrainingPage(Protocol):
    """What training needs of a page, synthetic (`SynthPage`) or real (the TeX Live pages'
    `RealPage`); pixel coordinates are the image's, boxes on the 0-1000 grid.

    - image: RGB; blocks: reading order; parent_text: the layout branch (`fork` form);
      children_texts: the content branches in fork order; assembled_text: the `plain` target.
    - glyphs [N, 3]: centre x, y (px) and code point of every drawn non-space character (the
      glyph probe's targets).
    - child_glyphs: per child, [n, >= 2] centres (x, y px), one per character of
      `grammar.drawn_positions(text)`, in order (the pointer targets); None where the drawn
      characters do not spell the text (formulas).
    - child_trained: per child, False where its content is not a target (its `<BLOCK>label
      [box]<FORK>` is still trained; its branch has no loss) and the page never takes the
      `plain` prompt.
    """

    @property
    def image(self) -> Image.Image: ...

    @property
    def blocks(self) -> list[Block]: ...

    @property
    def glyphs(self) -> np.ndarray: ...

    @property
    def parent_text(self) -> str: ...

    @property
    def children_texts(self) -> list[str]: ...

    @property
    def child_glyphs(self) -> list[np.ndarray | None]: ...

    @property
    def child_trained(self) -> list[bool]: ...

    @property
    def assembled_text(self) -> str: ...


PageSource = Callable[[int], TrainingPage]  # seed -> page, the same page for the same seed


@dataclass(frozen=True)
class Stage:
    sources: tuple[SynthConfig | PageSource, ...]  # page kinds, taken in turn by seed
    batch: int
    lr: float
    plain_fraction: float = 0.1   # share of samples with the `plain` prompt (one flat trajectory)
    box_noise: float = 0.0        # share of the layout branch's boxes noised as input only (`noised_parent`)

    def page(self, seed: int) -> TrainingPage:
        source = self.sources[seed % len(self.sources)]
        return render_page(seed, source) if isinstance(source, SynthConfig) else source(seed)


LINES = SynthConfig.lines()
DENSE = SynthConfig.dense(font_size_range=DENSE_LARGE_TYPE)
SPARSE = SynthConfig.sparse()
# Document scale: a US-letter page at 150 DPI (the default render DPI), 8-12 pt body text; a 2x2
# grid of 640-px tiles shows 10-pt type at ~16 px, the size the one-tile model read.
DOC_WIDTH, DOC_TYPE = 1275, (17.0, 25.0)
DOC_DENSE = SynthConfig.dense(width=DOC_WIDTH, font_size_range=DOC_TYPE)
DOC_SPARSE = SynthConfig.sparse(width=DOC_WIDTH, font_size_range=DOC_TYPE)
DOC_LINES = SynthConfig.lines(width=DOC_WIDTH, font_size_range=DOC_TYPE)
DOCUMENT = SynthConfig.document()  # real page sizes at 150 dpi, 8-12 pt, general text, document typesetting
DOC_LANDSCAPE = SynthConfig.document(page_sizes=LANDSCAPE_SIZES)
DOC_LETTER = SynthConfig.letter()  # letters as DOCUMENT sets its pages: addresses, a date, a signature


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
    # the four-tile model's synthetic pages at document scale (`mixv`'s shares): `real` without
    # real pages. Batch: four tiles a page (`real_stage`)
    "docs": Stage((DOC_LINES, DOC_SPARSE, DOCUMENT, DOC_DENSE, DOCUMENT, DOC_DENSE), 16, 6e-4),
}


def real_stage(real: PageSource, wide: bool = False) -> Stage:
    """`real`: half real pages, a quarter document-scale dense synthetic pages (exact content, every
    label; a twelfth landscape ones), a twelfth each letters, sparse and short-line ones (letters
    since session 43: a 12-pt LaTeX letter's layout branch looped, docs/training.md). About a tenth of
    the pages are landscape (real ones are ~4%: slides). `real-wide` (`wide`): four of the six
    synthetic slots landscape, so about two fifths of the pages are (for a layout branch that
    places a landscape page's boxes as on a portrait grid: docs/training.md, sessions 19-21).
    Batch 16 of four tiles a page: 64 tiles, where the one-tile stages' 28 pages peaked at 28 GiB
    on the H200 (docs/training.md)."""
    synthetic = ((DOCUMENT, DOC_LANDSCAPE, DOC_LANDSCAPE, DOC_LANDSCAPE, DOC_DENSE, DOC_LANDSCAPE) if wide
                 else (DOCUMENT, DOC_DENSE, DOC_LINES, DOC_LANDSCAPE, DOC_LETTER, DOC_SPARSE))
    return Stage(tuple(source for kind in synthetic for source in (real, kind)), 16, 6e-4)


def stages(real: PageSource | None = None) -> dict[str, Stage]:
    """The training stages by name; `real` and `real-wide` only with a real-page source."""
    if real is None:
        return dict(STAGES)
    return {**STAGES, "real": real_stage(real), "real-wide": real_stage(real, wide=True)}


Sample = tuple[torch.Tensor, Packed, torch.Tensor]  # uint8 tiles (`tile_bytes`), packed sequence, glyph targets


def sample(seed: int, stage: Stage, config: HPDConfig, tok: HPDTokenizer) -> Sample:
    page = stage.page(seed)
    pixels = tile_bytes(tiles(page.image.convert("RGB"), config))  # normalised on the device (`to_device`)
    glyphs = glyph_targets(page.glyphs, page.image.size, config)
    image_tokens = pixels.shape[0] * config.tokens_per_tile
    end = [tok.special.im_end]
    # the `plain` prompt's target holds every child's content: only for pages whose every child is trained
    if random.Random(f"prompt:{seed}").random() < stage.plain_fraction and all(page.child_trained):
        prompt = tok.prompt_ids(INSTRUCTIONS["plain"], image_tokens)
        return pixels, pack(prompt, tok.encode(page.assembled_text) + end, [], fork=tok.special.fork,
                            child=tok.special.child), glyphs
    prompt = tok.prompt_ids(INSTRUCTIONS["fork"], image_tokens)
    children = [(ids + end, cells + [()]) if trained else ([], [])  # untrained: its <CHILD> alone, no loss
                for (ids, cells), trained in zip(child_tokens(page, tok, config), page.child_trained)]
    parent, noised = noised_parent(page.parent_text, tok, random.Random(f"boxes:{seed}"), stage.box_noise)
    return pixels, pack(prompt, parent + end, [ids for ids, _ in children], fork=tok.special.fork,
                        child=tok.special.child, cells=[cells for _, cells in children], untrained=noised), glyphs


BOX = re.compile(r"(<BLOCK>[^\[<]*\[)(\d+),(\d+),(\d+),(\d+)\]")
BOX_JITTER = 40  # on the 0-1000 grid: ~half a line of body text, ~4% of the page's width


def noised_parent(text: str, tok: HPDTokenizer, rng: random.Random, share: float) -> tuple[list[int], set[int]]:
    """The layout branch's tokens with `share` of its boxes moved (each number by up to BOX_JITTER,
    keeping its digits' count, so the tokens stay one a digit), and the indices of the tokens inside
    the moved boxes: inputs only, without loss. The branch learns to write the truth's next block
    after a box of its own that is off (greedy decoding's earlier boxes; docs/training.md, session
    40), never to write a moved one."""
    if not share:
        return tok.encode(text), set()
    spans, pieces, last = [], [], 0
    for match in BOX.finditer(text):
        if rng.random() >= share:
            continue
        start = match.start(2)
        pieces.append(text[last:start])
        x1, y1, x2, y2 = (_moved(int(v), rng) for v in match.groups()[1:])
        box = f"{min(x1, x2)},{min(y1, y2)},{max(x1, x2)},{max(y1, y2)}"
        spans.append((start, start + len(box)))
        pieces.append(box)
        last = match.end(5)
    pieces.append(text[last:])
    encoding = tok.tokenizer.encode("".join(pieces), add_special_tokens=False)
    noised = {i for i, (a, b) in enumerate(encoding.offsets) if any(lo <= a and b <= hi for lo, hi in spans)}
    return encoding.ids, noised


def _moved(value: int, rng: random.Random) -> int:
    """`value` moved by up to BOX_JITTER within the numbers of as many digits (and 0-1000)."""
    digits = len(str(value))
    low, high = (0 if digits == 1 else 10 ** (digits - 1)), min(10 ** digits - 1, 1000)
    return min(high, max(low, value + rng.randint(-BOX_JITTER, BOX_JITTER)))


def glyph_slots(config: HPDConfig) -> int:
    """Glyph-probe slots of one image token's cell: its s patch columns x s/2 rows of two patches
    (s = the shuffle scale: 2 slots, left and right half, for 2x2; 8 for 4x4), row-major."""
    return config.shuffle_scale * max(1, config.shuffle_scale // 2)


def glyph_cells(glyphs: np.ndarray, page_size: tuple[int, int], config: HPDConfig
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """For glyph centres [N, 3] (page px): the image token whose cell holds each centre, its slot
    in the cell (`glyph_slots`), and whether it lies on the page. Page px -> the canvas of the
    tile grid (cols x rows tiles, `preprocess.grid_for`) -> tile -> cell: token index
    tile * tokens_per_tile + row * n + col, tiles and cells row-major as the LM sees them. A
    thumbnail tile (`use_thumbnail`) follows the grid's tiles and holds no targets: its type is a
    few px tall."""
    cols, rows = grid_for(page_size, config)
    tile, s = config.force_image_size, config.shuffle_scale
    n = config.vision_config.grid // s                    # cells per tile side
    cell = tile / n
    x = glyphs[:, 0] * cols * tile / page_size[0]         # canvas px
    y = glyphs[:, 1] * rows * tile / page_size[1]
    tc, tr = np.floor(x / tile).astype(np.int64), np.floor(y / tile).astype(np.int64)
    inside = (tc >= 0) & (tc < cols) & (tr >= 0) & (tr < rows)
    x, y = x - tc * tile, y - tr * tile                   # tile px
    col = np.clip(np.floor(x / cell).astype(np.int64), 0, n - 1)
    row = np.clip(np.floor(y / cell).astype(np.int64), 0, n - 1)
    sub_rows = max(1, s // 2)
    slot_col = np.clip(np.floor((x - col * cell) * s / cell).astype(np.int64), 0, s - 1)
    slot_row = np.clip(np.floor((y - row * cell) * sub_rows / cell).astype(np.int64), 0, sub_rows - 1)
    token = (tr * cols + tc) * n * n + row * n + col
    return token, slot_row * s + slot_col, inside


def glyph_targets(glyphs: np.ndarray, page_size: tuple[int, int], config: HPDConfig) -> torch.Tensor:
    """[tiles * tokens_per_tile, glyph_slots] classes: the character whose centre lies in each
    slot of each image token's cell, or 0; UNSEEN for every slot of a thumbnail tile."""
    token, slot, inside = glyph_cells(glyphs, page_size, config)
    code = glyphs[:, 2].astype(np.int64)
    classes = np.where((code >= 33) & (code <= 126), code - 32, GLYPH_CLASSES - 1)
    cols, rows = grid = grid_for(page_size, config)
    thumbnail = int(has_thumbnail(grid, config))
    out = np.zeros(((cols * rows + thumbnail) * config.tokens_per_tile, glyph_slots(config)), dtype=np.int64)
    out[cols * rows * config.tokens_per_tile:] = UNSEEN
    out[token[inside], slot[inside]] = classes[inside]
    return torch.from_numpy(out)


Branch = tuple[list[int], list[tuple[int, ...]]]  # tokens, and per token the image cells holding it


def child_tokens(page: TrainingPage, tok: HPDTokenizer, config: HPDConfig) -> list[Branch]:
    """Per content branch (fork order): its tokens (without <|im_end|>) and, per token, the image
    tokens whose cells hold the token's characters (the target of the pointer loss). A table's
    tags are not drawn: only its cell text is; branches whose drawn characters do not spell their
    text (`child_glyphs` None: formulas) get no cells: empty tuples."""
    out = []
    for text, glyphs in zip(page.children_texts, page.child_glyphs, strict=True):
        encoding = tok.tokenizer.encode(text, add_special_tokens=False)
        chars = drawn_positions(text)
        if glyphs is None or len(chars) != len(glyphs):  # a real page's text layer may draw more or fewer
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
    out["glyphs"] = torch.cat([g for _, _, g in items])  # [image rows of the batch, glyph_slots]
    return out
