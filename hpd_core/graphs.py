"""Decode forwards as CUDA graphs: the decoder's layers over a batch padded to a bucket, captured
once per bucket and replayed. Eager PyTorch dispatches ~100 kernels a layer, and at the real
dimensions the host, not the GPU, set a decode step's time (bench/NOTES.md: 25 ms against a
0.36 ms bandwidth floor at batch 1).

A bucket rounds each dimension of a forward's `Layout` up to a power of two: rows B, rest blocks
S, prefix groups G, rows per group R and prefix blocks P; q (1 + drafts) stays exact. Padding
never changes a real row's result:
- padded rows write only the cache's scratch block, read only it, and are dropped;
- padded rest keys lie past every query of their row (masked), padded prefix keys are not valid;
- a padded group attends to one scratch key, so no row computes a softmax over nothing (a NaN).
So the real rows see the same keys with the same weights; only the reduction shapes differ.

A step's layout is planned and padded on the host, where its tensor operations launch no kernel,
and reaches the device as one buffer (`pack`) in one copy, which the graph unpacks: the host's work
outside the replay was 66 launches and 9 copies before (bench/NOTES.md, session 39).

On the CPU (`capture=False`) the same padded, packed forward runs eagerly: the exactness tests check it
against the unpadded one. A graph holds the KV pool's address: when the pool grows (or another
cache comes), the graphs are dropped and captured again.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

import torch

from hpd_core.kv_cache import KVCache, Layout


def up(n: int) -> int:
    """The power of two >= n (0 stays 0)."""
    return 1 << (n - 1).bit_length() if n > 0 else 0


@dataclass(frozen=True)
class Bucket:
    rows: int
    q: int
    rest: int      # rest blocks per row
    groups: int
    members: int   # rows per group
    prefix: int    # prefix blocks per group

    @staticmethod
    def of(layout: Layout) -> Bucket:
        groups, members = layout.group_rows.shape
        return Bucket(up(layout.positions.shape[0]), layout.positions.shape[1], up(layout.rest_blocks.shape[1]),
                      up(groups), up(members), up(layout.prefix_blocks.shape[1]))


def pad_rows(x: torch.Tensor, rows: int, value) -> torch.Tensor:
    """x [B, ...] -> [rows, ...], new rows filled with `value` (a scalar or a row)."""
    extra = x.new_empty((rows - x.shape[0], *x.shape[1:]))
    extra[:] = value
    return torch.cat([x, extra])


def pad_cols(x: torch.Tensor, cols: int, value) -> torch.Tensor:
    """x [N, C] -> [N, cols], new columns filled with `value`."""
    return torch.cat([x, x.new_full((x.shape[0], cols - x.shape[1]), value)], 1)


def pad_layout(layout: Layout, bucket: Bucket, scratch: int, block_size: int) -> Layout:
    """The layout with padded rows, groups and columns (module docstring)."""
    b, q = layout.positions.shape
    device = layout.positions.device
    own = torch.arange(q, device=device)
    positions = pad_rows(layout.positions, bucket.rows, own)              # padded rows: queries 0..q-1
    slots = pad_rows(layout.slots.view(b, q), bucket.rows, scratch * block_size + own).flatten()
    rest_blocks = pad_rows(pad_cols(layout.rest_blocks, bucket.rest, scratch), bucket.rows, scratch)
    first = pad_rows(layout.rest_positions[:, :1], bucket.rows, 0)        # each row's first rest position
    rest_positions = first + torch.arange(bucket.rest * block_size, device=device)
    prefix_blocks = pad_rows(pad_cols(layout.prefix_blocks, bucket.prefix, scratch), bucket.groups, scratch)
    lone = torch.arange(bucket.prefix * block_size, device=device) == 0  # a padded group's one key
    prefix_valid = pad_rows(pad_cols(layout.prefix_valid, bucket.prefix * block_size, False), bucket.groups, lone)
    group_rows = pad_rows(pad_cols(layout.group_rows, bucket.members, 0), bucket.groups, 0)
    return Layout(slots, positions, rest_blocks, rest_positions, prefix_blocks, prefix_valid, group_rows,
                  pad_rows(layout.row_group, bucket.rows, -1), pad_rows(layout.row_slot, bucket.rows, 0))


TENSORS = [f.name for f in fields(Layout) if f.type == "torch.Tensor"]  # all but the `causal` flag


def plan(cache: KVCache, rows: list[int], positions: torch.Tensor) -> tuple[Bucket, Layout]:
    """A decode forward's layout, padded to its bucket, planned on the host: the positions are a
    few ints, and there the plan's ~60 tensor operations launch no kernel (module docstring)."""
    layout = cache.layout(rows, positions.cpu())  # reserves blocks: the pool may grow here
    bucket = Bucket.of(layout)
    return bucket, pad_layout(layout, bucket, cache.scratch, cache.block_size)


def pack(layout: Layout, out: torch.Tensor | None = None) -> torch.Tensor:
    """The layout's tensors flattened into one int64 buffer (`out`, e.g. pinned, when given), so a
    step's whole layout reaches the device in one copy."""
    return torch.cat([getattr(layout, name).reshape(-1).long() for name in TENSORS], out=out)


def unpack(flat: torch.Tensor, like: Layout) -> Layout:
    """The layout `pack` flattened from one shaped as `like`: views of `flat`, but `prefix_valid`
    (a bool, the one tensor computed; inside a graph, one kernel of the replay)."""
    values, start = {}, 0
    for name in TENSORS:
        shape = getattr(like, name).shape
        view = flat[start:start + shape.numel()].view(shape)
        values[name] = view != 0 if name == "prefix_valid" else view
        start += shape.numel()
    return Layout(**values, causal=like.causal)


def capture(run, pool) -> tuple[torch.cuda.CUDAGraph, object]:
    """`run()` captured as a CUDA graph in memory pool `pool`, and what the captured call returned
    (its static outputs). Capture needs a warm-up run on a side stream first; it does what the
    replays will do (the same keys written, the same shapes compiled)."""
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        run()
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, pool=pool):
        out = run()
    return graph, out


@dataclass
class CapturedDrafts:
    """One (rows bucket, k)'s draft graph and its static inputs and outputs."""
    graph: torch.cuda.CUDAGraph
    hidden: torch.Tensor
    pending: torch.Tensor
    drafts: torch.Tensor
    probabilities: torch.Tensor


class DraftGraphs:
    """`LanguageModel.draft_graphs`: all k drafts of a step (`speculative.all_drafts`: the head, the
    lm_head and the argmax k times, no host sync between them) over rows padded to a power of two,
    captured once per (rows, k) and replayed; `speculative.draft` applies the confidence stop
    after them. Padded rows draft from zeros and are dropped. Without `capture` (the CPU tests) the
    padded drafts run eagerly. Drafts never change the tokens a step emits, only how many it keeps."""

    def __init__(self, capture: bool):
        self.capture = capture
        self.graphs: dict[tuple[int, int], CapturedDrafts] = {}
        self.memory = None  # the graphs' memory pool, made with the first graph

    def run(self, drafts_of, hidden: torch.Tensor, pending: torch.Tensor, k: int
            ) -> tuple[torch.Tensor, torch.Tensor]:
        """`drafts_of(hidden, pending)` -> drafts and probabilities [B, k] each, for B rows."""
        b = hidden.shape[0]
        hidden, pending = pad_rows(hidden, up(b), 0), pad_rows(pending, up(b), 0)
        if not self.capture:
            drafts, probabilities = drafts_of(hidden, pending)
            return drafts[:b], probabilities[:b]
        captured = self.graphs.get((up(b), k))
        if captured is None:
            captured = self.graphs[up(b), k] = self._capture(drafts_of, hidden, pending)
        else:
            captured.hidden.copy_(hidden)
            captured.pending.copy_(pending)
        captured.graph.replay()
        return captured.drafts[:b].clone(), captured.probabilities[:b].clone()

    def _capture(self, drafts_of, hidden: torch.Tensor, pending: torch.Tensor) -> CapturedDrafts:
        if self.memory is None:
            self.memory = torch.cuda.graph_pool_handle()
        graph, (drafts, probabilities) = capture(lambda: drafts_of(hidden, pending), self.memory)
        return CapturedDrafts(graph, hidden, pending, drafts, probabilities)


@dataclass
class Captured:
    """One bucket's graph and the static tensors it reads and writes."""
    graph: torch.cuda.CUDAGraph
    embeds: torch.Tensor
    host: torch.Tensor    # the packed layout (`pack`) in pinned host memory
    flat: torch.Tensor    # its copy on the device, which the graph unpacks
    copied: torch.cuda.Event  # recorded after the last copy from `host`
    out: torch.Tensor


class DecodeGraphs:
    """`Decoder.graphs`: decode forwards of at most `max_q` positions a row, padded to buckets and,
    with `capture`, run as CUDA graphs."""

    def __init__(self, capture: bool, max_q: int = 16):
        self.capture, self.max_q = capture, max_q
        self.graphs: dict[Bucket, Captured] = {}
        self.pool_key: tuple | None = None
        self.memory = None  # the graphs' shared memory pool, made with the first graph

    def run(self, decoder, embeds: torch.Tensor, positions: torch.Tensor, cache: KVCache,
            rows: list[int]) -> torch.Tensor:
        """Post-norm hidden states [B, q, H], as `Decoder.forward` with a cache."""
        bucket, padded = plan(cache, rows, positions)
        embeds = pad_rows(embeds, bucket.rows, 0)
        b = len(rows)
        if not self.capture:
            return self._forward(decoder, cache, embeds, pack(padded).to(embeds.device), padded)[:b]
        key = (id(cache), cache.k.data_ptr(), cache.k.shape)
        if key != self.pool_key:  # another pool: new graphs in a new memory pool (the old one goes with them)
            self.graphs.clear()
            self.pool_key, self.memory = key, torch.cuda.graph_pool_handle()
        captured = self.graphs.get(bucket)
        if captured is None:
            captured = self.graphs[bucket] = self._capture(decoder, cache, embeds, padded)
        else:
            captured.copied.synchronize()  # the last replay's copy has left the pinned buffer
            pack(padded, out=captured.host)
            captured.flat.copy_(captured.host, non_blocking=True)
            captured.copied.record()
            captured.embeds.copy_(embeds)
        captured.graph.replay()
        return captured.out[:b].clone()

    @staticmethod
    def _forward(decoder, cache: KVCache, embeds: torch.Tensor, flat: torch.Tensor, like: Layout) -> torch.Tensor:
        layout = unpack(flat, like)
        return decoder.run_layers(embeds, layout.positions, None, cache, layout)

    def _capture(self, decoder, cache: KVCache, embeds: torch.Tensor, layout: Layout) -> Captured:
        """Capture the forward over these (static from now on) inputs; the layout is unpacked
        inside the graph from one device buffer that each replay refills with one copy."""
        host = pack(layout).pin_memory()
        flat = host.to(embeds.device)
        graph, out = capture(lambda: self._forward(decoder, cache, embeds, flat, layout), self.memory)
        copied = torch.cuda.Event()
        copied.record()
        return Captured(graph, embeds, host, flat, copied, out)
