"""A branch: one decoding trajectory (the layout branch of a page, or one block's content).

Invariant: the branch's KV row holds every emitted token; `pending` is the next token,
already predicted (greedy) but not yet fed, and `hidden` is the post-norm hidden state that
predicted it (where P-MTP drafting starts).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import torch

from hpd_core.grammar import BLOCK, BBox, Block, iou, parse_blocks
from hpd_core.tokenizer import TextStream


@dataclass(eq=False)
class Branch:
    page: int
    id: int                      # 0 = layout branch; children 1, 2, ... in fork order
    row: int                     # KV cache row
    pending: int
    hidden: torch.Tensor         # [H]
    budget: int                  # most tokens this branch may emit
    can_fork: bool
    stream: TextStream
    position: int | None = None  # fork position p (children)
    label: str | None = None
    bbox: BBox | None = None
    tokens: list[int] = field(default_factory=list)
    drafted: list[bool] = field(default_factory=list)
    text: str = ""
    number_run: int = 0          # characters at the end of `text` that are digits and number punctuation
    headers: dict[int, Block] = field(default_factory=dict)  # a forking branch's block headers, by their <FORK>'s index in `tokens`
    box_repeats: int = 0         # its last blocks in a row whose box repeats an earlier one's
    finish_reason: str | None = None

    @property
    def finished(self) -> bool:
        return self.finish_reason is not None

    def accept(self, emitted: list[int], drafted: list[bool], stop: frozenset[int], loop_window: int,
               fork: int) -> tuple[list[int], list[bool], list[str]]:
        """Append emitted tokens up to the first stop token or the budget; returns what was kept,
        its draft flags and each kept token's text. Sets `finish_reason` ("stop", "length" or
        "loop": a repeated n-gram, a run of numbers longer than NUMBER_RUN x loop_window
        characters, or, in a forking branch, BOX_REPEATS blocks in a row over earlier blocks'
        boxes) when the branch ends. `fork`: the `<FORK>` token, which ends a block's header."""
        pieces = []
        for token in emitted:
            self.tokens.append(token)
            pieces += self.stream.pieces([token])
            self.number_run = number_run(self.number_run, pieces[-1])
            if self.can_fork and token == fork:
                self.read_header(self.text + "".join(pieces))
            if token in stop:
                self.finish_reason = "stop"
            elif len(self.tokens) >= self.budget:
                self.finish_reason = "length"
            elif loop_window and (is_looping(self.tokens, loop_window) or self.number_run > NUMBER_RUN * loop_window
                                  or self.box_repeats >= BOX_REPEATS):
                self.finish_reason = "loop"
            if self.finished:
                break
        kept = len(pieces)
        self.drafted += drafted[:kept]
        self.text += "".join(pieces)
        return emitted[:kept], drafted[:kept], pieces

    def read_header(self, written: str) -> None:
        """At a `<FORK>` of a forking branch that has written `written`: the block header it ends
        (the last block of `written`, if any) joins `headers`, and `box_repeats` counts its box
        when it lies over an earlier block's box (IoU >= BOX_REPEAT_IOU), else starts again. The
        blocks of a page do not overlap, so such repeats are a layout branch going round (a real
        slide page: 106 blocks for 6, the same few boxes again with a unit or two of jitter, which
        no repeated n-gram catches)."""
        blocks = parse_blocks(written[max(written.rfind(BLOCK), 0):])
        box = blocks[-1].bbox if blocks else None
        repeat = box is not None and any(h.bbox is not None and iou(box, h.bbox) >= BOX_REPEAT_IOU
                                         for h in self.headers.values())
        self.box_repeats = self.box_repeats + 1 if repeat else 0
        if blocks:
            self.headers[len(self.tokens) - 1] = blocks[-1]

NUMBER_RUN = 4  # a number run longer than 4 x loop_window characters (960 by default) is runaway output
BOX_REPEATS, BOX_REPEAT_IOU = 3, 0.9  # no truth page of the TeX Live evaluation has such a run (docs/training.md)
_NUMBER_CHARS = re.compile(r"[\d\s.,:;+\-−/%()\[\]]*")  # what a run of numbers is made of


def number_run(run: int, piece: str) -> int:
    """The length of the number run at the end of a text that had `run` and then `piece`: digits,
    spaces and number punctuation without a letter or another sign (a table's tags end it too).
    Greedy models that lose track of a dense page write such runs (tens of thousands of digits
    on real landscape pages) that no repeated n-gram catches."""
    tail = _NUMBER_CHARS.fullmatch(piece)
    if tail is not None:
        return run + len(piece)
    return len(piece) - _last_non_number(piece) - 1


def _last_non_number(text: str) -> int:
    """Index of the last character of `text` that cannot be part of a number run."""
    return max(i for i, ch in enumerate(text) if not _NUMBER_CHARS.fullmatch(ch))


def is_looping(tokens: list[int], window: int) -> bool:
    """True when the last `window` tokens repeat one n-gram (n <= window // 8) end to end.

    A period n must pair the last token with the one n before it, so most n are rejected by
    that one comparison before the window is compared (this runs for every emitted token)."""
    if len(tokens) < window:
        return False
    last, tail = tokens[-1], None
    for n in range(1, window // 8 + 1):
        if tokens[-1 - n] != last:
            continue
        tail = tail or tokens[-window:]
        if tail[n:] == tail[:-n]:
            return True
    return False
