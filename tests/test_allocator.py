"""The C heap keeps freed memory in the process once `keep_freed_memory` ran (hpd_core.allocator)."""

import ctypes.util
import subprocess
import sys

import pytest

PROBE = """
import sys, torch
from hpd_core.allocator import keep_freed_memory

def rss_mb():
    for line in open('/proc/self/status'):
        if line.startswith('VmRSS:'):
            return int(line.split()[1]) / 1024

if sys.argv[1] == 'keep':
    assert keep_freed_memory() and keep_freed_memory()   # idempotent
x = torch.ones(6 << 20)     # 24 MiB of float32, touched (under the 32 MiB the policy keeps)
before = rss_mb()
del x
print(before - rss_mb())
"""


def released_mb(mode: str) -> float:
    out = subprocess.run([sys.executable, "-c", PROBE, mode], capture_output=True, text=True, check=True)
    return float(out.stdout)


@pytest.mark.skipif(not sys.platform.startswith("linux") or ctypes.util.find_library("c") is None,
                    reason="glibc's mallopt and /proc are Linux's")
def test_freed_tensors_stay_with_the_process_only_after_keep_freed_memory():
    assert released_mb("default") > 20           # glibc hands the first large block back at once
    assert released_mb("keep") < 5               # ... and keeps it after keep_freed_memory


def test_loading_an_engine_on_the_cpu_sets_the_policy(app_checkpoint):
    from hpd_core.allocator import keep_freed_memory
    from hpd_core.loader import load_engine

    keep_freed_memory.cache_clear()
    load_engine(app_checkpoint, device="cpu")
    assert keep_freed_memory.cache_info().currsize == 1
