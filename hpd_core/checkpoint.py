"""Checkpoint folders: load and save HPD models in the real tensor layout (docs/format.md §2).

A folder holds `config.json`, `tokenizer.json` and `model.safetensors` (or shards listed in
`model.safetensors.index.json`). The P-MTP head is either embedded (`language_model.mtp.*`) or
in a `P-MTP/` folder (`config.json` + `model.safetensors`); there its tensors may be named
`language_model.mtp.*` or `mtp.*`, and the copies of `embed_tokens`/`lm_head` it carries are
ignored (the head shares the main model's). Only safetensors are read: never pickle.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch
from safetensors import safe_open
from safetensors.torch import save_file

from hpd_core.config import HPDConfig
from hpd_core.model import HPDModel

MTP_PREFIX = "language_model.mtp."
SHARED_IN_MTP = ("embed_tokens.weight", "lm_head.weight")


class CheckpointError(ValueError):
    """A checkpoint whose tensors do not fit the model its config describes."""


def read_tensors(folder: Path) -> dict[str, torch.Tensor]:
    """All tensors of `model.safetensors` or of the shards its index lists."""
    index = folder / "model.safetensors.index.json"
    if index.is_file():
        files = sorted(set(json.loads(index.read_text())["weight_map"].values()))
    elif (folder / "model.safetensors").is_file():
        files = ["model.safetensors"]
    else:
        raise CheckpointError(f"no model.safetensors or model.safetensors.index.json in {folder}")
    tensors = {}
    for name in files:
        with safe_open(str(folder / name), framework="pt") as f:
            tensors.update({key: f.get_tensor(key) for key in f.keys()})
    return tensors


def read_mtp_folder(folder: Path) -> dict[str, torch.Tensor]:
    """The P-MTP head tensors of a `P-MTP/` folder, renamed to `language_model.mtp.*`."""
    out = {}
    for key, value in read_tensors(folder).items():
        if key.endswith(SHARED_IN_MTP):
            continue
        rest = key.removeprefix("language_model.").removeprefix("model.").removeprefix("mtp.")
        out[MTP_PREFIX + rest] = value
    return out


def check_tensors(expected: dict[str, torch.Tensor], found: dict[str, torch.Tensor], where: str) -> None:
    missing = sorted(expected.keys() - found.keys())
    extra = sorted(found.keys() - expected.keys())
    shapes = [f"{k}: file {tuple(found[k].shape)}, model {tuple(expected[k].shape)}"
              for k in sorted(expected.keys() & found.keys()) if found[k].shape != expected[k].shape]
    problems = [f"{label} ({len(names)}): " + ", ".join(names[:8]) + (" ..." if len(names) > 8 else "")
                for label, names in (("missing tensors", missing), ("unexpected tensors", extra),
                                     ("mis-shaped tensors", shapes)) if names]
    if problems:
        raise CheckpointError(f"{where} does not match its config: " + "; ".join(problems))


def checkpoint_tensors(folder: Path, mtp_folder: str | Path | None = None) -> dict[str, torch.Tensor]:
    """The checkpoint's tensors with its P-MTP head: embedded, or from `mtp_folder` (default
    `folder/P-MTP`) when that has one."""
    tensors = read_tensors(folder)
    mtp_dir = Path(mtp_folder) if mtp_folder else folder / "P-MTP"
    if not any(k.startswith(MTP_PREFIX) for k in tensors) and (mtp_dir / "config.json").is_file():
        tensors.update(read_mtp_folder(mtp_dir))
    return tensors


def load_model(folder: str | Path, *, dtype: torch.dtype = torch.float32, device: str | torch.device = "cpu",
               mtp_folder: str | Path | None = None) -> HPDModel:
    """The model of a checkpoint folder; with the P-MTP head when the checkpoint or
    `mtp_folder` (default `folder/P-MTP`) has one."""
    folder = Path(folder)
    cfg = HPDConfig.load(folder / "config.json")
    tensors = checkpoint_tensors(folder, mtp_folder)
    with torch.device("meta"):
        model = HPDModel(cfg, with_mtp=any(k.startswith(MTP_PREFIX) for k in tensors))
    expected = model.state_dict()
    if cfg.llm_config.tie_word_embeddings:
        expected.pop("language_model.lm_head.weight")
        tensors.pop("language_model.lm_head.weight", None)
    check_tensors(expected, tensors, str(folder))
    model.load_state_dict({k: v.to(dtype) for k, v in tensors.items()}, strict=False, assign=True)
    if cfg.llm_config.tie_word_embeddings:
        model.language_model.lm_head.weight = model.language_model.model.embed_tokens.weight
    return model.to(device).eval()


def save_model(model: HPDModel, folder: str | Path, *, dtype: torch.dtype = torch.bfloat16,
               shard_bytes: int = 14 * 2**20, mtp_folder: str | Path | None = None) -> None:
    """Write config.json and the weights (sharded under `shard_bytes`). With `mtp_folder`, the
    P-MTP head goes there (with copies of embed_tokens and lm_head, like the real P-MTP/ folder);
    otherwise it stays embedded as `language_model.mtp.*`."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    model.config.save(folder / "config.json")
    state = {k: v.detach().to("cpu", dtype).contiguous() for k, v in model.state_dict().items()}
    if model.config.llm_config.tie_word_embeddings:
        state.pop("language_model.lm_head.weight")
    if mtp_folder is not None:
        mtp = {k: state.pop(k) for k in list(state) if k.startswith(MTP_PREFIX)}
        if mtp:
            mtp["language_model.model.embed_tokens.weight"] = state["language_model.model.embed_tokens.weight"]
            mtp["language_model.lm_head.weight"] = state.get("language_model.lm_head.weight",
                                                             mtp["language_model.model.embed_tokens.weight"])
            write_tensors(mtp, Path(mtp_folder), shard_bytes, mtp_config(model.config))
    write_tensors(state, folder, shard_bytes)


def mtp_config(cfg: HPDConfig) -> dict:
    llm = cfg.llm_config
    return {"architectures": ["HPDParsingMTP"], "model_type": "hpd_mtp", "hidden_size": llm.hidden_size,
            "intermediate_size": llm.intermediate_size, "rms_norm_eps": llm.rms_norm_eps,
            "vocab_size": llm.vocab_size, "num_hidden_layers": 1, "num_speculative_tokens": 6}


def write_tensors(state: dict[str, torch.Tensor], folder: Path, shard_bytes: int, config: dict | None = None) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for old in list(folder.glob("model*.safetensors")) + list(folder.glob("model.safetensors.index.json")):
        old.unlink()
    if config is not None:
        (folder / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    shards, size = [[]], 0
    for key in sorted(state):
        nbytes = state[key].numel() * state[key].element_size()
        if shards[-1] and size + nbytes > shard_bytes:
            shards.append([])
            size = 0
        shards[-1].append(key)
        size += nbytes
    if len(shards) == 1:
        save_file(state, str(folder / "model.safetensors"), metadata={"format": "pt"})
        return
    weight_map = {}
    for i, keys in enumerate(shards, 1):
        name = f"model-{i:05d}-of-{len(shards):05d}.safetensors"
        save_file({k: state[k] for k in keys}, str(folder / name), metadata={"format": "pt"})
        weight_map.update(dict.fromkeys(keys, name))
    total = sum(v.numel() * v.element_size() for v in state.values())
    (folder / "model.safetensors.index.json").write_text(
        json.dumps({"metadata": {"total_size": total}, "weight_map": weight_map}, indent=2) + "\n")
