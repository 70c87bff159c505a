"""Block-paged key/value cache shared between branches (nano-vllm's block manager, plus forks).

    k, v: [layers, blocks, block_size, kv_heads, head_dim]     (the pool)
    tables[row]: the physical block of each logical block       (position i -> tables[row][i // bs])

A row is one branch. `lengths[row]` is its number of valid positions (where its next token is
fed). Blocks carry reference counts: `fork` gives a child the parent's full blocks by reference
(no copy) and a copy only of a partly filled last block, so memory grows with the tokens really
written, not with rows x the longest row. A row only ever writes blocks it holds alone (refcount
1; asserted): a referenced block lies wholly before the fork position, and the parent writes only
at or after its length. `crop` shortens a row (speculative verification) and frees the blocks past
its end; `free` drops a row's references, and a block whose count reaches zero is reused.
`scratch` is one block no row holds, where padded rows of a captured forward write (graphs.py).

A row's shared prefix (`share`): its leading full blocks, attended once per step for all rows that
hold them (`Layout`), not once per row. The engine marks a page's prompt as the shared prefix of
the page's layout branch; every child inherits it. Attention never reads past a query's own
position, so stale entries of reused or padded blocks are harmless. All tensors are inference
tensors: every method that creates or changes them runs in inference mode.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch


@dataclass(frozen=True)
class Layout:
    """Where one forward's rows write and what their attention reads; built once per forward.

    B rows, q positions each; G groups of rows that hold the same shared prefix (R rows at most);
    P = the longest shared prefix, S = the longest rest (positions from a row's prefix end on)."""
    slots: torch.Tensor          # [B * q] flat pool slot (block * bs + offset) of each written position
    positions: torch.Tensor      # [B, q]
    rest_blocks: torch.Tensor    # [B, S / bs] each row's blocks after its shared prefix (padded)
    rest_positions: torch.Tensor  # [B, S] the position of each rest key
    prefix_blocks: torch.Tensor  # [G, P / bs] each group's shared blocks (padded; G = 0: none)
    prefix_valid: torch.Tensor   # [G, P] True where the group's prefix has that key
    group_rows: torch.Tensor     # [G, R] the rows of each group (padded with row 0)
    row_group: torch.Tensor      # [B] the group of each row, -1 for rows without a shared prefix
    row_slot: torch.Tensor       # [B] the row's place in its group
    causal: bool = False         # every row is written from position 0 in order (a page's prefill)

    @property
    def keys_read(self) -> int:
        """Key positions read per layer (padding included): G x P for the prefixes + B x S."""
        return self.prefix_valid.numel() + self.rest_positions.numel()


BLOCK_SIZE = 16  # positions per block


class KVCache:
    @torch.inference_mode()
    def __init__(self, layers: int, kv_heads: int, head_dim: int, *, dtype: torch.dtype,
                 device: torch.device | str = "cpu", block_size: int = BLOCK_SIZE, blocks: int = 64):
        shape = (layers, blocks, block_size, kv_heads, head_dim)
        self.k = torch.zeros(shape, dtype=dtype, device=device)
        self.v = torch.zeros(shape, dtype=dtype, device=device)
        self.block_size = block_size
        self._scratch: int | None = None
        self.reset()

    @property
    def blocks(self) -> int:
        return self.k.shape[1]

    @property
    def blocks_in_use(self) -> int:
        """Blocks held by rows (not the scratch block)."""
        return self.blocks - len(self.free_blocks) - (self._scratch is not None)

    @property
    def scratch(self) -> int:
        """A block that no row holds (reserved on first use): padded rows write there, and padded
        reads read it, so its contents are finite and never seen by a real row."""
        if self._scratch is None:
            self._scratch = self._new_block()
        return self._scratch

    @property
    def token_bytes(self) -> int:
        """Bytes of K and V of one position over all layers."""
        layers, _, _, heads, dim = self.k.shape
        return 2 * layers * heads * dim * self.k.element_size()

    def reset(self) -> None:
        """Free every row and block (the pool and the scratch block stay where they are)."""
        self.tables: list[list[int]] = []
        self.lengths: list[int] = []
        self.shared: list[int] = []       # leading blocks of the row attended as its shared prefix
        self.free_rows: list[int] = []
        self.refs = [0] * self.blocks
        self.free_blocks = [b for b in range(self.blocks - 1, -1, -1) if b != self._scratch]
        if self._scratch is not None:
            self.refs[self._scratch] = 1

    # ---- rows -------------------------------------------------------------------------------

    def alloc(self) -> int:
        """An empty row."""
        if not self.free_rows:
            self.free_rows.append(len(self.tables))
            self.tables.append([])
            self.lengths.append(0)
            self.shared.append(0)
        return self.free_rows.pop()

    def free(self, row: int) -> None:
        self._release(self.tables[row])
        self.tables[row], self.lengths[row], self.shared[row] = [], 0, 0
        self.free_rows.append(row)

    @torch.inference_mode()
    def fork(self, src: int, length: int) -> int:
        """A new row holding positions [0, length) of row `src`: its full blocks by reference,
        the partly filled last one (if any) copied."""
        assert length <= self.lengths[src], (length, self.lengths[src])
        row = self.alloc()
        full, partial = divmod(length, self.block_size)
        table = self.tables[src][:full]
        for b in table:
            self.refs[b] += 1
        if partial:
            block = self._new_block()
            source = self.tables[src][full]
            self.k[:, block] = self.k[:, source]
            self.v[:, block] = self.v[:, source]
            table = table + [block]
        self.tables[row], self.lengths[row] = table, length
        self.shared[row] = min(self.shared[src], full)
        return row

    def share(self, row: int) -> None:
        """Mark the row's full blocks as its shared prefix (children inherit it)."""
        self.shared[row] = self.lengths[row] // self.block_size

    def crop(self, row: int, length: int) -> None:
        """Set the row's length and free the blocks wholly past it (rejected drafts)."""
        keep = -(-length // self.block_size)
        assert keep >= self.shared[row] and keep <= len(self.tables[row]), (row, length)
        self._release(self.tables[row][keep:])
        del self.tables[row][keep:]
        self.lengths[row] = length

    # ---- one forward ------------------------------------------------------------------------

    def layout(self, rows: list[int], positions: torch.Tensor) -> Layout:
        """Give each row blocks up to its last position in `positions` [B, q] and plan the
        forward's writes and reads. The rows must be distinct; positions start at each row's
        length or earlier (a prefill), never past it."""
        assert len(set(rows)) == len(rows), rows
        bs, device = self.block_size, positions.device
        ends = (positions.amax(1) + 1).tolist()
        firsts = positions.amin(1).tolist()
        for row, first, end in zip(rows, firsts, ends):
            assert first <= self.lengths[row] and first >= self.shared[row] * bs, (row, first)
            self._reserve(row, end)
            assert all(self.refs[b] == 1 for b in self.tables[row][first // bs:]), "write to a shared block"
        tables = [self.tables[r] for r in rows]
        index = torch.arange(len(rows), device=device)[:, None]
        # only each row's blocks from its first written position on (one or two in a decode step),
        # not its whole table: a page's 1,800-token prompt is 113 blocks a row
        first_blocks = [first // bs for first in firsts]
        written = padded([t[f:] for t, f in zip(tables, first_blocks)], device)
        offsets = positions // bs - ints(first_blocks, device)[:, None]
        slots = written[index, offsets] * bs + positions % bs
        starts = [self.shared[r] for r in rows]
        rest_blocks = padded([t[s:] for t, s in zip(tables, starts)], device)
        rest_positions = (ints(starts, device)[:, None] * bs
                          + torch.arange(rest_blocks.shape[1] * bs, device=device))
        groups: dict[tuple[int, int], list[int]] = {}
        for i, (row, start) in enumerate(zip(rows, starts)):
            if start:
                groups.setdefault((self.tables[row][0], start), []).append(i)
        causal = not any(firsts) and bool((positions == torch.arange(positions.shape[1], device=device)).all())
        return Layout(slots.flatten(), positions, rest_blocks, rest_positions,
                      *self._groups(rows, groups, device), causal)

    def _groups(self, rows: list[int], groups: dict[tuple[int, int], list[int]], device) -> tuple:
        """prefix_blocks, prefix_valid, group_rows, row_group, row_slot of `Layout`."""
        row_group, row_slot = [-1] * len(rows), [0] * len(rows)
        for g, members in enumerate(groups.values()):
            for slot, i in enumerate(members):
                row_group[i], row_slot[i] = g, slot
        row_group, row_slot = ints(row_group, device), ints(row_slot, device)
        if not groups:
            empty = torch.zeros((0, 0), dtype=torch.long, device=device)
            return empty, empty.bool(), empty, row_group, row_slot
        prefix_blocks = padded([self.tables[rows[m[0]]][:start] for (_, start), m in groups.items()], device)
        sizes = ints([start for _, start in groups], device) * self.block_size
        prefix_valid = torch.arange(prefix_blocks.shape[1] * self.block_size, device=device) < sizes[:, None]
        group_rows = padded(list(groups.values()), device)
        return prefix_blocks, prefix_valid, group_rows, row_group, row_slot

    @torch.inference_mode()
    def write(self, layer: int, layout: Layout, k: torch.Tensor, v: torch.Tensor) -> None:
        """Store k, v: [B, kv_heads, q, D] at the layout's slots."""
        heads, dim = k.shape[1], k.shape[3]
        self.k[layer].view(-1, heads, dim).index_copy_(0, layout.slots, k.transpose(1, 2).reshape(-1, heads, dim))
        self.v[layer].view(-1, heads, dim).index_copy_(0, layout.slots, v.transpose(1, 2).reshape(-1, heads, dim))

    def gather(self, layer: int, blocks: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Keys and values [N, kv_heads, n * bs, D] of block lists [N, n]."""
        n = blocks.shape[0]
        heads, dim = self.k.shape[3], self.k.shape[4]
        return tuple(pool[layer][blocks].view(n, -1, heads, dim).transpose(1, 2) for pool in (self.k, self.v))

    # ---- blocks -----------------------------------------------------------------------------

    def _reserve(self, row: int, end: int) -> None:
        table = self.tables[row]
        while len(table) * self.block_size < end:
            table.append(self._new_block())

    def _new_block(self) -> int:
        if not self.free_blocks:
            self._grow(2 * self.blocks)
        block = self.free_blocks.pop()
        self.refs[block] = 1
        return block

    def _release(self, blocks: list[int]) -> None:
        for b in blocks:
            self.refs[b] -= 1
            assert self.refs[b] >= 0, b
            if self.refs[b] == 0:
                self.free_blocks.append(b)

    @torch.inference_mode()
    def _grow(self, blocks: int) -> None:
        old = self.blocks
        for name in ("k", "v"):
            pool = getattr(self, name)
            new = pool.new_zeros((pool.shape[0], blocks, *pool.shape[2:]))
            new[:, :old] = pool
            setattr(self, name, new)
        self.refs += [0] * (blocks - old)
        self.free_blocks = list(range(blocks - 1, old - 1, -1)) + self.free_blocks


def ints(values: list, device) -> torch.Tensor:
    """An int64 tensor of (nested, equally long) lists of ints, read by numpy: 4-6x faster than
    `torch.tensor` at thousands of rows (bench.host_layout); one host-to-device copy."""
    return torch.from_numpy(np.array(values, dtype=np.int64)).to(device)


def padded(lists: list[list[int]], device) -> torch.Tensor:
    """[len(lists), longest] int64, padded with 0 (block 0: padding is masked or discarded)."""
    width = max(map(len, lists))
    return ints([x + [0] * (width - len(x)) for x in lists], device)
