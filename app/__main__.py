"""`hpd-demo` / `python -m app`: load an engine and serve the Gradio app."""

from __future__ import annotations

import argparse

import torch

from app.ui import CACHE_SECONDS, build_demo, launch
from hpd_tools.backends import add_backend_argument, backend_options, open_engine
from hpd_tools.forms import UsageError, add_limit_arguments, limits_of
from hpd_core.loader import ModelNotFound

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="hpd-demo", description=__doc__)
    parser.add_argument("--model", default=None,
                        help="bundled model (hpd-tiny, hpd-tiny-docs), checkpoint folder or Hugging Face "
                             "repo id (default: hpd-tiny)")
    parser.add_argument("--server", default=None,
                        help="use an HPD server instead (hpd-serve or the official vLLM build), e.g. "
                             "http://127.0.0.1:8118/v1")
    parser.add_argument("--served-model-name", default="HPD-Parsing", help="model name on --server")
    add_backend_argument(parser)
    parser.add_argument("--device", default=None, help="cpu, cuda, cuda:1, ... (default: cuda if available)")
    parser.add_argument("--dtype", choices=sorted(DTYPES), default=None,
                        help="default: float32 on CPU, bfloat16 on CUDA")
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (0.0.0.0: all)")
    parser.add_argument("--port", type=int, default=7860)
    parser.add_argument("--share", action="store_true", help="also serve through a public gradio.live link")
    parser.add_argument("--cache-seconds", type=int, default=CACHE_SECONDS,
                        help="delete uploads and served result files this long after they were made")
    add_limit_arguments(parser)
    args = parser.parse_args(argv)
    try:
        args.limits = limits_of(args)
    except UsageError as err:
        parser.error(str(err))
    if args.cache_seconds < 1:
        parser.error("--cache-seconds must be at least 1")
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    try:
        engine = open_engine(args.server or args.model, device=args.device, dtype=DTYPES.get(args.dtype),
                             model=args.served_model_name, **backend_options(args))
    except (ModelNotFound, ConnectionError, ValueError) as err:
        raise SystemExit(f"hpd-demo: {err}") from err
    launch(build_demo(engine, args.limits, args.cache_seconds), args.limits, server_name=args.host,
           server_port=args.port, share=args.share)


if __name__ == "__main__":
    main()
