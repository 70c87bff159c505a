"""Example documents shown in the app: the supported files in assets/examples/, each with the
one-line description that `examples.json` beside them gives it (a JSON object {file name: line};
files it does not name are shown by name). How the synthetic ones were made: `hpd_training/examples.py`."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

FOLDER = Path(__file__).resolve().parent.parent / "assets" / "examples"
SUFFIXES = (".pdf", ".png", ".jpg", ".jpeg", ".webp", ".tif", ".tiff", ".bmp")
DESCRIPTIONS = "examples.json"


@dataclass(frozen=True)
class Example:
    path: Path
    description: str = ""

    @property
    def label(self) -> str:
        """What the example list shows: the file name and its description."""
        return f"{self.path.name}: {self.description}" if self.description else self.path.name


def example_files(folder: Path = FOLDER) -> list[Path]:
    """Supported files in `folder`, sorted by name (none if the folder is missing)."""
    if not folder.is_dir():
        return []
    return sorted(p for p in folder.iterdir() if p.is_file() and p.suffix.lower() in SUFFIXES)


def examples(folder: Path = FOLDER) -> list[Example]:
    """The example files of `folder` with their descriptions."""
    listed = folder / DESCRIPTIONS
    descriptions = json.loads(listed.read_text(encoding="utf-8")) if listed.is_file() else {}
    return [Example(path, " ".join(str(descriptions.get(path.name, "")).split())) for path in example_files(folder)]
