"""`open_engine`: the engine behind a front door's `--model` / `--server` / `--backend`: a server
URL gives a `RemoteEngine` (no torch), anything else the in-process engine of `hpd_core.load_engine`,
or with backend "vllm" the `hpd_vllm.VLLMEngine` (stock vLLM runs the language model)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from hpd_core.options import ParseOptions
from hpd_tools.forms import UsageError
from hpd_tools.remote import RemoteEngine


def is_url(source) -> bool:
    return isinstance(source, str) and source.startswith(("http://", "https://"))


BACKENDS = ("hpd", "vllm")


def open_engine(source: str | Path | None = None, *, model: str = "HPD-Parsing", backend: str = "hpd",
                vllm_server: str | None = None, vllm_args: dict | None = None, **engine_options):
    """A `RemoteEngine` for an http(s) URL (`http://host:8118/v1`, the server's `model`), else
    `load_engine(source, **engine_options)` (a folder, a hub repo id, None: bundled) of
    `hpd_core` (backend "hpd") or `hpd_vllm` (backend "vllm", the optional [vllm] extra; its
    language model in this process, with `vllm_args` for `vllm.LLM`, or in the `vllm serve`
    process at `vllm_server`)."""
    if is_url(source):
        return RemoteEngine(source, model=model)
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}, not {backend!r}")
    if (vllm_server or vllm_args) and backend != "vllm":
        raise ValueError(f"--vllm-{'server' if vllm_server else 'arg'} needs --backend vllm")
    if vllm_server and vllm_args:
        raise ValueError("--vllm-arg sets up an in-process vLLM; a --vllm-server process takes its own arguments")
    if backend == "vllm":
        from hpd_vllm import load_engine as load_vllm_engine
        return load_vllm_engine(source, server=vllm_server, **engine_options, **(vllm_args or {}))
    from hpd_core.loader import load_engine  # torch: imported only when a local model is needed
    return load_engine(source, **engine_options)


def vllm_arg(text: str) -> tuple[str, object]:
    """KEY=VALUE of --vllm-arg: VALUE as JSON (0.5, true, {...}), else as a string."""
    key, sep, value = text.partition("=")
    if not sep or not key.isidentifier():
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE (e.g. gpu_memory_utilization=0.5), not {text!r}")
    try:
        return key, json.loads(value)
    except json.JSONDecodeError:
        return key, value


def add_backend_argument(parser: argparse.ArgumentParser, vllm_server: bool = True) -> None:
    parser.add_argument("--backend", choices=BACKENDS, default="hpd",
                        help="what runs the language model of --model: hpd (this project's engine) or vllm "
                             "(stock vLLM; pip extra [vllm], docs/serving.md)")
    parser.add_argument("--vllm-arg", type=vllm_arg, action="append", default=[], metavar="KEY=VALUE",
                        help="with --backend vllm: a keyword argument of vllm.LLM, VALUE as JSON "
                             "(repeatable; e.g. gpu_memory_utilization=0.5, enforce_eager=true)")
    if vllm_server:
        parser.add_argument("--vllm-server", metavar="URL",
                            help="with --backend vllm: the `vllm serve` process of the converted --model that runs "
                                 "its language model, e.g. http://127.0.0.1:8000/v1 (no P-MTP; docs/serving.md)")


def backend_options(args: argparse.Namespace) -> dict:
    """open_engine's backend keywords from add_backend_argument's options."""
    return {"backend": args.backend, "vllm_server": getattr(args, "vllm_server", None),
            "vllm_args": dict(args.vllm_arg)}


def add_model_arguments(parser: argparse.ArgumentParser) -> None:
    """--model / --server / --served-model-name, shared by hpd-parse and hpd-eval."""
    parser.add_argument("--model", help="bundled model (hpd-tiny, hpd-tiny-docs), checkpoint folder or hub "
                                          "repo id (default: hpd-tiny)")
    parser.add_argument("--server", help="use an HPD server instead (hpd-serve or the official vLLM build), "
                                         "e.g. http://127.0.0.1:8118/v1")
    parser.add_argument("--served-model-name", default="HPD-Parsing", help="model name on --server")
    add_backend_argument(parser)


def engine_of(args: argparse.Namespace, options: ParseOptions):
    """The engine of --server or --model for `options`, or a UsageError saying why there is none."""
    from hpd_core.loader import ModelNotFound
    try:
        engine = open_engine(args.server or args.model, model=args.served_model_name, **backend_options(args))
    except ModelNotFound as err:
        raise UsageError(f"{err}; pass --model FOLDER") from err
    except (ModuleNotFoundError, ConnectionError, ValueError) as err:  # no vLLM, no server, --vllm-server alone
        raise UsageError(str(err)) from err
    if options.use_mtp and not engine.info.mtp:
        raise UsageError(f"{engine.info.name} offers no P-MTP drafts (no head, or a backend without them "
                         "here: docs/serving.md); pass --no-mtp")
    return engine
