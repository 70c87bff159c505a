"""Load test of the Gradio app: S simultaneous API sessions on loopback, bounded in count and time.

    python -m bench.load_app                   # the bundled model, 8 sessions x 1 parse
    python -m bench.load_app --tiny            # a tiny random checkpoint (tests/tiny.py)
    python -m bench.load_app [--model DIR] [--sessions 8] [--parses 1] [--max-new-tokens 8000]
                             [--deadline-s 600] [--out bench/results/app_load]

Starts `python -m app` (hpd-demo) on 127.0.0.1 at a free port (nothing else is reached), waits
until it answers, then S gradio_client sessions (one `Client` each, so one Gradio session each)
submit P parses each of a synthetic page (`/parse`, the Parse button's endpoint), one after
another within a session, all sessions at once. Every 0.05 s each session polls its job's
status: Gradio's queue rank while waiting (the app decodes one page at a time, so the others
queue). The server's resident memory is sampled every 0.1 s (psutil). Writes errors, queue
ranks seen, latency percentiles (submit -> result, including the wait in the queue), wait
in the queue, and RSS idle -> peak -> after to OUT.md and OUT.json.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from app.ui import ParsePanel
from bench.common import (HOST, RssSampler, add_model_arguments, app_option_values, free_port, model_of,
                          run_metadata, wait_ready)
from hpd_training.synth import render_page

RESULTS = Path(__file__).resolve().parent / "results"
POLL_SECONDS = 0.05
PARSE_FIELDS = ParsePanel._fields  # the /parse outputs, in order


@dataclass(frozen=True)
class Outcome:
    session: int
    seconds: float            # submit -> result
    queued_seconds: float     # submit -> the job left the queue
    ranks: tuple[int, ...]    # distinct queue ranks seen while waiting, in order
    tokens: int
    error: str


def start_app(model: str | None, port: int, log_path: Path, env: dict | None = None) -> subprocess.Popen:
    command = [sys.executable, "-m", "app", "--host", HOST, "--port", str(port)]
    command += ["--model", model] if model else []
    return subprocess.Popen(command, stdout=log_path.open("w"), stderr=subprocess.STDOUT,
                            env=os.environ | {"GRADIO_ANALYTICS_ENABLED": "False"} | (env or {}))


def parse_once(client, page: Path, max_new_tokens: int, session: int, timeout: float) -> Outcome:
    """One /parse job, polling its status until it is done."""
    from gradio_client import handle_file
    started = time.perf_counter()
    job = client.submit(handle_file(str(page)), 1, 90, "", "", *app_option_values(max_new_tokens=max_new_tokens),
                        api_name="/parse")
    ranks, queued = [], None
    while not job.done() and time.perf_counter() - started < timeout:
        status = job.status()
        if status.code.name == "IN_QUEUE" and status.rank is not None:
            if not ranks or ranks[-1] != status.rank:
                ranks.append(status.rank)
        elif queued is None and status.code.name in ("PROCESSING", "ITERATING"):
            queued = time.perf_counter() - started
        time.sleep(POLL_SECONDS)
    try:
        out = dict(zip(PARSE_FIELDS, job.result(timeout=max(timeout - (time.perf_counter() - started), 1))))
        tokens, error = out["json"]["stats"]["generated_tokens"], ""
    except Exception as err:  # a load test counts every kind of failure
        tokens, error = 0, f"{type(err).__name__}: {err}"[:160]
    seconds = time.perf_counter() - started
    return Outcome(session, seconds, seconds if queued is None else queued, tuple(ranks), tokens, error)


def run_sessions(url: str, page: Path, sessions: int, parses: int, max_new_tokens: int,
                 deadline_s: float) -> tuple[list[Outcome], float]:
    from gradio_client import Client
    outcomes, lock = [], threading.Lock()
    started = time.perf_counter()
    deadline = started + deadline_s
    clients = [Client(url, verbose=False) for _ in range(sessions)]
    gate = threading.Barrier(sessions)

    def session(index: int) -> None:
        gate.wait()  # all sessions submit at once
        for _ in range(parses):
            if time.perf_counter() >= deadline:
                return
            outcome = parse_once(clients[index], page, max_new_tokens, index, deadline - time.perf_counter())
            with lock:
                outcomes.append(outcome)

    threads = [threading.Thread(target=session, args=(i,)) for i in range(sessions)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for client in clients:
        client.close()
    return outcomes, time.perf_counter() - started


def run(model: str | None, sessions: int = 8, parses: int = 1, max_new_tokens: int = 8000,
        deadline_s: float = 600, seed: int = 0) -> dict:
    """Start the app, load it, stop it; the summary (see `summarize`)."""
    with tempfile.TemporaryDirectory() as tmp:
        page = Path(tmp) / f"synth-{seed}.png"
        render_page(seed).image.save(page)
        port = free_port()
        url = f"http://{HOST}:{port}/"
        app = start_app(model, port, Path(tmp) / "app.log")
        try:
            wait_ready(app, url + "gradio_api/info", "hpd-demo")
            sampler = RssSampler(app.pid)
            idle = sampler.rss()
            sampler.start()
            outcomes, wall = run_sessions(url, page, sessions, parses, max_new_tokens, deadline_s)
            sampler.stop.set()
            sampler.join()
            after = sampler.rss()
        finally:
            app.terminate()
            app.wait(30)
    rss = {"idle": idle, "peak": max(sampler.peak, idle, after), "after": after}
    return summarize(outcomes, wall, rss, sessions * parses)


def summarize(outcomes: list[Outcome], wall: float, rss: dict, planned: int) -> dict:
    ok = [o for o in outcomes if not o.error]
    latency = np.array([o.seconds for o in ok] or [np.nan])
    queued = np.array([o.queued_seconds for o in ok] or [np.nan])
    ranks = sorted({r for o in outcomes for r in o.ranks})
    return {
        "planned": planned, "completed": len(ok), "not_started": planned - len(outcomes),
        "errors": [o.error for o in outcomes if o.error], "wall_seconds": wall,
        "parses_per_minute": 60 * len(ok) / wall, "tokens": sum(o.tokens for o in ok),
        "queue_ranks_seen": ranks, "sessions_that_queued": len({o.session for o in outcomes if o.ranks}),
        "latency_seconds": {f"p{q}": float(np.percentile(latency, q)) for q in (50, 90, 99)}
        | {"max": float(latency.max())},
        "queued_seconds": {"p50": float(np.percentile(queued, 50)), "max": float(queued.max())},
        "server_rss_mb": {k: v / 2**20 for k, v in rss.items()},
        "outcomes": [asdict(o) for o in outcomes],
    }


def write_report(summary: dict, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.with_suffix(".json").write_text(json.dumps(summary, indent=1))
    lat, queued, rss = summary["latency_seconds"], summary["queued_seconds"], summary["server_rss_mb"]
    lines = [
        "# App load test (gradio_client sessions)", "",
        f"`python -m bench.load_app {summary['command']}` on {summary['machine']}, {summary['date']} "
        f"(1-min load average after the run: {summary['load_average_1min_after']:.1f}). Model: {summary['model']}.",
        "",
        "| sessions x parses | completed | errors | wall s | parses/min | p50 s | p90 s | p99 s | max s "
        "| queued p50 s (max) | queue ranks seen | server RSS MB idle -> peak -> after |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
        f"| {summary['sessions']} x {summary['parses']} | {summary['completed']} | {len(summary['errors'])} "
        f"| {summary['wall_seconds']:.1f} | {summary['parses_per_minute']:.1f} | {lat['p50']:.2f} "
        f"| {lat['p90']:.2f} | {lat['p99']:.2f} | {lat['max']:.2f} | {queued['p50']:.2f} ({queued['max']:.2f}) "
        f"| {', '.join(map(str, summary['queue_ranks_seen'])) or '-'} "
        f"| {rss['idle']:.0f} -> {rss['peak']:.0f} -> {rss['after']:.0f} |", "",
        f"max_new_tokens {summary['max_new_tokens']} per branch, MTP on, children serial (the app's defaults). "
        "All sessions submit at once; the app decodes one page at a time (one engine), so a parse's "
        "latency includes its wait in Gradio's queue (`queued`). Ranks are Gradio's queue positions "
        f"(0 = next) as polled every {POLL_SECONDS} s by gradio_client's `job.status()`. "
        f"{summary['sessions_that_queued']} of {summary['sessions']} sessions were seen waiting in the queue.",
    ]
    if summary["errors"]:
        lines += ["", "Errors:", *(f"- {e}" for e in summary["errors"])]
    path.with_suffix(".md").write_text("\n".join(lines) + "\n")


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_model_arguments(p)
    p.add_argument("--sessions", type=int, default=8)
    p.add_argument("--parses", type=int, default=1, help="parses per session, one after another")
    p.add_argument("--max-new-tokens", type=int, default=8000)
    p.add_argument("--deadline-s", type=float, default=600, help="no new parse after this many seconds")
    p.add_argument("--out", type=Path, default=RESULTS / "app_load")
    return p.parse_args(argv)


def main(argv=None) -> None:
    args = parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        summary = run(model_of(args, tmp), args.sessions, args.parses, args.max_new_tokens, args.deadline_s)
    summary |= run_metadata(args, argv) | {
        "load_average_1min_after": os.getloadavg()[0], "sessions": args.sessions, "parses": args.parses,
        "max_new_tokens": args.max_new_tokens}
    write_report(summary, args.out)
    print(args.out.with_suffix(".md").read_text())


if __name__ == "__main__":
    main()
