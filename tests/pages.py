"""A fake real-page source for the training tests: synthetic pages dressed as real ones, with
every third child's content untrained (as a real page's formulas and figures are)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
from PIL import Image

from hpd_core.grammar import Block
from hpd_training.synth import SynthConfig, render_page
from hpd_training.synth.page import SynthPage

KIND = SynthConfig.dense(width=640, min_blocks=6, max_blocks=9, font_size_range=(14.0, 17.0))


@dataclass(frozen=True)
class FakeRealPage:
    page: SynthPage

    @property
    def image(self) -> Image.Image:
        return self.page.image

    @property
    def blocks(self) -> list[Block]:
        return self.page.blocks

    @property
    def glyphs(self) -> np.ndarray:
        return self.page.glyphs

    @property
    def parent_text(self) -> str:
        return self.page.parent_text

    @property
    def children_texts(self) -> list[str]:
        return self.page.children_texts

    @property
    def child_glyphs(self) -> list[np.ndarray | None]:
        return [g if i % 3 else None for i, g in enumerate(self.page.child_glyphs)]

    @property
    def child_trained(self) -> list[bool]:
        return [i % 3 != 0 for i in range(len(self.children_texts))]

    @property
    def assembled_text(self) -> str:
        return self.page.assembled_text


def source(data: Path | None = None):
    """`--real-source tests.pages:source`: seed -> a fake real page (`data` unused)."""
    return lambda seed: FakeRealPage(render_page(seed, KIND))
