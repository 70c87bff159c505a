"""hpd_vllm: HPD-Parsing on stock vLLM, behind the engine API of hpd_core.

    from hpd_vllm import load_engine
    engine = load_engine(None)          # the bundled model; vLLM runs its language model
    result = engine.parse(image, ParseOptions(batch_children=True))

- backend.py  `VLLMEngine`: our vision tower makes the prompt, vLLM decodes; forks are prefix-cached requests
- convert.py  an HPD checkpoint as vLLM folders (the LM as Qwen3ForCausalLM, the P-MTP head as a draft model)
- draft.py    the P-MTP head as vLLM draft model (speculative method "eagle")
- plugin.py   the `vllm.general_plugins` entry point that registers it, for `vllm serve`
- remote.py   `ServerLM`: a `vllm serve` process of the converted language model, driven like vLLM's engine
- loader.py   `load_engine`

hpd_core imports none of this; only this package imports vllm (and only when an engine is made).
"""

import importlib

_EXPORTS = {"VLLMEngine": "backend", "load_engine": "loader", "convert": "convert", "VLLMFolders": "convert"}
__all__ = sorted(_EXPORTS)


def __getattr__(name):
    if name not in _EXPORTS:
        raise AttributeError(f"module 'hpd_vllm' has no attribute {name!r}")
    return getattr(importlib.import_module(f"hpd_vllm.{_EXPORTS[name]}"), name)
