"""Loss curves of training logs: `python -m hpd_training.train.report docs/training/r*.jsonl --out PNG`.

Runs are drawn one after another on a shared time axis (each run continues the previous one).
Draft accuracies come from `mtp` stages and from LM stages trained with `--mtp-weight`
(teacher-forced there).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("logs", nargs="+", type=Path)
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args(argv)
    fig, (lm_ax, mtp_ax) = plt.subplots(1, 2, figsize=(11, 3.6))
    offset = 0.0
    for path in args.logs:
        rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        stage_start, last = offset, None
        for row in rows:
            if "step" not in row:
                continue
            if row["stage"] != last:
                stage_start, last = offset, row["stage"]
                lm_ax.axvline(stage_start / 60, color="0.85", lw=0.8)
                lm_ax.text(stage_start / 60, 1.02, f"{path.stem}:{last}", transform=lm_ax.get_xaxis_transform(),
                           fontsize=7, rotation=30)
            t = (stage_start + row["seconds"]) / 60
            offset = max(offset, stage_start + row["seconds"])
            if "child" in row:
                lm_ax.scatter(t, row["child"], s=4, color="tab:blue")
                lm_ax.scatter(t, row["parent"], s=4, color="tab:orange")
            draft = "mtp_" if "mtp_acc1" in row else ""
            if f"{draft}acc1" in row:
                mtp_ax.scatter(t, row[f"{draft}acc1"], s=4, color="tab:green")
                mtp_ax.scatter(t, row.get(f"{draft}acc3", 0), s=4, color="tab:olive")
    lm_ax.set(xlabel="training minutes (H200s)", ylabel="cross-entropy (nats/token)")
    lm_ax.legend(handles=[plt.Line2D([], [], marker="o", ls="", color="tab:blue", label="content branches"),
                          plt.Line2D([], [], marker="o", ls="", color="tab:orange", label="layout branch")])
    mtp_ax.set(xlabel="training minutes (H200s)", ylabel="P-MTP draft accuracy", ylim=(0, 1))
    mtp_ax.legend(handles=[plt.Line2D([], [], marker="o", ls="", color="tab:green", label="draft 1"),
                           plt.Line2D([], [], marker="o", ls="", color="tab:olive", label="drafts 1-3 all right")])
    fig.tight_layout()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(args.out, dpi=110)


if __name__ == "__main__":
    main()
