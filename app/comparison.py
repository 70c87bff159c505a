"""Two decodes of the same page compared: times, forwards, speedup and an exact-match check."""

from __future__ import annotations

import difflib
from dataclasses import dataclass, replace

from hpd_core.grammar import BLOCK
from hpd_core.options import ParseOptions
from hpd_core.result import ParseResult


@dataclass(frozen=True)
class Variant:
    name: str
    changes: dict   # ParseOptions fields that differ from the user's settings


# mode -> (A, B): B is the faster setting, so speedup = A's time / B's time
MODES: dict[str, tuple[Variant, Variant]] = {
    "MTP off vs on": (Variant("MTP off (autoregressive)", {"use_mtp": False}),
                      Variant("MTP on (speculative)", {"use_mtp": True})),
    "children serial vs batched": (Variant("children serial", {"batch_children": False, "prompt": "fork"}),
                                   Variant("children batched", {"batch_children": True, "prompt": "fork"})),
    "plain vs fork (HPD)": (Variant("plain (one trajectory)", {"prompt": "plain"}),
                            Variant("fork (hierarchical)", {"prompt": "fork"})),
}


def variant_options(base: ParseOptions, variant: Variant) -> ParseOptions:
    return replace(base, **variant.changes)


@dataclass(frozen=True)
class Comparison:
    a: ParseResult
    b: ParseResult

    @property
    def complete(self) -> bool:
        return not (self.a.cancelled or self.b.cancelled)

    @property
    def exact(self) -> bool:
        """Same assembled page text (for MTP and batching: the same tokens in every branch)."""
        return self.a.text == self.b.text

    @property
    def speedup(self) -> float:
        """Wall-clock time of A over B (vision + prefill + decoding)."""
        b = self.b.stats.wall_seconds
        return self.a.stats.wall_seconds / b if b > 0 else 0.0

    @property
    def forward_ratio(self) -> float:
        b = self.b.stats.forwards
        return self.a.stats.forwards / b if b > 0 else 0.0

    def diff(self, context: int = 1) -> list[str]:
        """Unified diff of the two texts, one line per block."""
        return list(difflib.unified_diff(_lines(self.a.text), _lines(self.b.text), "A", "B",
                                         n=context, lineterm=""))


def _lines(text: str) -> list[str]:
    return text.replace(BLOCK, "\n" + BLOCK).strip("\n").splitlines()
