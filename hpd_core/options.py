"""ParseOptions: how a page is decoded (all greedy)."""

from __future__ import annotations

from dataclasses import dataclass

PROMPTS = ("fork", "plain")


@dataclass(frozen=True)
class ParseOptions:
    prompt: str = "fork"               # "fork": layout branch + forked content branches; "plain": one trajectory
    use_mtp: bool = True               # P-MTP drafts verified greedily: same tokens, fewer forwards
    num_speculative_tokens: int = 6    # drafts per step, 1-10
    draft_confidence: float = 0.5      # drafting stops after a position where no draft reaches this
                                       # probability (0: always k drafts); the output does not change
    batch_children: bool = False       # False: children decoded in place, one at a time; True: batched rounds
    max_active_branches: int = 64      # branches advanced per round (batched mode; over all pages decoded together)
    max_new_tokens: int = 8000         # per branch
    max_page_tokens: int = 64000       # all branches of a page together
    loop_window: int = 240             # stop a branch whose last N tokens repeat one n-gram (n <= N/8); 0: off

    def __post_init__(self):
        if self.prompt not in PROMPTS:
            raise ValueError(f"prompt must be one of {PROMPTS}, not {self.prompt!r}")
        if not 1 <= self.num_speculative_tokens <= 10:
            raise ValueError(f"num_speculative_tokens must be 1-10, not {self.num_speculative_tokens}")
        if not 0.0 <= self.draft_confidence < 1.0:
            raise ValueError(f"draft_confidence must be in [0, 1), not {self.draft_confidence}")
        if self.max_active_branches < 1:
            raise ValueError("max_active_branches must be at least 1")
        if self.max_new_tokens < 1 or self.max_page_tokens < 1:
            raise ValueError("max_new_tokens and max_page_tokens must be at least 1")
        if self.loop_window != 0 and self.loop_window < 16:
            raise ValueError("loop_window must be 0 (off) or at least 16 tokens")

    @property
    def draft_tokens(self) -> int:
        """Drafts per step actually used (0 without MTP)."""
        return self.num_speculative_tokens if self.use_mtp else 0
