"""Gradio's upload folder: removing what Gradio itself leaves there.

gradio 6.31's `gr.File(type="filepath")` creates an empty `NamedTemporaryFile(delete=False)`
in its cache folder each time a handler receives a file, and never tracks or deletes it
(`components/file.py`, `File.preprocess`). `delete_cache` only removes files Gradio tracks,
so these accumulate: one empty file per request. `sweep_leftovers` removes them once they
are older than the cache lifetime (an upload in progress is also a `tmp*` file in that
folder, but it is younger, or it is not empty).
"""

from __future__ import annotations

import time
from pathlib import Path


def sweep_leftovers(cache: str | Path, age: float) -> int:
    """Delete empty `tmp*` files directly in `cache` last changed more than `age` seconds ago;
    returns how many."""
    removed, cutoff = 0, time.time() - age
    for path in Path(cache).glob("tmp*"):
        try:
            status = path.lstat()
            if path.is_file() and status.st_size == 0 and status.st_ctime < cutoff:
                path.unlink()
                removed += 1
        except FileNotFoundError:  # removed meanwhile
            continue
    return removed
