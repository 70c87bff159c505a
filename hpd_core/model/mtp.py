"""The P-MTP draft head (docs/format.md §8).

One step maps (hidden h that predicted token x, embedding of x) to the hidden that predicts
the token after x:  f = fc([norm_h(h); norm_e(e)]);  y = norm(f + down(silu(gate f) * up f)).
Logits come from the language model's shared `lm_head`. Drafting applies it recurrently.
"""

from __future__ import annotations

import torch
from torch import nn

from hpd_core.config import LLMConfig
from hpd_core.model.language import MLP, RMSNorm


class MTPLayer(nn.Module):
    def __init__(self, cfg: LLMConfig):
        super().__init__()
        self.mlp = MLP(cfg.hidden_size, cfg.intermediate_size)


class MTPHead(nn.Module):
    def __init__(self, cfg: LLMConfig):
        super().__init__()
        self.fc = nn.Linear(2 * cfg.hidden_size, cfg.hidden_size, bias=False)
        self.pre_fc_norm_hidden = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        self.pre_fc_norm_embedding = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        self.layers = nn.ModuleList([MTPLayer(cfg)])
        self.norm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)

    def forward(self, hidden: torch.Tensor, embedding: torch.Tensor) -> torch.Tensor:
        f = self.fc(torch.cat([self.pre_fc_norm_hidden(hidden), self.pre_fc_norm_embedding(embedding)], -1))
        return self.norm(f + self.layers[0].mlp(f))
