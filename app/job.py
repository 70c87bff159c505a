"""A parse running in a background thread, folding the engine's events into one `PageView` per page.

The pages (PIL images or `documents.Page`s, possibly a lazy iterator that renders them) are decoded
`batch` at a time through `engine.stream_batch`: batched modes decode a batch's pages together,
serial children decode them one after another (the engine's choice; the output is the same).
The engine decodes at full speed in its own thread; UI handlers poll the views at a few frames
per second (`frames`) instead of rendering per token. `cancel()` sets the engine's cancel event,
which it checks every decode round, so a stopped job ends (and frees the engine) within a round;
pages finished before that keep their results.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterable, Iterator
from itertools import islice

from app.state import PageView
from hpd_core.engine import Engine
from hpd_core.options import ParseOptions

log = logging.getLogger(__name__)
FRAME_SECONDS = 0.15   # at most ~7 UI updates per second
JOIN_SECONDS = 30.0    # how long cancel() waits for the engine to stop
PAGE_BATCH = 4         # pages given to one engine.stream_batch call (held in memory together)


class ParseJob:
    def __init__(self, engine: Engine, pages: Iterable, options: ParseOptions, batch: int = PAGE_BATCH):
        """Renders (takes) the first batch of `pages` before it returns; the others as it goes."""
        self.options = options
        self.pages: list = []                  # the pages handed to the engine so far, in order
        self.views: list[PageView] = []        # one per page in `pages`
        self.lock = threading.Lock()           # held while the views change or are rendered
        self.cancel_event = threading.Event()
        self.changed = threading.Event()
        self.done = threading.Event()
        self.error: Exception | None = None
        self.started, self.ended = time.monotonic(), None
        pages = iter(pages)
        self._add(list(islice(pages, batch)))  # the first batch here: `view` exists from the start
        self.thread = threading.Thread(target=self._run, args=(engine, pages, batch), daemon=True,
                                       name="hpd-parse")
        self.thread.start()

    def _add(self, chunk: list) -> int:
        """Append a batch of pages and their (empty) views; the index of its first page."""
        with self.lock:
            first = len(self.views)
            self.pages += chunk
            self.views += [PageView(self.options) for _ in chunk]
        return first

    def _run(self, engine: Engine, pages: Iterator, batch: int) -> None:
        first, chunk = 0, list(self.pages)
        try:
            while chunk:  # a page added is always decoded: its view gets a result (a cancelled one at worst)
                for event in engine.stream_batch(chunk, self.options, self.cancel_event):
                    with self.lock:
                        self.views[first + event.page].apply(event)
                    self.changed.set()
                chunk = [] if self.cancel_event.is_set() else list(islice(pages, batch))
                first = self._add(chunk)
        except Exception as exc:  # the UI thread reports it; the engine's own errors are specific
            log.exception("parse failed")
            self.error = exc
        finally:
            self.ended = time.monotonic()
            self.done.set()
            self.changed.set()

    @property
    def current(self) -> int:
        """Index of the page being decoded: the first without a result (else the last page)."""
        return next((i for i, v in enumerate(self.views) if v.result is None), len(self.views) - 1)

    @property
    def view(self) -> PageView:
        """The view of the page being decoded (the last page's once all are done)."""
        return self.views[self.current]

    @property
    def finished(self) -> list[int]:
        """Indices of the pages decoded to the end (not cancelled), in order."""
        return [i for i, v in enumerate(self.views) if v.result is not None and not v.result.cancelled]

    @property
    def seconds(self) -> float:
        return (self.ended or time.monotonic()) - self.started

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
