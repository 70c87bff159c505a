"""Example documents shown in the app: the supported files in assets/examples/ (how the synthetic
ones were made: `hpd_training/examples.py`)."""

from __future__ import annotations

from pathlib import Path

FOLDER = Path(__file__).resolve().parent.parent / "assets" / "examples"
SUFFIXES = (".pdf", ".png", ".jpg", ".jpeg", ".webp", ".tif", ".tiff", ".bmp")


def example_files(folder: Path = FOLDER) -> list[Path]:
    """Supported files in `folder`, sorted by name (none if the folder is missing)."""
    if not folder.is_dir():
        return []
    return sorted(p for p in folder.iterdir() if p.is_file() and p.suffix.lower() in SUFFIXES)
