"""An HPD checkpoint as folders stock vLLM loads: the language model and the P-MTP draft head.

    python -m hpd_vllm.convert [SOURCE] OUT      # SOURCE: a checkpoint folder (default: the bundled model)

    OUT/              Qwen3ForCausalLM: config.json, model.safetensors, tokenizer.json, tokenizer_config.json
    OUT/draft/        the P-MTP head as vLLM draft model `EagleHPDParsingMTP` (run as method "eagle"; the
                      architecture is registered by the `hpd` vLLM plugin, see hpd_vllm/plugin.py)

Tensors keep their dtype and values: `language_model.model.*` -> `model.*`, `language_model.lm_head.*`
-> `lm_head.*`, `language_model.mtp.*` -> `*` in draft/ (the head shares the LM's embed_tokens and
lm_head inside vLLM, so they are not copied). The vision tower stays in the HPD checkpoint: our
preprocessing and InternViT make the image rows that vLLM takes as prompt embeddings.
"""

from __future__ import annotations

import argparse
import json
import shutil
from dataclasses import dataclass
from pathlib import Path

import torch
from safetensors.torch import save_file

from hpd_core.checkpoint import MTP_PREFIX, checkpoint_tensors
from hpd_core.config import HPDConfig, LLMConfig
from hpd_core.loader import resolve_model

LM_PREFIX = "language_model."
DRAFT_ARCHITECTURE = "EagleHPDParsingMTP"


@dataclass(frozen=True)
class VLLMFolders:
    lm: Path                   # the language model folder (what `vllm serve` is given)
    draft: Path | None         # its P-MTP draft folder (the `speculative_config` model), None without a head


def qwen3_config(llm: LLMConfig, cfg: HPDConfig, architecture: str, dtype: torch.dtype, layers: int) -> dict:
    """A transformers Qwen3 config.json of the HPD language model (`layers` decoder layers)."""
    return {"architectures": [architecture], "model_type": "qwen3", "vocab_size": llm.vocab_size,
            "hidden_size": llm.hidden_size, "intermediate_size": llm.intermediate_size,
            "num_hidden_layers": layers, "num_attention_heads": llm.num_attention_heads,
            "num_key_value_heads": llm.num_key_value_heads, "head_dim": llm.head_dim,
            "max_position_embeddings": llm.max_position_embeddings, "rms_norm_eps": llm.rms_norm_eps,
            "rope_parameters": {"rope_type": "default", "rope_theta": llm.rope_theta},
            "hidden_act": llm.hidden_act, "tie_word_embeddings": llm.tie_word_embeddings,
            "attention_bias": False, "eos_token_id": cfg.eos_token_id, "pad_token_id": cfg.pad_token_id,
            "dtype": str(dtype).removeprefix("torch.")}


def tokenizer_config() -> dict:
    return {"tokenizer_class": "PreTrainedTokenizerFast", "eos_token": "<|im_end|>", "pad_token": "<|endoftext|>",
            "model_max_length": 1 << 20, "clean_up_tokenization_spaces": False}


def convert(source: str | Path | None, out: str | Path) -> VLLMFolders:
    """Write the vLLM folders of the HPD checkpoint `source` (None: the bundled model) under `out`."""
    folder, mtp_folder = resolve_model(source)
    cfg = HPDConfig.load(folder / "config.json")
    tensors = checkpoint_tensors(folder, mtp_folder)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    lm = {k.removeprefix(LM_PREFIX): v.contiguous() for k, v in tensors.items()
          if k.startswith(LM_PREFIX) and not k.startswith(MTP_PREFIX)}
    dtype = lm["model.embed_tokens.weight"].dtype
    write(out, lm, qwen3_config(cfg.llm_config, cfg, "Qwen3ForCausalLM", dtype, cfg.llm_config.num_hidden_layers))
    shutil.copyfile(folder / "tokenizer.json", out / "tokenizer.json")
    (out / "tokenizer_config.json").write_text(json.dumps(tokenizer_config(), indent=2) + "\n")
    mtp = {k.removeprefix(MTP_PREFIX): v.contiguous() for k, v in tensors.items() if k.startswith(MTP_PREFIX)}
    if not mtp:
        return VLLMFolders(out, None)
    draft = out / "draft"
    draft.mkdir(exist_ok=True)
    write(draft, mtp, qwen3_config(cfg.llm_config, cfg, DRAFT_ARCHITECTURE, dtype, 1))
    return VLLMFolders(out, draft)


def write(folder: Path, tensors: dict[str, torch.Tensor], config: dict) -> None:
    (folder / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    save_file(tensors, str(folder / "model.safetensors"), metadata={"format": "pt"})


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="hpd-vllm-convert", description=__doc__.split("\n\n")[0])
    parser.add_argument("source", nargs="?", default=None, help="HPD checkpoint folder (default: the bundled model)")
    parser.add_argument("out", type=Path, help="output folder")
    args = parser.parse_args(argv)
    folders = convert(args.source, args.out)
    print(f"language model: {folders.lm}\ndraft head:     {folders.draft or 'none (the checkpoint has no P-MTP head)'}")


if __name__ == "__main__":
    main()
