"""Example documents shown in the app: the supported files in assets/examples/, each with the
one-line description that `examples.json` beside them gives it and the bundled model that reads it
(a JSON object {file name: {"description": line, "model": bundled model name}}; files it does not
name are shown by name, for every model). The app on a bundled model shows the examples that model
reads; on any other model, all. How the synthetic ones were made: `hpd_training/examples.py`; the
real pages are pages of TeX Live documentation (assets/examples/SOURCES.md)."""

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
    model: str | None = None  # the bundled model that reads it; None: any

    @property
    def label(self) -> str:
        """What the example list shows: the file name and its description."""
        return f"{self.path.name}: {self.description}" if self.description else self.path.name


def example_files(folder: Path = FOLDER) -> list[Path]:
    """Supported files in `folder`, sorted by name (none if the folder is missing)."""
    if not folder.is_dir():
        return []
    return sorted(p for p in folder.iterdir() if p.is_file() and p.suffix.lower() in SUFFIXES)


def examples(folder: Path = FOLDER, model: str | None = None) -> list[Example]:
    """The example files of `folder` with their descriptions; with `model` (a bundled model's
    name), only those it reads."""
    listed = folder / DESCRIPTIONS
    entries = json.loads(listed.read_text(encoding="utf-8")) if listed.is_file() else {}
    found = [example(path, entries.get(path.name, {})) for path in example_files(folder)]
    return [e for e in found if model is None or e.model in (None, model)]


def example(path: Path, entry: dict) -> Example:
    """`path` with its examples.json entry ({} when it has none)."""
    return Example(path, " ".join(str(entry.get("description", "")).split()), entry.get("model"))
