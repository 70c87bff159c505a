"""hpd_core: an inference engine for HPD-Parsing checkpoints.

Hierarchical parallel decoding (a layout branch forks one content branch per block)
and P-MTP speculative decoding over an InternViT + Qwen3 model, in plain PyTorch.

    from hpd_core import load_engine, ParseOptions
    engine = load_engine(None)                     # the bundled model
    result = engine.parse(image, ParseOptions(use_mtp=True, num_speculative_tokens=6))
    for event in engine.stream(image, ParseOptions(batch_children=True)): ...

Names are imported lazily, so `import hpd_core.grammar` does not pull in torch.
"""

import importlib

_EXPORTS = {
    "Engine": "engine", "EngineInfo": "engine", "load_engine": "loader", "ParseOptions": "options",
    "ParseResult": "result", "Stats": "result", "Block": "grammar",
    "Event": "events", "PageStarted": "events", "BranchForked": "events", "TokensAppended": "events",
    "BranchFinished": "events", "PageFinished": "events",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name):
    if name not in _EXPORTS:
        raise AttributeError(f"module 'hpd_core' has no attribute {name!r}")
    return getattr(importlib.import_module(f"hpd_core.{_EXPORTS[name]}"), name)
