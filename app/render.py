"""HTML panels of the app: status, statistics, the branch tree, branch outputs, comparisons.

Pure functions of the view model (app.state) and results; all model text is HTML-escaped.
Class names start with `hpd-`; their styles are `CSS`, which `app.ui.launch` passes to Gradio.
"""

from __future__ import annotations

import html
from collections.abc import Iterable

from app.comparison import Comparison
from app.palette import colour
from app.state import BranchView, PageView, Summary
from hpd_core.engine import EngineInfo
from hpd_core.grammar import BLOCK, CHILD, FORK, format_bbox
from hpd_core.loader import bundled_name

STATES = ("waiting", "decoding", "done")

CSS = """
.hpd-status { padding: 8px 12px; border-radius: 8px; font-weight: 600; }
.hpd-status.info { background: #eff6ff; color: #1e3a8a; }
.hpd-status.running { background: #fef9c3; color: #713f12; }
.hpd-status.done { background: #dcfce7; color: #14532d; }
.hpd-status.error { background: #fee2e2; color: #7f1d1d; }
.hpd-stats { display: grid; grid-template-columns: repeat(auto-fill, minmax(96px, 1fr)); gap: 4px; }
.hpd-tile { border: 1px solid var(--border-color-primary); border-radius: 6px; padding: 2px 6px; }
.hpd-tile .v { font-size: 1.05em; font-weight: 700; font-variant-numeric: tabular-nums; }
.hpd-tile .k { font-size: 0.72em; opacity: 0.75; line-height: 1.2; }
#header h1 { margin: 0 0 2px 0; font-size: 1.6em; } #header p { margin: 0; }
#tree .hpd-scroll { max-height: 190px; }
.hpd-scroll { max-height: 360px; overflow-y: auto; border: 1px solid var(--border-color-primary);
              border-radius: 8px; }
.hpd-outputs { max-height: 560px; }
.hpd-tree table { width: 100%; border-collapse: collapse; font-size: 0.85em; border: none !important; }
.hpd-tree tr, .hpd-compare tr { border: none !important; }  /* Gradio's prose tables draw dark row borders */
.hpd-tree td, .hpd-tree th { padding: 2px 6px; text-align: left; white-space: nowrap;
                             border: none !important; border-bottom: 1px solid var(--border-color-primary) !important; }
.hpd-tree th { position: sticky; top: 0; background: var(--background-fill-secondary); }
.hpd-tree td.num { text-align: right; font-variant-numeric: tabular-nums; }
.hpd-tree .edge { color: #94a3b8; font-family: monospace; }
.hpd-chip { display: inline-block; padding: 0 6px; border-radius: 9px; color: #fff; font-size: 0.85em; }
.hpd-state { display: inline-block; padding: 0 6px; border-radius: 9px; font-size: 0.85em; }
.hpd-state.waiting { background: #e2e8f0; color: #334155; }
.hpd-state.decoding { background: #fde68a; color: #713f12; }
.hpd-state.done { background: #bbf7d0; color: #14532d; }
.hpd-branch { border-bottom: 1px solid var(--border-color-primary); padding: 6px 10px; }
.hpd-branch .head { font-size: 0.82em; opacity: 0.85; margin-bottom: 2px; }
.hpd-branch .body { font-family: ui-monospace, monospace; font-size: 0.85em; white-space: pre-wrap;
                    word-break: break-word; }
mark.hpd-draft { background: #fde68a; color: #111827; border-radius: 2px; padding: 0; }
.hpd-tag { color: #7c3aed; font-weight: 600; }
.hpd-legend { font-size: 0.82em; margin: 4px 0; display: flex; flex-wrap: wrap; gap: 6px; align-items: center; }
.hpd-compare table { border-collapse: collapse; width: 100%; border: none !important; }
.hpd-compare td, .hpd-compare th { padding: 4px 10px; border: none !important;
                                   border-bottom: 1px solid var(--border-color-primary) !important;
                                   text-align: right; font-variant-numeric: tabular-nums; }
.hpd-compare td:first-child, .hpd-compare th:first-child { text-align: left; }
.hpd-verdict { font-size: 1.1em; font-weight: 700; margin: 6px 0; }
.hpd-verdict.ok { color: #15803d; } .hpd-verdict.bad { color: #b91c1c; }
.hpd-verdict .why { font-size: 0.8em; font-weight: 400; }
.hpd-diff { font-family: ui-monospace, monospace; font-size: 0.82em; white-space: pre-wrap; max-height: 360px;
            overflow-y: auto; border: 1px solid var(--border-color-primary); border-radius: 8px; padding: 6px; }
.hpd-page { position: relative; line-height: 0; }
.hpd-page img { width: 100%; height: auto; display: block; border: 1px solid var(--border-color-primary); }
.hpd-page.empty { line-height: normal; padding: 40px 12px; text-align: center; opacity: 0.6;
                  border: 1px dashed var(--border-color-primary); border-radius: 8px; }
.hpd-box { position: absolute; box-sizing: border-box; border: 2px solid var(--c);
           background: color-mix(in srgb, var(--c) 14%, transparent); cursor: pointer; }
.hpd-box-tag { position: absolute; left: -2px; bottom: 100%; background: var(--c); color: #fff;
               font: 600 11px/14px sans-serif; padding: 0 3px; }
.hpd-box.hpd-selected { border-width: 3px; background: color-mix(in srgb, var(--c) 30%, transparent);
                        outline: 3px solid #111827; }
#tree tr[class*="hpd-b"], #branches .hpd-branch[class*="hpd-b"] { cursor: pointer; }
#tree tr.hpd-selected td { background: #fde68a !important; }
.hpd-branch.hpd-selected { background: #fef3c7; outline: 2px solid #f59e0b; }
#markdown .hpd-selected { background: #fef3c7; outline: 2px solid #f59e0b; border-radius: 4px; }
.hpd-mark { height: 0; margin: 0; }
.hpd-diff .add { background: #dcfce7; color: #14532d; } .hpd-diff .del { background: #fee2e2; color: #7f1d1d; }
"""


def esc(text: str) -> str:
    return html.escape(text, quote=True)


def status_html(message: str, kind: str = "info", run: int | None = None) -> str:
    """kind: info | running | done | error; `run` numbers the parse it reports on."""
    data = f' data-run="{run}"' if run is not None else ""
    return f'<div class="hpd-status {kind}"{data}>{esc(message)}</div>'


def info_markdown(info: EngineInfo) -> str:
    if getattr(info, "remote", False):
        what = ("it honours the decoding options" if info.extensions else
                "it decodes with its own settings: the options and the Compare tab do not apply")
        return (f"**Backend** remote server `{info.path}` · **model** `{info.name}` · {what}. A server sends "
                "text only: no token counts, accepted drafts or per-branch timing.")
    mtp = "yes" if info.mtp else "no (use_mtp unavailable)"
    dtype = f"{info.dtype} (vision {info.vision_dtype})" if info.vision_dtype else info.dtype
    line = (f"**Backend** in-process · **model** `{info.name}` · **device** {info.device} · **dtype** "
            f"{dtype} · **parameters** {info.parameters / 1e6:,.2f} M · **P-MTP head** {mtp}")
    return line + BUNDLED_NOTES.get(bundled_name(info.path) or "", "")


# What each bundled model reads (measured: README, docs/training.md), so that nobody takes its
# transcription of their own document for the method's.
BUNDLED_NOTES = {
    "hpd-tiny": ("  \nThe bundled model is a 21 M demo trained on synthetic pages: it reads large print (20-28 px "
                 "type on a 768-px page) with some wrong letters (about 1 character in 40 on dense pages), "
                 "now and then splits or merges paragraphs, and reads almost nothing of real PDFs (word F1 0.08 "
                 "on 106 held-out TeX Live pages). For real documents run the app with `--model hpd-tiny-docs` "
                 "(a preview) or `--model PaddlePaddle/HPD-Parsing`."),
    "hpd-tiny-docs": ("  \nThis bundled model is a 21 M preview trained 176 GPU minutes on TeX Live documentation "
                      "pages and synthetic documents, read at 150 DPI: on 106 pages of packages it never saw it reads "
                      "about three words in four (word F1 0.75, text edit distance 0.26), with misspelt words "
                      "and missed, split or invented blocks; on landscape pages (slides) its boxes land in the "
                      "wrong place. For faithful text run the app with `--model PaddlePaddle/HPD-Parsing`."),
}


# ---- statistics ------------------------------------------------------------------------------

def stats_html(summary: Summary) -> str:
    s = summary
    rate = (f"{s.rate_avg:,.0f}", "tokens/s (page)") if s.finished else (f"{s.rate_now:,.0f}", "tokens/s now")
    wall = f"{s.wall_seconds:.2f} s" if s.wall_seconds is not None else f"{s.elapsed:.1f} s"
    tiles = [
        rate, (f"{s.rate_avg:,.0f}", "tokens/s average"), (f"{s.tokens:,}", "tokens generated"),
        (wall, "wall time" if s.finished else "decoding time"),
        (f"{s.forwards:,}", "decode forwards"), (f"{s.peak_active}", "peak active branches"),
        (f"{s.branches} ({s.live} live)", "branches"), (f"{s.shared_prefix_tokens:,}", "shared-prefix tokens"),
        (f"{s.accepted:,} / {s.drafted:,}", "drafts accepted / drafted"),
        (f"{s.mean_accepted_length:.2f}", "mean accepted length τ"),
        (f"{s.accepted / s.drafted:.0%}" if s.drafted else "–", "acceptance rate"),
        (f"{s.rounds:,}", "decode rounds"),
    ]
    cells = "".join(f'<div class="hpd-tile"><div class="v">{esc(v)}</div><div class="k">{esc(k)}</div></div>'
                    for v, k in tiles)
    return f'<div class="hpd-stats">{cells}</div>'


# ---- the branch tree ---------------------------------------------------------------------------

def label_chip(label: str | None, branch: int = 1) -> str:
    name = "layout" if branch == 0 else (label or "?")
    return f'<span class="hpd-chip" style="background:{colour(name)}">{esc(name)}</span>'


def tree_html(view: PageView, blocks: dict[int, int] | None = None) -> str:
    """The layout branch with its children: label, box, state, tokens, drafts, tokens/s; a child's
    row has its block's class (`blocks`: {branch: block number}, app.selection)."""
    branches = list(view.branches.values())
    if not branches:
        return '<div class="hpd-tree">The branch tree appears when decoding starts.</div>'
    states = {b.branch: b.state(view.round) for b in branches}
    counts = ", ".join(f"{sum(1 for s in states.values() if s == name)} {name}" for name in STATES)
    rows = "".join(_tree_row(b, states[b.branch], view.elapsed, last=i == len(branches) - 1,
                             block=(blocks or {}).get(b.branch)) for i, b in enumerate(branches))
    return (f'<div class="hpd-tree"><div class="hpd-legend">1 layout branch → {len(branches) - 1} '
            f'children · {counts}</div><div class="hpd-scroll"><table><thead><tr><th>branch</th>'
            f'<th>label</th><th>box (0-1000)</th><th>state</th><th>tokens</th><th>drafts</th>'
            f'<th>tok/s</th></tr></thead><tbody>{rows}</tbody></table></div></div>')


def block_class(block: int | None) -> str:
    return f' class="hpd-b{block}"' if block is not None else ""


def _tree_row(b: BranchView, state: str, now: float, last: bool, block: int | None = None) -> str:
    edge = "●" if b.branch == 0 else ("└─" if last else "├─")
    box = format_bbox(b.bbox) if b.bbox is not None else "–"
    reason = f" ({b.reason})" if b.reason not in (None, "stop") else ""
    return (f'<tr data-branch="{b.branch}" data-state="{state}"{block_class(block)}>'
            f'<td><span class="edge">{edge}</span> '
            f'{b.branch}</td><td>{label_chip(b.label, b.branch)}</td><td>{box}</td>'
            f'<td><span class="hpd-state {state}">{state}{esc(reason)}</span></td>'
            f'<td class="num">{b.tokens:,}</td><td class="num">{b.accepted:,}</td>'
            f'<td class="num">{b.rate(now):,.0f}</td></tr>')


# ---- branch outputs ----------------------------------------------------------------------------

def draft_legend() -> str:
    return ('<div class="hpd-legend">Legend: <span>verified token</span>'
            '<mark class="hpd-draft">accepted P-MTP draft</mark>'
            f'<span class="hpd-tag">{esc(FORK)}</span> protocol marker</div>')


def branches_html(view: PageView, blocks: dict[int, int] | None = None) -> str:
    """Every branch's text as written so far, accepted drafts highlighted; a child's card has its
    block's class (`blocks`: {branch: block number})."""
    cards = "".join(_branch_card(b, b.state(view.round), (blocks or {}).get(b.branch))
                    for b in view.branches.values())
    if not cards:
        cards = '<div class="hpd-branch">Branch outputs appear here while the page is decoded.</div>'
    return f'{draft_legend()}<div class="hpd-scroll hpd-outputs">{cards}</div>'


def _branch_card(b: BranchView, state: str, block: int | None = None) -> str:
    name = "layout branch" if b.branch == 0 else f"child {b.branch}"
    box = f" {format_bbox(b.bbox)}" if b.bbox is not None else ""
    body = "".join(_piece(text, drafted) for text, drafted in b.pieces)
    classes = f"hpd-branch hpd-b{block}" if block is not None else "hpd-branch"
    return (f'<div class="{classes}" data-branch="{b.branch}"><div class="head">{label_chip(b.label, b.branch)} '
            f'<b>{name}</b>{esc(box)} · <span class="hpd-state {state}">{state}</span> · {b.tokens:,} tokens, '
            f'{b.accepted:,} from drafts</div><div class="body">{body}</div></div>')


def _piece(text: str, drafted: bool) -> str:
    marked = esc(text)
    for marker in (BLOCK, FORK, CHILD):
        marked = marked.replace(esc(marker), f'<span class="hpd-tag">{esc(marker)}</span>')
    return f'<mark class="hpd-draft">{marked}</mark>' if drafted else marked


def label_legend(labels: Iterable[str | None]) -> str:
    chips = " ".join(label_chip(label) for label in dict.fromkeys(labels))
    return f'<div class="hpd-legend">{chips}</div>' if chips else ""


# ---- comparison ---------------------------------------------------------------------------------

def comparison_html(names: tuple[str, str], comparison: Comparison) -> str:
    a, b = comparison.a.stats, comparison.b.stats
    rows = [("wall time (s)", f"{a.wall_seconds:.2f}", f"{b.wall_seconds:.2f}"),
            ("decode time (s)", f"{a.decode_seconds:.2f}", f"{b.decode_seconds:.2f}"),
            ("tokens generated", f"{a.generated_tokens:,}", f"{b.generated_tokens:,}"),
            ("tokens/s", f"{a.tokens_per_second:,.0f}", f"{b.tokens_per_second:,.0f}"),
            ("decode forwards", f"{a.forwards:,}", f"{b.forwards:,}"),
            ("peak active branches", f"{a.peak_active_branches}", f"{b.peak_active_branches}"),
            ("mean accepted length τ", f"{a.mean_accepted_length:.2f}", f"{b.mean_accepted_length:.2f}")]
    body = "".join(f"<tr><td>{esc(k)}</td><td>{x}</td><td>{y}</td></tr>" for k, x, y in rows)
    table = (f'<table><thead><tr><th></th><th>A: {esc(names[0])}</th><th>B: {esc(names[1])}</th></tr></thead>'
             f'<tbody>{body}</tbody></table>')
    speed = (f'<div class="hpd-verdict" data-speedup="{comparison.speedup:.3f}" '
             f'data-forward-ratio="{comparison.forward_ratio:.3f}">Speedup B over A: '
             f'{comparison.speedup:.2f}× wall clock, {comparison.forward_ratio:.2f}× fewer forwards</div>')
    return f'<div class="hpd-compare">{speed}{_verdict(comparison)}{table}</div>'


def _verdict(comparison: Comparison) -> str:
    if not comparison.complete:
        return '<div class="hpd-verdict bad" data-match="cancelled">Stopped: no exact-match check.</div>'
    if comparison.exact:
        n = len(comparison.a.blocks)
        return (f'<div class="hpd-verdict ok" data-match="exact">✓ Exact match: identical output '
                f'({len(comparison.a.text):,} characters, {n} blocks)</div>')
    why = (f'<span class="why">: in {esc(comparison.dtype)} a k+1-token verify or a batched forward rounds '
           f'differently from a one-token step, so a near-tie can flip the greedy argmax; run with --dtype float32 '
           f'for the token-for-token check</span>' if comparison.rounding else "")
    return f'<div class="hpd-verdict bad" data-match="differs">✗ The outputs differ (diff below){why}</div>'


def diff_html(comparison: Comparison) -> str:
    if comparison.exact or not comparison.complete:
        return ""
    lines = []
    for line in comparison.diff():
        kind = "add" if line.startswith("+") else "del" if line.startswith("-") else ""
        lines.append(f'<div class="{kind}">{esc(line)}</div>')
    return f'<div class="hpd-diff">{"".join(lines)}</div>'
