"""Security properties of the engine, the app and the server: no code execution from model
files, model paths only from the command line or the environment, uploads and result files
cleaned up, safe download names, no reading of server files through the API, loopback by default."""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path
from types import SimpleNamespace

import httpx
import pytest
from gradio.route_utils import delete_files_created_by_app
from gradio_client import Client, handle_file
from hypothesis import given, settings
from hypothesis import strategies as st
from PIL import Image

import app.ui as ui
from app.downloads import write_downloads
from app.ui import ParsePanel, build_demo
from hpd_core.documents import Page
from hpd_core.grammar import Block
from hpd_core.markdown import to_markdown
from hpd_core.result import ParseResult, Stats
from hpd_tools.forms import option_specs
from hpd_tools.server import create_app, serving
from tests.conftest import app_options, handlers_of, serve

ROOT = Path(__file__).resolve().parent.parent
SOURCES = sorted([*ROOT.glob("hpd_core/**/*.py"), *ROOT.glob("hpd_tools/**/*.py"), *ROOT.glob("app/**/*.py"),
                  ROOT / "app.py"])
PICKLE_MODULES = {"pickle", "cPickle", "_pickle", "dill", "cloudpickle", "joblib", "shelve", "marshal"}
PNG = ROOT / "assets" / "examples" / "synth-report.png"


def unsafe_loading(tree: ast.AST) -> list[str]:
    """Pickle imports, torch.load / *.load of a pickle module, trust_remote_code=, allow_pickle=True,
    weights_only=False, eval/exec: what could run code from a file."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            names = [a.name for a in node.names] + ([node.module] if isinstance(node, ast.ImportFrom) else [])
            found += [f"import {n}" for n in names if n and n.split(".")[0] in PICKLE_MODULES]
        elif isinstance(node, ast.Call):
            func = ast.unparse(node.func)
            if func in ("torch.load", "eval", "exec") or re.fullmatch(r"(pickle|dill|joblib)\.\w+", func):
                found.append(func)
            for keyword in node.keywords:
                value = ast.unparse(keyword.value)
                if keyword.arg == "trust_remote_code" or (keyword.arg, value) in (
                        ("allow_pickle", "True"), ("weights_only", "False")):
                    found.append(f"{func}({keyword.arg}={value})")
    return found


def test_the_scan_finds_what_it_looks_for():
    code = ("import pickle\nfrom dill import loads\nimport torch\ntorch.load('m.pt')\nnp.load(f, allow_pickle=True)\n"
            "AutoModel.from_pretrained(p, trust_remote_code=True)\neval('1')\n")
    assert len(unsafe_loading(ast.parse(code))) == 6


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_source_loads_pickles_or_remote_code(path):
    assert unsafe_loading(ast.parse(path.read_text(encoding="utf-8"))) == []


def calls(path: Path, names: set[str]) -> list[str]:
    """Names of the functions in `path` that call one of `names`."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return sorted({fn.name for fn in ast.walk(tree) if isinstance(fn, ast.FunctionDef)
                   for node in ast.walk(fn) if isinstance(node, ast.Call) and ast.unparse(node.func) in names})


LOADERS = {"load_engine", "open_engine"}  # hpd_core's, and hpd_tools.backends' (a folder, a hub id or a server)


def test_models_are_loaded_only_from_the_command_line_entry_points():
    loading = {str(p.relative_to(ROOT)): calls(p, LOADERS) for p in ROOT.glob("app/*.py")}
    loading["hpd_tools/server.py"] = calls(ROOT / "hpd_tools/server.py", LOADERS)
    assert loading == {**dict.fromkeys(loading, []), "app/__main__.py": ["main"], "hpd_tools/server.py": ["main"]}


def test_the_app_api_takes_no_model_path(app_server):
    """Every input of every endpoint is a document input, a decoding option, the compared mode or the
    finished page to show."""
    endpoints = Client(app_server, verbose=False).view_api(print_info=False, return_format="dict")["named_endpoints"]
    labels = {p["label"] for e in endpoints.values() for p in e["parameters"]}
    documents = {"Document (PDF, PNG, JPEG, WebP, TIFF, BMP)", "Page", "Render DPI (PDF)", "PDF password", "Pages to parse",
                 "Finished pages", "Compare"}
    assert labels <= documents | {spec.name for spec in option_specs()}, labels


@pytest.mark.parametrize("model", ["../assets/hpd-tiny", "/etc/passwd", str(ROOT / "assets" / "hpd-tiny"),
                                   "PaddlePaddle/HPD-Parsing", "hpd-parsing"])
def test_the_server_refuses_any_model_but_the_served_one(app_engine, model):
    with serving(create_app([app_engine])) as base:
        response = httpx.post(base + "/chat/completions", json={"model": model, "messages": []}, timeout=30)
    assert response.status_code == 404 and "does not exist; this server serves 'HPD-Parsing'" in response.text


def test_the_app_api_cannot_read_server_files(app_server):
    api = app_server + "gradio_api"
    for path in ("/etc/passwd", str(PNG), str(ROOT / "assets" / "hpd-tiny" / "config.json")):
        event = httpx.post(api + "/call/open_document", timeout=30,
                           json={"data": [{"path": path, "meta": {"_type": "gradio.FileData"}}, 90, ""]})
        stream = httpx.get(f"{api}/call/open_document/{event.json()['event_id']}", timeout=30).text
        assert stream.startswith("event: error") and "hpd-status" not in stream, stream
        assert httpx.get(f"{api}/file={path}", timeout=30).status_code == 403


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=60), st.integers(1, 10_000))
def test_download_files_stay_in_their_folder_with_safe_names(tmp_path_factory, name, page):
    folder = tmp_path_factory.mktemp("downloads")
    result = ParseResult("", [Block("text", None, "x")], to_markdown([Block("text", None, "x")]), Stats(), (10, 10))
    for path in write_downloads(folder, name, [Page(Image.new("RGB", (10, 10)), page, "x", None)], [result]):
        assert path.parent.parent == folder and path.is_file()
        assert re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*-p\d+\.(md|json)", path.name), path.name


@pytest.fixture
def cached_app(app_engine, tmp_path, monkeypatch):
    """The app with its Gradio files in tmp_path/gradio and 2 runs kept. Its files live the default
    hour (CACHE_SECONDS): none can expire between an upload and its parse, or between a result and
    the client's fetch of it, however slow the machine; the test says when the hour has passed."""
    monkeypatch.setenv("GRADIO_TEMP_DIR", str(tmp_path / "gradio"))
    monkeypatch.setattr(ui, "MAX_RUNS", 2)
    demo = build_demo(app_engine)
    with serve(demo) as url:
        yield url, demo, handlers_of(demo), tmp_path / "gradio"


def files(folder: Path) -> list[Path]:
    return [p for p in folder.rglob("*") if p.is_file()]


def parse_in_new_session(url: str, upload: Path) -> str:
    client = Client(url, verbose=False)  # each Client is one Gradio session
    out = dict(zip(ParsePanel._fields, client.predict(
        handle_file(str(upload)), 1, 90, "", "", *app_options(max_new_tokens=10), api_name="/parse")))
    client.close()
    return out["status"]


def test_gradio_deletes_the_apps_cached_files_after_the_cache_lifetime(app_engine):
    assert build_demo(app_engine, cache_seconds=7).delete_cache == (7, 7)  # every 7 s, files older than 7 s
    assert build_demo(app_engine).delete_cache == (ui.CACHE_SECONDS, ui.CACHE_SECONDS)


def test_uploads_and_result_files_do_not_accumulate(cached_app, tmp_path):
    url, demo, handlers, cache = cached_app
    uploads = [tmp_path / f"upload-{i}.png" for i in range(5)]
    for i, upload in enumerate(uploads):
        upload.write_bytes(PNG.read_bytes() + bytes(i))  # distinct files, each cached on its own
    for upload in uploads[:4]:
        assert f"Parsed page 1 of {upload.name}" in parse_in_new_session(url, upload)
    assert len(handlers.runs) == 2  # MAX_RUNS: older sessions' runs are dropped ...
    assert len(files(handlers.downloads)) == 2 * 2  # ... with their .md and .json
    empty = [p for p in files(cache) if p.stat().st_size == 0]
    assert empty  # Gradio's gr.File leaves an empty temp file per request (app/cache.py)
    handlers.cache_seconds = 0  # the lifetime has passed: every file made so far is older than it
    parse_in_new_session(url, uploads[4])  # each parse sweeps the old ones
    assert not any(p.exists() for p in empty)
    delete_files_created_by_app(demo, age=0)  # Gradio's scheduled pass (delete_cache), at the same age
    assert [p for p in files(cache) if p.stat().st_size] == []  # uploads and served copies are gone
    assert len(files(cache)) <= 1  # the last request's empty file, until the next parse


def test_result_files_are_written_once_per_run_and_kept_until_the_run_is_dropped(cached_app):
    url, _, handlers, _ = cached_app
    assert "Parsed page 1" in parse_in_new_session(url, PNG)
    [run] = handlers.runs.values()
    written = run.downloads
    assert all(path.is_file() for path in written)
    handlers._final(run)  # Stop renders a finished run again, maybe while Gradio still copies the first files
    assert run.downloads == written and all(path.is_file() for path in written)
    handlers.forget(SimpleNamespace(session_hash=next(iter(handlers.runs))))  # the tab was closed
    assert not handlers.runs and not any(path.exists() for path in written)


def test_servers_listen_on_loopback_unless_told_otherwise(app_checkpoint, monkeypatch, capsys):
    import app.__main__ as app_main
    import hpd_tools.server as server
    launched, served = {}, {}
    monkeypatch.setattr(app_main, "launch", lambda demo, limits, **kwargs: launched.update(kwargs))
    app_main.main(["--model", str(app_checkpoint)])
    assert launched["server_name"] == "127.0.0.1" and launched["share"] is False
    monkeypatch.setattr(server.uvicorn, "run", lambda app, **kwargs: served.update(kwargs))
    monkeypatch.setattr(sys, "argv", ["hpd-serve"])
    server.main(["--model", str(app_checkpoint)])
    assert served["host"] == "127.0.0.1"
    assert "reachable from other machines" not in capsys.readouterr().err
    server.main(["--model", str(app_checkpoint), "--host", "0.0.0.0"])
    assert served["host"] == "0.0.0.0"
    assert "reachable from other machines; there is no authentication" in capsys.readouterr().err
