"""Cancellation: Stop in the app and Ctrl-C in hpd-parse end the work within the decode round in
progress, leave the engine usable, and keep what was already written.

The engine checks its cancel event once per decode round, so the property is counted in rounds,
not seconds: a cancel seen by the consumer of the stream between two events of round r ends
the stream with no token of a later round; a cancel from another thread (Stop) may also let the
round already computing finish (r + 1). With the bundled model (hpd-tiny, 21M) a round takes
~10-20 ms on a 2-core CPU. Vision encoding and prefill (~2 s per page) are not interruptible: a
cancel that arrives then takes effect at the first round.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
from gradio_client import Client, handle_file

from app.job import ParseJob
from app.examples import FOLDER
from app.ui import ParsePanel, build_demo
from hpd_core import load_engine
from hpd_tools import cli
from hpd_core.events import PageFinished, TokensAppended
from hpd_core.options import ParseOptions
from hpd_training.synth import render_page
from tests.test_documents import make_pdf
from tests.conftest import Scripted, app_options, handlers_of

PNG = FOLDER / "synth-report.png"
CONDITION_SECONDS = 120  # how long a test waits for a condition (decoding started, a file written)


@pytest.fixture(scope="module")
def bundled():
    return load_engine(None)


@pytest.fixture(scope="module")
def page():
    return render_page(3).image


def cancel_after(engine, image, options: ParseOptions, tokens: int):
    """(round in progress when the consumer cancelled, last round with tokens, result): the
    stream's consumer sets the cancel event once `tokens` tokens have arrived."""
    cancel, seen, at_cancel, last, result = threading.Event(), 0, None, 0, None
    for event in engine.stream(image, options, cancel):
        if isinstance(event, TokensAppended):
            seen += len(event.token_ids)
            last = event.round
            if seen >= tokens and at_cancel is None:
                at_cancel = event.round
                cancel.set()
        if isinstance(event, PageFinished):
            result = event.result
    return at_cancel, last, result


@pytest.mark.parametrize("options", [ParseOptions(), ParseOptions(batch_children=True, use_mtp=False)],
                         ids=["serial+mtp", "batched"])
def test_cancel_ends_the_bundled_models_stream_in_the_round_in_progress_and_the_engine_parses_again(
        bundled, page, options):
    small = page.resize((200, 260))
    before = bundled.parse(small, ParseOptions(max_new_tokens=20))
    at_cancel, last, result = cancel_after(bundled, page, options, tokens=40)
    assert at_cancel is not None and last == at_cancel  # no token from a round after the cancel
    assert result.cancelled and "cancelled" in {b.finish_reason for b in result.branches}
    assert result.stats.generated_tokens >= 40 and result.to_dict()["cancelled"] is True
    assert not bundled.lock.locked()
    assert bundled.parse(small, ParseOptions(max_new_tokens=20)).text == before.text


def test_a_cancel_before_decoding_starts_returns_an_empty_cancelled_page(bundled, page):
    cancel = threading.Event()
    cancel.set()
    result = bundled.parse(page.resize((200, 260)), ParseOptions(), cancel)
    assert result.cancelled and result.stats.generated_tokens == 0 and result.stats.rounds == 0


def test_stop_of_an_app_job_ends_it_within_a_round_and_frees_the_engine(bundled, page):
    job = ParseJob(bundled, [page], ParseOptions())
    deadline = time.monotonic() + CONDITION_SECONDS
    while job.view.tokens < 20:
        assert job.running and time.monotonic() < deadline, job.error
        time.sleep(0.01)
    with job.lock:  # the engine thread cannot apply an event meanwhile
        seen = job.view.round
        job.cancel_event.set()
    job.cancel()  # waits for the engine
    assert not job.running and job.error is None and job.view.result.cancelled
    assert job.view.result.stats.rounds <= seen + 1  # at most the round that was computing
    assert not bundled.lock.locked()


def test_stop_answers_after_the_parse_streams_last_frame(app_engine):
    """Stop and the parse handler both write the status; Stop's final answer must come after the
    stream's last frame, or a live frame rendered just before the cancel can overwrite it."""
    handlers = handlers_of(build_demo(Scripted(app_engine, loop_window=0)))
    request = SimpleNamespace(session_hash="one")
    stream = handlers.parse(request, str(PNG), 1, 90, "", "", *app_options(use_mtp=False, max_new_tokens=8000))
    status = handlers.parse_panel.status
    next(stream)  # the run exists
    late = next(stream)  # a live frame, not yet delivered
    assert "Decoding page 1" in late[status]
    answers = []
    stopper = threading.Thread(target=lambda: answers.append(("stop", handlers.stop(request))))
    stopper.start()
    assert handlers.runs["one"].job.done.wait(CONDITION_SECONDS)  # Stop has stopped the engine
    stopper.join(2)  # ... and must still wait: the stream has a frame to deliver
    answers += [("parse", late)] + [("parse", frame) for frame in stream]
    stopper.join(CONDITION_SECONDS)
    assert [who for who, _ in answers[-2:]] == ["parse", "stop"]
    assert all("Stopped; partial output of page 1" in frame[status] for _, frame in answers[-2:])


def test_stop_through_the_app_api_ends_the_parse_and_the_next_parse_works(endless_server):
    client = Client(endless_server, verbose=False)
    args = (handle_file(str(PNG)), 1, 90, "", "")
    job = client.submit(*args, *app_options(use_mtp=False, max_new_tokens=8000), api_name="/parse")  # until Stop
    deadline = time.monotonic() + CONDITION_SECONDS
    while job.status().code.name != "ITERATING":  # decoding, the live view is streaming
        assert time.monotonic() < deadline and not job.done()
        time.sleep(0.02)
    stopped = dict(zip(ParsePanel._fields, client.predict(api_name="/stop")))
    assert "Stopped; partial output of page 1 of synth-report.png" in stopped["status"]
    assert stopped["json"]["cancelled"] is True
    while not job.done():  # the stopped parse's handler has ended before the next parse starts
        assert time.monotonic() < deadline
        time.sleep(0.02)
    out = dict(zip(ParsePanel._fields, client.predict(*args, *app_options(use_mtp=False, max_new_tokens=20),
                                                      api_name="/parse")))
    assert "Parsed page 1 of synth-report.png" in out["status"]
    client.close()


class CtrlCAfterTokens:
    """An engine that presses Ctrl-C once page `page` has produced tokens, and notes in which round,
    and the last round that produced tokens after it."""

    def __init__(self, engine, page: int):
        self.engine, self.page, self.pages = engine, page, 0
        self.pressed_in: int | None = None
        self.last_round = 0

    @property
    def info(self):
        return self.engine.info

    def stream(self, image, options, cancel):
        self.pages += 1
        for event in self.engine.stream(image, options, cancel):
            if self.pages == self.page and isinstance(event, TokensAppended):
                self.last_round = event.round
                if self.pressed_in is None:
                    self.pressed_in = event.round
                    signal.raise_signal(signal.SIGINT)  # handled in this (the main) thread before it goes on
            yield event


def test_ctrl_c_ends_the_page_in_the_round_in_progress_keeps_written_pages_and_leaves_the_engine_usable(
        app_checkpoint, tmp_path, monkeypatch, capsys):
    pdf = tmp_path / "three.pdf"
    pdf.write_bytes(make_pdf(3, 200, 260))
    engines = []
    load = cli.engine_of
    monkeypatch.setattr(cli, "engine_of", lambda *a: engines.append(CtrlCAfterTokens(load(*a), page=2)) or engines[-1])
    out = tmp_path / "out"
    code = cli.main([str(pdf), "-o", str(out), "--model", str(app_checkpoint), "--no-mtp", "--max-new-tokens", "8000"])
    assert code == 130 and engines[0].last_round == engines[0].pressed_in
    assert sorted(p.name for p in out.rglob("*")) == ["page-0001.json", "page-0001.md", "three"]
    assert "interrupted; 0 files ok, 0 failed; 1 page parsed" in capsys.readouterr().err
    engine = engines[0].engine
    assert not engine.lock.locked() and engine.parse(render_page(0).image, ParseOptions(max_new_tokens=5))


def test_ctrl_c_in_a_real_hpd_parse_process_exits_130_and_keeps_the_finished_page(app_checkpoint, tmp_path):
    pdf = tmp_path / "two.pdf"
    pdf.write_bytes(make_pdf(2, 200, 260))
    out = tmp_path / "out"
    process = subprocess.Popen([sys.executable, "-m", "hpd_tools.cli", str(pdf), "-o", str(out), "--model",
                                str(app_checkpoint), "--no-mtp", "--max-new-tokens", "100000"],
                               stderr=subprocess.PIPE, text=True, cwd=Path(__file__).resolve().parent.parent)
    first = out / "two" / "page-0001.json"  # written before its .md, each atomically
    deadline = time.monotonic() + CONDITION_SECONDS
    while not first.exists():
        assert process.poll() is None and time.monotonic() < deadline
        time.sleep(0.02)
    process.send_signal(signal.SIGINT)  # page 1 is written or being written, page 2 starts or decodes
    _, err = process.communicate(timeout=CONDITION_SECONDS)
    assert process.returncode == 130, err
    assert "interrupted" in err and "Traceback" not in err
    assert sorted(p.name for p in (out / "two").iterdir()) == ["page-0001.json", "page-0001.md"]
