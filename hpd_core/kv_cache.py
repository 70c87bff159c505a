"""Preallocated key/value cache for many branches (rows) of ragged lengths.

    k, v: [layers, rows, kv_heads, capacity, head_dim]

Row r holds, at position i, the key/value of the token fed at position i of that branch.
`lengths[r]` is the number of valid positions (the position the row's next token is fed at);
the engine owns it. Attention never reads past a query's own position (the mask is built from
positions), so stale entries beyond `lengths[r]` are harmless. Capacity and rows grow by
doubling. Forking copies a prefix into a free row. All tensors are inference tensors:
every method that creates or changes them runs in inference mode.
"""

from __future__ import annotations

import torch


class KVCache:
    @torch.inference_mode()
    def __init__(self, layers: int, kv_heads: int, head_dim: int, *, dtype: torch.dtype,
                 device: torch.device | str = "cpu", rows: int = 1, capacity: int = 256):
        shape = (layers, rows, kv_heads, capacity, head_dim)
        self.k = torch.zeros(shape, dtype=dtype, device=device)
        self.v = torch.zeros(shape, dtype=dtype, device=device)
        self.lengths = [0] * rows
        self.free_rows = list(range(rows - 1, -1, -1))

    @property
    def capacity(self) -> int:
        return self.k.shape[3]

    @property
    def rows(self) -> int:
        return self.k.shape[1]

    def alloc(self) -> int:
        if not self.free_rows:
            self._grow(rows=self.rows * 2)
        row = self.free_rows.pop()
        self.lengths[row] = 0
        return row

    def free(self, row: int) -> None:
        self.lengths[row] = 0
        self.free_rows.append(row)

    @torch.inference_mode()
    def fork(self, src: int, length: int) -> int:
        """A new row holding a copy of positions [0, length) of row `src`."""
        row = self.alloc()
        self.k[:, row, :, :length] = self.k[:, src, :, :length]
        self.v[:, row, :, :length] = self.v[:, src, :, :length]
        self.lengths[row] = length
        return row

    def ensure(self, capacity: int) -> None:
        if capacity > self.capacity:
            self._grow(capacity=max(capacity, 2 * self.capacity))

    @torch.inference_mode()
    def write(self, layer: int, rows: torch.Tensor, positions: torch.Tensor,
              k: torch.Tensor, v: torch.Tensor) -> None:
        """Store k, v: [B, kv_heads, q, D] of rows [B] at positions [B, q]."""
        heads = torch.arange(k.shape[1], device=k.device)
        index = (rows[:, None, None], heads[None, :, None], positions[:, None, :])
        self.k[layer].index_put_(index, k)
        self.v[layer].index_put_(index, v)

    @staticmethod
    def selector(rows: torch.Tensor) -> slice | torch.Tensor:
        """How `read` picks `rows` [B]: a slice (a view, no copy) when they are consecutive."""
        first = int(rows[0])
        if rows.numel() == 1 or torch.equal(rows, torch.arange(first, first + rows.numel(), device=rows.device)):
            return slice(first, first + rows.numel())
        return rows

    def read(self, layer: int, rows: slice | torch.Tensor, length: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Keys and values [B, kv_heads, length, D] of the rows a `selector` picked."""
        if isinstance(rows, slice):
            return self.k[layer, rows, :, :length], self.v[layer, rows, :, :length]
        return (self.k[layer, :, :, :length].index_select(0, rows),
                self.v[layer, :, :, :length].index_select(0, rows))

    @torch.inference_mode()
    def stash(self, row: int, start: int, end: int) -> tuple[torch.Tensor, torch.Tensor]:
        """A copy of positions [start, end) of `row` (all layers)."""
        return self.k[:, row, :, start:end].clone(), self.v[:, row, :, start:end].clone()

    @torch.inference_mode()
    def restore(self, row: int, start: int, kv: tuple[torch.Tensor, torch.Tensor]) -> None:
        k, v = kv
        end = start + k.shape[2]
        self.k[:, row, :, start:end] = k
        self.v[:, row, :, start:end] = v

    @torch.inference_mode()
    def _grow(self, *, rows: int | None = None, capacity: int | None = None) -> None:
        layers, old_rows, heads, old_cap, dim = self.k.shape
        rows, capacity = rows or old_rows, capacity or old_cap
        for name in ("k", "v"):
            old = getattr(self, name)
            new = old.new_zeros((layers, rows, heads, capacity, dim))
            new[:, :old_rows, :, :old_cap] = old
            setattr(self, name, new)
        self.lengths += [0] * (rows - old_rows)
        self.free_rows = list(range(rows - 1, old_rows - 1, -1)) + self.free_rows
