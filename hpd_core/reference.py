"""Slow reference decoding: no KV cache, the whole sequence recomputed at every step.

The engine's fast paths (KV cache, forking, batching, drafts) must reproduce it token for token.
"""

from __future__ import annotations

import torch

from hpd_core.model.language import LanguageModel


@torch.inference_mode()
def greedy(lm: LanguageModel, embeds: torch.Tensor, max_new_tokens: int, stop: frozenset[int]) -> list[int]:
    """Greedy tokens after input embeddings [n, H], up to a stop token (kept) or the budget."""
    seq, out = embeds, []
    for _ in range(max_new_tokens):
        h = lm.model(seq[None], torch.arange(seq.shape[0], device=seq.device)[None])
        token = int(lm.logits(h[0, -1]).argmax())
        out.append(token)
        if token in stop:
            break
        seq = torch.cat([seq, lm.embed(torch.tensor([token], device=seq.device))])
    return out
