"""Fast versions of bench/load_app.py and bench/soak.py on the tiny checkpoint: simultaneous
app sessions queue and all succeed; consecutive parses do not grow memory or leave files."""

from __future__ import annotations

from bench.load_app import run as load_app
from bench.soak import page_files, soak_client, soak_engine
from hpd_core.options import ParseOptions
from hpd_training.synth import render_page


def test_three_simultaneous_app_sessions_queue_and_all_succeed(app_checkpoint):
    summary = load_app(str(app_checkpoint), sessions=3, parses=1, max_new_tokens=300, deadline_s=120)
    assert summary["completed"] == 3 and summary["errors"] == [], summary["errors"]
    assert 1 in summary["queue_ranks_seen"]  # the third session waited behind two others
    rss = summary["server_rss_mb"]
    assert rss["peak"] - rss["idle"] < 300, rss  # the whole app with the tiny model idles at ~450 MB


def test_consecutive_engine_parses_do_not_grow_memory(app_engine):
    pages = [render_page(seed).image for seed in range(2)]
    soak = soak_engine(app_engine, 6, ParseOptions(max_new_tokens=200), pages)
    assert soak["growth_mb"] < 20, soak["rss_mb"]


def test_consecutive_app_parses_do_not_grow_memory_or_fail(app_server, tmp_path):
    import psutil
    process = psutil.Process()  # the app server runs in this process
    soak = soak_client(app_server, 5, 100, page_files(tmp_path, 2), lambda: process.memory_info().rss)
    assert soak["errors"] == [] and soak["growth_mb"] < 30, soak
