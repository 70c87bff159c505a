"""RemoteEngine against hpd-serve: same results as the local engine, events, batches, retries, errors."""

from __future__ import annotations

import socket
import threading
import time

import httpx
import pytest
from PIL import Image

from hpd_core.events import BranchFinished, BranchForked, PageFinished, PageStarted, TokensAppended
from hpd_core.grammar import Block, format_assembled, format_parent
from hpd_core.loader import load_engine
from hpd_core.options import ParseOptions
from hpd_tools.backends import open_engine
from hpd_tools.remote import BranchSplitter, RemoteEngine, RemoteError
from hpd_tools.server import create_app, serving
from tests.tiny import write_checkpoint

OPTIONS = {"batched": ParseOptions(batch_children=True, max_new_tokens=45),
           "serial": ParseOptions(max_new_tokens=45),
           "plain": ParseOptions(prompt="plain", max_new_tokens=60)}
TIMING = {"vision_seconds", "prefill_seconds", "decode_seconds", "wall_seconds", "tokens_per_second"}


def counters(stats) -> dict:
    return {k: v for k, v in stats.as_dict().items() if k not in TIMING}


@pytest.fixture(scope="module")
def engine(tmp_path_factory):
    return load_engine(str(write_checkpoint(tmp_path_factory.mktemp("ckpt"), seed=0, noise=0.5)))


@pytest.fixture(scope="module")
def base(engine):
    with serving(create_app([engine])) as url:
        yield url


@pytest.fixture(scope="module")
def remote(base):
    engine = RemoteEngine(base)
    yield engine
    engine.close()


@pytest.fixture(scope="module")
def image():
    return Image.new("RGB", (60, 80), "white")


@pytest.mark.parametrize("mode", OPTIONS)
def test_remote_parse_equals_local_parse(engine, remote, image, mode):
    local, far = engine.parse(image, OPTIONS[mode]), remote.parse(image, OPTIONS[mode])
    assert (far.text, far.markdown, far.blocks, far.image_size) == (local.text, local.markdown, local.blocks,
                                                                     local.image_size)
    assert counters(far.stats) == counters(local.stats) and far.warnings == ()


@pytest.mark.parametrize("mode", OPTIONS)
def test_remote_stream_rebuilds_the_local_branches(engine, remote, image, mode):
    local = engine.parse(image, OPTIONS[mode])
    events = list(remote.stream(image, OPTIONS[mode]))
    assert isinstance(events[0], PageStarted) and isinstance(events[-1], PageFinished)
    result = events[-1].result
    assert (result.text, result.markdown, counters(result.stats)) == (local.text, local.markdown,
                                                                      counters(local.stats))
    forked = [e for e in events if isinstance(e, BranchForked)]
    assert len(forked) == local.stats.forked_branches
    assert [(e.branch, e.label, e.bbox) for e in forked] == [(b.branch, b.label, b.bbox) for b in local.branches[1:]]
    assert [b.text for b in result.branches[1:]] == [b.text for b in local.branches[1:]]
    finished = [e.branch for e in events if isinstance(e, BranchFinished)]
    assert sorted(finished) == list(range(len(local.branches))) and finished[-1] == 0
    assert all(e.token_ids == () for e in events if isinstance(e, TokensAppended))


def test_splitting_does_not_depend_on_chunk_boundaries():
    blocks = [Block("title", (10, 20, 900, 80), "Annual <b>report</b>"), Block("image", (10, 100, 500, 400)),
              Block("text", (10, 420, 900, 600), "a < b and <BLOC"), Block("page_number", (480, 950, 520, 990), "7")]
    text = format_assembled(blocks)
    runs = []
    for size in (len(text), 1, 3, 7):
        splitter = BranchSplitter(0, True, lambda: 0.0)
        events = [e for i in range(0, len(text), size) for e in splitter.feed(text[i:i + size])]
        events += splitter.close("stop")
        texts = {}
        for e in events:
            if isinstance(e, TokensAppended):
                texts[e.branch] = texts.get(e.branch, "") + e.text
        labels = [(e.label, e.bbox) for e in events if isinstance(e, BranchForked)]
        runs.append((texts, labels))
    assert all(run == runs[0] for run in runs)
    texts, labels = runs[0]
    assert texts[0] == format_parent(blocks)
    assert [texts[i] for i in (1, 2, 3)] == ["Annual <b>report</b>", "a < b and <BLOC", "7"]
    assert labels == [(b.label, b.bbox) for b in blocks if b.label != "image"]


def test_parse_batch_keeps_page_order(engine, remote):
    pages = [Image.new("RGB", size, color) for size, color in (((60, 80), "white"), ((120, 40), "black"),
                                                                ((50, 50), "gray"))]
    options = OPTIONS["batched"]
    assert [r.text for r in remote.parse_batch(pages, options)] == [engine.parse(p, options).text for p in pages]
    finished = {e.page: e.result for e in remote.stream_batch(pages, options) if isinstance(e, PageFinished)}
    assert [finished[i].image_size for i in range(3)] == [p.size for p in pages]


def test_cancel_stops_a_remote_stream_with_a_prefix_of_the_text(engine, remote, image):
    cancel = threading.Event()
    events = []
    for event in remote.stream(image, OPTIONS["serial"], cancel):
        events.append(event)
        if isinstance(event, TokensAppended):
            cancel.set()
    result = events[-1].result
    full = engine.parse(image, OPTIONS["serial"]).text
    assert result.cancelled and result.text and full.startswith(result.text) and len(result.text) < len(full)
    assert any(isinstance(e, BranchFinished) and e.reason == "cancelled" for e in events)


def test_connection_errors_are_retried(base, image, engine):
    real, attempts = httpx.HTTPTransport(), []

    def flaky(request: httpx.Request) -> httpx.Response:
        attempts.append(request.url.path)
        if len(attempts) <= 2:
            raise httpx.ConnectError("refused", request=request)
        return real.handle_request(request)

    remote = RemoteEngine(base, retries=2, backoff=0.01, transport=httpx.MockTransport(flaky))
    assert remote.parse(image, OPTIONS["batched"]).text == engine.parse(image, OPTIONS["batched"]).text
    assert len(attempts) == 3


def test_unreachable_server_raises_after_its_retries(image):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # closed again: nothing listens there
    started = time.perf_counter()
    with pytest.raises(RemoteError, match="cannot reach"):
        RemoteEngine(f"http://127.0.0.1:{port}/v1", retries=2, backoff=0.05).parse(image)
    assert time.perf_counter() - started >= 0.05 + 0.1


def test_server_refusals_carry_the_server_message(base, image):
    stranger = RemoteEngine(base, model="gpt-4o", retries=0)
    with pytest.raises(RemoteError, match="does not exist") as err:
        stranger.parse(image)
    assert err.value.status == 404
    with pytest.raises(RemoteError, match="does not serve"):
        stranger.info


def test_open_engine_dispatches_urls_to_the_remote_engine(base):
    engine = open_engine(base, model="HPD-Parsing")
    assert isinstance(engine, RemoteEngine) and engine.info.remote and engine.info.name == "HPD-Parsing"
    assert engine.info.parameters > 0 and engine.info.path == base and engine.info.extensions
