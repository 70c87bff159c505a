"""`load_engine`: a `VLLMEngine` for a checkpoint folder, a hub repo id, or the bundled model.

The checkpoint is converted for vLLM once (convert.py) into a cache folder named after its files
(`$HPD_VLLM_CACHE`, default ~/.cache/hpd-vllm/); our engine is loaded beside it for the prompts.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
from pathlib import Path

import torch

from hpd_core.engine import Engine
from hpd_core.loader import load_engine as load_hpd_engine
from hpd_core.loader import resolve_model
from hpd_vllm.backend import VLLMEngine, check_llm_kwargs
from hpd_vllm.convert import VLLMFolders, convert
from hpd_vllm.remote import ServerLM


def cache_root() -> Path:
    return Path(os.environ.get("HPD_VLLM_CACHE") or Path.home() / ".cache" / "hpd-vllm")


def fingerprint(source: str | Path | None) -> str:
    """A digest of the checkpoint's file names, sizes and modification times (and the P-MTP folder's)."""
    folder, mtp = resolve_model(source)
    files = [f for d in (folder, mtp or folder / "P-MTP") if d.is_dir() for f in sorted(d.iterdir()) if f.is_file()]
    stamp = [(str(f), f.stat().st_size, f.stat().st_mtime_ns) for f in files]
    return hashlib.sha256(json.dumps(stamp).encode()).hexdigest()[:16]


def converted(source: str | Path | None) -> VLLMFolders:
    """convert.py's folders for `source`, made on the first call."""
    out = cache_root() / fingerprint(source)
    done = out / "converted.json"
    if not done.is_file():
        folders = convert(source, out)
        done.write_text(json.dumps({"draft": str(folders.draft) if folders.draft else None}) + "\n")
    draft = json.loads(done.read_text())["draft"]
    return VLLMFolders(out, Path(draft) if draft else None)


def load_engine(source: str | Path | None = None, *, device: str | None = None, dtype: torch.dtype | None = None,
                vision_bf16: bool | None = None, server: str | None = None, **llm_kwargs) -> VLLMEngine:
    """As `hpd_core.load_engine` (no URLs), with vLLM running the language model: in this process
    (`llm_kwargs` go to `vllm.LLM`, e.g. `enforce_eager=False`, `gpu_memory_utilization=0.5`), or in
    the `vllm serve` process at `server` (`http://host:port/v1`) of `python -m hpd_vllm.convert`'s
    language-model folder of the same checkpoint."""
    if importlib.util.find_spec("vllm") is None:
        raise ModuleNotFoundError("the vllm backend needs vLLM: pip install -e '.[vllm]', then on a CPU "
                                  "pip uninstall -y torchvision torchaudio torchcodec (docs/serving.md §5)")
    check_llm_kwargs(llm_kwargs)
    hpd = load_hpd_engine(source, device=device, dtype=dtype, vision_bf16=vision_bf16)
    assert isinstance(hpd, Engine)
    remote = ServerLM(server, hpd.model.lm.embed) if server else None
    return VLLMEngine(hpd, None if remote else converted(source), llm_kwargs=llm_kwargs, server=remote)
