"""The app as an API: gradio_client against the real server (tiny forking checkpoint)."""

from pathlib import Path

import pytest
from gradio_client import Client, handle_file
from gradio_client.exceptions import AppError

from app.examples import FOLDER
from app.latex import katex_markdown
from app.selection import marked_markdown
from app.ui import ParsePanel
from hpd_core import ParseOptions
from hpd_core.documents import load_pages
from tests.conftest import app_options

PNG = FOLDER / "synth-report.png"


@pytest.fixture(scope="module")
def client(app_server):
    return Client(app_server, verbose=False)


def parse(client, path, **options):
    o = {"use_mtp": True, "num_speculative_tokens": 6, "batch_children": False, "max_new_tokens": 60, **options}
    out = client.predict(handle_file(str(path)), 1, 90, "", "", *app_options(**o), api_name="/parse")
    return dict(zip(ParsePanel._fields, out))


def downloaded(value) -> Path:
    return Path(value["value"] if isinstance(value, dict) else value)


def test_every_event_is_a_named_endpoint(client):
    endpoints = client.view_api(print_info=False, return_format="dict")["named_endpoints"]
    assert {"/parse", "/stop", "/compare", "/stop_compare", "/open_document", "/unlock", "/show_page"} <= set(endpoints)


def test_parse_endpoint_returns_what_the_engine_returns(client, app_engine):
    out = parse(client, PNG, batch_children=True)
    expected = app_engine.parse(load_pages(PNG)[0].image, ParseOptions(batch_children=True, max_new_tokens=60))
    assert out["json"]["text"] == expected.text
    assert out["json"]["blocks"] == expected.to_dict()["blocks"]
    assert out["raw"] == expected.markdown and out["markdown"] == katex_markdown(marked_markdown(expected.blocks))
    assert out["json"]["stats"]["forwards"] == expected.stats.forwards
    assert 'class="hpd-status done"' in out["status"]
    md, data = downloaded(out["download_md"]), downloaded(out["download_json"])
    assert (md.name, data.name) == ("synth-report-p1.md", "synth-report-p1.json")
    assert md.read_text(encoding="utf-8") == expected.markdown + "\n"


def test_parse_endpoint_reports_bad_files_and_options_clearly(client, tmp_path):
    bad = tmp_path / "bad.pdf"
    bad.write_bytes(b"%PDF-1.7\n" + b"\x00garbage" * 100)
    with pytest.raises(AppError, match="'bad.pdf' is"):
        parse(client, bad)
    empty = tmp_path / "empty.png"
    empty.write_bytes(b"")
    with pytest.raises(AppError, match="empty"):
        parse(client, empty)
    with pytest.raises(AppError, match="11 is greater than maximum value 10"):
        parse(client, PNG, num_speculative_tokens=11)


def test_compare_endpoint_checks_exact_match(client):
    out = client.predict(handle_file(str(PNG)), 1, 90, "", "", "children serial vs batched",
                         *app_options(use_mtp=True, batch_children=False, max_new_tokens=40), api_name="/compare")
    summary = out[-2]
    assert 'data-match="exact"' in summary and "Speedup B over A" in summary
    assert out[-1] == ""  # no diff
