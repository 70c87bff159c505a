"""hpd-bench: decoding speed of one model on the same pages, every mode, in one run.

    hpd-bench [--model PATH] [--pages 2 | --inputs FILES] [--ks 2,4,6,8] [--pages-per-batch 1,4]

Matrix: {plain, fork-serial, fork-batched} x {MTP off, MTP on for each k}: each page is decoded
alone (`engine.parse`), the cell sums over pages. Page batching: `--pages-per-batch` B decodes B
pages together (`engine.parse_batch`; pages cycled when fewer than B; max_active_branches
scaled by B) for plain AR and for fork-batched with and without P-MTP. fork-serial decodes the pages of a
batch one after another by design, so it is not swept. Every MTP-on cell is checked token for
token against MTP off in the same mode, fork-batched against fork-serial, and every swept
batch against the pages decoded alone.

Writes <out>/results.md (the tables, with date, hardware, torch, model), results.json (all
numbers), speedup.png (speedup and forward reduction vs plain AR, by k) and batching.png
(tokens/s by pages per batch). Default pages: synthetic dense pages, seeds from 10,000,000
(never used in training). One page is decoded first, untimed, in every mode and draft count, to warm up
(the vllm backend makes its `LLM` of each draft count then); with --repeats R
every cell runs R times, round-robin over the cells, and reports its fastest run.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import sys
import threading
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Sequence

import psutil
import torch

from hpd_tools.backends import add_backend_argument, backend_options, is_url, open_engine
from hpd_tools.files import safe_name, write_atomic
from hpd_core.documents import DocumentError, load_pages
from hpd_core.engine import Engine
from hpd_core.loader import ModelNotFound
from hpd_core.options import ParseOptions

MODES = {"plain": dict(prompt="plain"), "fork-serial": dict(prompt="fork", batch_children=False),
         "fork-batched": dict(prompt="fork", batch_children=True)}
BENCH_SEED = 10_000_000  # synthetic seeds from here on are never used in training
RESULTS = Path(__file__).resolve().parent.parent / "bench" / "results"


@dataclass(frozen=True)
class Cell:
    """Sums over the pages of one configuration."""
    mode: str
    k: int                      # P-MTP drafts per step; 0 = MTP off
    batch: int                  # pages decoded together
    pages: int
    wall_seconds: float         # vision + prefill + decode, all pages
    prefill_seconds: float      # vision encoding + prompt prefill, all pages (the rest of wall is decoding)
    forwards: int               # LM forwards after the prompt prefills (one forward serves a whole batch)
    generated_tokens: int
    branch_steps: int
    drafted_tokens: int
    accepted_tokens: int
    accepted_by_position: tuple[int, ...]
    peak_active_branches: int
    peak_memory_mib: float      # RSS (CPU) or allocator peak (CUDA) during the cell
    exact: bool | None = None   # same tokens as its reference; None for a reference itself

    @property
    def tokens_per_second(self) -> float:
        return self.generated_tokens / self.wall_seconds

    @property
    def pages_per_second(self) -> float:
        return self.pages / self.wall_seconds

    @property
    def tau(self) -> float:
        """Mean accepted length: tokens emitted per branch step."""
        return 1 + self.accepted_tokens / self.branch_steps if self.branch_steps else 0.0

    @property
    def acceptance_by_position(self) -> tuple[float, ...]:
        return tuple(n / self.branch_steps for n in self.accepted_by_position) if self.k else ()

    def as_dict(self) -> dict:
        return {**asdict(self), "tokens_per_second": self.tokens_per_second,
                "pages_per_second": self.pages_per_second, "tau": self.tau,
                "acceptance_rate": self.accepted_tokens / self.drafted_tokens if self.drafted_tokens else 0.0,
                "acceptance_by_position": self.acceptance_by_position}


# ---- measuring ----------------------------------------------------------------------------

class PeakMemory:
    """Peak memory in MiB over a `with` block: process RSS sampled every 10 ms on CPU, the
    allocator's peak on CUDA."""

    def __init__(self, device: str):
        self.cuda, self.mib = device.startswith("cuda"), 0.0
        self.done = threading.Event()

    def __enter__(self) -> PeakMemory:
        if self.cuda:
            torch.cuda.reset_peak_memory_stats()
        else:
            self.sampler = threading.Thread(target=self._sample, daemon=True)
            self.sampler.start()
        return self

    def _sample(self) -> None:
        process = psutil.Process()
        while True:
            self.mib = max(self.mib, process.memory_info().rss / 2**20)
            if self.done.wait(0.01):
                return

    def __exit__(self, *exc) -> None:
        if self.cuda:
            torch.cuda.synchronize()
            self.mib = torch.cuda.max_memory_allocated() / 2**20
        else:
            self.done.set()
            self.sampler.join()


@dataclass(frozen=True)
class Job:
    mode: str
    options: ParseOptions
    batches: tuple[tuple, ...]  # pages decoded together by one `parse_batch`, batch after batch

    @property
    def label(self) -> str:
        return f"{self.mode} k={self.options.draft_tokens} batch={len(self.batches[0])}"


@dataclass(frozen=True)
class Run:
    wall_seconds: float
    peak_memory_mib: float
    forwards: int
    results: list


def timed(engine, job: Job, device: str) -> Run:
    """One run of `job`. Forwards are counted at the decoder, so a round that decodes the
    branches of many pages counts once (each page's own `Stats.forwards` counts it too); vLLM's
    decoder is not ours to hook: there they are the pages' `Stats.forwards` summed."""
    results, calls = [], []
    hooked = isinstance(engine, Engine)
    hook = engine.model.lm.model.register_forward_pre_hook(lambda *_: calls.append(None)) if hooked else None
    try:
        with PeakMemory(device) as memory:
            start = time.perf_counter()
            for batch in job.batches:
                results += engine.parse_batch(batch, job.options)
            wall = time.perf_counter() - start
    finally:
        if hook is not None:
            hook.remove()
    forwards = len(calls) - len(results) if hooked else sum(r.stats.forwards for r in results)
    return Run(wall, memory.mib, forwards, results)  # less one prefill per page


def measure(engine, jobs: Sequence[Job], device: str, repeats: int, log) -> list[tuple[Cell, list]]:
    """(Cell of its fastest run, results in page order) per job. The jobs run round-robin,
    `repeats` times, so that a burst of load from elsewhere on the machine slows one run of
    several cells rather than every run of one cell. Greedy decoding: every run gives the same tokens."""
    runs: list[list[Run]] = [[] for _ in jobs]
    for r in range(repeats):
        for job, mine in zip(jobs, runs):
            mine.append(timed(engine, job, device))
            log(f"{job.label} run {r + 1}/{repeats}: {mine[-1].wall_seconds:.2f} s")
    return [(cell(job, min(mine, key=lambda run: run.wall_seconds)), mine[0].results)
            for job, mine in zip(jobs, runs)]


def cell(job: Job, run: Run) -> Cell:
    stats = [r.stats for r in run.results]
    k = job.options.draft_tokens
    return Cell(mode=job.mode, k=k, batch=len(job.batches[0]), pages=len(stats), wall_seconds=run.wall_seconds,
                prefill_seconds=sum(s.vision_seconds + s.prefill_seconds for s in stats),
                forwards=run.forwards,
                generated_tokens=sum(s.generated_tokens for s in stats),
                branch_steps=sum(s.branch_steps for s in stats),
                drafted_tokens=sum(s.drafted_tokens for s in stats),
                accepted_tokens=sum(s.accepted_tokens for s in stats),
                accepted_by_position=tuple(sum(s.accepted_by_position[i] for s in stats
                                               if i < len(s.accepted_by_position)) for i in range(k)),
                peak_active_branches=max(s.peak_active_branches for s in stats),
                peak_memory_mib=run.peak_memory_mib)


def token_ids(results) -> list[list[tuple[int, ...]]]:
    return [[b.token_ids for b in r.branches] for r in results]


def run_matrix(engine, pages, ks: Sequence[int], base: ParseOptions, device: str, repeats: int,
               log) -> tuple[list[Cell], dict]:
    """The mode x k cells, each page decoded alone; and the token ids of each mode with MTP
    off (the references)."""
    jobs = [Job(mode, replace(base, **fields, use_mtp=k > 0, num_speculative_tokens=k or 1),
                tuple((p,) for p in pages)) for mode, fields in MODES.items() for k in (0, *ks)]
    cells, references = [], {}
    for c, results in measure(engine, jobs, device, repeats, log):
        ids = references.setdefault(c.mode, token_ids(results))
        cells.append(replace(c, exact=None if c.k == 0 else token_ids(results) == ids))
        log(f"{c.mode} k={c.k}: {c.wall_seconds:.2f} s, {c.forwards} forwards, "
            f"{c.tokens_per_second:.0f} tok/s, tau {c.tau:.2f}, exact {cells[-1].exact}")
    return cells, references


def run_sweep(engine, pages, sizes: Sequence[int], k: int, base: ParseOptions, references: dict,
              device: str, repeats: int, log) -> list[Cell]:
    """Pages per batch for plain AR and fork-batched with and without P-MTP, each checked against
    its pages decoded alone. The engine's `max_active_branches` caps a round over all pages of a
    batch, so it is scaled by the batch size here: each page keeps the same branch budget."""
    configs = [("plain", replace(base, **MODES["plain"], use_mtp=False)),
               ("fork-batched", replace(base, **MODES["fork-batched"], use_mtp=False)),
               ("fork-batched", replace(base, **MODES["fork-batched"], use_mtp=True, num_speculative_tokens=k))]
    jobs = [Job(mode, replace(options, max_active_branches=base.max_active_branches * size),
                (tuple(pages[i % len(pages)] for i in range(size)),))
            for mode, options in configs for size in sizes]
    cells = []
    for c, results in measure(engine, jobs, device, repeats, log):
        expected = [references[c.mode][i % len(pages)] for i in range(c.batch)]
        cells.append(replace(c, exact=token_ids(results) == expected))
        log(f"batch {c.batch} {c.mode} k={c.k}: {c.wall_seconds:.2f} s, {c.tokens_per_second:.0f} tok/s, "
            f"{c.pages_per_second:.3f} pages/s, exact {cells[-1].exact}")
    return cells


# ---- reporting ----------------------------------------------------------------------------

def hardware(device: str) -> str:
    if device.startswith("cuda"):
        return f"{torch.cuda.get_device_name()} (CUDA {torch.version.cuda})"
    cpuinfo = Path("/proc/cpuinfo")
    names = [line.split(":", 1)[1].strip() for line in
             (cpuinfo.read_text().splitlines() if cpuinfo.exists() else []) if line.startswith("model name")]
    cpu = names[0] if names else platform.processor() or platform.machine()
    return f"{cpu}, {os.cpu_count()} cores, {torch.get_num_threads()} torch threads"


def baseline(cells: Sequence[Cell], mode: str) -> Cell:
    return next(c for c in cells if c.mode == mode and c.k == 0)


def matrix_table(cells: Sequence[Cell]) -> str:
    ar = baseline(cells, "plain")
    rows = ["| mode | k | wall s | vision+prefill s | forwards | tokens | tok/s | pages/s | τ | "
            "accepted by position | peak branches | peak MiB | exact | forwards ÷ | speedup vs AR | "
            "speedup vs MTP off |", "|" + "---|" * 16]
    for c in cells:
        off = baseline(cells, c.mode)
        by_pos = " ".join(f"{a:.2f}" for a in c.acceptance_by_position) or "–"
        rows.append(f"| {c.mode} | {c.k or 'off'} | {c.wall_seconds:.2f} | {c.prefill_seconds:.2f} | "
                    f"{c.forwards} | {c.generated_tokens} | "
                    f"{c.tokens_per_second:.0f} | {c.pages_per_second:.3f} | {c.tau:.2f} | {by_pos} | "
                    f"{c.peak_active_branches} | {c.peak_memory_mib:.0f} | {mark(c.exact)} | "
                    f"{ar.forwards / c.forwards:.2f}× | {ar.wall_seconds / c.wall_seconds:.2f}× | "
                    f"{off.wall_seconds / c.wall_seconds:.2f}× |")
    return "\n".join(rows)


def sweep_table(cells: Sequence[Cell]) -> str:
    rows = ["| mode | k | pages/batch | wall s | forwards | tokens | tok/s | pages/s | peak branches | "
            "peak MiB | exact | pages/s vs plain AR |", "|" + "---|" * 12]
    for c in cells:
        ar = next(a for a in cells if a.mode == "plain" and a.batch == c.batch)
        rows.append(f"| {c.mode} | {c.k or 'off'} | {c.batch} | {c.wall_seconds:.2f} | {c.forwards} | "
                    f"{c.generated_tokens} | {c.tokens_per_second:.0f} | {c.pages_per_second:.3f} | "
                    f"{c.peak_active_branches} | {c.peak_memory_mib:.0f} | {mark(c.exact)} | "
                    f"{c.pages_per_second / ar.pages_per_second:.2f}× |")
    return "\n".join(rows)


def mark(exact: bool | None) -> str:
    return {None: "ref", True: "yes", False: "**NO**"}[exact]


def report(meta: dict, cells: Sequence[Cell], sweep: Sequence[Cell], serial_equals_batched: bool) -> str:
    lines = [f"# hpd-bench: {meta['model']}", "",
             *(f"- {key}: {value}" for key, value in meta.items()), "",
             "## Modes × P-MTP (pages decoded one at a time)", "", matrix_table(cells), "",
             "`exact`: token ids of every branch of every page equal those of the same mode with MTP off. "
             f"fork-batched == fork-serial (MTP off): {mark(serial_equals_batched)}.", "",
             "## Pages per batch", "", sweep_table(sweep), "",
             "fork-serial decodes the pages of a batch one after another by design; it is not swept. "
             "`exact`: every page equals the same page decoded alone.", "",
             "![speedup](speedup.png) ![batching](batching.png)", ""]
    return "\n".join(lines)


def plot(cells: Sequence[Cell], sweep: Sequence[Cell], out: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    ar = baseline(cells, "plain")
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    for mode in MODES:
        mine = [c for c in cells if c.mode == mode]
        ks = [c.k for c in mine]
        left.plot(ks, [ar.wall_seconds / c.wall_seconds for c in mine], marker="o", label=mode)
        right.plot(ks, [ar.forwards / c.forwards for c in mine], marker="o", label=mode)
    for ax, title in ((left, "wall-clock speedup vs plain AR"), (right, "fewer decode forwards vs plain AR")):
        ax.set(xlabel="P-MTP drafts k (0 = off)", ylabel="×", title=title, xticks=sorted({c.k for c in cells}))
        ax.grid(alpha=0.3)
        ax.legend()
    fig.tight_layout()
    fig.savefig(out / "speedup.png", dpi=80)
    fig, ax = plt.subplots(figsize=(5, 4))
    for mode, k in sorted({(c.mode, c.k) for c in sweep}, key=lambda mk: (mk[0] != "plain", mk)):
        mine = [c for c in sweep if (c.mode, c.k) == (mode, k)]
        ax.plot([c.batch for c in mine], [c.tokens_per_second for c in mine], marker="o",
                label=f"{mode} (k={k})" if k else f"{mode}, MTP off")
    ax.set(xscale="log", xlabel="pages per batch", ylabel="tokens/s", title="throughput by batch")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(out / "batching.png", dpi=80)
    plt.close("all")


# ---- entry point --------------------------------------------------------------------------

def int_list(text: str) -> list[int]:
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError as err:
        raise argparse.ArgumentTypeError(f"expected numbers like 1,4,16, got {text!r}") from err
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"expected positive numbers, got {text!r}")
    return values


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="hpd-bench", description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", help="bundled model (hpd-tiny, hpd-tiny-docs), checkpoint folder or hub "
                                          "repo id (default: hpd-tiny)")
    add_backend_argument(parser, vllm_server=False)  # it measures MTP on and off, which a server cannot
    source = parser.add_mutually_exclusive_group()
    source.add_argument("--pages", type=int, default=2, help="synthetic dense pages (default 2)")
    source.add_argument("--inputs", nargs="+", type=Path,
                        help="PDFs/images instead (all their pages; PDFs at the model's render DPI)")
    parser.add_argument("--seed", type=int, default=BENCH_SEED, help="first synthetic seed")
    parser.add_argument("--font-size", type=float, nargs=2, metavar=("LO", "HI"),
                        help="body text size range in px of the synthetic pages (default: the dense preset's, "
                             "14-17; the bundled model reads 20-28)")
    parser.add_argument("--device", choices=("cpu", "cuda"), help="default: cuda when available")
    parser.add_argument("--dtype", choices=("float32", "bfloat16", "float64"),
                        help="default: float32 on CPU, bfloat16 on CUDA")
    parser.add_argument("--threads", type=int, help="torch CPU threads (default: torch's; 1 on a busy machine, "
                        "where waiting for a descheduled thread stalls every op)")
    parser.add_argument("--ks", type=int_list, default=[2, 4, 6, 8], help="P-MTP draft lengths (1-10)")
    parser.add_argument("--pages-per-batch", type=int_list, help="default 1,4 on CPU, 1,16,64,256 on CUDA")
    parser.add_argument("--sweep-k", type=int, default=6, help="k of fork-batched + P-MTP in the batch sweep")
    parser.add_argument("--draft-confidence", type=float, default=ParseOptions.draft_confidence,
                        help="stop drafting where no draft reaches this probability (0: always k drafts)")
    parser.add_argument("--max-new-tokens", type=int, default=8000, help="per branch")
    parser.add_argument("--max-active-branches", type=int, default=64)
    parser.add_argument("--max-pages-in-flight", type=int, default=0,
                        help="the most pages a batch holds at once, later ones starting as earlier ones finish "
                             "(in-process engine; 0: the whole batch)")
    parser.add_argument("--repeats", type=int, default=1,
                        help="runs of every cell (round-robin); each cell reports its fastest")
    parser.add_argument("--out", type=Path, help="output folder (default bench/results/<model>-<device>)")
    return parser


def load_bench_pages(args, dpi: float) -> tuple[list, str]:
    """Page images (PDFs rendered at `dpi`) and a description of them."""
    if args.inputs:
        pages = [p.image for f in args.inputs for p in load_pages(f, dpi=dpi)]
        return pages, f"{len(pages)} pages of {', '.join(f.name for f in args.inputs)} at {dpi:g} dpi"
    from hpd_training.synth import SynthConfig, render_page  # pymupdf: only for synthetic pages

    config = SynthConfig.dense(**({"font_size_range": tuple(args.font_size)} if args.font_size else {}))
    seeds = range(args.seed, args.seed + args.pages)
    pages = [render_page(s, config).image for s in seeds]
    low, high = config.font_size_range
    return pages, f"{args.pages} synthetic dense pages, font size {low:g}-{high:g} px, seeds {seeds.start}-{seeds.stop - 1}"


def setup(parser: argparse.ArgumentParser, args) -> tuple:
    """(engine, pages, their description, base options, device), or a usage error."""
    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    try:
        if args.repeats < 1:
            raise ValueError("--repeats must be at least 1")
        if args.threads is not None:
            if args.threads < 1:
                raise ValueError("--threads must be at least 1")
            torch.set_num_threads(args.threads)
        base = ParseOptions(max_new_tokens=args.max_new_tokens, max_active_branches=args.max_active_branches,
                            draft_confidence=args.draft_confidence)
        for k in (*args.ks, args.sweep_k):
            ParseOptions(num_speculative_tokens=k)
        if is_url(args.model):
            raise ValueError(f"{args.model} is a server; hpd-bench measures a local engine (a folder or hub id)")
        if args.max_pages_in_flight and args.backend != "hpd":
            raise ValueError("--max-pages-in-flight is the in-process engine's "
                             "(vLLM admits pages by its own KV memory)")
        in_flight = {"max_pages_in_flight": args.max_pages_in_flight} if args.max_pages_in_flight else {}
        engine = open_engine(args.model, device=device, dtype=getattr(torch, args.dtype) if args.dtype else None,
                             **backend_options(args), **in_flight)
        if not engine.info.mtp:
            raise ValueError(f"{engine.info.name} offers no P-MTP drafts (no head, or a backend without them "
                             "here: docs/serving.md); hpd-bench compares MTP on and off")
        pages, described = load_bench_pages(args, engine.info.render_dpi)
    except (ValueError, ModelNotFound) as err:  # DocumentError is a ValueError
        parser.error(f"--inputs: {err}" if isinstance(err, DocumentError) else str(err))
    return engine, pages, described, base, device


def write_results(out: Path, meta: dict, cells: list[Cell], sweep: list[Cell], serial_equals_batched: bool) -> str:
    text = report(meta, cells, sweep, serial_equals_batched)
    out.mkdir(parents=True, exist_ok=True)
    write_atomic(out / "results.md", text)
    write_atomic(out / "results.json", json.dumps(
        {"meta": meta, "matrix": [c.as_dict() for c in cells], "sweep": [c.as_dict() for c in sweep],
         "fork_batched_equals_serial": serial_equals_batched}, indent=1))
    plot(cells, sweep, out)
    return text


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    engine, pages, described, base, device = setup(parser, args)
    started = time.perf_counter()

    def log(message: str) -> None:
        print(f"[{time.perf_counter() - started:6.1f} s] {message}", file=sys.stderr, flush=True)

    log(f"{engine.info.name} on {device}: {described}; warming up")
    for fields in MODES.values():  # MTP off and on: the vllm backend makes an `LLM` per draft count on first use
        for k in {0, *args.ks, args.sweep_k}:
            engine.parse(pages[0], replace(base, **fields, max_new_tokens=16, use_mtp=k > 0, num_speculative_tokens=k or 1))
    info = engine.info
    meta = {"date": datetime.datetime.now().isoformat(timespec="seconds"), "hardware": hardware(device),
            "torch": torch.__version__, "model": f"{info.name} ({info.parameters:,} parameters, {info.dtype})",
            "model_path": info.path, "pages": described, "max_new_tokens": args.max_new_tokens,
            "max_active_branches": args.max_active_branches, "max_pages_in_flight": args.max_pages_in_flight,
            "draft_confidence": args.draft_confidence, "repeats": args.repeats}
    out = args.out or RESULTS / safe_name(f"{info.name}-{device}")
    cells, references = run_matrix(engine, pages, args.ks, base, device, args.repeats, log)
    same = references["fork-serial"] == references["fork-batched"]
    write_results(out, meta, cells, [], same)  # the matrix is kept if the sweep is cut short
    log(f"wrote the matrix to {out}; batch sweep next")
    sizes = args.pages_per_batch or ([1, 16, 64, 256] if device == "cuda" else [1, 4])
    sweep = run_sweep(engine, pages, sizes, args.sweep_k, base, references, device, args.repeats, log)
    print(write_results(out, meta, cells, sweep, same))
    log(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
