"""The `hpd` vLLM plugin (entry point group `vllm.general_plugins`, see pyproject.toml).

vLLM calls `register()` in every process it starts (`vllm serve`, `LLM(...)`), so a stock vLLM
knows the P-MTP draft architecture of convert.py's draft/ folder without being patched.
"""

from hpd_vllm.convert import DRAFT_ARCHITECTURE


def register() -> None:
    from vllm import ModelRegistry
    if DRAFT_ARCHITECTURE not in ModelRegistry.get_supported_archs():
        ModelRegistry.register_model(DRAFT_ARCHITECTURE, "hpd_vllm.draft:HPDDraftModel")
