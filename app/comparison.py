"""Two decodes of the same page compared: times, forwards, speedup and an exact-match check.

Greedy decoding promises that MTP and batching change no token; in exact arithmetic they do not
(tests/test_engine_exactness.py). In a reduced-precision dtype a k+1-token verify or a batched
forward is another matmul shape than a one-token step and rounds differently, so a near-tie of the
argmax can flip (bench/NOTES.md): a difference there has that explanation; in float32, where
every measured cell was exact, it is a bug."""

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


@dataclass(frozen=True)
class Mode:
    variants: tuple[Variant, Variant]  # (A, B): B is the faster setting, so speedup = A's time / B's time
    same_tokens: bool                  # greedy promises B's tokens == A's (MTP, batching; not another prompt)


MODES: dict[str, Mode] = {
    "MTP off vs on": Mode((Variant("MTP off (autoregressive)", {"use_mtp": False}),
                           Variant("MTP on (speculative)", {"use_mtp": True})), same_tokens=True),
    "children serial vs batched": Mode((Variant("children serial", {"batch_children": False, "prompt": "fork"}),
                                        Variant("children batched", {"batch_children": True, "prompt": "fork"})),
                                       same_tokens=True),
    "plain vs fork (HPD)": Mode((Variant("plain (one trajectory)", {"prompt": "plain"}),
                                 Variant("fork (hierarchical)", {"prompt": "fork"})), same_tokens=False),
}

REDUCED_PRECISION = ("bfloat16", "float16")


def variant_options(base: ParseOptions, variant: Variant) -> ParseOptions:
    return replace(base, **variant.changes)


@dataclass(frozen=True)
class Comparison:
    a: ParseResult
    b: ParseResult
    dtype: str         # the engine's decoder dtype (EngineInfo.dtype); "" when a server does not say
    same_tokens: bool  # the mode's promise (Mode.same_tokens)

    @property
    def complete(self) -> bool:
        return not (self.a.cancelled or self.b.cancelled)

    @property
    def exact(self) -> bool:
        """Same assembled page text (for MTP and batching: the same tokens in every branch)."""
        return self.a.text == self.b.text

    @property
    def rounding(self) -> bool:
        """A difference here can be a near-tie of reduced-precision rounding instead of a bug."""
        return self.same_tokens and self.dtype in REDUCED_PRECISION

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
