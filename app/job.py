"""A parse running in a background thread, folding the engine's events into a `PageView`.

The engine decodes at full speed in its own thread; UI handlers poll the view at a few frames
per second (`frames`) instead of rendering per token. `cancel()` sets the engine's cancel event,
which it checks every decode round, so a stopped job ends (and frees the engine) within a round.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator

from PIL import Image

from app.state import PageView
from hpd_core.engine import Engine
from hpd_core.options import ParseOptions

log = logging.getLogger(__name__)
FRAME_SECONDS = 0.15   # at most ~7 UI updates per second
JOIN_SECONDS = 30.0    # how long cancel() waits for the engine to stop


class ParseJob:
    def __init__(self, engine: Engine, image: Image.Image, options: ParseOptions):
        self.view = PageView(options)
        self.lock = threading.Lock()           # held while the view changes or is rendered
        self.cancel_event = threading.Event()
        self.changed = threading.Event()
        self.done = threading.Event()
        self.error: Exception | None = None
        self.thread = threading.Thread(target=self._run, args=(engine, image, options), daemon=True,
                                       name="hpd-parse")
        self.thread.start()

    def _run(self, engine: Engine, image: Image.Image, options: ParseOptions) -> None:
        try:
            for event in engine.stream(image, options, self.cancel_event):
                with self.lock:
                    self.view.apply(event)
                self.changed.set()
        except Exception as exc:  # the UI thread reports it; the engine's own errors are specific
            log.exception("parse failed")
            self.error = exc
        finally:
            self.done.set()
            self.changed.set()

    def frames(self, interval: float = FRAME_SECONDS) -> Iterator[None]:
        """Yields while the job runs, at most once per `interval` and only after a change;
        returns when the job is done (the caller then renders the final view)."""
        while not self.done.is_set():
            started = time.monotonic()
            if self.changed.wait(interval) and not self.done.is_set():
                self.changed.clear()
                yield
            time.sleep(max(0.0, interval - (time.monotonic() - started)))

    def cancel(self, wait: float = JOIN_SECONDS) -> None:
        """Stop decoding and wait until the engine is free again."""
        self.cancel_event.set()
        self.thread.join(wait)

    @property
    def running(self) -> bool:
        return not self.done.is_set()
