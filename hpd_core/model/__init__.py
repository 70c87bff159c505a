"""The composed HPD model: InternViT -> pixel shuffle -> mlp1 -> Qwen3 (+ P-MTP head).

`HPDModel.state_dict()` keys are the real checkpoint's tensor names (docs/format.md §2).
"""

from __future__ import annotations

import torch
from torch import nn

from hpd_core.config import HPDConfig
from hpd_core.model.language import LanguageModel
from hpd_core.model.mtp import MTPHead
from hpd_core.model.vision import InternViT, image_tokens, projector


class HPDModel(nn.Module):
    def __init__(self, cfg: HPDConfig, with_mtp: bool = True):
        super().__init__()
        self.config = cfg
        self.vision_model = InternViT(cfg.vision_config)
        self.mlp1 = projector(cfg)
        self.language_model = LanguageModel(cfg.llm_config, MTPHead(cfg.llm_config) if with_mtp else None)

    @property
    def lm(self) -> LanguageModel:
        return self.language_model

    @property
    def has_mtp(self) -> bool:
        return self.language_model.mtp is not None

    def encode_images(self, pixels: torch.Tensor, chunk: int = 8) -> torch.Tensor:
        """Tiles [T, 3, S, S] -> image rows [T · tokens_per_tile, H], a few tiles at a time."""
        pixels = pixels.to(self.mlp1[1].weight.dtype)
        return torch.cat([image_tokens(self.vision_model, self.mlp1, pixels[i:i + chunk], self.config.shuffle_scale)
                          for i in range(0, pixels.shape[0], chunk)])

    def embed_prompt(self, ids: torch.Tensor, image_rows: torch.Tensor, image_token_id: int) -> torch.Tensor:
        """Embeddings [n, H] of prompt ids [n] with the `<IMG_CONTEXT>` run replaced by image rows."""
        embeds = self.lm.embed(ids)
        slots = (ids == image_token_id).nonzero().flatten()
        if slots.numel() != image_rows.shape[0]:
            raise ValueError(f"prompt has {slots.numel()} image slots for {image_rows.shape[0]} image rows")
        if slots.numel() and int(slots[-1] - slots[0]) + 1 != slots.numel():
            raise ValueError("the <IMG_CONTEXT> tokens of the prompt are not contiguous")
        embeds = embeds.clone()
        embeds[slots] = image_rows.to(embeds.dtype)
        return embeds
