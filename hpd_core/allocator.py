"""The C heap's policy for freed memory, for fast CPU decoding.

By default glibc's malloc gives large freed blocks back to the kernel (a block over the dynamic mmap
threshold is munmap-ed at once; the top of the heap is trimmed past 128 KiB), so the next page's
tensors of the same sizes come from fresh pages that the kernel zero-fills on first touch. A page's
vision tower and prefill allocate and free hundreds of MB this way: on the 2-core VM this project
measures on, first touch of 26 MB took 0.12-0.16 s, and vision + prefill of a page 1.73-1.88 s with
the default policy against 1.32-1.47 s with the one below (bench/NOTES.md, "The C heap").

`keep_freed_memory` sets it: blocks under 32 MiB (glibc's largest mmap threshold; every tensor of
the bundled models) come from the heap, a free keeps up to 1 GiB at its top instead of trimming,
and the heap grows 256 MiB at a time. The cost is resident memory: a process keeps its peak heap
(a few hundred MB for the bundled models) after a page instead of returning it. Setting only the
trim threshold turns glibc's dynamic mmap threshold off and was slower (2.45 s), so all three go
together. A no-op where the C library is not glibc.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools

# mallopt parameters (glibc's malloc.h)
M_TRIM_THRESHOLD = -1
M_TOP_PAD = -2
M_MMAP_THRESHOLD = -3

TRIM_THRESHOLD = 1 << 30
TOP_PAD = 256 << 20
MMAP_THRESHOLD = 32 << 20   # glibc's maximum (HEAP_MAX / 2 on 64-bit)


@functools.cache
def keep_freed_memory() -> bool:
    """Sets glibc's malloc to keep freed memory in the process (once per process). True where it
    was set, False where the C library has no mallopt (not glibc) or refused a value."""
    libc = _glibc()
    if libc is None:
        return False
    settings = ((M_MMAP_THRESHOLD, MMAP_THRESHOLD), (M_TRIM_THRESHOLD, TRIM_THRESHOLD), (M_TOP_PAD, TOP_PAD))
    return all(libc.mallopt(param, value) == 1 for param, value in settings)


def _glibc() -> ctypes.CDLL | None:
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    libc = ctypes.CDLL(name)
    if not hasattr(libc, "mallopt") or not hasattr(libc, "gnu_get_libc_version"):
        return None
    libc.mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    libc.mallopt.restype = ctypes.c_int
    return libc
