"""What the bench scripts share: a free loopback port, waiting for a server process, sampling its
memory, the model to serve (--model, or a tiny random checkpoint with --tiny), and a CUDA sync
for timing."""

from __future__ import annotations

import argparse
import socket
import subprocess
import threading
import time
from pathlib import Path

import httpx
import psutil
import torch

HOST = "127.0.0.1"  # the scripts only ever talk to loopback


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind((HOST, 0))
        return sock.getsockname()[1]


def sync() -> None:
    """Wait for queued GPU work, so that a wall-clock reading includes it (no-op without CUDA)."""
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def wait_ready(process: subprocess.Popen, health_url: str, name: str, seconds: float = 300) -> None:
    """Until `health_url` answers 200; raises if `process` exits first or the time runs out."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"{name} exited with {process.returncode} before it was ready")
        try:
            if httpx.get(health_url, timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass  # not listening yet
        time.sleep(0.2)
    raise RuntimeError(f"{name} did not become ready")


class RssSampler(threading.Thread):
    """Peak resident memory of a process and its children, sampled every `every` seconds."""

    def __init__(self, pid: int, every: float = 0.1):
        super().__init__(daemon=True)
        self.process, self.every = psutil.Process(pid), every
        self.peak, self.stop = 0, threading.Event()

    def rss(self) -> int:
        processes = [self.process] + self.process.children(recursive=True)
        return sum(p.memory_info().rss for p in processes)

    def run(self) -> None:
        while not self.stop.is_set():
            self.peak = max(self.peak, self.rss())
            time.sleep(self.every)


def add_model_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", default=None, help="checkpoint folder (default: the bundled model)")
    parser.add_argument("--tiny", action="store_true", help="a tiny random checkpoint (tests/tiny.py) instead")


def model_of(args: argparse.Namespace, tmp: str) -> str | None:
    """The checkpoint to serve: --model, a tiny random one written into `tmp` with --tiny, or None."""
    if not args.tiny:
        return args.model
    from tests.tiny import write_checkpoint
    return str(write_checkpoint(Path(tmp) / "tiny", seed=0, noise=0.5))


def run_metadata(args: argparse.Namespace, argv: list[str] | None) -> dict:
    """Command, date, machine and model of a run, for its report."""
    import os
    import platform
    import sys
    return {"command": " ".join(argv if argv is not None else sys.argv[1:]), "date": time.strftime("%Y-%m-%d"),
            "machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores",
            "model": "tiny random checkpoint (tests/tiny.py)" if args.tiny else (args.model or "bundled hpd-tiny")}


def app_option_values(**given) -> list:
    """The app API's option inputs (one per ParseOptions field, in field order): defaults and `given`."""
    from hpd_tools.forms import option_specs
    return [given.get(spec.name, spec.default) for spec in option_specs()]
