"""Security properties of the entry points (filled in below)."""

from __future__ import annotations

import gradio as gr

from app.ui import Handlers


def handlers_of(demo: gr.Blocks) -> Handlers:
    """The `Handlers` behind a demo built by `build_demo`."""
    return next(f.fn.__self__ for f in demo.fns.values() if getattr(f.fn, "__self__", None).__class__ is Handlers)
