"""hpd_core: an inference engine for HPD-Parsing checkpoints.

Hierarchical parallel decoding (a layout branch forks one content branch per block)
and P-MTP speculative decoding over an InternViT + Qwen3 model, in plain PyTorch.
"""
