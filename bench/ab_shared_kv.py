"""A/B on the CPU: the engine of an earlier commit (copying KV cache) against this tree's
(shared-prefix block cache), both in one process, on the same pages.

    python -m bench.ab_shared_kv [--old bc4aaa1] [--pages 2] [--passes 2] [--threads 1]

`git archive OLD hpd_core` is unpacked into a temporary folder as the package `hpd_core_old`
(its imports renamed), so both engines load the bundled weights side by side. Modes: plain AR
(MTP off) and fork-batched + P-MTP (k = 6). Each pass decodes every page with every engine and
mode in turn, so outside load hits all alike; each cell keeps its fastest pass. Prints per
engine and mode: wall, vision + prefill and decode seconds, forwards, tokens, whether the tokens
equal the other engine's, and the ratios fork-batched + P-MTP over plain AR and new over old.
"""

from __future__ import annotations

import argparse
import importlib
import io
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

import torch

from hpd_core import ParseOptions, load_engine, loader

REPO = Path(__file__).resolve().parent.parent
MODES = {"plain AR": ParseOptions(prompt="plain", use_mtp=False),
         "fork-batched + P-MTP k=6": ParseOptions(batch_children=True, num_speculative_tokens=6)}


def old_package(commit: str, folder: Path):
    """`hpd_core` of `commit`, importable as `hpd_core_old`."""
    archive = subprocess.run(["git", "-C", str(REPO), "archive", commit, "hpd_core"], check=True,
                             capture_output=True).stdout
    tarfile.open(fileobj=io.BytesIO(archive)).extractall(folder, filter="data")
    (folder / "hpd_core").rename(folder / "hpd_core_old")
    for path in (folder / "hpd_core_old").rglob("*.py"):
        path.write_text(path.read_text().replace("hpd_core", "hpd_core_old"))
    sys.path.insert(0, str(folder))
    package, old_loader = importlib.import_module("hpd_core_old"), importlib.import_module("hpd_core_old.loader")
    old_loader.BUNDLED_MODEL, old_loader.BUNDLED_MTP = loader.BUNDLED_MODEL, loader.BUNDLED_MTP  # not in the archive
    return package


def dense_pages(n: int, seed: int = 10_000_000) -> list:
    from hpd_training.synth import SynthConfig, render_page  # pymupdf: only for synthetic pages

    config = SynthConfig.dense(font_size_range=(20, 26))  # the training's dense type sizes, as NOTES.md
    return [render_page(seed + i, config).image for i in range(n)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--old", default="bc4aaa1", help="commit with the copying KV cache")
    parser.add_argument("--pages", type=int, default=2)
    parser.add_argument("--passes", type=int, default=2)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    pages = dense_pages(args.pages)
    with tempfile.TemporaryDirectory() as tmp:
        old = old_package(args.old, Path(tmp))
        engines = {"old": old.load_engine(None), "new": load_engine(None)}
        engines["old"].parse(pages[0], old.ParseOptions(prompt="plain", use_mtp=False, max_new_tokens=32))  # warm-up
        engines["new"].parse(pages[0], ParseOptions(prompt="plain", use_mtp=False, max_new_tokens=32))
        best, tokens = {}, {}
        for _ in range(args.passes):
            for mode, options in MODES.items():
                for name, engine in engines.items():
                    opts = old.ParseOptions(**vars(options)) if name == "old" else options
                    start = time.perf_counter()
                    results = [engine.parse(p, opts) for p in pages]
                    wall = time.perf_counter() - start
                    before = sum(r.stats.vision_seconds + r.stats.prefill_seconds for r in results)
                    cell = (wall, before, wall - before, sum(r.stats.forwards for r in results),
                            sum(r.stats.generated_tokens for r in results))
                    best[name, mode] = min(best.get((name, mode), cell), cell)
                    tokens[name, mode] = [[b.token_ids for b in r.branches] for r in results]
    print(f"{args.pages} dense pages (20-26 px), {args.threads} thread(s), fastest of {args.passes} passes; "
          f"old = {args.old}, new = this tree")
    print("| engine | mode | wall s | vision+prefill s | decode s | forwards | tokens | tokens == other engine |")
    print("|---|---|---|---|---|---|---|---|")
    for (name, mode), (wall, before, decode, forwards, n) in best.items():
        same = tokens["old", mode] == tokens["new", mode]
        print(f"| {name} | {mode} | {wall:.2f} | {before:.2f} | {decode:.2f} | {forwards} | {n} | {same} |")
    plain, fork = MODES
    for name in engines:
        print(f"{name}: fork-batched + P-MTP vs plain AR: wall {best[name, plain][0] / best[name, fork][0]:.2f}x, "
              f"decode {best[name, plain][2] / best[name, fork][2]:.2f}x")
    for mode in MODES:
        print(f"{mode}: old / new: wall {best['old', mode][0] / best['new', mode][0]:.2f}x, "
              f"decode {best['old', mode][2] / best['new', mode][2]:.2f}x")


if __name__ == "__main__":
    main()
