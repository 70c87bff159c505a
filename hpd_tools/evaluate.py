"""hpd-eval: parse pages and score them against their ground truth with `hpd_tools.metrics`.

    hpd-eval [--model PATH] --synth 20 [--seed 20000000] [--synth-config dense|sparse|simple|lines|document|letter]
    hpd-eval [--model PATH] --gt truth.json --inputs scan.png report.pdf
    hpd-eval [--model PATH] --real data/texlive/manifest.json [--dpi 150] [--baseline bench/results/eval-docs-real]

Ground truth comes from the synthetic generator (seeds from --seed; the default 20,000,000 is
the training's held-out range) or from a JSON file mapping each input's file name to the
blocks of its page; page N > 1 of a PDF or TIFF is keyed "name#N". Blocks are a list of
{"label", "bbox": [x1,y1,x2,y2] on the 0-1000 grid, "text"}, or an hpd-parse page JSON (whose
"bbox_1000" is used), so a corrected hpd-parse output serves as ground truth. Only pages with
ground truth are parsed. --real takes the held-out TeX Live pages of a manifest
(`python -m hpd_training.texlive manifest`; the pages with `evaluate` set, their PDFs under the
manifest's folder) with their text layers as ground truth (hpd_training.pagelayout), and adds
the text scores of `metrics.score_text` (text edit distance and word F1 of the page's text,
words read by type size) in tables by kind of document and by type size.

Scores (metrics.py): page edit distance (micro-averaged), block precision/recall/F1 at
IoU >= 0.5, label accuracy of matched blocks, reading-order distance, table TEDS; with P-MTP,
tau (tokens per branch step: 1 + accepted drafts, over all pages' steps); where the edits
are, by kind of block (`metrics.edits_by_kind`); how long the outputs ran (`lengths`: tokens
against the median page's, text against the truth's length); and on pages set in two columns, how
many had a column left unread (`columns`). Writes
<out>/pages.csv and pages.json (per page) and summary.json / summary.md (all pages, with the
the bundled model's targets in docs/training.md). --baseline DIR adds the page-by-page
comparison with an earlier run's pages.csv (`paired`): two checkpoints' means over the same
pages differ by less than their spread over pages, so each score's mean difference over the
pages both runs scored, its standard error and on how many pages it is better or worse.
"""

from __future__ import annotations

import argparse
import csv
import datetime
import io
import json
import statistics
import sys

import pymupdf
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Sequence

from PIL import Image
from tqdm import tqdm

from hpd_tools.backends import add_model_arguments, engine_of
from hpd_tools.files import safe_name, write_atomic
from hpd_tools.forms import UsageError, add_option_arguments, options_from_args
from hpd_core.documents import DEFAULT_DPI, DocumentError, count_pages, iter_pages
from hpd_core.grammar import Block, format_assembled
from hpd_tools.metrics import (SIZE_BUCKETS, aggregate, aggregate_text, edits_by_kind, evaluate_page, score_text,
                              unread_column)
from hpd_core.result import Stats

EVAL_SEED = 20_000_000  # held out: the training never renders these seeds
SYNTH_PRESETS = ("dense", "sparse", "simple", "lines", "document", "letter")  # SynthConfig's presets (hpd_training.synth)
RESULTS = Path(__file__).resolve().parent.parent / "bench" / "results"
# The bundled model on fresh synthetic pages (issue 3's targets; tau at k = 6). (metric, target, higher is better)
TARGETS = {"edit_distance": (0.03, False), "f1": (0.95, True), "label_accuracy": (0.95, True), "teds": (0.90, True),
           "tau": (4.0, True)}
COLUMNS = ("page", "edit_distance", "precision", "recall", "f1", "label_accuracy", "reading_order", "teds",
           "tau", "gt_blocks", "pred_blocks", "tokens", "length_ratio", "seconds", "kind", "text_edit_distance",
           "word_f1", "unread_column")
RUNAWAY = 3.0  # a page is runaway output at more than 3x the median page's tokens, or 3x its truth's length
# Scores compared page by page with --baseline: (column, higher is better)
PAIRED = (("text_edit_distance", False), ("word_f1", True), ("edit_distance", False), ("f1", True), ("tau", True))


@dataclass(frozen=True)
class Sample:
    name: str             # "synth-20000003", "scan.png", "report.pdf#2"
    image: Image.Image
    truth: list[Block]
    kind: str = ""        # real pages: kind of document (hpd_training.dockind)
    words: tuple[tuple[str, float], ...] | None = None  # real pages: scored (word, type size pt)


# ---- ground truth -------------------------------------------------------------------------

def synth_samples(count: int, seed: int, config) -> list[Sample]:
    from hpd_training.synth import render_page  # the generator: only for synthetic pages
    pages = (render_page(s, config) for s in range(seed, seed + count))
    return [Sample(f"synth-{p.seed}", p.image, p.blocks) for p in pages]


def read_blocks(value, key: str) -> list[Block]:
    """Blocks from a list of block objects or an hpd-parse page JSON."""
    items = value.get("blocks") if isinstance(value, dict) else value
    if not isinstance(items, list):
        raise UsageError(f"ground truth {key!r}: expected a list of blocks or an object with 'blocks'")
    try:
        return [Block(str(b["label"]), grid_box(b.get("bbox_1000", b.get("bbox"))), str(b.get("text", "")))
                for b in items]
    except (KeyError, TypeError, ValueError) as err:
        raise UsageError(f"ground truth {key!r}: bad block ({err!r}); expected label, bbox, text") from err


def grid_box(raw) -> tuple[int, int, int, int] | None:
    if raw is None:
        return None
    x1, y1, x2, y2 = (int(v) for v in raw)
    return (x1, y1, x2, y2)


def file_samples(gt_path: Path, inputs: Sequence[Path], dpi: float) -> list[Sample]:
    """The pages of `inputs` that have ground truth in the JSON at `gt_path`."""
    try:
        truth = json.loads(gt_path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        raise UsageError(f"--gt {gt_path}: {err}") from err
    if not isinstance(truth, dict):
        raise UsageError(f"--gt {gt_path}: expected an object mapping file names to blocks")
    samples = []
    for path in inputs:
        found = {n: key for n in range(1, count_pages(path) + 1) if (key := truth_key(truth, path.name, n))}
        if not found:
            raise UsageError(f"--gt {gt_path} has no entry {path.name!r} for input {path}")
        for page in iter_pages(path, list(found), dpi):
            key = found[page.number]
            samples.append(Sample(key, page.image, read_blocks(truth[key], key)))
    return samples


def truth_key(truth: dict, name: str, number: int) -> str | None:
    """The key of page `number` of file `name`: "name#N", or "name" for page 1."""
    keys = [f"{name}#{number}"] + ([name] if number == 1 else [])
    return next((k for k in keys if k in truth), None)


def real_samples(manifest: Path, dpi: float) -> tuple[list[Sample], str]:
    """The evaluation pages of a TeX Live manifest, ground truth from their text layers, and which
    pages they are: "held-out" (all of the held-out split) or "training-split"
    (`python -m hpd_training.texlive sample`)."""
    from hpd_training.manifest import load
    from hpd_training.pagelayout import Rejected
    from hpd_training.realpage import real_page
    try:
        records = [p for p in load(manifest).pages if p.evaluate]
    except (OSError, ValueError, KeyError, TypeError) as err:
        raise UsageError(f"--real {manifest}: {err}") from err
    if not records:
        raise UsageError(f"--real {manifest}: no pages with evaluate set")
    samples = []
    for record in records:
        try:
            with pymupdf.open(manifest.parent / record.pdf) as doc:
                page = real_page(doc[record.page], dpi)
        except Rejected as err:
            raise UsageError(f"--real {manifest}: {record.pdf} page {record.page} is now rejected "
                             f"({err.reason}): the manifest is older than the rules; rebuild it") from err
        words = tuple(w for b in page.layout.blocks if b.trained for w in b.words)
        name = f"{record.pdf.split('texlive-doc/')[-1]}#{record.page + 1}"
        samples.append(Sample(name, page.image, page.blocks, record.kind, words))
    return samples, "held-out" if all(r.split == "eval" for r in records) else "training-split"


# ---- scoring ------------------------------------------------------------------------------

def score(engine, samples: Sequence[Sample], options) -> tuple[list[dict], list, list, list]:
    """Per-page rows (COLUMNS + texts), PageScores, decoding Stats and TextScores (None for pages
    without scored words), parsing each sample."""
    rows, scores, stats, texts = [], [], [], []
    for sample in tqdm(samples, unit="page", file=sys.stderr, dynamic_ncols=True):
        result = engine.parse(sample.image, options)
        page = evaluate_page(result.blocks, sample.truth)
        summary = aggregate([page])
        text = score_text(result.blocks, sample.words) if sample.words is not None else None
        truth = format_assembled(sample.truth)
        rows.append({"page": sample.name, **{k: getattr(summary, k) for k in COLUMNS[1:8]},
                     "kind": sample.kind, "text_edit_distance": None if text is None else text.edit_distance,
                     "word_f1": None if text is None else text.word_f1,
                     "tau": result.stats.mean_accepted_length if options.use_mtp else None,
                     "gt_blocks": len(sample.truth), "pred_blocks": len(result.blocks),
                     "tokens": result.stats.generated_tokens, "seconds": result.stats.wall_seconds,
                     "length_ratio": len(result.text) / max(1, len(truth)),
                     "unread_column": unread_column(result.blocks, sample.truth),
                     "predicted": result.text, "truth": truth})
        scores.append(page)
        stats.append(result.stats)
        texts.append(text)
    return rows, scores, stats, texts


def mean_accepted_length(stats: Sequence[Stats]) -> float | None:
    """tau over all pages: `Stats.mean_accepted_length` of every page's branch steps together."""
    total = Stats(branch_steps=sum(s.branch_steps for s in stats),
                  accepted_tokens=sum(s.accepted_tokens for s in stats))
    return total.mean_accepted_length if total.branch_steps else None


def lengths(rows: Sequence[dict]) -> dict[str, float | int]:
    """How long the outputs ran: tokens against the median page's (the issue's measure of runaway
    output, which a long page read right can exceed too) and each page's assembled text against its
    truth's (`length_ratio`, characters: runaway whatever the page's own length)."""
    tokens = sorted(r["tokens"] for r in rows)
    median = statistics.median(tokens)
    ratios = [r["length_ratio"] for r in rows]
    return {"median_tokens": median, "max_tokens_over_median": tokens[-1] / median if median else 0.0,
            "pages_over_median": sum(t > RUNAWAY * median for t in tokens),
            "max_length_ratio": max(ratios), "pages_over_length": sum(x > RUNAWAY for x in ratios)}


def columns(rows: Sequence[dict]) -> dict[str, int]:
    """The pages set in two columns and those of them with a column left unread (`metrics.unread_column`)."""
    flags = [r["unread_column"] for r in rows if r["unread_column"] is not None]
    return {"pages": len(flags), "unread": sum(flags)}


def read_pages(folder: Path) -> list[dict]:
    """The per-page rows of an hpd-eval output folder (its pages.csv)."""
    path = folder / "pages.csv"
    if not path.is_file():
        raise UsageError(f"--baseline {folder}: no pages.csv there (an hpd-eval output folder holds one)")
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def paired(rows: Sequence[dict], baseline: Sequence[dict]) -> dict:
    """Per PAIRED score, over the pages both runs scored it on: the two means, the mean of this
    run's minus the baseline's, its standard error (the differences' standard deviation / sqrt n)
    and the pages on which this run is better / worse."""
    before = {r["page"]: r for r in baseline}
    common = [(r, before[r["page"]]) for r in rows if r["page"] in before]
    out = {"pages": len(common), "only_here": len(rows) - len(common), "only_baseline": len(before) - len(common)}
    for name, higher in PAIRED:
        pairs = [(float(a[name]), float(b[name])) for a, b in common if a.get(name) not in (None, "")
                 and b.get(name) not in (None, "")]
        if not pairs:
            continue
        diffs = [a - b for a, b in pairs]
        sign = 1 if higher else -1
        out[name] = {"pages": len(pairs), "mean": statistics.fmean(a for a, _ in pairs),
                     "baseline": statistics.fmean(b for _, b in pairs), "difference": statistics.fmean(diffs),
                     "standard_error": statistics.stdev(diffs) / len(diffs) ** 0.5 if len(diffs) > 1 else None,
                     "better": sum(sign * d > 0 for d in diffs), "worse": sum(sign * d < 0 for d in diffs)}
    return out


def paired_table(comparison: dict, baseline: Path) -> str:
    lines = [f"Page by page against {baseline} ({comparison['pages']} pages in both; "
             f"{comparison['only_here']} only here, {comparison['only_baseline']} only there):", "",
             "| score | pages | this run | baseline | difference | standard error | better / worse |",
             "|---|---|---|---|---|---|---|"]
    for name, _ in PAIRED:
        if (row := comparison.get(name)) is not None:
            se = "–" if row["standard_error"] is None else f"{row['standard_error']:.4f}"
            lines.append(f"| {name} | {row['pages']} | {row['mean']:.4f} | {row['baseline']:.4f} | "
                         f"{row['difference']:+.4f} | {se} | {row['better']} / {row['worse']} |")
    return "\n".join(lines)


def summary_table(summary: dict) -> str:
    lines = ["| metric | value | target |", "|---|---|---|"]
    for name in ("edit_distance", "precision", "recall", "f1", "label_accuracy", "reading_order", "teds", "tau"):
        value = summary[name]
        target = TARGETS.get(name)
        goal = "" if target is None else f"{'≥' if target[1] else '≤'} {target[0]}"
        if target is not None and value is not None:
            goal += " met" if (value >= target[0] if target[1] else value <= target[0]) else " **not met**"
        lines.append(f"| {name} | {'–' if value is None else f'{value:.4f}'} | {goal} |")
    lines += ["", "Where the edits are (matched blocks by true label; missed true blocks; extra predicted ones):", "",
              "| blocks | count | edit distance | share of edits |", "|---|---|---|---|"]
    lines += [f"| {kind} | {row['blocks']} | {row['edit_distance']:.3f} | {row['share_of_edits']:.2f} |"
              for kind, row in summary["by_kind"].items()]
    n = summary["lengths"]
    lines += ["", f"Output length: median {n['median_tokens']:g} tokens a page, at most "
              f"{n['max_tokens_over_median']:.1f}x that ({n['pages_over_median']} pages over {RUNAWAY:g}x); "
              f"assembled text at most {n['max_length_ratio']:.1f}x its truth's length "
              f"({n['pages_over_length']} pages over {RUNAWAY:g}x)."]
    if (columns := summary["columns"])["pages"]:
        lines += ["", f"Two columns: {columns['unread']} of the {columns['pages']} pages set in two columns had a "
                  "column left unread (under a quarter of its blocks reached: `metrics.unread_column`)."]
    return "\n".join(lines)


def to_csv(rows: Sequence[dict]) -> str:
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, COLUMNS, extrasaction="ignore", lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return buffer.getvalue()


def write_results(out: Path, meta: dict, rows: list[dict], summary: dict) -> str:
    real = [real_table(summary["real"]), ""] if "real" in summary else []
    against = [paired_table(summary["paired"], meta["baseline"]), ""] if "paired" in summary else []
    text = "\n".join([f"# hpd-eval: {meta['model']}", "", *(f"- {k}: {v}" for k, v in meta.items()), "",
                      summary_table(summary), "", *real, *against])
    write_atomic(out / "pages.csv", to_csv(rows))
    write_atomic(out / "pages.json", json.dumps(rows, ensure_ascii=False, indent=1))
    write_atomic(out / "summary.json", json.dumps({"meta": meta, "summary": summary}, indent=1))
    write_atomic(out / "summary.md", text)
    return text


# ---- entry point --------------------------------------------------------------------------

def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="hpd-eval", description=__doc__.split("\n\n")[0])
    source = parser.add_mutually_exclusive_group()
    source.add_argument("--synth", type=int, metavar="N", help="N synthetic pages (the default, with 10)")
    source.add_argument("--gt", type=Path, metavar="FILE.json", help="ground truth for --inputs")
    source.add_argument("--real", type=Path, metavar="MANIFEST",
                        help="the held-out TeX Live pages of a manifest (hpd_training.texlive manifest)")
    parser.add_argument("--inputs", nargs="+", type=Path, default=[], help="PDFs/images scored against --gt")
    parser.add_argument("--seed", type=int, default=EVAL_SEED, help="first synthetic seed")
    parser.add_argument("--synth-config", choices=SYNTH_PRESETS, default="dense")
    parser.add_argument("--font-size", type=float, nargs=2, metavar=("LO", "HI"),
                        help="body text size range, overriding the preset's: px (points for --synth-config "
                             "document and letter, laid out in points at 150 dpi)")
    parser.add_argument("--out", type=Path, help="output folder (default bench/results/eval-<model>)")
    add_model_arguments(parser)
    add_option_arguments(parser)
    parser.add_argument("--dpi", type=float, default=None,
                        help=f"PDF render resolution (default: the model's, {DEFAULT_DPI} for most)")
    parser.add_argument("--baseline", type=Path, metavar="DIR",
                        help="an earlier hpd-eval output folder of the same pages: add a page-by-page comparison")
    return parser


def check_sources(args) -> None:
    """The usage errors of the page options, before a model is loaded for them."""
    if args.real is not None:
        return
    if args.gt is not None and not args.inputs:
        raise UsageError("--gt needs --inputs")
    if args.gt is None and args.inputs:
        raise UsageError("--inputs needs --gt")
    if args.gt is None and args.synth is not None and args.synth < 1:
        raise UsageError("--synth must be at least 1")


def load_samples(args) -> tuple[list[Sample], str]:
    """The pages of the options `check_sources` passed, PDFs rendered at args.dpi."""
    if args.real is not None:
        samples, which = real_samples(args.real, args.dpi)
        return samples, f"{len(samples)} {which} TeX Live pages of {args.real} at {args.dpi:g} dpi"
    if args.gt is not None:
        samples = file_samples(args.gt, args.inputs, args.dpi)
        return samples, f"{len(samples)} pages of {len(args.inputs)} files, ground truth {args.gt}"
    from hpd_training.synth import SynthConfig
    config = getattr(SynthConfig, args.synth_config)()
    if args.font_size:
        config = replace(config, font_size_range=tuple(args.font_size))
    count = 10 if args.synth is None else args.synth
    unit = "px" if config.dpi == 72 else f"pt at {config.dpi:g} dpi"  # the page is laid out in points
    fonts = f", font size {config.font_size_range[0]:g}-{config.font_size_range[1]:g} {unit}"
    if config.fonts == "document":  # the families this machine has: pages of other machines differ (docs/training.md)
        from hpd_training.synth.fonts import document_families
        families = document_families()
        fonts += f" in {len(families)} families ({', '.join(families)})"
    return synth_samples(count, args.seed, config), \
        f"{count} synthetic {args.synth_config} pages{fonts}, seeds {args.seed}-{args.seed + count - 1}"


def run(args) -> str:
    options = options_from_args(args)
    check_sources(args)
    baseline = None if args.baseline is None else read_pages(args.baseline)  # refused before the model loads
    engine = engine_of(args, options)
    args.dpi = args.dpi or engine.info.render_dpi
    samples, described = load_samples(args)
    if baseline is not None and not {s.name for s in samples} & {r["page"] for r in baseline}:
        raise UsageError(f"--baseline {args.baseline} scored none of these pages")
    rows, scores, stats, texts = score(engine, samples, options)
    info = engine.info
    meta = {"date": datetime.datetime.now().isoformat(timespec="seconds"),
            "model": f"{info.name} ({info.parameters:,} parameters, {info.dtype}, {info.device})",
            "model_path": info.path, "pages": described, "options": repr(options)}
    out = args.out or RESULTS / safe_name(f"eval-{info.name}")
    summary = {**aggregate(scores).as_dict(), "tau": mean_accepted_length(stats) if options.use_mtp else None,
               "by_kind": edits_by_kind(scores), "lengths": lengths(rows), "columns": columns(rows)}
    if args.real is not None:
        summary["real"] = real_tables([s.kind for s in samples], scores, texts)
    if baseline is not None:
        meta["baseline"] = str(args.baseline)
        summary["paired"] = paired(rows, baseline)
    return write_results(out, meta, rows, summary)


def real_tables(kinds: Sequence[str], scores: Sequence, texts: Sequence) -> dict:
    """Text scores and block F1 of all real pages and of each kind of document."""
    groups = {"all": list(range(len(kinds)))}
    for i, kind in enumerate(kinds):
        groups.setdefault(kind, []).append(i)
    return {name: {**aggregate_text([texts[i] for i in idx]), "block_f1": aggregate([scores[i] for i in idx]).f1}
            for name, idx in groups.items()}


def real_table(real: dict) -> str:
    """Markdown: by kind of document, then by type size (share of the words read)."""
    lines = ["Held-out real pages by kind of document:", "",
             "| kind | pages | text edit distance | word F1 | block F1 |", "|---|---|---|---|---|"]
    lines += [f"| {kind} | {r['pages']} | {r['text_edit_distance']:.3f} | {r['word_f1']:.3f} | {r['block_f1']:.3f} |"
              for kind, r in real.items()]
    lines += ["", "Words read by type size (all real pages):", "", "| type size | words | read |", "|---|---|---|"]
    everything = real["all"]
    for name, _, _ in SIZE_BUCKETS:
        share = everything[f"read {name} pt"]
        lines.append(f"| {name} pt | {everything[f'words {name} pt']} | {'–' if share is None else f'{share:.3f}'} |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        print(run(args))
    except (UsageError, DocumentError) as err:
        parser.print_usage(sys.stderr)
        print(f"hpd-eval: error: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
