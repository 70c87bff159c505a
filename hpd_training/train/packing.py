"""A page's prompt and target branches packed into one training sequence with a tree mask."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

IGNORE = -100
TRUNK, PAD = -1, -2  # segment ids: the prompt + layout branch, and padding; children are 0, 1, ...


@dataclass(frozen=True)
class Packed:
    ids: list[int]
    positions: list[int]   # inference positions (a child continues from its fork position)
    segments: list[int]    # TRUNK or the child's index
    forks: list[int]       # per token: its child's fork position p (0 on the trunk)
    labels: list[int]      # next token of the same branch, or IGNORE
    kinds: list[int]       # 0: no loss, 1: layout-branch token, 2: content-branch token
    cells: list[tuple[int, ...]]  # image cells holding the label token's characters (pointer target), or ()


def pack(prompt: list[int], parent: list[int], children: list[list[int]], *, fork: int, child: int,
         cells: list[list[tuple[int, ...]]] | None = None, untrained: set[int] = frozenset()) -> Packed:
    """`parent` and each child end with <|im_end|>; the i-th <FORK> of `parent` starts child i.
    An empty child (content not trained) is its <CHILD> alone, without a label.
    `cells`: per child, per token, the image cells that hold it (default: none). `untrained`:
    indices of `parent` tokens that are inputs only (`data.noised_parent`): no label predicts them."""
    n = len(prompt)
    ids = prompt + parent
    positions = list(range(len(ids)))
    segments = [TRUNK] * len(ids)
    forks = [0] * len(ids)
    labels = [IGNORE] * (n - 1) + [IGNORE if i in untrained else t for i, t in enumerate(parent)] + [IGNORE]
    kinds = [0] * (n - 1) + [0 if i in untrained else 1 for i in range(len(parent))] + [0]
    targets: list[tuple[int, ...]] = [()] * len(ids)
    fork_positions = [n + i for i, t in enumerate(parent) if t == fork]
    if len(fork_positions) != len(children):
        raise ValueError(f"{len(fork_positions)} <FORK>s for {len(children)} children")
    for c, (p, tokens) in enumerate(zip(fork_positions, children)):
        targets += (cells[c] if cells else [()] * len(tokens)) + [()]
        ids += [child] + tokens
        positions += range(p, p + 1 + len(tokens))
        segments += [c] * (1 + len(tokens))
        forks += [p] * (1 + len(tokens))
        labels += tokens + [IGNORE]
        kinds += [2] * len(tokens) + [0]
    return Packed(ids, positions, segments, forks, labels, kinds, targets)


def collate(packed: list[Packed], pad_id: int) -> dict[str, torch.Tensor]:
    """Right-padded [B, L] tensors of a batch."""
    length = max(len(p.ids) for p in packed)

    def column(name, fill):
        return torch.tensor([getattr(p, name) + [fill] * (length - len(p.ids)) for p in packed])

    width = max(1, max(len(c) for p in packed for c in p.cells))
    cells = np.full((len(packed), length, width), -1, dtype=np.int64)
    for b, p in enumerate(packed):
        for t, c in enumerate(p.cells):
            cells[b, t, :len(c)] = c
    return {"ids": column("ids", pad_id), "positions": column("positions", 0), "segments": column("segments", PAD),
            "forks": column("forks", 0), "labels": column("labels", IGNORE), "kinds": column("kinds", 0),
            "cells": torch.from_numpy(cells)}


def tree_mask(segments: torch.Tensor, forks: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
    """[B, 1, L, L] bool: causal within a segment, plus a child's view of the trunk before its fork."""
    index = torch.arange(segments.shape[1], device=segments.device)
    same = (segments[:, :, None] == segments[:, None, :]) & (index[:, None] >= index[None, :])
    trunk = (segments[:, :, None] >= 0) & (segments[:, None, :] == TRUNK) & (positions[:, None, :] < forks[:, :, None])
    return (same | trunk)[:, None]
