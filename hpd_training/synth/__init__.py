"""Synthetic document pages with exact ground truth in the HPD grammar.

    from hpd_training.synth import SynthConfig, render_page
    page = render_page(seed=7, config=SynthConfig.dense())
    page.image, page.blocks, page.lines, page.assembled_text
"""

from hpd_training.synth.config import LABELS, SynthConfig
from hpd_training.synth.page import Line, SynthPage, render_page

__all__ = ["LABELS", "Line", "SynthConfig", "SynthPage", "render_page"]
