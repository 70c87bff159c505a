"""bench.replay's fork pattern on stock vLLM, at any scale: what our vLLM backend asks of vLLM.

    python -m bench.vllm_replay [--model PATH] [--pages 1,64,512] [--schedules plain,fork | fork-mtp]
                                [--k 6] [--gpu-memory-utilization 0.85] [--eager]

vLLM cannot be told which tokens to write, so the trace (`bench.replay.Trace`) fixes the shape,
not the text. Each page's prompt has `trace.prompt` positions; the first `--image` after a short
head are image rows, sent as prompt embeddings (random, seeded per page) in mixed mode, as
hpd_vllm/backend.py sends a page. `plain`: one request per page writes the trace's page tokens.
`fork`: the layout request writes `trace.layout` tokens (min_tokens = max_tokens, ignore_eos);
once it has written a fork point of the trace, the child request `prompt + its tokens so far +
<CHILD>` starts and writes its trace length; the prefix cache shares the page. `fork-mtp`: the
same with the P-MTP head drafting k tokens (method "eagle", the `hpd` plugin). The tokens are the
model's greedy choice: random weights write random tokens, and their drafts are rarely
accepted, so at random weights `fork-mtp` measures what drafting costs, not what it gains
(the accepted drafts per step are reported).

Reports per schedule and page count: tokens/s after the last page's first token (the prompts'
prefill; vLLM overlaps it with decoding, so only tokens written after it count), pages/s over
the whole run, steps and ms per step after the prefill, the children's prefix-cache hits
(tokens), and vLLM's drafts. One `vllm.LLM` per process (vLLM does not give its GPU memory back
in process), so `fork-mtp`, which needs its own, runs in a call of its own.
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass, field

import torch

from tokenizers import Tokenizer

from bench.replay import Trace
from hpd_vllm.backend import make_llm, mixed_prompt
from hpd_vllm.loader import converted

HEAD = 16  # prompt positions before the image rows (system prompt tokens)


@dataclass
class Flow:
    """One request of the replay."""
    page: int
    goal: int
    forks: list[int] = field(default_factory=list)     # layout request: fork points still to come
    children: list[int] = field(default_factory=list)  # and the lengths of their children
    tokens: list[int] = field(default_factory=list)
    counted: bool = False    # its prefix-cache hits are in the total


@dataclass(frozen=True)
class Measured:
    tokens: int              # written after the prefill
    seconds: float           # after the prefill
    steps: int               # after the prefill
    prefill_seconds: float   # until every page's first request has its first token
    cached_tokens: int       # the children's prefix-cache hits
    drafts: int              # vLLM's draft tokens and accepted ones (0 without speculation)
    accepted: int


def page_prompt(page: int, trace: Trace, image: int, vocab: int, hidden: int, dtype: torch.dtype) -> tuple:
    g = torch.Generator().manual_seed(page)
    ids = torch.randint(16, vocab, (trace.prompt,), generator=g).tolist()
    embeds = (torch.randn(trace.prompt, hidden, generator=g) * 0.02).to(dtype)
    is_ids = [not HEAD <= i < HEAD + image for i in range(trace.prompt)]
    return ids, embeds, is_ids


def spec_counts(llm) -> tuple[int, int]:
    got = {m.name: m.value for m in llm.get_metrics() if hasattr(m, "value")}
    return int(got.get("vllm:spec_decode_num_draft_tokens", 0)), int(got.get("vllm:spec_decode_num_accepted_tokens", 0))


def replay(llm, trace: Trace, pages: int, schedule: str, image: int, child: int) -> Measured:
    from vllm import SamplingParams
    from vllm.sampling_params import RequestOutputKind
    engine = llm.llm_engine
    config = engine.model_config
    vocab, hidden = config.get_vocab_size(), config.get_hidden_size()
    prompts = [page_prompt(p, trace, image, vocab, hidden, config.dtype) for p in range(pages)]
    flows: dict[str, Flow] = {}
    drafts0, accepted0 = spec_counts(llm)

    def submit(name: str, flow: Flow, tail: list[int]) -> None:
        params = SamplingParams(temperature=0.0, max_tokens=flow.goal, min_tokens=flow.goal, ignore_eos=True,
                                detokenize=False, output_kind=RequestOutputKind.DELTA)
        engine.add_request(name, mixed_prompt(*prompts[flow.page], tail), params)
        flows[name] = flow

    start = time.perf_counter()
    for p in range(pages):
        if schedule == "plain":
            submit(f"p{p}", Flow(p, trace.tokens), [])
        else:
            submit(f"p{p}", Flow(p, trace.layout, forks=trace.forks(), children=list(trace.children)), [])
    first = set()
    prefilled = None
    tokens = steps = cached = 0
    while engine.has_unfinished_requests():
        outputs = engine.step()
        if prefilled is not None:
            steps += 1
        for out in outputs:
            flow = flows[out.request_id]
            new = list(out.outputs[0].token_ids)
            flow.tokens += new
            if prefilled is not None:
                tokens += len(new)
            if out.request_id.startswith("p") and new:
                first.add(out.request_id)
            if out.request_id.startswith("c") and not flow.counted and out.num_cached_tokens is not None:
                flow.counted = True  # in process vLLM reports the hits with the first output
                cached += out.num_cached_tokens
            while flow.forks and len(flow.tokens) >= flow.forks[0]:
                at = flow.forks.pop(0)
                submit(f"c{flow.page}-{len(flow.children)}", Flow(flow.page, flow.children.pop(0)),
                       flow.tokens[:at] + [child])
        if prefilled is None and len(first) == pages:
            prefilled = time.perf_counter()
    end = time.perf_counter()
    drafts, accepted = spec_counts(llm)
    return Measured(tokens, end - prefilled, steps, prefilled - start, cached, drafts - drafts0, accepted - accepted0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", help="HPD checkpoint folder (default: the bundled model)")
    parser.add_argument("--pages", default="1,64,512")
    parser.add_argument("--schedules", default="plain,fork", help="plain,fork or fork-mtp")
    parser.add_argument("--k", type=int, default=6)
    parser.add_argument("--image", type=int, default=1600,
                        help="image rows of the prompt, as prompt embeddings (default: the bundled model's 1,600; "
                             "the real model's 1,792 of 2,008 is the same share)")
    parser.add_argument("--dtype", default="bfloat16")
    parser.add_argument("--gpu-memory-utilization", type=float, default=0.85)
    parser.add_argument("--max-num-seqs", type=int, default=1024)
    parser.add_argument("--eager", action="store_true", help="no torch.compile / CUDA graphs")
    args = parser.parse_args()
    trace = Trace()
    schedules = args.schedules.split(",")
    if not set(schedules) <= {"plain", "fork", "fork-mtp"} or ("fork-mtp" in schedules and len(schedules) > 1):
        parser.error("--schedules: plain and/or fork, or fork-mtp alone (it needs its own vllm.LLM)")
    if HEAD + args.image > trace.prompt:
        parser.error(f"--image must leave room in the {trace.prompt}-position prompt")
    folders = converted(args.model)
    child = Tokenizer.from_file(str(folders.lm / "tokenizer.json")).token_to_id("<CHILD>")
    llm = make_llm(folders, args.dtype, args.k if schedules == ["fork-mtp"] else 0,
                   gpu_memory_utilization=args.gpu_memory_utilization, max_num_seqs=args.max_num_seqs,
                   enforce_eager=args.eager, max_model_len=trace.prompt + trace.tokens + 64)
    print(f"vLLM replay of {args.model or 'the bundled model'} ({args.dtype}); trace {trace}; {args.image} image rows")
    print("| schedule | pages | tokens/s | pages/s | steps | ms/step | prefill s | child cache hits | "
          "drafts accepted / drafted |")
    print("|---|---|---|---|---|---|---|---|---|")
    for schedule in schedules:
        for pages in (int(p) for p in args.pages.split(",")):
            llm.llm_engine.reset_prefix_cache()
            m = replay(llm, trace, pages, schedule, args.image, child)
            rate = f"{m.accepted:,} / {m.drafts:,}" if m.drafts else "–"
            print(f"| {schedule} | {pages} | {m.tokens / m.seconds:,.0f} | {pages / (m.prefill_seconds + m.seconds):.2f} "
                  f"| {m.steps} | {m.seconds / max(m.steps, 1) * 1000:.2f} | {m.prefill_seconds:.2f} | "
                  f"{m.cached_tokens:,} | {rate} |", flush=True)


if __name__ == "__main__":
    main()
