"""Shared fixtures. App fixtures (app_*): a tiny forking checkpoint, its engine, and the Gradio
app served on a free local port for the browser and gradio_client tests."""

import socket

import pytest

from tests.tiny import write_checkpoint


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


@pytest.fixture(scope="session")
def app_server(app_engine):
    """URL of `build_demo(app_engine)` served by a real Gradio server in this process."""
    from app.ui import build_demo, launch
    demo = build_demo(app_engine)
    port = free_port()
    launch(demo, server_name="127.0.0.1", server_port=port, prevent_thread_lock=True, quiet=True)
    yield f"http://127.0.0.1:{port}/"
    demo.close()
