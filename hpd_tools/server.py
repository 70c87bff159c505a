"""`hpd-serve`: an OpenAI-compatible server with the official HPD vLLM contract (docs/format.md §10).

    hpd-serve [--model PATH] [--host 127.0.0.1] [--port 8118] [--served-model-name HPD-Parsing]
              [--max-concurrency 1] [--max-queue 16] [--max-body-mb 20] [--max-image-pixels N]
              [--allow-image-urls]

Contract (what the official client sends works unmodified):
- `POST /v1/chat/completions`: one user message whose content holds one `image_url` part (a
  base64 data URL; http(s) only with --allow-image-urls) and one `text` part, the instruction
  `document parsing with fork.` (prompt "fork") or `document parsing.` ("plain").
  `max_tokens` is the budget of each branch; `temperature` must be 0 or absent (greedy only);
  `repetition_penalty` is accepted and has no effect (the engine's loop stop does its job; the
  response's `hpd_warnings` says so). Extra body fields, as vLLM accepts them: every ParseOptions
  field but the prompt and the budget (`forms.request_specs`: `use_mtp`, `num_speculative_tokens`,
  `batch_children`, `max_active_branches`, ...), with its exact JSON type.
- The response is a `chat.completion` whose content is the assembled HPD text, with `usage`,
  `spec_decode_metrics` (vLLM's names) and `hpd_stats` (`Stats.as_dict()`).
- `stream: true` sends `chat.completion.chunk`s in document order (see `DocumentOrder`),
  then `data: [DONE]`; the streamed pieces concatenate to exactly the non-streamed content.
- `GET /v1/models`, `GET /health` (decodes running, at peak, waiting, cancelled).
- Admission: one decode per engine replica (--max-concurrency), at most --max-queue requests
  waiting for one, beyond that 429; bodies over --max-body-mb get 413; an image that is not
  readable, is a PDF, or has more than --max-image-pixels pixels (default: HPD_MAX_IMAGE_PIXELS,
  else 50,000,000; checked from its header, before decoding) gets 400; every 4xx is an
  OpenAI-format error (`{"error": {"message", "type", "param", "code"}}`). A client that
  disconnects cancels its decode.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import binascii
import contextlib
import json
import logging
import socket
import sys
import threading
import time
import uuid
from collections.abc import AsyncIterator, Iterator, Sequence
from dataclasses import dataclass, replace

import httpx
import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, StreamingResponse
from PIL import Image
from starlette.exceptions import HTTPException

from hpd_tools.backends import add_backend_argument, backend_options, open_engine
from hpd_tools.forms import UsageError, add_limit_arguments, limits_of, options_from_json
from hpd_core.documents import DocumentError, Limits, Page, detect_kind, load_pages
from hpd_core.engine import Engine
from hpd_core.events import BranchFinished, BranchForked, Event, PageFinished, TokensAppended
from hpd_core.options import ParseOptions
from hpd_core.result import ParseResult, Stats
from hpd_core.tokenizer import INSTRUCTIONS, HPDTokenizer

log = logging.getLogger("hpd_tools.server")

PROMPT_OF_INSTRUCTION = {text: prompt for prompt, text in INSTRUCTIONS.items()}
TRUNCATED = frozenset({"length", "page_budget", "loop"})  # branch finish reasons -> finish_reason "length"
ERROR_TYPES = {400: "invalid_request_error", 404: "not_found_error", 413: "invalid_request_error",
               429: "rate_limit_error"}


@dataclass(frozen=True)
class ServeConfig:
    served_model_name: str = "HPD-Parsing"
    max_queue: int = 16                   # requests waiting for an engine; more get 429
    max_body_bytes: int = 20 * 2**20
    allow_image_urls: bool = False        # fetch http(s) image URLs (off: the server makes no requests)
    limits: Limits = Limits()             # of images; their max_file_bytes is max_body_bytes


class RequestError(Exception):
    """A request the server refuses: HTTP status and a message for the client."""

    def __init__(self, status: int, message: str, param: str | None = None):
        super().__init__(message)
        self.status, self.message, self.param = status, message, param


@dataclass(frozen=True)
class ChatRequest:
    image_url: str             # data URL or http(s) URL
    options: ParseOptions
    stream: bool
    include_usage: bool        # stream_options.include_usage: a last chunk with usage
    warnings: tuple[str, ...]


# ---- request parsing --------------------------------------------------------------------

def parse_chat_request(body: dict, config: ServeConfig, defaults: ParseOptions) -> ChatRequest:
    """The request's image, options and flags; RequestError (4xx) for anything outside the contract."""
    model = body.get("model", config.served_model_name)
    if model != config.served_model_name:
        raise RequestError(404, f"model {model!r} does not exist; this server serves "
                                f"{config.served_model_name!r}", "model")
    temperature = body.get("temperature")
    if temperature not in (None, 0, 0.0):
        raise RequestError(400, f"temperature {temperature!r} is not supported: only greedy decoding "
                                "(temperature 0) is supported", "temperature")
    image_url, instruction = user_parts(body.get("messages"))
    if instruction not in PROMPT_OF_INSTRUCTION:
        raise RequestError(400, f"unknown instruction {instruction!r}; the text part must be one of "
                                f"{sorted(PROMPT_OF_INSTRUCTION)}", "messages")
    if not image_url.startswith("data:") and not config.allow_image_urls:
        raise RequestError(400, "image URLs are disabled on this server: send the image as a base64 "
                                "data URL (data:image/png;base64,...), or start it with --allow-image-urls",
                           "messages")
    stream_options = body.get("stream_options") or {}
    return ChatRequest(image_url, request_options(body, defaults, PROMPT_OF_INSTRUCTION[instruction]),
                       bool(body.get("stream", False)), bool(stream_options.get("include_usage", False)),
                       penalty_warnings(body))


def user_parts(messages) -> tuple[str, str]:
    """(image URL, stripped instruction) of the single user message."""
    if not isinstance(messages, list) or len(messages) != 1 or not isinstance(messages[0], dict) \
            or messages[0].get("role") != "user":
        raise RequestError(400, "messages must hold exactly one user message whose content is an "
                                "image_url part and a text part", "messages")
    content = messages[0].get("content")
    parts = content if isinstance(content, list) else [{"type": "text", "text": content}]
    images = [p.get("image_url") for p in parts if isinstance(p, dict) and p.get("type") == "image_url"]
    texts = [p.get("text") for p in parts if isinstance(p, dict) and p.get("type") == "text"]
    if len(images) != 1:
        raise RequestError(400, f"the user message must contain exactly one image_url part, found {len(images)}",
                           "messages")
    url = images[0].get("url") if isinstance(images[0], dict) else images[0]
    if not isinstance(url, str) or len(texts) != 1 or not isinstance(texts[0], str):
        raise RequestError(400, "the user message needs an image_url part with a url string and one "
                                "text part (the instruction)", "messages")
    return url, texts[0].strip()


def request_options(body: dict, defaults: ParseOptions, prompt: str) -> ParseOptions:
    """The request's options: `forms.request_specs` by name, `max_tokens` as each branch's budget."""
    max_tokens = body.get("max_tokens", body.get("max_completion_tokens"))
    if max_tokens is not None and type(max_tokens) is not int:
        raise RequestError(400, f"max_tokens must be an integer, got {max_tokens!r}", "max_tokens")
    given = {"prompt": prompt, **({} if max_tokens is None else {"max_new_tokens": max_tokens})}
    try:
        return options_from_json(body, defaults, **given)
    except TypeError as err:
        raise RequestError(400, str(err), str(err).split()[0]) from err
    except ValueError as err:
        raise RequestError(400, str(err)) from err


def penalty_warnings(body: dict) -> tuple[str, ...]:
    penalty = body.get("repetition_penalty")
    if penalty is None or penalty == 1:
        return ()
    if not isinstance(penalty, (int, float)) or isinstance(penalty, bool) or penalty <= 0:
        raise RequestError(400, f"repetition_penalty must be a positive number, got {penalty!r}",
                           "repetition_penalty")
    return (f"repetition_penalty {penalty} has no effect: decoding is greedy without penalties; "
            "branches that loop are stopped (finish reason 'loop') instead",)


async def read_json(request: Request, limit: int) -> dict:
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise RequestError(413, f"request body is {int(declared):,} bytes, over the limit of {limit:,} bytes")
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > limit:
            raise RequestError(413, f"request body is over the limit of {limit:,} bytes")
    try:
        data = json.loads(body)
    except ValueError as err:
        raise RequestError(400, f"request body is not valid JSON: {err}") from err
    if not isinstance(data, dict):
        raise RequestError(400, "request body must be a JSON object")
    return data


async def fetch_image_bytes(url: str, limit: int) -> bytes:
    """The image of a data URL, or (with --allow-image-urls) an http(s) URL."""
    if url.startswith("data:"):
        header, _, payload = url.partition(",")
        if not header.endswith(";base64"):
            raise RequestError(400, "the image data URL must be base64 encoded (data:image/png;base64,...)")
        try:
            return base64.b64decode(payload, validate=True)
        except (binascii.Error, ValueError) as err:
            raise RequestError(400, f"the image data URL is not valid base64: {err}") from err
    if not url.startswith(("http://", "https://")):
        raise RequestError(400, f"unsupported image URL scheme in {url[:40]!r}: use a data URL or http(s)")
    try:
        async with httpx.AsyncClient(timeout=30) as client, client.stream("GET", url) as response:
            response.raise_for_status()
            data = bytearray()
            async for chunk in response.aiter_bytes():
                data += chunk
                if len(data) > limit:
                    raise RequestError(400, f"the image at {url} is over {limit:,} bytes")
            return bytes(data)
    except httpx.HTTPError as err:
        raise RequestError(400, f"cannot fetch the image at {url}: {err}") from err


def decode_image(data: bytes, limits: Limits) -> Page:
    """The first page of an image (its warnings say when frames were left out)."""
    try:
        if detect_kind(data) != "image":
            raise RequestError(400, "the image_url holds a PDF; send one page image (PNG, JPEG, WebP, "
                                    "TIFF, BMP) per request")
        [page] = load_pages(data, pages=[1], limits=limits)
    except DocumentError as err:
        raise RequestError(400, f"the image_url is not a readable image: {err}") from err
    return page


# ---- document-order streaming -----------------------------------------------------------

class DocumentOrder:
    """A page's assembled text, in document order, as it becomes final.

    The assembled text is the layout branch's ids with its i-th `<FORK>` replaced by `<CHILD>`
    + child i's ids, decoded, then stripped (`Engine._result`). A prefix of that id sequence is
    final once known: the layout ids up to the next `<FORK>`, then that child's ids as they
    grow; the layout branch resumes only when the child has finished. Children decoded in
    parallel further down the page are held until their turn. The final ids are fed through
    one incremental detokenizer; leading whitespace is dropped and trailing whitespace held back
    (the final text is stripped). `finish(text)` returns the rest of the final text, so all
    pieces concatenate to exactly `result.text` (also when the page was cancelled).
    """

    def __init__(self, tokenizer: HPDTokenizer, fork: bool):
        self.decoder, self.special, self.fork = tokenizer.stream(), tokenizer.special, fork
        self.parent: list[int] = []
        self.children: dict[int, list[int]] = {}     # branch id -> ids so far (children are 1, 2, ...)
        self.finished: set[int] = set()
        self.cursor = 0                              # next layout id to pass on
        self.forks = 0                               # layout <FORK>s passed on
        self.child: tuple[int, int] | None = None    # (branch, ids passed on) of the child in progress
        self.sent, self.held = "", ""

    def push(self, event: Event) -> str:
        """New final text after `event` (maybe empty)."""
        if isinstance(event, TokensAppended):
            (self.children[event.branch] if event.branch else self.parent).extend(event.token_ids)
        elif isinstance(event, BranchForked):
            self.children[event.branch] = []
        elif isinstance(event, BranchFinished):
            self.finished.add(event.branch)
        return self._emit(self.decoder.push(self._advance()))

    def finish(self, text: str) -> str:
        if not text.startswith(self.sent):
            log.error("streamed text diverged from the final text after %d characters", len(self.sent))
            return ""
        rest, self.sent = text[len(self.sent):], text
        return rest

    def _advance(self) -> list[int]:
        """The ids that became final, in document order."""
        out: list[int] = []
        while True:
            if self.child is not None:
                branch, passed = self.child
                ids = self.children[branch]
                out += ids[passed:]
                self.child = None if branch in self.finished else (branch, len(ids))
                if self.child is not None:
                    return out
            elif self.cursor < len(self.parent):
                token = self.parent[self.cursor]
                if self.fork and token == self.special.fork:
                    branch = self.forks + 1
                    if branch not in self.children:
                        return out  # forked in this round; BranchForked follows
                    self.forks, self.child, token = branch, (branch, 0), self.special.child
                out.append(token)
                self.cursor += 1
            else:
                return out

    def _emit(self, piece: str) -> str:
        text = self.held + piece
        if not self.sent:
            text = text.lstrip()
        body = text.rstrip()
        self.held = text[len(body):]
        self.sent += body
        return body


# ---- admission and decoding -------------------------------------------------------------

class Admission:
    """At most one decode per engine replica; at most `max_queue` requests waiting for one.
    Lives on the event loop (not thread-safe); decode threads hand engines back through it."""

    def __init__(self, engines: Sequence[Engine], max_queue: int):
        self.engines, self.max_queue = list(engines), max_queue
        self.slots = asyncio.Semaphore(len(self.engines))
        self.waiting = self.running = self.peak_running = self.cancelled = 0

    async def acquire(self) -> Engine:
        if self.slots.locked() and self.waiting >= self.max_queue:
            raise RequestError(429, f"server busy: {self.running} decoding and {self.waiting} waiting "
                                    f"(--max-queue {self.max_queue}); retry later")
        self.waiting += 1
        try:
            await self.slots.acquire()
        finally:
            self.waiting -= 1
        self.running += 1
        self.peak_running = max(self.peak_running, self.running)
        return self.engines.pop()

    def release(self, engine: Engine, cancelled: bool) -> None:
        self.engines.append(engine)
        self.running -= 1
        self.cancelled += cancelled
        self.slots.release()


class Decode:
    """One page decoded on a worker thread; its events are consumed on the event loop.
    The engine goes back to `admission` when the thread ends (finished, failed or cancelled)."""

    def __init__(self, admission: Admission, engine: Engine, image: Image.Image, options: ParseOptions):
        self.loop = asyncio.get_running_loop()
        self.events: asyncio.Queue = asyncio.Queue()
        self.cancel = threading.Event()
        self.admission, self.engine = admission, engine
        threading.Thread(target=self._work, args=(image, options), daemon=True, name="hpd-decode").start()

    def _post(self, callback, *args) -> None:
        if not self.loop.is_closed():
            self.loop.call_soon_threadsafe(callback, *args)

    def _work(self, image: Image.Image, options: ParseOptions) -> None:
        try:
            for event in self.engine.stream(image, options, self.cancel):
                self._post(self.events.put_nowait, event)
        except Exception as err:  # reported to the client by `__aiter__`
            log.exception("decode failed")
            self._post(self.events.put_nowait, err)
        finally:
            self._post(self.admission.release, self.engine, self.cancel.is_set())
            self._post(self.events.put_nowait, None)

    async def __aiter__(self) -> AsyncIterator[Event]:
        try:
            while (item := await self.events.get()) is not None:
                if isinstance(item, Exception):
                    raise item
                yield item
        finally:
            self.cancel.set()  # the consumer stopped early (client gone): stop decoding


async def cancel_on_disconnect(request: Request, cancel: threading.Event, every: float = 0.25) -> None:
    while not cancel.is_set():
        if await request.is_disconnected():
            cancel.set()
        await asyncio.sleep(every)


# ---- responses --------------------------------------------------------------------------

@dataclass(frozen=True)
class Reply:
    """What every chunk or completion of one request shares."""
    id: str
    created: int
    model: str
    warnings: tuple[str, ...]

    def completion(self, result: ParseResult) -> dict:
        return {"id": self.id, "object": "chat.completion", "created": self.created, "model": self.model,
                "choices": [{"index": 0, "message": {"role": "assistant", "content": result.text},
                             "finish_reason": finish_reason(result), "logprobs": None}],
                "usage": usage(result.stats), **self.extras(result)}

    def chunk(self, delta: dict, finish: str | None = None, **extra) -> dict:
        return {"id": self.id, "object": "chat.completion.chunk", "created": self.created, "model": self.model,
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}], **extra}

    def usage_chunk(self, result: ParseResult) -> dict:
        return {"id": self.id, "object": "chat.completion.chunk", "created": self.created, "model": self.model,
                "choices": [], "usage": usage(result.stats)}

    def extras(self, result: ParseResult) -> dict:
        return {"spec_decode_metrics": spec_decode_metrics(result.stats), "hpd_stats": result.stats.as_dict(),
                "hpd_warnings": list(self.warnings + result.warnings)}


def finish_reason(result: ParseResult) -> str:
    """"length" when any branch was cut (budget, page budget, loop), else "stop"."""
    return "length" if any(b.finish_reason in TRUNCATED for b in result.branches) else "stop"


def usage(stats: Stats) -> dict:
    return {"prompt_tokens": stats.prompt_tokens, "completion_tokens": stats.generated_tokens,
            "total_tokens": stats.prompt_tokens + stats.generated_tokens}


def spec_decode_metrics(stats: Stats) -> dict:
    """Per request, under vLLM's spec-decode metric names; mean_acceptance_length counts the
    bonus token (1 + accepted / drafts) and draft_acceptance_rate is a fraction (0-1)."""
    drafts = stats.branch_steps if stats.drafted_tokens else 0
    return {"num_drafts": drafts, "num_draft_tokens": stats.drafted_tokens,
            "num_accepted_tokens": stats.accepted_tokens,
            "num_accepted_tokens_per_pos": list(stats.accepted_by_position),
            "mean_acceptance_length": 1 + stats.accepted_tokens / drafts if drafts else None,
            "draft_acceptance_rate": stats.acceptance_rate if drafts else None}


def error_response(status: int, message: str, param: str | None = None) -> JSONResponse:
    kind = ERROR_TYPES.get(status, "server_error" if status >= 500 else "invalid_request_error")
    return JSONResponse({"error": {"message": message, "type": kind, "param": param, "code": status}}, status)


def sse(data: dict | str) -> str:
    return f"data: {data if isinstance(data, str) else json.dumps(data, ensure_ascii=False)}\n\n"


async def stream_chunks(decode: Decode, reply: Reply, order: DocumentOrder, include_usage: bool) -> AsyncIterator[str]:
    """SSE lines; text of events that queued up while the client was being written to goes out
    as one chunk (fewer, larger chunks when the decode runs ahead of the stream)."""
    yield sse(reply.chunk({"role": "assistant", "content": ""}))
    pending = ""
    try:
        async for event in decode:
            if isinstance(event, PageFinished):
                result = event.result
                pending += order.finish(result.text)
            else:
                pending += order.push(event)
            if pending and decode.events.empty():
                yield sse(reply.chunk({"content": pending}))
                pending = ""
    except Exception as err:  # headers are sent: the error travels as an SSE event, as vLLM does
        yield sse({"error": {"message": f"decoding failed: {type(err).__name__}: {err}",
                             "type": "server_error", "param": None, "code": 500}})
        yield sse("[DONE]")
        return
    if pending:
        yield sse(reply.chunk({"content": pending}))
    yield sse(reply.chunk({}, finish_reason(result), **reply.extras(result)))
    if include_usage:
        yield sse(reply.usage_chunk(result))
    yield sse("[DONE]")


async def complete(decode: Decode, reply: Reply, request: Request) -> JSONResponse:
    watcher = asyncio.create_task(cancel_on_disconnect(request, decode.cancel))
    try:
        result = [e.result async for e in decode if isinstance(e, PageFinished)][0]
    except Exception as err:  # the edge: report, keep serving
        return error_response(500, f"decoding failed: {type(err).__name__}: {err}")
    finally:
        watcher.cancel()
    return JSONResponse(reply.completion(result))


# ---- the app ----------------------------------------------------------------------------

def replicas(engine: Engine, count: int) -> list[Engine]:
    """`count` engines sharing one model's weights (the model holds no decode state); a vLLM
    engine is one (vLLM batches the requests of a decode; decodes take turns)."""
    if not isinstance(engine, Engine):
        return [engine]
    return [engine] + [Engine(engine.model, engine.tokenizer, name=engine.name, path=engine.path)
                       for _ in range(count - 1)]


def create_app(engines: Sequence[Engine], config: ServeConfig = ServeConfig()) -> FastAPI:
    """The FastAPI app over `engines` (one decode at a time each; see `replicas`)."""
    first = engines[0]
    info = first.info
    defaults = ParseOptions(use_mtp=info.mtp, batch_children=True)
    admission = Admission(engines, config.max_queue)
    app = FastAPI(title="hpd-serve", docs_url=None, redoc_url=None)
    app.state.admission = admission

    @app.exception_handler(RequestError)
    async def refused(_request, err: RequestError):
        return error_response(err.status, err.message, err.param)

    @app.exception_handler(HTTPException)
    async def http_error(_request, err: HTTPException):
        return error_response(err.status_code, str(err.detail))

    @app.get("/health")
    async def health():
        return {"status": "ok", "model": config.served_model_name, "replicas": len(engines),
                "running": admission.running, "peak_running": admission.peak_running, "waiting": admission.waiting,
                "cancelled": admission.cancelled}

    @app.get("/v1/models")
    async def models():
        return {"object": "list", "data": [{
            "id": config.served_model_name, "object": "model", "created": 0, "owned_by": "hpd-parsing-demo",
            "root": info.path, "max_model_len": first.config.llm_config.max_position_embeddings,
            "hpd": {"name": info.name, "device": info.device, "dtype": info.dtype,
                    "vision_dtype": info.vision_dtype or info.dtype, "parameters": info.parameters, "mtp": info.mtp,
                    "render_dpi": info.render_dpi}}]}

    @app.post("/v1/chat/completions")
    async def chat(request: Request):
        chat_request = parse_chat_request(await read_json(request, config.max_body_bytes), config, defaults)
        if chat_request.options.use_mtp and not info.mtp:
            raise RequestError(400, "use_mtp needs a P-MTP head, and this model has none", "use_mtp")
        page = decode_image(await fetch_image_bytes(chat_request.image_url, config.max_body_bytes),
                            replace(config.limits, max_file_bytes=config.max_body_bytes))
        decode = Decode(admission, await admission.acquire(), page.image, chat_request.options)
        reply = Reply(f"chatcmpl-{uuid.uuid4().hex}", int(time.time()), config.served_model_name,
                      chat_request.warnings + page.warnings)
        if not chat_request.stream:
            return await complete(decode, reply, request)
        order = DocumentOrder(first.tokenizer, chat_request.options.prompt == "fork")
        return StreamingResponse(stream_chunks(decode, reply, order, chat_request.include_usage),
                                 media_type="text/event-stream", headers={"Cache-Control": "no-cache"})

    return app


@contextlib.contextmanager
def serving(app: FastAPI, host: str = "127.0.0.1", port: int = 0) -> Iterator[str]:
    """Serve `app` on a background thread; yields the base URL (`http://host:port/v1`)."""
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", timeout_graceful_shutdown=5))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True, name="hpd-serve")
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("hpd-serve did not start")
        time.sleep(0.01)
    try:
        yield f"http://{host}:{sock.getsockname()[1]}/v1"
    finally:
        server.should_exit = True
        thread.join(10)
        sock.close()


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="hpd-serve", description="OpenAI-compatible HPD-Parsing server "
                                "(the official HPD vLLM contract) over the hpd_core engine.")
    p.add_argument("--model", default=None, help="bundled model (hpd-tiny, hpd-tiny-docs), checkpoint "
                                                     "folder or hub repo id (default: hpd-tiny)")
    add_backend_argument(p)
    p.add_argument("--host", default="127.0.0.1", help="bind address (default loopback only)")
    p.add_argument("--port", type=int, default=8118)
    p.add_argument("--served-model-name", default="HPD-Parsing")
    p.add_argument("--max-concurrency", type=int, default=1, help="decodes at once (engine replicas sharing weights)")
    p.add_argument("--max-queue", type=int, default=16, help="requests waiting for a decode; more get 429")
    p.add_argument("--max-body-mb", type=float, default=20)
    p.add_argument("--allow-image-urls", action="store_true", help="let requests name http(s) image URLs")
    add_limit_arguments(p, ["max_image_pixels"])
    args = p.parse_args(argv)
    if args.max_concurrency < 1 or args.max_queue < 0 or args.max_body_mb <= 0:
        p.error("--max-concurrency must be >= 1, --max-queue >= 0 and --max-body-mb > 0")
    try:
        args.limits = limits_of(args)
    except UsageError as err:
        p.error(str(err))
    return args


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    if args.host not in ("127.0.0.1", "localhost", "::1"):
        print(f"hpd-serve: listening on {args.host}, reachable from other machines; there is no "
              "authentication", file=sys.stderr)
    engine = open_engine(args.model, **backend_options(args))
    config = ServeConfig(args.served_model_name, args.max_queue, int(args.max_body_mb * 2**20),
                         args.allow_image_urls, args.limits)
    app = create_app(replicas(engine, args.max_concurrency), config)
    log.info("serving %s (%s) as %r on http://%s:%d/v1", engine.info.name, engine.info.device,
             args.served_model_name, args.host, args.port)
    uvicorn.run(app, host=args.host, port=args.port, timeout_graceful_shutdown=10)


if __name__ == "__main__":
    main()
