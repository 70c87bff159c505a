"""What a parse returns: the assembled text, blocks, Markdown, branches and statistics."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, fields, replace

from hpd_core.grammar import BBox, Block


@dataclass(frozen=True)
class Counts:
    """A page's decoding counters so far. The engine replaces them after every round and every
    batch of forks (a new frozen record each time, so events can carry them as they are) and
    freezes the last into `Stats`; the app shows them as they come."""
    forwards: int = 0                      # LM forwards after the prompt prefill (rounds + child prefills)
    rounds: int = 0                        # decode rounds: one batched forward over the active branches
    peak_active_branches: int = 0
    forked_branches: int = 0
    shared_prefix_tokens: int = 0          # Σ p over children: prefix tokens a child reuses instead of recomputing
    branch_steps: int = 0                  # Σ over rounds of branches advanced (verification steps)
    drafted_tokens: int = 0
    accepted_tokens: int = 0
    accepted_by_position: tuple[int, ...] = ()  # steps whose i-th draft was accepted, i = 1..k

    def after_round(self, accepted: Sequence[int], drafts: int) -> Counts:
        """One round (a forward) over len(accepted) branches of the page, each fed `drafts` drafts
        of which it accepted accepted[i]."""
        by_position = list(self.accepted_by_position) + [0] * (drafts - len(self.accepted_by_position))
        for m in accepted:
            for i in range(m):
                by_position[i] += 1
        return replace(self, forwards=self.forwards + 1, rounds=self.rounds + 1,
                       peak_active_branches=max(self.peak_active_branches, len(accepted)),
                       branch_steps=self.branch_steps + len(accepted),
                       drafted_tokens=self.drafted_tokens + drafts * len(accepted),
                       accepted_tokens=self.accepted_tokens + sum(accepted), accepted_by_position=tuple(by_position))

    def after_forks(self, positions: Sequence[int]) -> Counts:
        """One forward that started children at fork positions `positions`."""
        return replace(self, forwards=self.forwards + 1, forked_branches=self.forked_branches + len(positions),
                       shared_prefix_tokens=self.shared_prefix_tokens + sum(positions))

    def as_fields(self) -> dict:
        return {f.name: getattr(self, f.name) for f in fields(self)}

    @property
    def mean_accepted_length(self) -> float:
        return mean_accepted_length(self.accepted_tokens, self.branch_steps)


def mean_accepted_length(accepted_tokens: int, branch_steps: int) -> float:
    """τ: tokens emitted per branch step (1 + accepted drafts per step); 0 before any step."""
    return 1 + accepted_tokens / branch_steps if branch_steps else 0.0


@dataclass(frozen=True)
class Stats:
    """Decoding statistics of one page (docs/format.md §11, plus times and
    rates): the page's final `Counts`, flattened, with token counts and times."""
    prompt_tokens: int = 0
    tiles: int = 0
    parent_tokens: int = 0                 # incl. <FORK>s and <|im_end|>
    child_tokens: tuple[int, ...] = ()     # fork order, incl. <|im_end|>
    forwards: int = 0                      # the fields of Counts, in its order
    rounds: int = 0
    peak_active_branches: int = 0
    forked_branches: int = 0
    shared_prefix_tokens: int = 0
    branch_steps: int = 0
    drafted_tokens: int = 0
    accepted_tokens: int = 0
    accepted_by_position: tuple[int, ...] = ()
    vision_seconds: float = 0.0
    prefill_seconds: float = 0.0
    decode_seconds: float = 0.0
    wall_seconds: float = 0.0

    @property
    def generated_tokens(self) -> int:
        return self.parent_tokens + sum(self.child_tokens)

    @property
    def mean_accepted_length(self) -> float:
        return mean_accepted_length(self.accepted_tokens, self.branch_steps)

    @property
    def acceptance_rate(self) -> float:
        return self.accepted_tokens / self.drafted_tokens if self.drafted_tokens else 0.0

    @property
    def acceptance_by_position(self) -> tuple[float, ...]:
        steps = self.branch_steps if self.drafted_tokens else 0
        return tuple(n / steps for n in self.accepted_by_position) if steps else ()

    @property
    def tokens_per_second(self) -> float:
        return self.generated_tokens / self.decode_seconds if self.decode_seconds else 0.0

    def as_dict(self) -> dict:
        out = asdict(self)
        for name in ("generated_tokens", "mean_accepted_length", "acceptance_rate",
                     "acceptance_by_position", "tokens_per_second"):
            out[name] = getattr(self, name)
        return out


@dataclass(frozen=True)
class BranchRecord:
    branch: int                 # 0 = layout branch, then children in fork order
    label: str | None
    bbox: BBox | None
    position: int | None        # fork position p (children)
    token_ids: tuple[int, ...]
    drafted: tuple[bool, ...]
    text: str
    finish_reason: str


@dataclass(frozen=True)
class ParseResult:
    text: str                   # assembled HPD text (docs/format.md §7.6)
    blocks: list[Block]
    markdown: str
    stats: Stats
    image_size: tuple[int, int]
    branches: tuple[BranchRecord, ...] = ()
    cancelled: bool = False
    warnings: tuple[str, ...] = field(default=())

    def to_dict(self) -> dict:
        """JSON-ready: blocks with label, page-pixel bbox, grid bbox and text; stats; flags."""
        w, h = self.image_size
        return {
            "image_size": [w, h],
            "blocks": [{"label": b.label, "bbox": b.page_bbox(w, h), "bbox_1000": b.bbox, "text": b.text}
                       for b in self.blocks],
            "markdown": self.markdown,
            "text": self.text,
            "stats": self.stats.as_dict(),
            "branches": [{"branch": r.branch, "label": r.label, "bbox_1000": r.bbox, "position": r.position,
                          "tokens": len(r.token_ids), "drafted_accepted": sum(r.drafted),
                          "finish_reason": r.finish_reason} for r in self.branches],
            "cancelled": self.cancelled,
            "warnings": list(self.warnings),
        }
