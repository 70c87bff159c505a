"""The engine: pages in, streamed events and parse results out.

Decoding modes (all greedy):
- `plain` prompt: one trajectory per page (the AR baseline).
- `fork` prompt, serial (`batch_children=False`): when the layout branch emits `<FORK>` at
  position p, the child is decoded to its end at once, then the layout branch goes on.
- `fork` prompt, batched (`batch_children=True`): rounds; each round is one forward over up to
  `max_active_branches` branches.
- Either way a child's KV row references its parent's prefix [0, p) (`KVCache.fork`: shared
  blocks, no copy but a partly filled last block), and the page's prompt is attended once per
  round for all the page's branches (its shared prefix).
- P-MTP drafts (`use_mtp`) in every mode; per-row lengths diverge after verification.

The output never depends on the mode, the batch, `max_active_branches` or the pages in flight: a
child sees only the prompt, its parent's prefix and itself, and every emitted token is a greedy
argmax.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Iterator, Sequence

import torch
from PIL import Image

from hpd_core import speculative
from hpd_core.branch import Branch
from hpd_core.documents import DEFAULT_DPI, as_image
from hpd_core.events import (BranchFinished, BranchForked, Event, PageFinished, PageStarted,
                             TokensAppended)
from hpd_core.grammar import parse_blocks
from hpd_core.kv_cache import KVCache
from hpd_core.markdown import to_markdown
from hpd_core.model import HPDModel
from hpd_core.options import ParseOptions
from hpd_core.preprocess import preprocess
from hpd_core.result import BranchRecord, Counts, ParseResult, Stats
from hpd_core.tokenizer import INSTRUCTIONS, HPDTokenizer


@dataclass(frozen=True)
class EngineInfo:
    name: str
    path: str
    device: str
    dtype: str
    parameters: int
    mtp: bool
    vision_dtype: str = ""  # when the vision tower runs in another dtype (autocast) than `dtype`
    render_dpi: float = DEFAULT_DPI  # the PDF resolution the checkpoint reads (its config's `render_dpi`)


@dataclass
class PageRun:
    """One page being decoded: its branches (id order) and counters."""
    index: int
    image_size: tuple[int, int]
    branches: list[Branch]
    counts: Counts
    prompt_tokens: int
    tiles: int
    vision_seconds: float
    prefill_seconds: float
    started: float                 # wall clock when the page's vision encoding began
    decode_started: float = 0.0
    live: int = 1                  # unfinished branches
    tokens: int = 0                # tokens emitted by all branches

    def elapsed(self) -> float:
        return time.perf_counter() - self.decode_started


class Decoding:
    """`parse`, `parse_batch` and `stream` of an engine, from its `stream_batch(pages, options,
    cancel)`: the in-process `Engine` and hpd_vllm's `VLLMEngine`."""

    def parse(self, page, options: ParseOptions = ParseOptions(), cancel: threading.Event | None = None) -> ParseResult:
        return self.parse_batch([page], options, cancel)[0]

    def parse_batch(self, pages: Sequence, options: ParseOptions = ParseOptions(),
                    cancel: threading.Event | None = None) -> list[ParseResult]:
        results = {e.page: e.result for e in self.stream_batch(pages, options, cancel) if isinstance(e, PageFinished)}
        return [results[i] for i in range(len(pages))]

    def stream(self, page, options: ParseOptions = ParseOptions(),
               cancel: threading.Event | None = None) -> Iterator[Event]:
        return self.stream_batch([page], options, cancel)


class Engine(Decoding):
    def __init__(self, model: HPDModel, tokenizer: HPDTokenizer, *, name: str = "HPD", path: str = "",
                 vision_autocast: torch.dtype | None = None, max_pages_in_flight: int = 0):
        """`vision_autocast`: run the vision tower and projector under autocast to this dtype (the
        decoder keeps the model's dtype, so every decoding mode still sees the same image rows).
        `max_pages_in_flight`: the most pages a batched decode holds at once (0: all it is given);
        the KV memory of a batch grows with it, not with the batch."""
        if max_pages_in_flight < 0:
            raise ValueError(f"max_pages_in_flight must be 0 (all) or more, not {max_pages_in_flight}")
        self.model, self.tokenizer = model, tokenizer
        self.config = model.config
        self.special = tokenizer.special
        self.name, self.path = name, path
        self.vision_autocast = vision_autocast
        self.lock = threading.Lock()  # one decode at a time per engine (the model is not re-entrant)
        self.cache: KVCache | None = None
        self.max_pages_in_flight = max_pages_in_flight

    @property
    def device(self) -> torch.device:
        return self.model.mlp1[1].weight.device

    @property
    def dtype(self) -> torch.dtype:
        return self.model.mlp1[1].weight.dtype

    @property
    def info(self) -> EngineInfo:
        return EngineInfo(self.name, self.path, str(self.device), str(self.dtype).removeprefix("torch."),
                          sum(p.numel() for p in self.model.parameters()), self.model.has_mtp,
                          str(self.vision_autocast or "").removeprefix("torch."),
                          self.model.config.render_dpi or DEFAULT_DPI)

    # ---- public API -------------------------------------------------------------------------

    def stream_batch(self, pages: Sequence, options: ParseOptions = ParseOptions(),
                     cancel: threading.Event | None = None) -> Iterator[Event]:
        """Events of decoding `pages` (PIL images or objects with an `.image`) together.
        Serial fork mode decodes the pages one after another; the other modes batch them, at most
        the engine's `max_pages_in_flight` at once (later pages start as earlier ones finish)."""
        if options.use_mtp and not self.model.has_mtp:
            raise ValueError("use_mtp needs a P-MTP head, and this checkpoint has none")
        images = [as_image(p) for p in pages]
        with self.lock:
            cache = self._new_cache()
            if options.prompt == "fork" and not options.batch_children:
                for i, image in enumerate(images):
                    if cancelled(cancel):
                        yield unstarted(i, image)
                        continue
                    run = self._start_page(i, image, options, cache)
                    yield self._started(run)
                    yield from self._decode_serial(run, cache, options, cancel)
            else:
                yield from self._decode_rounds(images, cache, options, cancel)

    # ---- prompt and prefill -----------------------------------------------------------------

    def _new_cache(self) -> KVCache:
        """The engine's cache, emptied: kept from call to call, so that its pool (and the CUDA
        graphs captured over it) stays where it is."""
        if self.cache is None:
            llm = self.config.llm_config
            self.cache = KVCache(llm.num_hidden_layers, llm.num_key_value_heads, llm.head_dim,
                                 dtype=self.dtype, device=self.device, blocks=64)
        self.cache.reset()
        return self.cache

    @torch.inference_mode()
    def prompt(self, image: Image.Image, prompt: str = "fork") -> tuple[list[int], torch.Tensor, int]:
        """Prompt ids, their embeddings [n, H] (image rows in place) and the tile count of a page."""
        pixels = preprocess(image, self.config).to(self.device)
        with torch.autocast(self.device.type, dtype=self.vision_autocast, enabled=self.vision_autocast is not None):
            rows = self.model.encode_images(pixels).to(self.dtype)
        ids = self.tokenizer.prompt_ids(INSTRUCTIONS[prompt], rows.shape[0])
        embeds = self.model.embed_prompt(torch.tensor(ids, device=self.device), rows, self.special.image_context)
        return ids, embeds, pixels.shape[0]

    @torch.inference_mode()
    def _start_page(self, index: int, image: Image.Image, options: ParseOptions, cache: KVCache) -> PageRun:
        """Vision encoding and prompt prefill: the page's layout branch, ready to decode."""
        started = time.perf_counter()
        ids, embeds, tiles = self.prompt(image, options.prompt)
        vision_done = time.perf_counter()
        row = cache.alloc()
        positions = torch.arange(len(ids), device=self.device)[None]
        h = self.model.lm.model(embeds[None], positions, cache, [row])[0, -1]
        cache.crop(row, len(ids))
        cache.share(row)  # the prompt: attended once per round for all the page's branches
        parent = Branch(page=index, id=0, row=row, pending=int(self.model.lm.logits(h).argmax()), hidden=h,
                        budget=options.max_new_tokens, can_fork=options.prompt == "fork",
                        stream=self.tokenizer.stream())
        now = time.perf_counter()
        return PageRun(index, image.size, [parent], Counts(), len(ids), tiles,
                       vision_done - started, now - vision_done, started, decode_started=now)

    def _started(self, run: PageRun) -> PageStarted:
        return PageStarted(run.index, run.image_size, run.tiles, run.prompt_tokens,
                           run.vision_seconds, run.prefill_seconds)

    @torch.inference_mode()
    def _start_children(self, requests: list[tuple[PageRun, int, int]], cache: KVCache,
                        options: ParseOptions) -> list[Branch]:
        """Children for (run, row, p): `<CHILD>` fed at p in `row`, forked from the parent's
        prefix [0, p); all in one forward."""
        ids = torch.full((len(requests), 1), self.special.child, device=self.device)
        positions = torch.tensor([[p] for _, _, p in requests])  # on the host (`Decoder.forward`)
        h = self.model.lm.model(self.model.lm.embed(ids), positions, cache, [row for _, row, _ in requests])[:, 0]
        pending = self.model.lm.logits(h).argmax(-1).tolist()
        for run in {id(r): r for r, _, _ in requests}.values():
            run.counts = run.counts.after_forks([p for r, _, p in requests if r is run])
        children = []
        for (run, row, p), token, hidden in zip(requests, pending, h):
            cache.crop(row, p + 1)
            children.append(self._new_child(run, p, row, token, hidden, options))
        return children

    def _new_child(self, run: PageRun, p: int, row: int, pending: int, hidden: torch.Tensor,
                   options: ParseOptions) -> Branch:
        """The page's next child branch, forked at KV position p, with the label and box of the
        layout branch's block header before it; added to the run's live branches."""
        budget = min(options.max_new_tokens, self.config.llm_config.max_position_embeddings - p - 1)
        child = Branch(page=run.index, id=len(run.branches), row=row, pending=pending, hidden=hidden,
                       budget=max(budget, 1), can_fork=False, stream=self.tokenizer.stream(), position=p)
        header = run.branches[0].headers.get(p - run.prompt_tokens)
        if header is not None:
            child.label, child.bbox = header.label, header.bbox
        run.branches.append(child)
        run.live += 1
        return child

    # ---- decoding ---------------------------------------------------------------------------

    def _advance(self, runs: dict[int, PageRun], branches: list[Branch], cache: KVCache, options: ParseOptions):
        """One decode round over `branches`; yields their token events and returns the fork
        requests [(run, parent row, p)] for each `<FORK>` a forking branch emitted."""
        out = speculative.step(self.model.lm, cache, [b.row for b in branches], [b.pending for b in branches],
                               torch.stack([b.hidden for b in branches]), options.draft_tokens,
                               options.draft_confidence)
        forks, by_page = [], {}
        for i, b in enumerate(branches):
            by_page.setdefault(b.page, []).append(i)
        for page, mine in by_page.items():
            runs[page].counts = runs[page].counts.after_round([out.accepted[i] for i in mine], out.drafts)
        for i, b in enumerate(branches):
            run = runs[b.page]
            b.pending, b.hidden = out.pending[i], out.hidden[i]
            drafted = [False] + [True] * out.accepted[i]
            kept, flags, pieces = b.accept(out.emitted[i], drafted, self.special.stop, options.loop_window,
                                           self.special.fork)
            run.tokens += len(kept)
            yield TokensAppended(run.index, b.id, tuple(kept), tuple(flags), tuple(pieces), "".join(pieces),
                                 out.drafts, run.counts.rounds, run.elapsed(), run.counts)
            if b.can_fork:
                forks += [(run, b.row, out.starts[i] + j) for j, t in enumerate(kept) if t == self.special.fork]
            if not b.finished and run.tokens >= options.max_page_tokens:
                b.finish_reason = "page_budget"
        return forks

    def _finish_branch(self, run: PageRun, branch: Branch) -> Event:
        run.live -= 1
        return BranchFinished(run.index, branch.id, branch.finish_reason, len(branch.tokens), run.elapsed())

    def _decode_serial(self, run: PageRun, cache: KVCache, options: ParseOptions,
                       cancel: threading.Event | None) -> Iterator[Event]:
        """Layout branch; each child decoded to its end as soon as it forks."""
        parent = run.branches[0]
        runs = {run.index: run}
        while not parent.finished:
            if cancelled(cancel):
                parent.finish_reason = "cancelled"
                break
            forks = yield from self._advance(runs, [parent], cache, options)
            for _, row, p in forks:
                [child] = self._start_children([(run, cache.fork(row, p), p)], cache, options)
                yield self._forked(run, child)
                while not child.finished:
                    if cancelled(cancel):
                        child.finish_reason = "cancelled"
                        break
                    yield from self._advance(runs, [child], cache, options)
                yield self._finish_branch(run, child)
                cache.free(child.row)
        yield self._finish_branch(run, parent)
        cache.free(parent.row)
        yield PageFinished(run.index, self._result(run))

    def _decode_rounds(self, images: list[Image.Image], cache: KVCache, options: ParseOptions,
                       cancel: threading.Event | None) -> Iterator[Event]:
        """Rounds over all live branches of the pages in flight, at most `max_active_branches` per
        round. Priority: newly forked children, then unfinished branches in order, then the
        waiting. A page starts (vision, prefill) when fewer than `max_pages_in_flight` are
        unfinished, so its layout branch joins the next round: memory holds that many pages."""
        runs_by_index: dict[int, PageRun] = {}
        pending = iter(enumerate(images))
        queue: list[Branch] = []
        limit = self.max_pages_in_flight or len(images)
        in_flight = 0

        def admit() -> Iterator[Event]:
            nonlocal in_flight
            while in_flight < limit or cancelled(cancel):
                i, image = next(pending, (None, None))
                if image is None:
                    return
                if cancelled(cancel):
                    yield unstarted(i, image)
                    continue
                run = runs_by_index[i] = self._start_page(i, image, options, cache)
                queue.append(run.branches[0])
                in_flight += 1
                yield self._started(run)

        yield from admit()
        while queue:
            if cancelled(cancel):
                for b in queue:
                    b.finish_reason = "cancelled"
                active, children = queue, []
            else:
                active = queue[:options.max_active_branches]
                forks = yield from self._advance(runs_by_index, active, cache, options)
                requests = [(run, cache.fork(row, p), p) for run, row, p in forks]
                children = self._start_children(requests, cache, options) if requests else []
                for child in children:
                    yield self._forked(runs_by_index[child.page], child)
            waiting = queue[len(active):]
            for b in active:
                if b.finished:
                    run = runs_by_index[b.page]
                    yield self._finish_branch(run, b)
                    cache.free(b.row)
                    if run.live == 0:
                        in_flight -= 1
                        yield PageFinished(run.index, self._result(run))
            queue[:] = children + [b for b in active if not b.finished] + waiting
            yield from admit()

    def _forked(self, run: PageRun, child: Branch) -> BranchForked:
        return BranchForked(run.index, child.id, child.position, child.label, child.bbox, run.elapsed(), run.counts)

    # ---- results ----------------------------------------------------------------------------

    def _result(self, run: PageRun) -> ParseResult:
        parent, children = run.branches[0], run.branches[1:]
        ids, child_iter = [], iter(children)
        for token in parent.tokens:
            child = next(child_iter, None) if parent.can_fork and token == self.special.fork else None
            ids += [self.special.child] + child.tokens if child is not None else [token]
        text = self.tokenizer.decode(ids).strip()
        blocks = parse_blocks(text)
        now = time.perf_counter()
        stats = Stats(prompt_tokens=run.prompt_tokens, tiles=run.tiles, parent_tokens=len(parent.tokens),
                      child_tokens=tuple(len(b.tokens) for b in children), **run.counts.as_fields(),
                      vision_seconds=run.vision_seconds, prefill_seconds=run.prefill_seconds,
                      decode_seconds=now - run.decode_started, wall_seconds=now - run.started)
        records = tuple(BranchRecord(b.id, b.label, b.bbox, b.position, tuple(b.tokens), tuple(b.drafted),
                                     b.text, b.finish_reason) for b in run.branches)
        cancelled_ = any(b.finish_reason == "cancelled" for b in run.branches)
        return ParseResult(text, blocks, to_markdown(blocks), stats, run.image_size, records, cancelled_)


def unstarted(index: int, image: Image.Image) -> PageFinished:
    """A page not started before a cancel: it still gets a (cancelled, empty) result."""
    return PageFinished(index, ParseResult("", [], "", Stats(), image.size, cancelled=True))


def cancelled(cancel: threading.Event | None) -> bool:
    return cancel is not None and cancel.is_set()
