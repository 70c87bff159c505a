"""ParseOptions: how a page is decoded (all greedy).

Each field carries its own help text and bounds (`field.metadata`), so front doors build their
flags, request fields and controls from the dataclass alone (`hpd_tools.forms`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

PROMPTS = ("fork", "plain")


def option(default, help: str, *, choices: tuple | None = None, low: float | None = None,
           high: float | None = None):
    """A ParseOptions field: its default, a one-line help, and its allowed values (choices, or
    the closed range [low, high]; None: unbounded on that side)."""
    return field(default=default, metadata={"help": help, "choices": choices, "low": low, "high": high})


@dataclass(frozen=True)
class ParseOptions:
    prompt: str = option("fork", "fork: a layout branch forks one content branch per block; plain: one trajectory",
                         choices=PROMPTS)
    use_mtp: bool = option(True, "P-MTP drafts verified greedily: the same tokens, fewer forwards")
    num_speculative_tokens: int = option(6, "P-MTP drafts per step", low=1, high=10)
    draft_confidence: float = option(0.5, "drafting stops after a position where no draft reaches this "
                                          "probability (0: always k drafts); the output does not change",
                                     low=0.0, high=0.95)
    batch_children: bool = option(False, "decode content branches in batched rounds (False: in place, one at a time)")
    max_active_branches: int = option(64, "branches advanced per round (batched mode; over all pages decoded together)",
                                      low=1)
    max_new_tokens: int = option(8000, "token budget of each branch", low=1)
    max_page_tokens: int = option(64000, "token budget of all branches of a page together", low=1)
    loop_window: int = option(240, "stop a branch whose last N tokens repeat one n-gram (n <= N/8) or that ends in "
                                   "over 4N characters of numbers only, and a layout branch that writes 3 blocks in a "
                                   "row over earlier blocks' boxes; 0: off", low=0)

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
