"""One decode step for a batch of branches, with optional P-MTP drafts (docs/format.md §8).

    draft:   h_i = mtp(h_{i-1}, embed(x_{i-1})),  d_i = argmax lm_head(h_i),  x_0 = pending
    verify:  feed [x_0, d_1..d_k] at positions s..s+k;  t_j = argmax of row j
             m = longest prefix with d_i == t_{i-1};  emit x_0, t_0..t_{m-1};  pending = t_m

With k = 0 this is plain greedy decoding. The emitted tokens equal those of plain greedy
decoding whatever the drafts are: every emitted token is an argmax given the exact prefix.
So drafting may stop early: with `min_confidence` c > 0 it stops after the first draft position
where no row's draft probability reaches c (a draft costs a head step and an lm_head product).
With draft graphs (CUDA) all k drafts run as one graph and the same stop is applied after them:
the same drafts, one host sync a step instead of one a draft.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from hpd_core.kv_cache import KVCache
from hpd_core.model.language import LanguageModel


@dataclass(frozen=True)
class StepOutput:
    starts: list[int]          # per row: the position x_0 was fed at
    drafts: int                # drafts fed per row (k, or fewer when drafting stopped early)
    emitted: list[list[int]]   # per row: x_0 then the accepted drafts
    accepted: list[int]        # m per row
    pending: list[int]         # per row: t_m
    hidden: torch.Tensor       # [B, H]: the hidden that predicted each new pending token


def draft_once(lm: LanguageModel, h: torch.Tensor, x: torch.Tensor
               ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """One draft position: the head's next hidden [B, H], its draft [B] and each row's probability
    of that draft [B] (its softmax maximum, without a softmax over the vocabulary)."""
    h = lm.mtp(h, lm.embed(x))
    logits = lm.logits(h)
    best, x = logits.max(-1)
    return h, x, (best - logits.logsumexp(-1)).exp()


def all_drafts(lm: LanguageModel, hidden: torch.Tensor, pending: torch.Tensor, k: int
               ) -> tuple[torch.Tensor, torch.Tensor]:
    """Every draft and its probability, [B, k] each, with no host sync (what a draft graph captures)."""
    h, x, drafts, probabilities = hidden, pending, [], []
    for _ in range(k):
        h, x, p = draft_once(lm, h, x)
        drafts.append(x)
        probabilities.append(p)
    return torch.stack(drafts, 1), torch.stack(probabilities, 1)


def confident_drafts(probabilities: list[list[float]], min_confidence: float) -> int:
    """k': the draft positions up to and including the first where no row's probability
    [B][k] reaches `min_confidence` (all k with 0)."""
    best = [max(column) for column in zip(*probabilities)]
    return next((i + 1 for i, p in enumerate(best) if min_confidence and p < min_confidence), len(best))


def draft(lm: LanguageModel, hidden: torch.Tensor, pending: torch.Tensor, k: int,
          min_confidence: float = 0.0) -> torch.Tensor:
    """Drafts [B, k'] (1 <= k' <= k) from hidden [B, H] and pending tokens [B]."""
    if lm.draft_graphs is not None:
        drafts, probabilities = lm.draft_graphs.run(lambda h, x: all_drafts(lm, h, x, k), hidden, pending, k)
        return drafts[:, :confident_drafts(probabilities.tolist(), min_confidence)]
    out = []
    h, x = hidden, pending
    for _ in range(k):
        h, x, p = draft_once(lm, h, x)
        out.append(x)
        if min_confidence and float(p.amax()) < min_confidence:
            break
    return torch.stack(out, 1)


def accepted_lengths(drafts: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """m [B]: how many leading drafts [B, k] equal the verified targets [B, k]."""
    return (drafts == targets).int().cumprod(1).sum(1)


@torch.inference_mode()
def step(lm: LanguageModel, cache: KVCache, rows: list[int], pending: list[int],
         hidden: torch.Tensor, k: int, min_confidence: float = 0.0) -> StepOutput:
    """Feed each row's pending token (and k drafts) at its cache length; crop each row to
    s + 1 + m (its rejected drafts' keys are dropped and their blocks freed)."""
    device = hidden.device
    x0 = torch.tensor(pending, device=device)
    ids = torch.cat([x0[:, None], draft(lm, hidden, x0, k, min_confidence)], 1) if k else x0[:, None]
    k = ids.shape[1] - 1  # [B, 1+k]
    starts = [cache.lengths[r] for r in rows]
    positions = torch.tensor(starts)[:, None] + torch.arange(k + 1)      # on the host (`Decoder.forward`)
    h = lm.model(lm.embed(ids), positions, cache, rows)                   # [B, 1+k, H]
    targets = lm.logits(h).argmax(-1)                                     # [B, 1+k]
    m = accepted_lengths(ids[:, 1:], targets[:, :-1]) if k else torch.zeros_like(x0)
    batch = torch.arange(len(rows), device=device)
    new_hidden = h[batch, m]
    new_pending = targets[batch, m]
    ids_l, m_l = ids.tolist(), m.tolist()
    for r, start, mi in zip(rows, starts, m_l):
        cache.crop(r, start + 1 + mi)
    return StepOutput(starts, k, [row[:1 + mi] for row, mi in zip(ids_l, m_l)], m_l,
                      new_pending.tolist(), new_hidden)
