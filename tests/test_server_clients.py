"""The app and the CLI drive a real hpd-serve through `--server URL` and get the local engine's result."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from gradio_client import Client, handle_file

from app.render import info_markdown
from app.ui import ParsePanel, build_demo
from hpd_tools.cli import main as hpd_parse
from hpd_core.documents import load_pages
from hpd_core.loader import load_engine
from hpd_tools.backends import open_engine
from hpd_core.options import ParseOptions
from hpd_tools.server import create_app, serving
from tests.conftest import app_options, serve

PNG = Path(__file__).resolve().parent.parent / "assets" / "examples" / "synth-report.png"
OPTIONS = ParseOptions(batch_children=True, max_new_tokens=60)


@pytest.fixture(scope="module")
def server(app_engine):
    with serving(create_app([app_engine])) as url:
        yield url


@pytest.fixture(scope="module")
def expected(app_engine):
    return app_engine.parse(load_pages(PNG)[0].image, OPTIONS)


def test_cli_with_server_writes_the_local_engines_result(server, expected, tmp_path):
    code = hpd_parse([str(PNG), "-o", str(tmp_path), "--server", server, "--batch-children",
                      "--max-new-tokens", "60"])
    assert code == 0
    page = json.loads(next(tmp_path.rglob("page-0001.json")).read_text())
    assert page["text"] == expected.text
    assert page["markdown"] == expected.markdown


def test_app_with_server_parses_and_says_which_backend(server, expected):
    remote = open_engine(server)
    assert remote.info.remote and remote.info.extensions
    with serve(build_demo(remote)) as url:
        client = Client(url, verbose=False)
        out = client.predict(handle_file(str(PNG)), 1, 90, "", "", *app_options(batch_children=True, max_new_tokens=60),
                             api_name="/parse")
        assert dict(zip(ParsePanel._fields, out))["json"]["text"] == expected.text
        assert "remote server" in info_markdown(remote.info)
