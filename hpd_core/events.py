"""Events streamed by `Engine.stream`: small frozen records, in decoding order.

Branch 0 of a page is its layout (parent) branch; children are numbered 1, 2, ... in fork order.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from hpd_core.grammar import BBox

from hpd_core.result import Counts

if TYPE_CHECKING:
    from hpd_core.result import ParseResult


@dataclass(frozen=True)
class PageStarted:
    page: int
    image_size: tuple[int, int]
    tiles: int
    prompt_tokens: int
    vision_seconds: float
    prefill_seconds: float


@dataclass(frozen=True)
class BranchForked:
    page: int
    branch: int
    position: int            # KV position p of the parent's <FORK>; the child sees [0, p) + <CHILD>
    label: str | None        # from the parent's `<BLOCK>label [bbox]` before the fork
    bbox: BBox | None        # 0-1000 grid
    elapsed: float
    counts: Counts = Counts()  # the page's counters after the fork (zeros from a remote engine)


@dataclass(frozen=True)
class TokensAppended:
    page: int
    branch: int
    token_ids: tuple[int, ...]  # empty from a remote engine, which sees text only
    drafted: tuple[bool, ...]   # per piece: True where the token was an accepted P-MTP draft
    pieces: tuple[str, ...]     # per token: the text it completed ("" inside a multi-byte character)
    text: str                   # newly completed text of the branch: "".join(pieces)
    drafts: int                 # P-MTP drafts this step fed for the branch (0 without MTP)
    round: int                 # decode round (batched forward) that produced them
    elapsed: float             # seconds since the page's decoding started
    counts: Counts = Counts()  # the page's counters after this round (zeros from a remote engine)


@dataclass(frozen=True)
class BranchFinished:
    page: int
    branch: int
    reason: str               # "stop" (<|im_end|>), "length", "page_budget", "loop", "cancelled"
    tokens: int
    elapsed: float


@dataclass(frozen=True)
class PageFinished:
    page: int
    result: "ParseResult"


Event = PageStarted | BranchForked | TokensAppended | BranchFinished | PageFinished
