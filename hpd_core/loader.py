"""`load_engine`: the engine of a checkpoint folder, a Hugging Face repo id, or the bundled model."""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path

import torch

from hpd_core.allocator import keep_freed_memory
from hpd_core.checkpoint import load_model
from hpd_core.engine import Engine
from hpd_core.graphs import DecodeGraphs, DraftGraphs
from hpd_core.model.kernels import compiled, fused_when_wide
from hpd_core.tokenizer import HPDTokenizer

REPO_ROOT = Path(__file__).resolve().parent.parent
BUNDLED_MODEL = REPO_ROOT / "assets" / "hpd-tiny"
BUNDLED_MTP = REPO_ROOT / "P-MTP"
# the bundled models by name: hpd-tiny (the default; large print) and hpd-tiny-docs (the preview
# that reads real born-digital documents at 150 DPI; its draft head in its own P-MTP/)
BUNDLED = {"hpd-tiny": (BUNDLED_MODEL, BUNDLED_MTP),
           "hpd-tiny-docs": (REPO_ROOT / "assets" / "hpd-tiny-docs", REPO_ROOT / "assets" / "hpd-tiny-docs" / "P-MTP")}


def bundled_name(path: str | Path) -> str | None:
    """The name of the bundled model in folder `path`, or None for any other checkpoint."""
    return next((name for name, (folder, _) in BUNDLED.items() if Path(path) == folder), None)


class ModelNotFound(FileNotFoundError):
    pass


def resolve_model(source: str | Path | None) -> tuple[Path, Path | None]:
    """(checkpoint folder, P-MTP folder or None) for a path, a bundled model's name (`BUNDLED`),
    a hub repo id, or None (the bundled hpd-tiny; the HPD_MODEL environment variable overrides it)."""
    source = source or os.environ.get("HPD_MODEL") or "hpd-tiny"
    path = Path(source).expanduser()
    if path.is_dir():
        return path, None
    if str(source) in BUNDLED:
        folder, mtp = BUNDLED[str(source)]
        if not (folder / "config.json").is_file():
            raise ModelNotFound(f"the bundled model {source} is missing from {folder}")
        return folder, mtp if (mtp / "config.json").is_file() else None
    if str(source).count("/") == 1 and not path.exists():
        from huggingface_hub import snapshot_download
        try:
            return Path(snapshot_download(str(source))), None
        except Exception as err:  # the hub raises many types; say which repo and why
            raise ModelNotFound(f"could not get {source} from the Hugging Face hub: {err}") from err
    raise ModelNotFound(f"no model folder at {source}")


def load_engine(source: str | Path | None = None, *, device: str | None = None,
                dtype: torch.dtype | None = None, vision_bf16: bool | None = None,
                cuda_graphs: bool = True, fused: bool = True, max_pages_in_flight: int = 0) -> Engine:
    """An engine for a checkpoint folder, a bundled model's name (hpd-tiny, hpd-tiny-docs), a hub
    repo id (e.g. PaddlePaddle/HPD-Parsing), or, with None, the bundled hpd-tiny. fp32 on CPU, bf16
    on CUDA unless `dtype` says otherwise.
    `vision_bf16`: an fp32 model runs its vision tower in bf16 autocast (2.6x faster on a CPU
    with bf16 instructions, same parse quality: bench/NOTES.md); None: where the CPU has them.
    `cuda_graphs`: on CUDA, decode forwards and a step's drafts run as captured CUDA graphs
    (`hpd_core.graphs`; the same tokens as eager, which is the reference path and the CPU's).
    `fused`: q, k, v and gate, up run as one matmul each (every device), and on CUDA the decoder's
    norms (with the residual adds), rotary and merge run as kernels fused by torch.compile and wide
    attention over the cache as one memory-efficient kernel (`hpd_core.model.kernels`; the CPU
    keeps the eager reference: Inductor's C++ compile there took ~1 minute for the tiny test model).
    In bf16 on CUDA, decode attention also reads the KV blocks in place (`hpd_core.model.paged`:
    1.12x the gather's tokens/s on the 64-page replay, bench/NOTES.md); float32 keeps the gather,
    the path measured exact in every mode on the GPU (the kernel's key splits follow the batch size).
    False: the reference path, a matmul per checkpoint tensor.
    `max_pages_in_flight`: the most pages a batched decode holds at once, later pages starting as
    earlier ones finish (`Engine`; 0: all it is given). With the real checkpoint on one GPU a page
    holds ~0.4 GB of KV, so a 512-page batch needs a cap (bench/NOTES.md: 64 on an H100).
    On a CPU the C heap keeps freed memory in the process (`hpd_core.allocator`: 0.3-0.5 s less per
    page on a 2-core VM, for a few hundred MB more resident memory).
    (A server URL is opened by `hpd_tools.backends.open_engine`.)"""
    folder, mtp = resolve_model(source)
    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    if torch.device(device).type == "cpu":
        keep_freed_memory()
    dtype = dtype or (torch.bfloat16 if str(device).startswith("cuda") else torch.float32)
    hpd = load_model(folder, dtype=dtype, device=device, mtp_folder=mtp)
    if fused:
        hpd.lm.fuse_projections()
    if torch.device(device).type == "cuda":
        if cuda_graphs:
            hpd.lm.model.graphs = DecodeGraphs(capture=True)
            hpd.lm.draft_graphs = DraftGraphs(capture=True)
        if fused:
            kernels = compiled()
            paged = None
            if dtype == torch.bfloat16:
                from hpd_core.model.paged import paged_attend  # Triton: with CUDA's torch only
                paged = paged_attend
            hpd.lm.model.kernels = replace(kernels, attend=fused_when_wide(kernels.attend), paged=paged)
    name = f"bundled {bundled_name(folder)}" if bundled_name(folder) else folder.name
    if vision_bf16 is None:
        vision_bf16 = str(device) == "cpu" and cpu_has_bf16()
    autocast = torch.bfloat16 if vision_bf16 and dtype == torch.float32 else None
    return Engine(hpd, HPDTokenizer.load(folder, hpd.config), name=name, path=str(folder), vision_autocast=autocast,
                  max_pages_in_flight=max_pages_in_flight)


def cpu_has_bf16() -> bool:
    """Native bf16 matrix instructions (AVX512-BF16 or AMX): without them bf16 is slower than fp32."""
    return torch.cpu._is_avx512_bf16_supported() or torch.cpu._is_amx_tile_supported()
