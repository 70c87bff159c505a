"""`VLLMEngine`: the engine API (`hpd_core.engine.Engine`'s) with stock vLLM running the language model.

    engine = hpd_vllm.load_engine(None)            # the bundled model, converted on the fly
    result = engine.parse(image, ParseOptions(batch_children=True))

How a page is decoded:
- Our preprocessing and vision tower make the prompt (`Engine.prompt`); vLLM gets it in mixed mode:
  the token ids, and our embeddings at the `<IMG_CONTEXT>` positions (`prompt_is_token_ids`).
- The layout branch is one request. Each `<FORK>` it emits at KV position p starts a child request
  on `prompt + parent[0, p) + <CHILD>`; vLLM's prefix cache supplies the shared prefix (each
  block's hash covers its prompt embeddings, so children share the page prompt and each other's
  prompts, but not the parent's generated blocks: see docs/serving.md).
- Batched (`batch_children`) and plain: every request in flight at once, at most
  `max_active_branches` (new children first). Serial: the layout request stops at each `<FORK>`
  (a stop token), the child runs alone, then the layout branch continues as a new request.
- P-MTP (`use_mtp`): the head runs inside vLLM as its draft model (method "eagle", hpd_vllm/draft.py),
  `num_speculative_tokens` drafts per step; vLLM needs one `LLM` per draft count, made on first use.
- Or a `vllm serve` process runs the language model (`server`, remote.py's `ServerLM`): the same
  requests over HTTP, without P-MTP.

Promises: the same events, branch records, text, blocks and Markdown as `Engine` (greedy tokens are
the model's; tests/test_vllm_backend.py checks them token for token against the in-process engine),
the same errors for bad input, and `Stats` with these meanings where vLLM differs:
- `forwards` = `rounds`: vLLM steps that advanced the page after its prompt prefill (a step mixes
  child prefills with decodes, so there are no separate child-prefill forwards);
- `shared_prefix_tokens`: Σ over child requests of vLLM's `num_cached_tokens` (prefix-cache hits);
- `branch_steps`: decode steps per request (its first output, from its prefill, is not one);
  `drafted_tokens` = k per step (vLLM always drafts k: `draft_confidence` has no effect);
  `accepted_tokens`, `accepted_by_position`: per step, the tokens it returned minus one; where a
  request stopped inside a step the drafts accepted after the stop are not reported by vLLM, so
  these are a lower bound (vLLM's own totals are in `llm.get_metrics()`), and the last token of
  such a step is flagged as not drafted.
"""

from __future__ import annotations

import itertools
import os
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace

import torch

from hpd_core.branch import Branch
from hpd_core.documents import as_image
from hpd_core.engine import Decoding, Engine, EngineInfo, PageRun, cancelled
from hpd_core.events import BranchForked, Event, PageFinished, TokensAppended
from hpd_core.options import ParseOptions
from hpd_core.result import Counts, ParseResult, Stats
from hpd_vllm.convert import VLLMFolders
from hpd_vllm.remote import ServerLM

# In-process vLLM on a CPU: no engine subprocess (it would re-import the caller), a bounded KV
# cache (GiB); set before vllm is imported, so the caller's environment wins.
VLLM_ENVIRONMENT = {"VLLM_ENABLE_V1_MULTIPROCESSING": "0", "VLLM_CPU_KVCACHE_SPACE": "1"}
NO_HIDDEN = torch.empty(0)  # vLLM holds the KV cache, the pending token and the hidden state
# `llm_arguments`' defaults on CUDA (the KV cache's size is added there, from the GPU's memory).
CUDA_DEFAULTS = {"enforce_eager": False, "gpu_memory_utilization": 0.3, "async_scheduling": False}


def llm_arguments(device: torch.device, given: dict) -> dict:
    """`vllm.LLM` arguments: the caller's over defaults by device. A CPU: eager (compiling takes
    ~40 s there). CUDA: torch.compile and CUDA graphs, and a fixed KV cache of a quarter of the
    GPU's memory per `LLM`: each draft count is its own `LLM` (MTP off and one k fit beside our
    vision tower and a third k), and with a size given vLLM skips its memory profiling, which fails
    for a second `LLM` in one process (the free memory moves while it profiles: seen with vLLM
    0.26). A caller's `gpu_memory_utilization` sizes the KV cache instead, as in vLLM. Scheduling is
    synchronous: vLLM 0.26's asynchronous path (its default for EAGLE on CUDA) verifies the drafts of
    prompt-embedding requests on stale embedding rows and writes wrong pages (fixed upstream by vLLM
    PR #57356); synchronous, its P-MTP pages were whole on the H200 (bench/NOTES.md)."""
    if device.type != "cuda":
        return {"enforce_eager": True, **given}
    defaults = dict(CUDA_DEFAULTS)
    if "gpu_memory_utilization" not in given:
        defaults["kv_cache_memory_bytes"] = torch.cuda.get_device_properties(device).total_memory // 4
    return {**defaults, **given}


def mtp_refusal(server: bool, device: torch.device, llm_kwargs: dict) -> str | None:
    """Why P-MTP drafts cannot run on this backend here, or None where they can."""
    if server:
        return ("use_mtp is not available through a vLLM server: vLLM 0.32 cannot draft for a prompt sent as "
                "embeddings (hpd_vllm/remote.py); decode with use_mtp off")
    if device.type == "cuda" and {**CUDA_DEFAULTS, **llm_kwargs}["async_scheduling"]:
        return ("use_mtp is not available on vLLM's CUDA build with async_scheduling: vLLM 0.26 then verifies "
                "drafts on stale embedding rows and writes wrong pages (bench/NOTES.md); leave async_scheduling "
                "at this backend's default (false) or decode with use_mtp off")
    return None


def set_environment() -> None:
    for name, value in VLLM_ENVIRONMENT.items():
        os.environ.setdefault(name, value)


def make_llm(folders: VLLMFolders, dtype: str, drafts: int, **kwargs):
    """A `vllm.LLM` of convert.py's `folders` as this backend runs it (prefix caching, prompt
    embeddings, statistics on), drafting `drafts` tokens a step with the P-MTP head (0: none)."""
    set_environment()
    from vllm import LLM
    spec = {"method": "eagle", "model": str(folders.draft), "num_speculative_tokens": drafts} if drafts else None
    return LLM(model=str(folders.lm), dtype=dtype, enable_prefix_caching=True, enable_prompt_embeds=True,
               disable_log_stats=False, speculative_config=spec, **kwargs)


def mixed_prompt(ids: list[int], embeds: torch.Tensor, is_token_ids: list[bool], tail: list[int]) -> dict:
    """vLLM's mixed prompt of a page prompt (`ids`, their `embeds` rows, `is_token_ids` False where
    the embedding is what counts) followed by token ids `tail` (zero rows: vLLM embeds their ids)."""
    return {"prompt_token_ids": ids + tail,
            "prompt_embeds": torch.cat([embeds, embeds.new_zeros(len(tail), embeds.shape[1])]),
            "prompt_is_token_ids": is_token_ids + [True] * len(tail)}


def check_llm_kwargs(kwargs: dict) -> None:
    """A ValueError naming the keywords that `vllm.LLM` would not take (it is made on first use,
    so a typo would otherwise surface only at the first page)."""
    if not kwargs:
        return  # nothing to check: vllm is imported when the first `LLM` is made
    import dataclasses
    set_environment()
    from vllm import EngineArgs
    unknown = sorted(set(kwargs) - {f.name for f in dataclasses.fields(EngineArgs)})
    if unknown:
        raise ValueError(f"not an argument of vllm.LLM: {', '.join(unknown)} (see vllm.EngineArgs)")


@dataclass(eq=False)
class Page:
    """A page being decoded: the engine's `PageRun` and the prompt every request of the page starts with."""
    run: PageRun
    ids: list[int]              # prompt token ids
    embeds: torch.Tensor        # [n, H]: their embeddings, image rows in place
    resume: "Request | None" = None  # serial mode: the layout branch's continuation after the running child


@dataclass(eq=False)
class Request:
    """A vLLM request of one branch (a serial layout branch makes one per stretch between forks)."""
    id: str
    page: Page
    branch: Branch
    tail: list[int]             # token ids after the page prompt: the parent's prefix (+ <CHILD>), or its own
    outputs: int = 0            # step outputs received; the first comes from the request's prefill
    hits_counted: bool = False  # its prefix-cache hits are in the page's Stats
    done: bool = False          # vLLM finished it
    submitted: float = 0.0


@dataclass
class Flight:
    """The requests of one `stream_batch` call: in vLLM, and waiting for a slot (children first)."""
    active: dict[str, Request] = field(default_factory=dict)
    waiting: list[Request] = field(default_factory=list)


class VLLMEngine(Decoding):
    def __init__(self, hpd: Engine, folders: VLLMFolders | None, *, llm_kwargs: dict | None = None,
                 server: ServerLM | None = None):
        """`hpd`: the in-process engine whose preprocessing, vision tower and tokenizer make the
        prompts (its decoder layers are not used); `folders`: convert.py's output for its checkpoint
        (None with a server);
        `server`: a `vllm serve` process of the converted language model that decodes instead of an
        in-process vLLM."""
        self.hpd, self.folders, self.server = hpd, folders, server
        self.tokenizer, self.config, self.special = hpd.tokenizer, hpd.config, hpd.special
        self.llm_kwargs = llm_kwargs or {}
        self.llms: dict[int, object] = {}       # draft count (0: no speculation) -> vllm.LLM
        self.ids = itertools.count()
        self.lock = threading.Lock()

    @property
    def info(self) -> EngineInfo:
        import vllm
        base = self.hpd.info
        if self.server is not None:
            return EngineInfo(f"{base.name} on the vLLM server at {self.server.url}", base.path, base.device,
                              base.dtype, base.parameters, False, base.vision_dtype, base.render_dpi)
        drafts = (base.mtp and self.folders.draft is not None
                  and mtp_refusal(False, self.hpd.device, self.llm_kwargs) is None)
        return EngineInfo(f"{base.name} on vLLM {vllm.__version__}", base.path, base.device, base.dtype,
                          base.parameters, drafts, base.vision_dtype, base.render_dpi)

    def engine(self, drafts: int):
        """What runs the requests: the server, or the in-process `LLM`'s engine for `drafts`."""
        if self.server is not None:
            return self.server
        return self.llm(drafts).llm_engine

    def llm(self, drafts: int):
        """The `vllm.LLM` that drafts `drafts` tokens per step (0: plain decoding), made on first use."""
        if drafts not in self.llms:
            self.llms[drafts] = make_llm(self.folders, str(self.hpd.dtype).removeprefix("torch."), drafts,
                                         max_model_len=self.config.llm_config.max_position_embeddings,
                                         **llm_arguments(self.hpd.device, self.llm_kwargs))
        return self.llms[drafts]

    # ---- public API (Engine's) --------------------------------------------------------------

    def stream_batch(self, pages: Sequence, options: ParseOptions = ParseOptions(),
                     cancel: threading.Event | None = None) -> Iterator[Event]:
        """Events of decoding `pages`; serial fork mode decodes them one after another."""
        refusal = options.use_mtp and mtp_refusal(self.server is not None, self.hpd.device, self.llm_kwargs)
        if refusal:
            raise ValueError(refusal)
        if options.use_mtp and not self.info.mtp:
            raise ValueError("use_mtp needs a P-MTP head, and this checkpoint has none")
        images = [as_image(p) for p in pages]
        with self.lock:
            engine = self.engine(options.draft_tokens)
            serial = options.prompt == "fork" and not options.batch_children
            started = []
            for i, image in enumerate(images):
                if cancelled(cancel):
                    yield PageFinished(i, ParseResult("", [], "", Stats(), image.size, cancelled=True))
                    continue
                started.append(self._start_page(i, image, options))
                yield self.hpd._started(started[-1].run)
                if serial:
                    yield from self._decode(engine, started[-1:], options, cancel)
            if not serial:
                yield from self._decode(engine, started, options, cancel)

    # ---- pages and requests -----------------------------------------------------------------

    def _start_page(self, index: int, image, options: ParseOptions) -> Page:
        """Vision encoding and the layout branch; its prefill happens in a vLLM step."""
        started = time.perf_counter()
        ids, embeds, tiles = self.hpd.prompt(image, options.prompt)
        parent = Branch(page=index, id=0, row=-1, pending=-1, hidden=NO_HIDDEN, budget=options.max_new_tokens,
                        can_fork=options.prompt == "fork", stream=self.tokenizer.stream())
        run = PageRun(index, image.size, [parent], Counts(), len(ids), tiles, time.perf_counter() - started, 0.0,
                      started)
        return Page(run, ids, embeds)

    def _request(self, page: Page, branch: Branch, tail: list[int]) -> Request:
        return Request(f"hpd-{next(self.ids)}-p{page.run.index}-b{branch.id}", page, branch, tail)

    def _submit(self, engine, request: Request, options: ParseOptions) -> None:
        """Add `request` to vLLM: page prompt + tail (`mixed_prompt`)."""
        from vllm import SamplingParams
        from vllm.sampling_params import RequestOutputKind
        ids, tail = request.page.ids, request.tail
        prompt = mixed_prompt(ids, request.page.embeds, [i != self.special.image_context for i in ids], tail)
        serial_parent = request.branch.can_fork and not options.batch_children
        stop = sorted(self.special.stop | ({self.special.fork} if serial_parent else set()))
        room = self.config.llm_config.max_position_embeddings - len(ids) - len(tail)
        budget = min(request.branch.budget - len(request.branch.tokens), room)
        params = SamplingParams(temperature=0.0, max_tokens=max(budget, 1), stop_token_ids=stop, detokenize=False,
                                skip_special_tokens=False, output_kind=RequestOutputKind.DELTA)
        engine.add_request(request.id, prompt, params)
        request.submitted = time.perf_counter()

    # ---- decoding ---------------------------------------------------------------------------

    def _decode(self, engine, pages: list[Page], options: ParseOptions,
                cancel: threading.Event | None) -> Iterator[Event]:
        """vLLM steps until every branch of `pages` has finished."""
        flight = Flight(waiting=[self._request(page, page.run.branches[0], []) for page in pages])
        limit = options.max_active_branches
        while flight.active or flight.waiting:
            if cancelled(cancel):
                yield from self._cancel(engine, flight)
                return
            while flight.waiting and len(flight.active) < limit:
                request = flight.waiting.pop(0)
                self._submit(engine, request, options)
                flight.active[request.id] = request
            outputs = [(flight.active[o.request_id], o) for o in engine.step() if o.request_id in flight.active]
            yield from self._advance(engine, flight, outputs, options)

    def _advance(self, engine, flight: Flight, outputs: list, options: ParseOptions) -> Iterator[Event]:
        """Book one vLLM step's outputs: tokens, forks, finished branches and pages."""
        by_page: dict[int, list] = {}
        for request, output in outputs:
            by_page.setdefault(request.page.run.index, []).append((request, output))
        for mine in by_page.values():
            run = mine[0][0].page.run
            if not run.decode_started:
                continue  # the step of the page's prompt prefill
            steps = [len(o.outputs[0].token_ids) - 1 for r, o in mine if r.outputs]  # accepted drafts
            run.counts = (run.counts.after_round(steps, options.draft_tokens) if steps
                          else replace(run.counts, forwards=run.counts.forwards + 1))  # child prefills only
        for request, output in outputs:
            yield from self._book(engine, flight, request, output, options)

    def _book(self, engine, flight: Flight, request: Request, output, options: ParseOptions) -> Iterator[Event]:
        page, branch = request.page, request.branch
        run = page.run
        first = request.outputs == 0
        request.outputs += 1
        if first and branch.id == 0 and not run.decode_started:
            run.prefill_seconds = time.perf_counter() - request.submitted
            run.decode_started = time.perf_counter()
        if branch.id > 0 and not request.hits_counted and output.num_cached_tokens is not None:
            request.hits_counted = True  # in process on the first output, from a server on the last
            run.counts = replace(run.counts, shared_prefix_tokens=run.counts.shared_prefix_tokens
                                 + output.num_cached_tokens)
        new = list(output.outputs[0].token_ids)
        drafted = [False] if first else [True] * (len(new) - 1) + [False]
        before = len(branch.tokens)
        kept, flags, pieces = branch.accept(new, drafted, self.special.stop, options.loop_window, self.special.fork)
        run.tokens += len(kept)
        yield TokensAppended(run.index, branch.id, tuple(kept), tuple(flags), tuple(pieces), "".join(pieces),
                             0 if first else options.draft_tokens, run.counts.rounds, run.elapsed(), run.counts)
        if branch.can_fork:
            for j, token in enumerate(kept):
                if token == self.special.fork:
                    yield self._fork(flight, page, before + j, options)
        if not branch.finished and run.tokens >= options.max_page_tokens:
            branch.finish_reason = "page_budget"
        request.done = output.finished
        if output.finished and not branch.finished and output.outputs[0].finish_reason == "length":
            branch.finish_reason = "length"  # the model's length limit, before the branch budget
        if branch.finished or request.done:
            del flight.active[request.id]
            if not request.done:
                engine.abort_request([request.id])
        if branch.finished:
            yield from self._finish(flight, page, branch)
        elif request.done:  # a serial layout branch stopped at <FORK>: it continues after the child
            page.resume = self._request(page, branch, branch.tokens.copy())

    def _fork(self, flight: Flight, page: Page, index: int, options: ParseOptions) -> BranchForked:
        """The child of the layout branch's `<FORK>` at token `index`, queued ahead of the waiting."""
        run = page.run
        parent = run.branches[0]
        child = self.hpd._new_child(run, run.prompt_tokens + index, -1, -1, NO_HIDDEN, options)
        run.counts = replace(run.counts, forked_branches=run.counts.forked_branches + 1)
        flight.waiting.insert(sum(r.branch.id > 0 for r in flight.waiting),
                              self._request(page, child, parent.tokens[:index] + [self.special.child]))
        return self.hpd._forked(run, child)

    def _finish(self, flight: Flight, page: Page, branch: Branch) -> Iterator[Event]:
        run = page.run
        yield self.hpd._finish_branch(run, branch)
        if branch.id > 0 and page.resume is not None:  # serial: the layout branch goes on after its child
            flight.waiting.insert(0, page.resume)
            page.resume = None
        if run.live == 0:
            yield PageFinished(run.index, self.hpd._result(run))

    def _cancel(self, engine, flight: Flight) -> Iterator[Event]:
        """Every unfinished branch of the call ends "cancelled", and so do its pages."""
        engine.abort_request([r.id for r in flight.active.values()])
        pages = {id(r.page): r.page for r in [*flight.active.values(), *flight.waiting]}
        flight.active.clear()
        flight.waiting.clear()
        for page in pages.values():
            page.resume = None
            for branch in page.run.branches:
                if not branch.finished:
                    branch.finish_reason = "cancelled"
                    yield from self._finish(flight, page, branch)
