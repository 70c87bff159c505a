"""The view model of one page being decoded: engine events folded into branches and counters.

`PageView.apply(event)` takes the events of `Engine.stream` in order; the renderers read the
view. Everything here is derived from events alone, so the UI never reaches into the engine.

Invariants:
- `branches[i].text` is the concatenation of its pieces, each piece one token's text (as the
  engine's `TokensAppended.pieces` gives it) tagged with whether it was an accepted P-MTP draft.
- Live counters are the engine's own (`result.Counts`, carried by its events), so they agree
  with the final statistics; once `PageFinished` arrives, `summary()` reports those exactly.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from hpd_core.events import BranchFinished, BranchForked, PageFinished, PageStarted, TokensAppended
from hpd_core.grammar import BBox, Block, parse_blocks
from hpd_core.options import ParseOptions
from hpd_core.result import Counts, ParseResult

RATE_WINDOW = 1.0      # seconds of decoding over which the current tokens/s is measured
HISTORY_POINTS = 200   # the tokens/s history is sampled every elapsed / HISTORY_POINTS seconds ...
HISTORY_STEP = 0.02    # ... but no more often than this


@dataclass
class BranchView:
    branch: int                     # 0 = layout (or the single plain) branch, children in fork order
    label: str | None = None
    bbox: BBox | None = None        # 0-1000 grid
    position: int | None = None     # fork position p of a child
    started: float = 0.0            # seconds of decoding when the branch was forked
    finished: float | None = None
    reason: str | None = None       # finish reason
    tokens: int = 0
    accepted: int = 0               # tokens that were accepted drafts
    pieces: list[tuple[str, bool]] = field(default_factory=list)  # merged runs (text, drafted)
    steps: list[tuple[int, int, int]] = field(default_factory=list)  # (round, tokens, accepted)

    @property
    def text(self) -> str:
        return "".join(text for text, _ in self.pieces)

    @property
    def last_round(self) -> int:
        return self.steps[-1][0] if self.steps else -1

    def state(self, current_round: int) -> str:
        """done, decoding (advanced in the last round or the one before) or waiting."""
        if self.finished is not None:
            return "done"
        return "decoding" if self.steps and self.last_round >= current_round - 1 else "waiting"

    def rate(self, now: float) -> float:
        span = (self.finished if self.finished is not None else now) - self.started
        return self.tokens / span if span > 0 else 0.0

    def add_piece(self, text: str, drafted: bool) -> None:
        if not text:
            return
        if self.pieces and self.pieces[-1][1] == drafted:
            self.pieces[-1] = (self.pieces[-1][0] + text, drafted)
        else:
            self.pieces.append((text, drafted))


@dataclass(frozen=True)
class Summary:
    """What the stats panel shows; exact once the page is finished."""
    elapsed: float
    tokens: int
    rate_now: float
    rate_avg: float
    rounds: int
    forwards: int
    branches: int
    live: int
    peak_active: int
    shared_prefix_tokens: int
    drafted: int
    accepted: int
    mean_accepted_length: float
    finished: bool
    cancelled: bool
    wall_seconds: float | None       # vision + prefill + decode, once finished


class PageView:
    def __init__(self, options: ParseOptions):
        self.options = options
        self.started: PageStarted | None = None
        self.branches: dict[int, BranchView] = {}
        self.result: ParseResult | None = None
        self.elapsed = 0.0
        self.tokens = self.round = 0
        self.counts = Counts()       # the engine's counters as of the latest event
        self.window: deque[tuple[float, int]] = deque()   # (elapsed, tokens) over RATE_WINDOW
        self.history: list[tuple[float, float]] = []       # (elapsed, tokens/s)
        self.version = 0             # bumped by every event: a renderer can skip an unchanged view

    # ---- events -------------------------------------------------------------------------

    def apply(self, event) -> None:
        self.version += 1
        handler = {PageStarted: self._page_started, BranchForked: self._forked, TokensAppended: self._tokens,
                   BranchFinished: self._finished, PageFinished: self._page_finished}[type(event)]
        handler(event)

    def _page_started(self, event: PageStarted) -> None:
        self.started = event
        self._branch(0)

    def _branch(self, branch: int) -> BranchView:
        if branch not in self.branches:
            self.branches[branch] = BranchView(branch)
        return self.branches[branch]

    def _forked(self, event: BranchForked) -> None:
        view = self._branch(event.branch)
        view.label, view.bbox, view.position, view.started = event.label, event.bbox, event.position, event.elapsed
        self.counts = event.counts
        self._tick(event.elapsed)

    def _tokens(self, event: TokensAppended) -> None:
        view = self._branch(event.branch)
        for piece, drafted in zip(event.pieces, event.drafted):
            view.add_piece(piece, drafted)
        accepted = sum(event.drafted)
        view.tokens += len(event.token_ids)
        view.accepted += accepted
        view.steps.append((event.round, len(event.token_ids), accepted))
        self.tokens += len(event.token_ids)
        self.round, self.counts = event.round, event.counts
        self._tick(event.elapsed)

    def _finished(self, event: BranchFinished) -> None:
        view = self._branch(event.branch)
        view.finished, view.reason = event.elapsed, event.reason
        self._tick(event.elapsed)

    def _page_finished(self, event: PageFinished) -> None:
        self.result = event.result

    def _tick(self, elapsed: float) -> None:
        self.elapsed = max(self.elapsed, elapsed)
        self.window.append((self.elapsed, self.tokens))
        while self.window and self.window[0][0] < self.elapsed - RATE_WINDOW:
            self.window.popleft()
        step = max(HISTORY_STEP, self.elapsed / HISTORY_POINTS)  # fine for short pages, bounded for long ones
        if not self.history or self.elapsed - self.history[-1][0] >= step:
            self.history.append((self.elapsed, self.rate_now()))

    # ---- derived --------------------------------------------------------------------------

    def rate_now(self) -> float:
        """Tokens/s over the last RATE_WINDOW seconds of decoding."""
        if len(self.window) < 2:
            return self.rate_avg()
        (t0, n0), (t1, n1) = self.window[0], self.window[-1]
        return (n1 - n0) / (t1 - t0) if t1 > t0 else self.rate_avg()

    def rate_avg(self) -> float:
        return self.tokens / self.elapsed if self.elapsed > 0 else 0.0

    def layout_blocks(self) -> list[Block]:
        """Blocks the layout branch has announced so far (the whole page once finished)."""
        if self.result is not None:
            return self.result.blocks
        return parse_blocks(self.branches[0].text) if 0 in self.branches else []

    def summary(self) -> Summary:
        live = sum(1 for b in self.branches.values() if b.finished is None)
        c = self.counts
        summary = Summary(
            elapsed=self.elapsed, tokens=self.tokens, rate_now=self.rate_now(), rate_avg=self.rate_avg(),
            rounds=c.rounds, forwards=c.forwards, branches=len(self.branches), live=live,
            peak_active=c.peak_active_branches, shared_prefix_tokens=c.shared_prefix_tokens,
            drafted=c.drafted_tokens, accepted=c.accepted_tokens, mean_accepted_length=c.mean_accepted_length,
            finished=False, cancelled=False, wall_seconds=None)
        return summary if self.result is None else final_summary(summary, self.result)


def final_summary(live: Summary, result: ParseResult) -> Summary:
    s = result.stats
    return Summary(
        elapsed=s.decode_seconds, tokens=s.generated_tokens, rate_now=live.rate_now,
        rate_avg=s.tokens_per_second, rounds=s.rounds, forwards=s.forwards, branches=len(result.branches),
        live=0, peak_active=s.peak_active_branches, shared_prefix_tokens=s.shared_prefix_tokens,
        drafted=s.drafted_tokens, accepted=s.accepted_tokens, mean_accepted_length=s.mean_accepted_length,
        finished=True, cancelled=result.cancelled, wall_seconds=s.wall_seconds)
