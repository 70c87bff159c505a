"""SVG charts: the branch timeline (one row per branch, x = decode round) and the tokens/s
sparkline. Plain SVG strings: cheap enough to redraw a few times a second, crisp at any size."""

from __future__ import annotations

from collections.abc import Sequence

from app.palette import colour
from app.state import BranchView

WIDTH = 760
GUTTER = 34          # px left of the plot for branch numbers
MAX_PLOT_HEIGHT = 420
AXIS = 26            # px under the plot for the round axis


def timeline_svg(branches: Sequence[BranchView], rounds: int, draft_tokens: int) -> str:
    """Each branch is a row of bars over the rounds it advanced in, coloured by its label
    (the layout branch in slate); dark ticks mark steps with accepted drafts, taller for more."""
    if not branches or rounds < 1:
        return _empty("the timeline appears when decoding starts")
    plot = WIDTH - GUTTER - 8
    row = max(3.0, min(14.0, MAX_PLOT_HEIGHT / len(branches)))
    height = row * len(branches) + AXIS
    per_round = plot / rounds
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {height:.0f}" '
             f'width="100%" role="img" aria-label="branch timeline">',
             f'<rect x="{GUTTER}" y="0" width="{plot}" height="{row * len(branches):.1f}" fill="#f8fafc"/>']
    for i, branch in enumerate(branches):
        y = i * row
        parts += _row(branch, y, row, per_round, draft_tokens)
        if row >= 9:
            parts.append(f'<text x="{GUTTER - 4}" y="{y + row * 0.78:.1f}" font-size="{min(row - 1, 11):.0f}" '
                         f'text-anchor="end" fill="#475569">{branch.branch}</text>')
    parts += _axis(rounds, per_round, row * len(branches))
    parts.append("</svg>")
    return "".join(parts)


def _row(branch: BranchView, y: float, row: float, per_round: float, draft_tokens: int) -> list[str]:
    fill = colour("layout" if branch.branch == 0 else branch.label)
    gap = max(1.0, 1 / per_round)  # rounds closer than a pixel merge into one bar
    bars, start, last = [], None, None
    for r, _, _ in branch.steps:
        if start is None or r - last > gap:
            if start is not None:
                bars.append((start, last))
            start = r
        last = r
    if start is not None:
        bars.append((start, last))
    out = [f'<rect x="{GUTTER + (a - 1) * per_round:.1f}" y="{y + 0.5:.1f}" '
           f'width="{max(1.0, (b - a + 1) * per_round):.1f}" height="{max(1.0, row - 1):.1f}" fill="{fill}"/>'
           for a, b in bars]
    ticks = _draft_ticks(branch, y, row, per_round, draft_tokens)
    if ticks:
        out.append(f'<path d="{ticks}" stroke="#0f172a" stroke-width="1" opacity="0.75"/>')
    return out


def _draft_ticks(branch: BranchView, y: float, row: float, per_round: float, draft_tokens: int) -> str:
    """One path: per pixel column, a tick whose height is the most drafts accepted in a step."""
    if draft_tokens < 1:
        return ""
    columns: dict[int, int] = {}
    for r, _, accepted in branch.steps:
        if accepted:
            x = int(GUTTER + (r - 0.5) * per_round)
            columns[x] = max(columns.get(x, 0), accepted)
    bottom = y + row - 0.5
    return "".join(f"M{x}.5 {bottom:.1f}v-{(row - 1) * min(1.0, n / draft_tokens):.1f}"
                   for x, n in columns.items())


def _axis(rounds: int, per_round: float, top: float) -> list[str]:
    step = _nice_step(rounds)
    out = [f'<line x1="{GUTTER}" x2="{WIDTH - 8}" y1="{top:.1f}" y2="{top:.1f}" stroke="#94a3b8"/>']
    for r in range(0, rounds + 1, step):
        x = GUTTER + r * per_round
        out.append(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{top:.1f}" y2="{top + 4:.1f}" stroke="#94a3b8"/>'
                   f'<text x="{x:.1f}" y="{top + 14:.1f}" font-size="10" text-anchor="middle" '
                   f'fill="#475569">{r}</text>')
    out.append(f'<text x="{WIDTH - 8}" y="{top + 24:.1f}" font-size="10" text-anchor="end" '
               f'fill="#475569">decode round</text>')
    return out


def _nice_step(span: float, ticks: int = 8) -> int:
    """1, 2, 5, 10, 20, 50, ... so that about `ticks` ticks cover `span`."""
    step = 1
    while span / step > ticks:
        for factor in (2, 2.5, 2):
            step = int(step * factor)
            if span / step <= ticks:
                break
    return step


def sparkline_svg(history: Sequence[tuple[float, float]], width: int = 360, height: int = 80) -> str:
    """Tokens/s over decoding time, with the peak and the time span labelled."""
    if len(history) < 2:
        return _empty("tokens/s over time", width, height)
    t_end = history[-1][0] or 1.0
    peak = max(rate for _, rate in history) or 1.0
    top, plot_h = 16, height - 16  # the peak label sits above the plot

    def point(t: float, rate: float) -> str:
        return f"{t / t_end * (width - 2) + 1:.1f},{plot_h - rate / peak * (plot_h - top):.1f}"

    line = " ".join(point(t, r) for t, r in history)
    return (f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" width="100%" '
            f'role="img" aria-label="tokens per second over time">'
            f'<polygon points="1,{plot_h} {line} {width - 1},{plot_h}" fill="#dbeafe"/>'
            f'<polyline points="{line}" fill="none" stroke="#2563eb" stroke-width="1.5"/>'
            f'<line x1="0" x2="{width}" y1="{plot_h}" y2="{plot_h}" stroke="#94a3b8"/>'
            f'<text x="2" y="11" font-size="10" fill="#475569">tokens/s over time · peak {peak:,.0f}</text>'
            f'<text x="2" y="{height - 3}" font-size="10" fill="#475569">0 s</text>'
            f'<text x="{width - 2}" y="{height - 3}" font-size="10" text-anchor="end" '
            f'fill="#475569">{t_end:.1f} s</text></svg>')


def _empty(message: str, width: int = WIDTH, height: int = 60) -> str:
    return (f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" width="100%">'
            f'<text x="{width / 2}" y="{height / 2}" font-size="12" text-anchor="middle" '
            f'fill="#94a3b8">{message}</text></svg>')
