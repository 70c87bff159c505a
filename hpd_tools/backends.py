"""`open_engine`: the engine behind a front door's `--model` / `--server`: a server URL gives a
`RemoteEngine` (no torch), anything else the in-process engine of `hpd_core.load_engine`."""

from __future__ import annotations

import argparse
from pathlib import Path

from hpd_core.options import ParseOptions
from hpd_tools.forms import UsageError
from hpd_tools.remote import RemoteEngine


def is_url(source) -> bool:
    return isinstance(source, str) and source.startswith(("http://", "https://"))


def open_engine(source: str | Path | None = None, *, model: str = "HPD-Parsing", **engine_options):
    """A `RemoteEngine` for an http(s) URL (`http://host:8118/v1`, the server's `model`), else
    `hpd_core.load_engine(source, **engine_options)` (a folder, a hub repo id, None: bundled)."""
    if is_url(source):
        return RemoteEngine(source, model=model)
    from hpd_core.loader import load_engine  # torch: imported only when a local model is needed
    return load_engine(source, **engine_options)


def add_model_arguments(parser: argparse.ArgumentParser) -> None:
    """--model / --server / --served-model-name, shared by hpd-parse and hpd-eval."""
    parser.add_argument("--model", help="checkpoint folder or hub repo id (default: the bundled model)")
    parser.add_argument("--server", help="use an HPD server instead (hpd-serve or the official vLLM build), "
                                         "e.g. http://127.0.0.1:8118/v1")
    parser.add_argument("--served-model-name", default="HPD-Parsing", help="model name on --server")


def engine_of(args: argparse.Namespace, options: ParseOptions):
    """The engine of --server or --model for `options`, or a UsageError saying why there is none."""
    from hpd_core.loader import ModelNotFound
    try:
        engine = open_engine(args.server or args.model, model=args.served_model_name)
    except ModelNotFound as err:
        raise UsageError(f"{err}; pass --model FOLDER") from err
    if options.use_mtp and not engine.info.mtp:
        raise UsageError(f"{engine.info.name} has no P-MTP head; pass --no-mtp")
    return engine
