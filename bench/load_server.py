"""Load test of hpd-serve on loopback: N requests from C concurrent clients, bounded in time.

    python -m bench.load_server --tiny                    # a tiny random checkpoint (tests/tiny.py)
    python -m bench.load_server [--model DIR] [--requests 32] [--clients 8] [--max-tokens 8000]
                                [--deadline-s 600] [--max-concurrency 1] [--stream] [--omp-threads N]

Starts `python -m hpd_tools.server` on 127.0.0.1 (a free port, nothing else), waits for
/health, sends the official request shape (base64 PNG of a synthetic page, `document parsing
with fork.`, temperature 0) from C client threads until N requests are done or the deadline
passes, and samples the server's RSS every 0.1 s. Writes latency percentiles (p50/p90/p99 of
successful requests), throughput (requests/s, completion tokens/s), errors by kind and peak
RSS to bench/results/serve_load.md and .json. With --stream, also the time to first content.
"""

from __future__ import annotations

import argparse
import base64
import io
import json
import os
import platform
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import httpx
import numpy as np

from bench.common import HOST, RssSampler, add_model_arguments, free_port, model_of, wait_ready
from hpd_training.synth import render_page

RESULTS = Path(__file__).resolve().parent / "results"


@dataclass(frozen=True)
class Outcome:
    status: int | None         # HTTP status; None when no response came
    seconds: float
    first_content: float | None
    completion_tokens: int
    error: str


def page_urls(count: int) -> list[str]:
    urls = []
    for seed in range(count):
        buffer = io.BytesIO()
        render_page(seed).image.save(buffer, format="PNG")
        urls.append("data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode())
    return urls


def start_server(model: str | None, port: int, args, log_path: Path) -> subprocess.Popen:
    command = [sys.executable, "-m", "hpd_tools.server", "--host", HOST, "--port", str(port),
               "--max-concurrency", str(args.max_concurrency), "--max-queue", str(max(args.clients, 16))]
    command += ["--model", model] if model else []
    env = os.environ | ({"OMP_NUM_THREADS": str(args.omp_threads)} if args.omp_threads else {})
    return subprocess.Popen(command, stdout=log_path.open("w"), stderr=subprocess.STDOUT, env=env)


def one_request(client: httpx.Client, url: str, args, timeout: float) -> Outcome:
    body = {"model": "HPD-Parsing", "max_tokens": args.max_tokens, "temperature": 0, "stream": args.stream,
            "messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": url}},
                                                      {"type": "text", "text": "document parsing with fork."}]}]}
    if args.stream:
        body["stream_options"] = {"include_usage": True}
    started = time.perf_counter()
    try:
        with client.stream("POST", "/chat/completions", json=body, timeout=timeout) as response:
            if response.status_code != 200:
                response.read()
                return Outcome(response.status_code, time.perf_counter() - started, None, 0,
                               response.json()["error"]["message"][:120])
            first, tokens = None, 0
            if not args.stream:
                tokens = json.loads(response.read())["usage"]["completion_tokens"]
            for line in response.iter_lines() if args.stream else ():
                if not line.startswith("data: {"):
                    continue
                chunk = json.loads(line[6:])
                if first is None and any(c["delta"].get("content") for c in chunk["choices"]):
                    first = time.perf_counter() - started
                tokens = (chunk.get("usage") or {}).get("completion_tokens", tokens)
            return Outcome(200, time.perf_counter() - started, first, tokens, "")
    except httpx.HTTPError as err:
        return Outcome(None, time.perf_counter() - started, None, 0, f"{type(err).__name__}: {err}"[:120])


def run_clients(base: str, urls: list[str], args) -> tuple[list[Outcome], float]:
    outcomes, lock, issued = [], threading.Lock(), [0]
    started = time.perf_counter()
    deadline = started + args.deadline_s

    def client_loop() -> None:
        with httpx.Client(base_url=base) as client:
            while True:
                with lock:
                    if issued[0] >= args.requests or time.perf_counter() >= deadline:
                        return
                    index = issued[0]
                    issued[0] += 1
                outcome = one_request(client, urls[index % len(urls)], args, max(deadline - time.perf_counter(), 1))
                with lock:
                    outcomes.append(outcome)

    threads = [threading.Thread(target=client_loop) for _ in range(args.clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return outcomes, time.perf_counter() - started


def summarize(outcomes: list[Outcome], wall: float, rss: dict, args, model: str) -> dict:
    ok = [o for o in outcomes if o.status == 200]
    latencies = np.array([o.seconds for o in ok]) if ok else np.array([np.nan])
    errors: dict[str, int] = {}
    for o in outcomes:
        if o.status != 200:
            key = f"{o.status or 'no response'}: {o.error}"
            errors[key] = errors.get(key, 0) + 1
    firsts = [o.first_content for o in ok if o.first_content is not None]
    return {
        "model": model, "requests": args.requests, "clients": args.clients, "max_tokens": args.max_tokens,
        "max_concurrency": args.max_concurrency, "stream": args.stream, "deadline_s": args.deadline_s,
        "pages": args.pages, "omp_threads": args.omp_threads or os.environ.get("OMP_NUM_THREADS", "torch default"),
        "completed": len(ok), "sent": len(outcomes), "not_sent": args.requests - len(outcomes), "errors": errors,
        "wall_seconds": wall, "requests_per_second": len(ok) / wall,
        "completion_tokens_per_second": sum(o.completion_tokens for o in ok) / wall,
        "latency_seconds": {f"p{q}": float(np.percentile(latencies, q)) for q in (50, 90, 99)}
        | {"mean": float(latencies.mean()), "max": float(latencies.max())},
        "first_content_seconds_p50": float(np.percentile(firsts, 50)) if firsts else None,
        "server_rss_mb": {k: v / 2**20 for k, v in rss.items()},
        "machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores",
        "load_average_1min_after": os.getloadavg()[0],
        "outcomes": [asdict(o) for o in outcomes],
    }


def write_report(summary: dict, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.with_suffix(".json").write_text(json.dumps(summary, indent=1))
    lat = summary["latency_seconds"]
    first = summary["first_content_seconds_p50"]
    errors = "; ".join(f"{n}x {k}" for k, n in summary["errors"].items()) or "none"
    lines = [
        "# hpd-serve load test", "",
        f"`python -m bench.load_server {summary['command']}` on {summary['machine']}, "
        f"{time.strftime('%Y-%m-%d')} (1-min load average after the run: {summary['load_average_1min_after']:.1f}; "
        "other jobs share the machine). Model: " + f"{summary['model']}.", "",
        "| requests (clients) | completed | not sent (deadline) | errors | wall s | req/s | completion tok/s "
        "| p50 s | p90 s | p99 s | max s | first content p50 s | server RSS MB (idle -> peak) |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
        f"| {summary['requests']} ({summary['clients']}) | {summary['completed']} | {summary['not_sent']} "
        f"| {errors} | {summary['wall_seconds']:.1f} | {summary['requests_per_second']:.2f} "
        f"| {summary['completion_tokens_per_second']:.0f} | {lat['p50']:.2f} | {lat['p90']:.2f} | {lat['p99']:.2f} "
        f"| {lat['max']:.2f} | {'-' if first is None else f'{first:.2f}'} "
        f"| {summary['server_rss_mb']['idle']:.0f} -> {summary['server_rss_mb']['peak']:.0f} |", "",
        f"max_tokens {summary['max_tokens']} per branch, --max-concurrency {summary['max_concurrency']}, "
        f"stream={summary['stream']}, server OMP_NUM_THREADS={summary['omp_threads']}. Latency is per request from send to last byte, including the wait in the "
        "server's queue (one decode at a time per replica: a request waits for those ahead of it). Pages are "
        f"{summary['pages']} synthetic pages (hpd_training.synth seeds 0..{summary['pages'] - 1}), round robin.",
    ]
    path.with_suffix(".md").write_text("\n".join(lines) + "\n")


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_model_arguments(p)
    p.add_argument("--requests", type=int, default=32)
    p.add_argument("--clients", type=int, default=8)
    p.add_argument("--max-tokens", type=int, default=8000)
    p.add_argument("--max-concurrency", type=int, default=1)
    p.add_argument("--deadline-s", type=float, default=600, help="no new request after this many seconds")
    p.add_argument("--stream", action="store_true")
    p.add_argument("--omp-threads", type=int, default=None, help="OMP_NUM_THREADS of the server (default: inherited)")
    p.add_argument("--pages", type=int, default=8, help="distinct synthetic pages, reused round robin")
    p.add_argument("--out", type=Path, default=RESULTS / "serve_load")
    return p.parse_args(argv)


def main(argv=None) -> None:
    args = parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        model = model_of(args, tmp)
        port = free_port()
        base = f"http://{HOST}:{port}/v1"
        server = start_server(model, port, args, Path(tmp) / "server.log")
        try:
            wait_ready(server, base.removesuffix("/v1") + "/health", "hpd-serve")
            urls = page_urls(args.pages)
            sampler = RssSampler(server.pid)
            idle = sampler.rss()
            sampler.start()
            outcomes, wall = run_clients(base, urls, args)
            sampler.stop.set()
            sampler.join()
        finally:
            server.terminate()
            server.wait(30)
    label = "tiny random checkpoint (tests/tiny.py)" if args.tiny else (args.model or "bundled model")
    summary = summarize(outcomes, wall, {"idle": idle, "peak": max(sampler.peak, idle)}, args, label)
    summary["command"] = " ".join(argv if argv is not None else sys.argv[1:])
    write_report(summary, args.out)
    print(args.out.with_suffix(".md").read_text())


if __name__ == "__main__":
    main()
