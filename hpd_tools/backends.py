"""`open_engine`: the engine behind a front door's `--model` / `--server` / `--backend`: a server
URL gives a `RemoteEngine` (no torch), anything else the in-process engine of `hpd_core.load_engine`,
or with backend "vllm" the `hpd_vllm.VLLMEngine` (stock vLLM runs the language model)."""

from __future__ import annotations

import argparse
from pathlib import Path

from hpd_core.options import ParseOptions
from hpd_tools.forms import UsageError
from hpd_tools.remote import RemoteEngine


def is_url(source) -> bool:
    return isinstance(source, str) and source.startswith(("http://", "https://"))


BACKENDS = ("hpd", "vllm")


def open_engine(source: str | Path | None = None, *, model: str = "HPD-Parsing", backend: str = "hpd",
                vllm_server: str | None = None, **engine_options):
    """A `RemoteEngine` for an http(s) URL (`http://host:8118/v1`, the server's `model`), else
    `load_engine(source, **engine_options)` (a folder, a hub repo id, None: bundled) of
    `hpd_core` (backend "hpd") or `hpd_vllm` (backend "vllm", the optional [vllm] extra; its
    language model in this process, or in the `vllm serve` process at `vllm_server`)."""
    if is_url(source):
        return RemoteEngine(source, model=model)
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}, not {backend!r}")
    if vllm_server and backend != "vllm":
        raise ValueError("--vllm-server needs --backend vllm")
    if backend == "vllm":
        from hpd_vllm import load_engine as load_vllm_engine
        return load_vllm_engine(source, server=vllm_server, **engine_options)
    from hpd_core.loader import load_engine  # torch: imported only when a local model is needed
    return load_engine(source, **engine_options)


def add_backend_argument(parser: argparse.ArgumentParser, vllm_server: bool = True) -> None:
    parser.add_argument("--backend", choices=BACKENDS, default="hpd",
                        help="what runs the language model of --model: hpd (this project's engine) or vllm "
                             "(stock vLLM; pip extra [vllm], docs/serving.md)")
    if vllm_server:
        parser.add_argument("--vllm-server", metavar="URL",
                            help="with --backend vllm: the `vllm serve` process of the converted --model that runs "
                                 "its language model, e.g. http://127.0.0.1:8000/v1 (no P-MTP; docs/serving.md)")


def add_model_arguments(parser: argparse.ArgumentParser) -> None:
    """--model / --server / --served-model-name, shared by hpd-parse and hpd-eval."""
    parser.add_argument("--model", help="checkpoint folder or hub repo id (default: the bundled model)")
    parser.add_argument("--server", help="use an HPD server instead (hpd-serve or the official vLLM build), "
                                         "e.g. http://127.0.0.1:8118/v1")
    parser.add_argument("--served-model-name", default="HPD-Parsing", help="model name on --server")
    add_backend_argument(parser)


def engine_of(args: argparse.Namespace, options: ParseOptions):
    """The engine of --server or --model for `options`, or a UsageError saying why there is none."""
    from hpd_core.loader import ModelNotFound
    try:
        engine = open_engine(args.server or args.model, model=args.served_model_name, backend=args.backend,
                             vllm_server=args.vllm_server)
    except ModelNotFound as err:
        raise UsageError(f"{err}; pass --model FOLDER") from err
    except (ModuleNotFoundError, ConnectionError, ValueError) as err:  # no vLLM, no server, --vllm-server alone
        raise UsageError(str(err)) from err
    if options.use_mtp and not engine.info.mtp:
        raise UsageError(f"{engine.info.name} has no P-MTP head; pass --no-mtp")
    return engine
