"""Model configuration, with the field names of the real `config.json` (docs/format.md §2).

`HPDConfig.from_dict` reads the real file (and ours); unknown fields are kept in `extra`
so that `to_dict` writes them back. Defaults follow the real model where the file is silent.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any


class ConfigError(ValueError):
    """A config.json that cannot describe a model we can run."""


def _take(cls, raw: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    names = {f.name for f in fields(cls)} - {"extra"}
    return {k: v for k, v in raw.items() if k in names}, {k: v for k, v in raw.items() if k not in names}


@dataclass(frozen=True)
class VisionConfig:
    hidden_size: int = 1024
    intermediate_size: int = 4096
    num_hidden_layers: int = 24
    num_attention_heads: int = 16
    num_channels: int = 3
    image_size: int = 448
    patch_size: int = 14
    layer_norm_eps: float = 1e-6
    hidden_act: str = "gelu"
    qkv_bias: bool = True
    norm_type: str = "layer_norm"
    extra: dict[str, Any] = field(default_factory=dict, compare=False)

    def __post_init__(self):
        if self.hidden_size % self.num_attention_heads:
            raise ConfigError("vision_config.hidden_size must be a multiple of num_attention_heads")
        if self.image_size % self.patch_size:
            raise ConfigError("vision_config.image_size must be a multiple of patch_size")
        if self.hidden_act != "gelu" or self.norm_type != "layer_norm" or self.num_channels != 3:
            raise ConfigError(f"unsupported InternViT variant: act={self.hidden_act}, "
                              f"norm={self.norm_type}, channels={self.num_channels}")

    @property
    def grid(self) -> int:
        """Patches per tile side."""
        return self.image_size // self.patch_size


@dataclass(frozen=True)
class LLMConfig:
    vocab_size: int = 151681
    hidden_size: int = 1024
    intermediate_size: int = 3072
    num_hidden_layers: int = 28
    num_attention_heads: int = 16
    num_key_value_heads: int = 8
    head_dim: int = 128
    max_position_embeddings: int = 40960
    rms_norm_eps: float = 1e-6
    rope_theta: float = 1_000_000.0
    hidden_act: str = "silu"
    tie_word_embeddings: bool = False
    extra: dict[str, Any] = field(default_factory=dict, compare=False)

    def __post_init__(self):
        if self.num_attention_heads % self.num_key_value_heads:
            raise ConfigError("llm_config.num_attention_heads must be a multiple of num_key_value_heads")
        if self.hidden_act != "silu":
            raise ConfigError(f"unsupported LM activation {self.hidden_act!r}")
        if self.head_dim % 2:
            raise ConfigError("llm_config.head_dim must be even for rotary embeddings")

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> "LLMConfig":
        known, extra = _take(cls, raw)
        rope = raw.get("rope_parameters") or raw.get("rope_scaling") or {}
        if "rope_theta" not in known and isinstance(rope, dict) and "rope_theta" in rope:
            known["rope_theta"] = rope["rope_theta"]
        known.setdefault("head_dim", raw.get("hidden_size", cls.hidden_size) // raw.get(
            "num_attention_heads", cls.num_attention_heads))
        return cls(**known, extra=extra)


@dataclass(frozen=True)
class HPDConfig:
    vision_config: VisionConfig = field(default_factory=VisionConfig)
    llm_config: LLMConfig = field(default_factory=LLMConfig)
    downsample_ratio: float = 0.5
    force_image_size: int = 448
    min_dynamic_patch: int = 1
    max_dynamic_patch: int = 24
    use_thumbnail: bool = True
    fork_token_id: int = 151679
    child_token_id: int = 151680
    eos_token_id: int = 151645
    pad_token_id: int = 151643
    render_dpi: float | None = None  # ours: the PDF render resolution it was trained for (None: DEFAULT_DPI)
    extra: dict[str, Any] = field(default_factory=dict, compare=False)

    def __post_init__(self):
        if self.force_image_size != self.vision_config.image_size:
            raise ConfigError("force_image_size must equal vision_config.image_size")
        if not 1 <= self.min_dynamic_patch <= self.max_dynamic_patch:
            raise ConfigError("need 1 <= min_dynamic_patch <= max_dynamic_patch")
        scale = round(1 / self.downsample_ratio)
        if abs(scale * self.downsample_ratio - 1) > 1e-9 or self.vision_config.grid % scale:
            raise ConfigError(f"downsample_ratio {self.downsample_ratio} does not divide the "
                              f"{self.vision_config.grid}-patch grid")

    @property
    def shuffle_scale(self) -> int:
        """Side of the square of patches merged into one LM token (2 for ratio 0.5)."""
        return round(1 / self.downsample_ratio)

    @property
    def tokens_per_tile(self) -> int:
        return (self.vision_config.grid // self.shuffle_scale) ** 2

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> "HPDConfig":
        known, extra = _take(cls, raw)
        known["vision_config"] = VisionConfig(**_split(VisionConfig, raw.get("vision_config", {})))
        known["llm_config"] = LLMConfig.from_dict(raw.get("llm_config", {}))
        try:
            return cls(**known, extra=extra)
        except TypeError as err:
            raise ConfigError(f"bad config.json: {err}") from None

    @classmethod
    def load(cls, path: str | Path) -> "HPDConfig":
        path = Path(path)
        try:
            raw = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise ConfigError(f"no config.json at {path}") from None
        except json.JSONDecodeError as err:
            raise ConfigError(f"{path} is not valid JSON: {err}") from None
        return cls.from_dict(raw)

    def to_dict(self) -> dict[str, Any]:
        out = {**self.extra, **{k: v for k, v in asdict(self).items()
                                if k != "extra" and not (k == "render_dpi" and v is None)}}
        out["vision_config"] = {**self.vision_config.extra, **_plain(self.vision_config)}
        out["llm_config"] = {**self.llm_config.extra, **_plain(self.llm_config)}
        return out

    def save(self, path: str | Path) -> None:
        Path(path).write_text(json.dumps(self.to_dict(), indent=2, ensure_ascii=False) + "\n",
                              encoding="utf-8")


def _split(cls, raw: dict[str, Any]) -> dict[str, Any]:
    known, extra = _take(cls, raw)
    return {**known, "extra": extra}


def _plain(cfg) -> dict[str, Any]:
    return {k: v for k, v in asdict(cfg).items() if k != "extra"}
