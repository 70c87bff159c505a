"""Soak test: many consecutive parses; does resident memory (or the temp folder) grow?

    python -m bench.soak                       # the bundled model, 50 parses, engine API and app API
    python -m bench.soak --tiny --parses 10    # a tiny random checkpoint (tests/tiny.py)
    python -m bench.soak [--model DIR] [--parses 50] [--apis engine,app] [--max-new-tokens 8000]
                         [--out bench/results/soak]

engine: one engine in this process parses synthetic pages (hpd_training.synth seeds 0..7, round
robin) one after another; this process's RSS is read after each parse.
app: `python -m app` on 127.0.0.1 at a free port, with its own temp folder (TMPDIR and
GRADIO_TEMP_DIR); one gradio_client session runs the parses through `/parse`; the server's RSS
is read after each parse, and the files left in its temp folder are counted at the end (the
app's own result files are deleted when a session's next run replaces them; Gradio's cached
uploads and served copies after --cache-seconds, one hour by default: they stay in this run).

Growth is reported from the RSS after the first parse (allocator and caches warm) to the
last, and as the slope of a least-squares line over the second half (MB per parse).
"""

from __future__ import annotations

import argparse
import gc
import json
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import psutil

from bench.common import HOST, add_model_arguments, app_option_values, free_port, model_of, run_metadata, wait_ready
from bench.load_app import PARSE_FIELDS, start_app
from hpd_core.options import ParseOptions
from hpd_training.synth import render_page

RESULTS = Path(__file__).resolve().parent / "results"
PAGES = 8  # distinct synthetic pages, reused round robin


def growth(rss: list[int]) -> dict:
    """MB: after the first parse, after the last, their difference, and the MB/parse slope of
    the second half."""
    mb = np.array(rss) / 2**20
    half = mb[len(mb) // 2:]
    slope = float(np.polyfit(np.arange(len(half)), half, 1)[0]) if len(half) > 1 else 0.0
    return {"first_mb": float(mb[0]), "last_mb": float(mb[-1]), "peak_mb": float(mb.max()),
            "growth_mb": float(mb[-1] - mb[0]), "slope_mb_per_parse_second_half": slope}


def soak_engine(engine, parses: int, options: ParseOptions, pages: list) -> dict:
    """RSS of this process after each of `parses` consecutive parses."""
    process = psutil.Process()
    before = process.memory_info().rss
    rss, seconds = [], []
    for i in range(parses):
        started = time.perf_counter()
        engine.parse(pages[i % len(pages)], options)
        seconds.append(time.perf_counter() - started)
        gc.collect()
        rss.append(process.memory_info().rss)
    return {"parses": parses, "before_mb": before / 2**20, "rss_mb": [r / 2**20 for r in rss],
            "seconds_per_parse": float(np.mean(seconds))} | growth(rss)


def soak_client(url: str, parses: int, max_new_tokens: int, files: list[Path], rss: Callable[[], int]) -> dict:
    """`parses` consecutive /parse calls from one gradio_client session; `rss()` after each."""
    from gradio_client import Client, handle_file
    client = Client(url, verbose=False)
    before, series, seconds, errors = rss(), [], [], []
    for i in range(parses):
        started = time.perf_counter()
        try:
            out = dict(zip(PARSE_FIELDS, client.predict(handle_file(str(files[i % len(files)])), 1, 90, "", "",
                                                        *app_option_values(max_new_tokens=max_new_tokens),
                                                        api_name="/parse")))
            assert out["json"]["stats"]["generated_tokens"] > 0
        except Exception as err:  # a soak test counts every kind of failure
            errors.append(f"{type(err).__name__}: {err}"[:160])
        seconds.append(time.perf_counter() - started)
        series.append(rss())
    client.close()
    return {"parses": parses, "errors": errors, "before_mb": before / 2**20, "rss_mb": [r / 2**20 for r in series],
            "seconds_per_parse": float(np.mean(seconds))} | growth(series)


def page_files(folder: Path, count: int = PAGES) -> list[Path]:
    files = []
    for seed in range(count):
        files.append(folder / f"synth-{seed}.png")
        render_page(seed).image.save(files[-1])
    return files


def soak_app(model: str | None, parses: int, max_new_tokens: int) -> dict:
    """The app in a subprocess with its own temp folder; its RSS and leftover files."""
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        temp = root / "app-tmp"
        temp.mkdir()
        files = page_files(root)
        port = free_port()
        url = f"http://{HOST}:{port}/"
        app = start_app(model, port, root / "app.log", {"TMPDIR": str(temp), "GRADIO_TEMP_DIR": str(temp / "gradio")})
        try:
            wait_ready(app, url + "gradio_api/info", "hpd-demo")
            server = psutil.Process(app.pid)
            out = soak_client(url, parses, max_new_tokens, files, lambda: server.memory_info().rss)
            leftover = [p for p in temp.rglob("*") if p.is_file()]
            out["files_left"] = {"gradio_cache": sum(1 for p in leftover if "gradio" in p.parts),
                                 "app_results": sum(1 for p in leftover if "gradio" not in p.parts)}
        finally:
            app.terminate()
            app.wait(30)
    return out


def run(model: str | None, parses: int, apis: list[str], max_new_tokens: int) -> dict:
    summary = {}
    if "engine" in apis:
        from hpd_core import load_engine
        pages = [render_page(seed).image for seed in range(PAGES)]
        summary["engine"] = soak_engine(load_engine(model), parses, ParseOptions(max_new_tokens=max_new_tokens), pages)
    if "app" in apis:
        summary["app"] = soak_app(model, parses, max_new_tokens)
    return summary


def write_report(summary: dict, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.with_suffix(".json").write_text(json.dumps(summary, indent=1))
    lines = [
        "# Soak test: consecutive parses", "",
        f"`python -m bench.soak {summary['command']}` on {summary['machine']}, {summary['date']}. "
        f"Model: {summary['model']}; max_new_tokens {summary['max_new_tokens']}, MTP on, children serial.", "",
        "| API | parses | errors | s/parse | RSS MB before | after parse 1 | after last | peak | growth MB "
        "| slope MB/parse (2nd half) | files left |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for api in ("engine", "app"):
        if api not in summary:
            continue
        s = summary[api]
        files = s.get("files_left")
        left = "-" if files is None else f"{files['app_results']} app, {files['gradio_cache']} Gradio cache"
        lines.append(f"| {api} | {s['parses']} | {len(s.get('errors', []))} | {s['seconds_per_parse']:.2f} "
                     f"| {s['before_mb']:.0f} | {s['first_mb']:.0f} | {s['last_mb']:.0f} | {s['peak_mb']:.0f} "
                     f"| {s['growth_mb']:+.1f} | {s['slope_mb_per_parse_second_half']:+.2f} | {left} |")
    lines += ["", "engine: RSS of the process holding the engine (after gc.collect()); app: RSS of the "
              "hpd-demo server process, read after each `/parse` returned. Growth is from the RSS after the "
              "first parse to the RSS after the last. Files left: in the app's temp folder at the end "
              "(app results: our .md/.json copies; Gradio cache: uploads and served copies, deleted after "
              "--cache-seconds)."]
    path.with_suffix(".md").write_text("\n".join(lines) + "\n")


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_model_arguments(p)
    p.add_argument("--parses", type=int, default=50)
    p.add_argument("--apis", default="engine,app", help="comma-separated: engine, app")
    p.add_argument("--max-new-tokens", type=int, default=8000)
    p.add_argument("--out", type=Path, default=RESULTS / "soak")
    return p.parse_args(argv)


def main(argv=None) -> None:
    args = parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        summary = run(model_of(args, tmp), args.parses, args.apis.split(","), args.max_new_tokens)
    summary |= run_metadata(args, argv) | {"max_new_tokens": args.max_new_tokens}
    write_report(summary, args.out)
    print(args.out.with_suffix(".md").read_text())


if __name__ == "__main__":
    main()
