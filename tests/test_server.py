"""hpd-serve: the official HPD request shape, streaming, errors, admission and cancellation."""

from __future__ import annotations

import base64
import io
import threading
import time

import httpx
import openai
import pytest
from PIL import Image

from hpd_core.events import PageFinished, TokensAppended
from hpd_core.loader import load_engine
from hpd_core.options import ParseOptions
from hpd_tools.server import DocumentOrder, ServeConfig, create_app, replicas, serving
from tests.tiny import write_checkpoint

FORK_PROMPT = "document parsing with fork."
MAX_BODY = 2**20


def data_url(image: Image.Image) -> str:
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode()


def messages(url: str, text: str = FORK_PROMPT) -> list[dict]:
    return [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": url}},
                                         {"type": "text", "text": text}]}]


def body(url: str, **fields) -> dict:
    return {"model": "HPD-Parsing", "messages": messages(url), "max_tokens": 3, "temperature": 0, **fields}


def health(base: str) -> dict:
    return httpx.get(base.removesuffix("/v1") + "/health").json()


def wait_for(condition, seconds: float = 20) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "condition not reached in time"
        time.sleep(0.02)


class HeldEngine:
    """An engine whose decode pauses after each event until `go` is set or it is cancelled,
    then for `delay` seconds."""

    def __init__(self, engine, delay: float = 0.0):
        self.engine, self.go, self.delay = engine, threading.Event(), delay

    def __getattr__(self, name):
        return getattr(self.engine, name)

    def stream(self, page, options, cancel=None):
        for event in self.engine.stream(page, options, cancel):
            yield event
            while not self.go.wait(0.01) and not cancel.is_set():
                pass
            time.sleep(self.delay)


@pytest.fixture(scope="module")
def engine(tmp_path_factory):
    return load_engine(str(write_checkpoint(tmp_path_factory.mktemp("ckpt"), seed=0, noise=0.5)))


@pytest.fixture(scope="module")
def image():
    return Image.new("RGB", (60, 80), "white")


@pytest.fixture(scope="module")
def base(engine):
    with serving(create_app([engine], ServeConfig(max_body_bytes=MAX_BODY))) as url:
        yield url


@pytest.fixture(scope="module")
def client(base):
    return openai.OpenAI(base_url=base, api_key="unused", max_retries=0)


def test_official_client_request_gives_the_local_engine_text(engine, image, client):
    response = client.chat.completions.create(model="HPD-Parsing", messages=messages(data_url(image)),
                                              max_tokens=8000, temperature=0)
    local = engine.parse(image, ParseOptions(max_new_tokens=8000, batch_children=True))
    assert response.choices[0].message.content == local.text
    assert local.stats.forked_branches > 5
    assert response.usage.prompt_tokens == local.stats.prompt_tokens
    assert response.usage.completion_tokens == local.stats.generated_tokens
    extra = response.model_extra
    assert extra["hpd_stats"]["forked_branches"] == local.stats.forked_branches
    assert extra["spec_decode_metrics"]["num_draft_tokens"] == local.stats.drafted_tokens
    assert extra["spec_decode_metrics"]["num_accepted_tokens"] == local.stats.accepted_tokens
    assert extra["spec_decode_metrics"]["mean_acceptance_length"] == pytest.approx(local.stats.mean_accepted_length)


@pytest.mark.parametrize("fields", [{"batch_children": True}, {"batch_children": False},
                                    {"use_mtp": False, "max_active_branches": 2}])
@pytest.mark.parametrize("instruction", [FORK_PROMPT, "document parsing."])
def test_streamed_chunks_concatenate_to_the_non_streamed_text(client, image, fields, instruction):
    request = dict(model="HPD-Parsing", messages=messages(data_url(image), instruction), max_tokens=45,
                   temperature=0, extra_body=fields)
    whole = client.chat.completions.create(**request).choices[0].message.content
    chunks = list(client.chat.completions.create(**request, stream=True, stream_options={"include_usage": True}))
    pieces = [c.choices[0].delta.content for c in chunks if c.choices and c.choices[0].delta.content]
    assert "".join(pieces) == whole
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] in ("stop", "length")
    assert chunks[-1].usage.completion_tokens > 0 and chunks[-1].choices == []


def test_text_streams_in_many_pieces_while_the_page_decodes(engine, image):
    slow = HeldEngine(engine, delay=0.005)
    slow.go.set()
    with serving(create_app([slow])) as base:
        client = openai.OpenAI(base_url=base, api_key="unused", max_retries=0)
        chunks = list(client.chat.completions.create(model="HPD-Parsing", messages=messages(data_url(image)),
                                                     max_tokens=45, temperature=0, stream=True))
    pieces = [c.choices[0].delta.content for c in chunks if c.choices and c.choices[0].delta.content]
    assert len(pieces) > 10
    assert "".join(pieces) == engine.parse(image, ParseOptions(batch_children=True, max_new_tokens=45)).text


def test_cancelled_page_stream_still_concatenates_to_its_text(engine, image):
    cancel, order, pieces = threading.Event(), DocumentOrder(engine.tokenizer, fork=True), []
    for event in engine.stream(image, ParseOptions(batch_children=True), cancel):
        if isinstance(event, PageFinished):
            pieces.append(order.finish(event.result.text))
            result = event.result
        else:
            pieces.append(order.push(event))
        if isinstance(event, TokensAppended) and event.round == 4:
            cancel.set()
    assert result.cancelled and "".join(pieces[:-1]) and "".join(pieces) == result.text


BAD_REQUESTS = {
    "no image": (lambda url: body(url, messages=[{"role": "user", "content": FORK_PROMPT}]), 400, "image_url"),
    "not an image": (lambda url: body("data:image/png;base64," + base64.b64encode(b"hello").decode()),
                     400, "not a readable image"),
    "a pdf": (lambda url: body("data:application/pdf;base64," + base64.b64encode(b"%PDF-1.4\n").decode()),
              400, "PDF"),
    "bad base64": (lambda url: body("data:image/png;base64,@@@"), 400, "base64"),
    "huge body": (lambda url: body(url, padding="x" * (MAX_BODY + 10)), 413, "limit"),
    "unknown model": (lambda url: body(url, model="gpt-4o"), 404, "does not exist"),
    "bad prompt": (lambda url: body(url, messages=messages(url, "describe this image.")), 400, "instruction"),
    "temperature 0.7": (lambda url: body(url, temperature=0.7), 400, "only greedy decoding"),
    "image url without flag": (lambda url: body("https://example.com/page.png"), 400, "--allow-image-urls"),
    "max_tokens not an integer": (lambda url: body(url, max_tokens="many"), 400, "integer"),
    "17 speculative tokens": (lambda url: body(url, num_speculative_tokens=17), 400, "1-10"),
    "two messages": (lambda url: body(url, messages=messages(url) * 2), 400, "exactly one user message"),
}


@pytest.mark.parametrize("case", BAD_REQUESTS)
def test_bad_request_gets_a_clear_4xx_and_the_server_keeps_serving(base, image, case):
    make, status, fragment = BAD_REQUESTS[case]
    response = httpx.post(base + "/chat/completions", json=make(data_url(image)), timeout=30)
    assert response.status_code == status
    error = response.json()["error"]
    assert fragment in error["message"] and error["code"] == status and error["type"]
    assert httpx.post(base + "/chat/completions", json=body(data_url(image)), timeout=30).status_code == 200


def test_invalid_json_gets_400(base):
    response = httpx.post(base + "/chat/completions", content=b"{not json", timeout=30)
    assert response.status_code == 400 and "JSON" in response.json()["error"]["message"]


def test_openai_client_sees_the_greedy_only_message(client, image):
    with pytest.raises(openai.BadRequestError, match="only greedy decoding"):
        client.chat.completions.create(model="HPD-Parsing", messages=messages(data_url(image)), temperature=0.7)


def test_repetition_penalty_is_accepted_and_reported_as_without_effect(base, image):
    plain = httpx.post(base + "/chat/completions", json=body(data_url(image)), timeout=30).json()
    penalised = httpx.post(base + "/chat/completions", json=body(data_url(image), repetition_penalty=1.05),
                           timeout=30).json()
    assert penalised["choices"][0]["message"]["content"] == plain["choices"][0]["message"]["content"]
    assert any("repetition_penalty" in w for w in penalised["hpd_warnings"])


def test_models_lists_the_served_name(base):
    [model] = httpx.get(base + "/models").json()["data"]
    assert model["id"] == "HPD-Parsing" and model["hpd"]["mtp"] is True
    assert model["hpd"]["vision_dtype"] in ("float32", "bfloat16")


def test_requests_beyond_the_queue_get_429(engine, image):
    held = HeldEngine(engine)
    with serving(create_app([held], ServeConfig(max_queue=1))) as base:
        results = {}
        first = threading.Thread(target=lambda: results.setdefault("first", httpx.post(
            base + "/chat/completions", json=body(data_url(image)), timeout=60)))
        first.start()
        wait_for(lambda: health(base)["running"] == 1)
        second = threading.Thread(target=lambda: results.setdefault("second", httpx.post(
            base + "/chat/completions", json=body(data_url(image)), timeout=60)))
        second.start()
        wait_for(lambda: health(base)["waiting"] == 1)
        third = httpx.post(base + "/chat/completions", json=body(data_url(image)), timeout=60)
        assert third.status_code == 429 and "busy" in third.json()["error"]["message"]
        held.go.set()
        first.join(30), second.join(30)
        assert results["first"].status_code == results["second"].status_code == 200


def test_client_disconnect_cancels_the_decode(engine, image):
    held = HeldEngine(engine)  # never released: only a cancellation ends its decodes
    with serving(create_app([held])) as base:
        with httpx.stream("POST", base + "/chat/completions", json=body(data_url(image), stream=True),
                          timeout=30) as response:
            assert next(response.iter_lines()).startswith("data: ")
        wait_for(lambda: health(base)["cancelled"] == 1 and health(base)["running"] == 0)
        with pytest.raises(httpx.ReadTimeout):
            httpx.post(base + "/chat/completions", json=body(data_url(image)), timeout=httpx.Timeout(30, read=0.5))
        wait_for(lambda: health(base)["cancelled"] == 2 and health(base)["running"] == 0)


def test_replicas_sharing_one_model_decode_at_once_with_identical_text(engine, image):
    budgets = (20, 30, 40, 50)
    with serving(create_app(replicas(engine, 2))) as base:
        results = {}
        threads = [threading.Thread(target=lambda n=n: results.setdefault(n, httpx.post(
            base + "/chat/completions", json=body(data_url(image), max_tokens=n), timeout=60)))
            for n in budgets]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert health(base)["replicas"] == health(base)["peak_running"] == 2
    for n in budgets:
        local = engine.parse(image, ParseOptions(batch_children=True, max_new_tokens=n))
        assert results[n].json()["choices"][0]["message"]["content"] == local.text
