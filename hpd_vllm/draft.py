"""The P-MTP head as a vLLM draft model, run with speculative method "eagle" (HPD_FORMAT.md §8).

vLLM's EAGLE proposer calls `forward(input_ids, positions, hidden_states)` with, per position,
the target's post-norm hidden state and the next token; later draft steps feed back what
`forward` returned. That is P-MTP's recurrence `h_i = mtp(h_{i-1}, embed(x_{i-1}))`, so the
head is `hpd_core.model.mtp.MTPHead` itself; logits come from the target's lm_head and the
embedding is the target's (the proposer shares both: this model declares neither as its own).

The head has no attention, but the proposer asserts that the draft layers form one KV-cache
group: `kv_anchor` is one attention layer of the target's shape that is registered and never run.
"""

from __future__ import annotations

from collections.abc import Iterable

import torch
from torch import nn
from vllm.config import VllmConfig
from vllm.model_executor.layers.attention import Attention
from vllm.model_executor.layers.logits_processor import LogitsProcessor
from vllm.model_executor.layers.vocab_parallel_embedding import ParallelLMHead, VocabParallelEmbedding

from hpd_core.config import LLMConfig
from hpd_core.model.mtp import MTPHead


class DraftBody(nn.Module):
    """`model`: where the proposer puts the shared `embed_tokens`; the head and its KV anchor."""

    def __init__(self, vllm_config: VllmConfig, prefix: str):
        super().__init__()
        hf = vllm_config.speculative_config.draft_model_config.hf_config
        llm = LLMConfig(vocab_size=hf.vocab_size, hidden_size=hf.hidden_size, intermediate_size=hf.intermediate_size,
                        num_hidden_layers=1, num_attention_heads=hf.num_attention_heads,
                        num_key_value_heads=hf.num_key_value_heads, head_dim=hf.head_dim, rms_norm_eps=hf.rms_norm_eps)
        self.embed_tokens = VocabParallelEmbedding(hf.vocab_size, hf.hidden_size)
        self.mtp = MTPHead(llm)
        target_layers = vllm_config.model_config.get_num_layers(vllm_config.parallel_config)
        self.kv_anchor = Attention(hf.num_attention_heads, hf.head_dim, hf.head_dim ** -0.5,
                                   num_kv_heads=hf.num_key_value_heads, cache_config=vllm_config.cache_config,
                                   prefix=f"{prefix}.layers.{target_layers}.self_attn.attn")


class HPDDraftModel(nn.Module):
    def __init__(self, *, vllm_config: VllmConfig, prefix: str = ""):
        super().__init__()
        hf = vllm_config.speculative_config.draft_model_config.hf_config
        self.config = hf
        self.model = DraftBody(vllm_config, f"{prefix}.model" if prefix else "model")
        self.lm_head = ParallelLMHead(hf.vocab_size, hf.hidden_size)  # replaced by the target's
        self.logits_processor = LogitsProcessor(hf.vocab_size)

    def embed_input_ids(self, input_ids: torch.Tensor) -> torch.Tensor:
        return self.model.embed_tokens(input_ids)

    def forward(self, input_ids: torch.Tensor, positions: torch.Tensor, hidden_states: torch.Tensor,
                inputs_embeds: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """(hidden for logits, hidden fed back) [T, H], both the head's output."""
        embeds = self.embed_input_ids(input_ids) if inputs_embeds is None else inputs_embeds
        h = self.model.mtp(hidden_states, embeds)
        return h, h

    def compute_logits(self, hidden_states: torch.Tensor) -> torch.Tensor:
        return self.logits_processor(self.lm_head, hidden_states)

    def load_weights(self, weights: Iterable[tuple[str, torch.Tensor]]) -> set[str]:
        """The head's tensors (`fc.weight`, `layers.0.mlp.*`, ...: convert.py's draft/ folder)."""
        params = dict(self.model.mtp.named_parameters())
        loaded = set()
        for name, tensor in weights:
            params[name].data.copy_(tensor)
            loaded.add(f"model.mtp.{name}")
        missing = {f"model.mtp.{n}" for n in params} - loaded
        if missing:
            raise ValueError(f"the draft checkpoint lacks {sorted(missing)}")
        return loaded | {n for n, _ in self.named_parameters() if not n.startswith("model.mtp.")}
