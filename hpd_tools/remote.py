"""`RemoteEngine`: the engine API over an HTTP server with the HPD serving contract
(the official HPD vLLM build, or `hpd-serve`; docs/format.md §10).

    engine = RemoteEngine("http://127.0.0.1:8118/v1")      # or load_engine("http://...")
    result = engine.parse(image, ParseOptions())
    for event in engine.stream(image): ...

Promises:
- `parse`/`stream`/`parse_batch`/`stream_batch`/`info` as `Engine`. Pages go out as base64 PNG
  data URLs with the instruction of `options.prompt`, `max_tokens = options.max_new_tokens`,
  temperature 0, and the options as extra body fields (a vLLM server ignores those it lacks).
- Events are rebuilt from the streamed assembled text (`BranchSplitter`): each `<BLOCK>`
  header goes to the layout branch 0 (with `<FORK>` where content follows) and each block's
  content to a new child branch, with `BranchForked` (label and box from the header) and
  `BranchFinished`. What the text does not carry is empty or zero: `token_ids`, `drafted`,
  fork positions, per-branch token counts and times. `info.remote` is True.
- Results: blocks and Markdown from the text; `Stats` from the server's `hpd_stats` when it
  sends them (hpd-serve), else only token counts and the request's wall time, and the
  result's `warnings` say so.
- Connection errors and 429/502/503/504 are retried `retries` times with exponential backoff
  (a stream only before its first byte of content); other errors raise `RemoteError` with the
  server's message. `parse_batch`/`stream_batch` send up to `max_workers` pages at once.
- Cancelling (`cancel` set, or the stream generator closed) closes the connection, which
  cancels the decode on hpd-serve; it is checked between streamed chunks.
"""

from __future__ import annotations

import base64
import contextlib
import io
import json
import queue
import threading
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, fields

import httpx
from PIL import Image

from hpd_core.documents import DEFAULT_DPI, as_image
from hpd_core.events import BranchFinished, BranchForked, Event, PageFinished, PageStarted, TokensAppended
from hpd_core.grammar import BLOCK, CHILD, FORK, BBox, parse_blocks
from hpd_core.markdown import to_markdown
from hpd_core.options import ParseOptions
from hpd_core.result import BranchRecord, ParseResult, Stats
from hpd_core.tokenizer import INSTRUCTIONS
from hpd_tools.forms import options_to_json

RETRY_STATUS = frozenset({429, 502, 503, 504})
RETRY_ERRORS = (httpx.ConnectError, httpx.ConnectTimeout, httpx.RemoteProtocolError, httpx.ReadError)
LIMITED_STATS = ("remote server: statistics are token counts and wall time only "
                 "(no per-branch timing or draft acceptance)")


class RemoteError(RuntimeError):
    """The server refused or failed a request, or could not be reached."""

    def __init__(self, message: str, status: int | None = None):
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class RemoteInfo:
    """`EngineInfo`'s fields, for a server; `remote` tells the two apart."""
    name: str
    path: str                  # the server's base URL
    device: str = "remote"
    dtype: str = ""
    parameters: int = 0
    mtp: bool = True           # the official serving command enables P-MTP
    remote: bool = True
    extensions: bool = False   # the server honours use_mtp, batch_children, ... (hpd-serve; vLLM ignores them)
    render_dpi: float = DEFAULT_DPI  # the PDF resolution its model reads (hpd-serve says; else the default)


class BranchSplitter:
    """Streamed assembled text -> the events of the branches that wrote it.

    The assembled text is `<BLOCK>label [bbox]<CHILD>content<BLOCK>...`; headers without
    `<CHILD>` are blocks without content (images). Text is held back while a marker may be cut
    across chunks. With `fork=False` (the plain prompt) all text belongs to branch 0.
    """

    def __init__(self, page: int, fork: bool, clock):
        self.page, self.fork, self.clock = page, fork, clock
        self.buffer = ""
        self.in_header = False     # the buffer starts with a header's `<BLOCK>`
        self.child = 0             # the child branch being written (0: none)
        self.children = 0
        self.round = 0

    def feed(self, text: str) -> list[Event]:
        self.round += 1
        if not self.fork:
            return self._text(0, text)
        self.buffer += text
        out: list[Event] = []
        while True:
            if self.in_header:
                end = min((i for i in (self.buffer.find(CHILD), self.buffer.find(BLOCK, len(BLOCK))) if i >= 0),
                          default=-1)
                if end < 0:
                    return out
                forks = self.buffer.startswith(CHILD, end)
                out += self._header(self.buffer[:end], forks)
                self.buffer = self.buffer[end + len(CHILD):] if forks else self.buffer[end:]
                self.in_header = not forks
            else:
                start = self.buffer.find(BLOCK)
                if start < 0:
                    keep = held_marker_prefix(self.buffer)
                    out += self._text(self.child, self.buffer[:len(self.buffer) - keep])
                    self.buffer = self.buffer[len(self.buffer) - keep:]
                    return out
                out += self._text(self.child, self.buffer[:start]) + self._end_child("stop")
                self.buffer, self.in_header = self.buffer[start:], True

    def close(self, reason: str) -> list[Event]:
        """The rest of the text; every open branch finishes, the layout branch last, with `reason`."""
        if self.in_header:
            out = self._header(self.buffer, False)
        else:
            out = self._text(self.child, self.buffer)
        self.buffer = ""
        return out + self._end_child(reason) + [BranchFinished(self.page, 0, reason, 0, self.clock())]

    def _text(self, branch: int, text: str) -> list[Event]:
        return [TokensAppended(self.page, branch, (), (False,), (text,), text, 0, self.round, self.clock())] if text else []

    def _header(self, header: str, forks: bool) -> list[Event]:
        header = header.replace(FORK, "")
        out = self._text(0, header + (FORK if forks else ""))
        if forks:
            blocks = parse_blocks(header)  # one block: the header starts with <BLOCK>
            self.children += 1
            self.child = self.children
            out.append(BranchForked(self.page, self.child, 0, blocks[0].label if blocks else None,
                                    blocks[0].bbox if blocks else None, self.clock()))
        return out

    def _end_child(self, reason: str) -> list[Event]:
        if not self.child:
            return []
        child, self.child = self.child, 0
        return [BranchFinished(self.page, child, reason, 0, self.clock())]


def held_marker_prefix(text: str) -> int:
    """Length of the longest tail of `text` that could start a `<BLOCK>` still on its way."""
    return next((k for k in range(len(BLOCK) - 1, 0, -1) if text.endswith(BLOCK[:k])), 0)


@dataclass
class BranchText:
    label: str | None = None
    bbox: BBox | None = None
    text: str = ""
    reason: str = "stop"


@dataclass
class PageText:
    """What a page's response carried so far (mutable while streaming)."""
    text: str = ""
    branches: dict[int, BranchText] = field(default_factory=dict)
    usage: dict = field(default_factory=dict)
    extras: dict = field(default_factory=dict)               # hpd_stats, spec_decode_metrics, ...
    finish: str = "stop"

    def record(self, event: Event) -> None:
        if isinstance(event, BranchForked):
            self.branches[event.branch] = BranchText(event.label, event.bbox)
        elif isinstance(event, TokensAppended):
            self.branches.setdefault(event.branch, BranchText()).text += event.text
        elif isinstance(event, BranchFinished):
            self.branches.setdefault(event.branch, BranchText()).reason = event.reason


class RemoteEngine:
    def __init__(self, base_url: str, model: str = "HPD-Parsing", *, timeout: float = 600.0, retries: int = 3,
                 max_workers: int = 16, backoff: float = 0.5, api_key: str | None = None,
                 transport: httpx.BaseTransport | None = None):
        self.base_url, self.model = base_url.rstrip("/"), model
        self.retries, self.max_workers, self.backoff = retries, max_workers, backoff
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self.client = httpx.Client(base_url=self.base_url, headers=headers, transport=transport,
                                   timeout=httpx.Timeout(timeout, connect=min(timeout, 10.0)),
                                   limits=httpx.Limits(max_connections=max_workers + 4))
        self._info: RemoteInfo | None = None

    def close(self) -> None:
        self.client.close()

    @property
    def info(self) -> RemoteInfo:
        """From `GET /models` (once); hpd-serve adds its engine's details."""
        if self._info is None:
            with self._request("GET", "/models") as response:
                entries = {m.get("id"): m for m in response.json().get("data", [])}
            if self.model not in entries:
                raise RemoteError(f"{self.base_url} does not serve {self.model!r} (it serves {sorted(entries)})", 404)
            hpd = entries[self.model].get("hpd") or {}
            self._info = RemoteInfo(self.model, self.base_url, dtype=hpd.get("dtype", ""),
                                    parameters=hpd.get("parameters", 0), mtp=hpd.get("mtp", True),
                                    extensions=bool(hpd), render_dpi=hpd.get("render_dpi", DEFAULT_DPI))
        return self._info

    # ---- public API -------------------------------------------------------------------------

    def parse(self, page, options: ParseOptions = ParseOptions(), cancel: threading.Event | None = None) -> ParseResult:
        """One non-streaming request; with `cancel`, a stream (so that it can be cancelled)."""
        if cancel is not None:
            return next(e.result for e in self.stream(page, options, cancel) if isinstance(e, PageFinished))
        image, started = as_image(page), time.perf_counter()
        with self._request("POST", "/chat/completions", json=self._body(image, options, stream=False)) as response:
            data = response.json()
        try:
            choice = data["choices"][0]
            page_text = PageText(text=choice["message"]["content"] or "", usage=data.get("usage") or {},
                                 extras=data, finish=choice.get("finish_reason") or "stop")
        except (KeyError, IndexError, TypeError) as err:
            raise RemoteError(f"unexpected response from {self.base_url}: {str(data)[:200]}") from err
        splitter = BranchSplitter(0, options.prompt == "fork", lambda: 0.0)
        for event in splitter.feed(page_text.text) + splitter.close(branch_reason(page_text.finish)):
            page_text.record(event)
        return remote_result(page_text, image.size, time.perf_counter() - started, cancelled=False)

    def parse_batch(self, pages: Sequence, options: ParseOptions = ParseOptions(),
                    cancel: threading.Event | None = None) -> list[ParseResult]:
        with ThreadPoolExecutor(min(self.max_workers, max(len(pages), 1))) as pool:
            return list(pool.map(lambda page: self.parse(page, options, cancel), pages))

    def stream(self, page, options: ParseOptions = ParseOptions(),
               cancel: threading.Event | None = None) -> Iterator[Event]:
        return self._stream_page(0, page, options, (cancel,))

    def stream_batch(self, pages: Sequence, options: ParseOptions = ParseOptions(),
                     cancel: threading.Event | None = None) -> Iterator[Event]:
        """The pages' events, interleaved as they arrive; `page` is the index in `pages`."""
        events: queue.Queue = queue.Queue()
        stop, done = threading.Event(), object()

        def run(index: int, page) -> None:
            try:
                for event in self._stream_page(index, page, options, (cancel, stop)):
                    events.put(event)
            except Exception as err:  # re-raised in the consumer's thread
                events.put(err)
            finally:
                events.put(done)

        pool = ThreadPoolExecutor(min(self.max_workers, max(len(pages), 1)))
        try:
            for index, page in enumerate(pages):
                pool.submit(run, index, page)
            remaining = len(pages)
            while remaining:
                item = events.get()
                if isinstance(item, Exception):
                    raise item
                if item is done:
                    remaining -= 1
                else:
                    yield item
        finally:
            stop.set()
            pool.shutdown(wait=True, cancel_futures=True)

    # ---- requests -----------------------------------------------------------------------------

    def _body(self, image: Image.Image, options: ParseOptions, stream: bool) -> dict:
        buffer = io.BytesIO()
        image.save(buffer, format="PNG")
        url = "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode("ascii")
        body = {"model": self.model, "max_tokens": options.max_new_tokens, "temperature": 0,
                "messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": url}},
                                                          {"type": "text", "text": INSTRUCTIONS[options.prompt]}]}],
                **options_to_json(options)}
        if stream:
            body |= {"stream": True, "stream_options": {"include_usage": True}}
        return body

    @contextlib.contextmanager
    def _request(self, method: str, path: str, stream: bool = False, **kwargs) -> Iterator[httpx.Response]:
        """The response (status < 400; its body read unless `stream`), after retries; closed on exit."""
        for attempt in range(self.retries + 1):
            last = attempt == self.retries
            try:
                response = self.client.send(self.client.build_request(method, path, **kwargs), stream=True)
            except RETRY_ERRORS as err:
                if last:
                    raise RemoteError(f"cannot reach {self.base_url}: {type(err).__name__}: {err}") from err
                time.sleep(self.backoff * 2 ** attempt)
                continue
            except httpx.TimeoutException as err:
                raise RemoteError(f"{self.base_url} timed out: {type(err).__name__}") from err
            if response.status_code in RETRY_STATUS and not last:
                response.close()
                time.sleep(self.backoff * 2 ** attempt)
                continue
            try:
                if response.status_code >= 400:
                    response.read()
                    raise RemoteError(f"{self.base_url} answered {response.status_code}: {error_message(response)}",
                                      response.status_code)
                if not stream:
                    response.read()
                yield response
            except (httpx.HTTPError, json.JSONDecodeError) as err:
                raise RemoteError(f"the response of {self.base_url} broke off or is not JSON: "
                                  f"{type(err).__name__}: {err}") from err
            finally:
                response.close()
            return

    def _stream_page(self, index: int, page, options: ParseOptions,
                     cancels: tuple[threading.Event | None, ...]) -> Iterator[Event]:
        image, started = as_image(page), time.perf_counter()

        def clock() -> float:
            return time.perf_counter() - started

        splitter, page_text = BranchSplitter(index, options.prompt == "fork", clock), PageText()
        cancelled = False
        with self._request("POST", "/chat/completions", stream=True,
                           json=self._body(image, options, stream=True)) as response:
            yield PageStarted(index, image.size, 0, 0, 0.0, 0.0)
            for chunk in sse_chunks(response):
                if any(c is not None and c.is_set() for c in cancels):
                    cancelled = True
                    break
                for event in splitter.feed(absorb(page_text, chunk)):
                    page_text.record(event)
                    yield event
        for event in splitter.close("cancelled" if cancelled else branch_reason(page_text.finish)):
            page_text.record(event)
            yield event
        yield PageFinished(index, remote_result(page_text, image.size, clock(), cancelled))


def sse_chunks(response: httpx.Response) -> Iterator[dict]:
    """The JSON objects of a server-sent-events response, up to `data: [DONE]`."""
    for line in response.iter_lines():
        if not line.startswith("data:"):
            continue
        data = line[len("data:"):].strip()
        if data == "[DONE]":
            return
        chunk = json.loads(data)
        if "error" in chunk:
            raise RemoteError(f"the server failed mid-stream: {chunk['error'].get('message', chunk['error'])}")
        yield chunk


def absorb(page_text: PageText, chunk: dict) -> str:
    """Record a chunk's usage, extras and finish reason; returns its new content."""
    if chunk.get("usage"):
        page_text.usage = chunk["usage"]
    page_text.extras |= {k: v for k, v in chunk.items() if k.startswith(("hpd_", "spec_decode"))}
    text = ""
    for choice in chunk.get("choices") or []:
        text += (choice.get("delta") or {}).get("content") or ""
        page_text.finish = choice.get("finish_reason") or page_text.finish
    page_text.text += text
    return text


def branch_reason(finish_reason: str) -> str:
    return "length" if finish_reason == "length" else "stop"


def error_message(response: httpx.Response) -> str:
    try:
        error = response.json().get("error")
    except ValueError:
        return response.text[:300]
    return error.get("message", str(error)) if isinstance(error, dict) else str(error)


def remote_result(page_text: PageText, image_size: tuple[int, int], seconds: float, cancelled: bool) -> ParseResult:
    text = page_text.text.strip()
    blocks = parse_blocks(text)
    records = tuple(BranchRecord(b, t.label, t.bbox, None, (), (), t.text, t.reason)
                    for b, t in sorted(page_text.branches.items()))
    hpd_stats = page_text.extras.get("hpd_stats")
    if hpd_stats:
        stats, warnings = stats_from_dict(hpd_stats), ()
    else:
        # per-branch counts are unknown: all of completion_tokens is booked on the layout branch
        generated = page_text.usage.get("completion_tokens", 0)
        stats = Stats(prompt_tokens=page_text.usage.get("prompt_tokens", 0), parent_tokens=generated,
                      forked_branches=len(records) - 1 if records else 0,
                      decode_seconds=seconds, wall_seconds=seconds)
        warnings = (LIMITED_STATS,)
    return ParseResult(text, blocks, to_markdown(blocks), stats, image_size, records, cancelled, warnings)


def stats_from_dict(data: dict) -> Stats:
    """`Stats` from `Stats.as_dict()` output (JSON lists back to tuples; derived keys dropped)."""
    values = {f.name: data[f.name] for f in fields(Stats) if f.name in data}
    return Stats(**{k: tuple(v) if isinstance(v, list) else v for k, v in values.items()})
