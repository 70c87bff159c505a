"""Shared fixtures. App fixtures (app_*): a tiny forking checkpoint, its engine, and the Gradio
app served on a free local port for the browser and gradio_client tests.

Every demo served here (`serve`) is watched by `parses_end_with_their_test`: a test's parses
have ended before the next test starts, so a parse that a test leaves running (a closed browser
tab, a stopped client job) never overlaps the next test's parse on the same server."""

import socket
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace

import pytest

from tests.tiny import write_checkpoint

SERVED: list = []       # Handlers of the demos being served
IDLE_SECONDS = 300      # how long a test's leftover parse may take to end (the engine stops within a round)


@pytest.fixture(scope="session")
def app_checkpoint(tmp_path_factory):
    return write_checkpoint(tmp_path_factory.mktemp("app-ckpt") / "tiny", seed=0, noise=0.5)


@pytest.fixture(scope="session")
def app_engine(app_checkpoint):
    from hpd_core import load_engine
    return load_engine(app_checkpoint)


def app_options(**given) -> list:
    """The app API's option inputs (one per ParseOptions field, in field order): the defaults and `given`."""
    from hpd_tools.forms import option_specs
    values = {s.name: s.default for s in option_specs()} | given
    return [values[s.name] for s in option_specs()]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def handlers_of(demo):
    """The `app.ui.Handlers` behind a demo built by `build_demo`."""
    from app.ui import Handlers
    return next(f.fn.__self__ for f in demo.fns.values() if isinstance(getattr(f.fn, "__self__", None), Handlers))


@contextmanager
def serve(demo, *launch_args) -> Iterator[str]:
    """URL of `demo` served by a real Gradio server in this process (app.ui.launch), until exit."""
    from app.ui import launch
    port = free_port()
    launch(demo, *launch_args, server_name="127.0.0.1", server_port=port, prevent_thread_lock=True, quiet=True)
    handlers = handlers_of(demo)
    SERVED.append(handlers)
    try:
        yield f"http://127.0.0.1:{port}/"
    finally:
        SERVED.remove(handlers)
        stop_on_its_loop(demo.app.stop_event)
        demo.close()


def stop_on_its_loop(event, timeout: float = 30.0) -> None:
    """Set Gradio's `stop_event` (an asyncio.Event) in the server's own event loop. `demo.close()`
    sets it from this thread, and asyncio.Event is not thread-safe: when the loop adds or removes
    a waiter meanwhile, set() fails with "deque mutated during iteration" (seen once in a run on a
    loaded machine). Set here first, close()'s set() finds it set and does nothing."""
    loop = getattr(event, "_loop", None)  # bound on its first wait; None: nothing waits on it yet
    if loop is None or not loop.is_running():
        return
    done = threading.Event()
    loop.call_soon_threadsafe(lambda: (event.set(), done.set()))
    done.wait(timeout)


@pytest.fixture(autouse=True)
def parses_end_with_their_test():
    yield
    for handlers in SERVED:
        with handlers.runs_lock:
            runs = list(handlers.runs.values())
        for run in runs:
            assert run.job.done.wait(IDLE_SECONDS), f"run {run.number} still decoding {IDLE_SECONDS} s after its test"


@pytest.fixture(scope="session")
def app_server(app_engine):
    """URL of `build_demo(app_engine)` served by a real Gradio server in this process."""
    from app.ui import build_demo
    with serve(build_demo(app_engine)) as url:
        yield url


class Scripted:
    """The tiny engine with part of its behaviour fixed by a test. `loop_window=0`: no loop
    detection, so a page decodes until its token limits (minutes at the default 8000 per branch)
    and only Stop ends it early, however fast the machine. `blocks`: every page it finishes reads
    these (what the browser shows of a known page)."""

    def __init__(self, engine, loop_window: int | None = None, blocks: Sequence | None = None):
        self.engine, self.loop_window, self.blocks = engine, loop_window, blocks

    @property
    def info(self):
        return self.engine.info

    def stream(self, page, options, cancel=None):
        return self.stream_batch([page], options, cancel)

    def stream_batch(self, pages, options, cancel=None):
        from hpd_core.events import PageFinished
        from hpd_core.markdown import to_markdown
        if self.loop_window is not None:
            options = replace(options, loop_window=self.loop_window)
        for event in self.engine.stream_batch(pages, options, cancel):
            if isinstance(event, PageFinished) and self.blocks is not None:
                written = replace(event.result, blocks=list(self.blocks), markdown=to_markdown(self.blocks))
                event = PageFinished(event.page, written)
            yield event


@pytest.fixture(scope="session")
def endless_server(app_engine):
    """Like app_server, on the tiny engine without loop detection: a page decodes until Stop."""
    from app.ui import build_demo
    with serve(build_demo(Scripted(app_engine, loop_window=0))) as url:
        yield url
