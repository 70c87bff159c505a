"""Average the weights of training runs: `python -m hpd_training.train.average --out runs/r14+r15 runs/r14 runs/r15`.

Each run folder holds `hpd-tiny/` (its draft head in `hpd-tiny/P-MTP/`) as `python -m hpd_training.train` writes them; the
output has the same layout, the tokenizer taken from the first run. Meant for the ends of
consecutive runs of one lineage (each run restarts the learning-rate schedule from the one
before). Measured in docs/training.md (r14+r15): the mean avoided each run's own failures on
validation pages but made one of its own on an example document, so gate it like any run.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import torch

from hpd_core.checkpoint import load_model
from hpd_training.train.__main__ import save_run


def average_runs(runs: list[Path], out: Path) -> None:
    models = [load_model(run / "hpd-tiny") for run in runs]
    states = [m.state_dict() for m in models]
    if any(s.keys() != states[0].keys() for s in states):
        raise ValueError("the runs' models have different tensors: only runs of one architecture average")
    mean = {k: torch.stack([s[k] for s in states]).mean(0) for k in states[0]}
    models[0].load_state_dict(mean)
    save_run(models[0], out, runs[0] / "hpd-tiny" / "tokenizer.json")


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("runs", nargs="+", type=Path, help="run folders, each with hpd-tiny/ (and hpd-tiny/P-MTP/)")
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args(argv)
    average_runs(args.runs, args.out)


if __name__ == "__main__":
    main()
