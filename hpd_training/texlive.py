"""The TeX Live documentation corpus: Debian 12's `texlive-*-doc` packages, downloaded and
unpacked (`fetch`), listed as TeX Live packages (`packages`) and split by package (`split_of`).

    python -m hpd_training.texlive fetch --out data/texlive      # ~1.3 GB of .deb, 1.7 GB unpacked
    python -m hpd_training.texlive manifest --out data/texlive   # pages, kinds, splits (manifest.py)
    python -m hpd_training.texlive bundle --out data/texlive --to data/texlive-train   (bundle.py)

A TeX Live package is a CTAN folder `usr/share/doc/texlive-doc/<area>/<package>/`; its name
without the area is the split key (`latex/base` and `latex-dev/base` hold the same documents).
A package is held out (split "eval", never trained on) when the first 8 hex digits of the
SHA-256 of its name, mod 100, are below HELD_OUT_PERCENT; the rest is "train". The split does
not depend on what else was fetched, so a rebuild from a clean checkout gives the same one.
"""

from __future__ import annotations

import argparse
import hashlib
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

# Debian 12 (bookworm) documentation packages, 2022.20230122; sizes of the .deb in MB
DEBIAN_PACKAGES = (
    "texlive-latex-base-doc",          # 85
    "texlive-latex-recommended-doc",   # 50
    "texlive-latex-extra-doc",         # 593
    "texlive-publishers-doc",          # 213: journal and thesis classes, their samples
    "texlive-pictures-doc",            # 233
    "texlive-science-doc",             # 84
    "texlive-humanities-doc",          # 27
    "texlive-fonts-recommended-doc",   # 3
)
DOC_ROOT = Path("root/usr/share/doc/texlive-doc")  # inside the data folder
HELD_OUT_PERCENT = 10


@dataclass(frozen=True)
class Package:
    name: str                # CTAN folder name, the split key
    pdfs: tuple[str, ...]    # paths relative to the data folder, sorted

    @property
    def split(self) -> str:
        return split_of(self.name)


def split_of(name: str) -> str:
    return "eval" if int(hashlib.sha256(name.encode()).hexdigest()[:8], 16) % 100 < HELD_OUT_PERCENT else "train"


def stable_hash(text: str) -> int:
    """A deterministic 64-bit hash (Python's hash() is salted per process)."""
    return int(hashlib.sha256(text.encode()).hexdigest()[:16], 16)


def fetch(out: Path) -> list[Path]:
    """Downloads the DEBIAN_PACKAGES (`apt-get download`, skipping those present) into out/debs
    and unpacks them (`dpkg -x`) into out/root. Needs Debian's apt sources (`apt-get update`)."""
    debs = out / "debs"
    debs.mkdir(parents=True, exist_ok=True)
    missing = [p for p in DEBIAN_PACKAGES if not list(debs.glob(f"{p}_*.deb"))]
    if missing:
        subprocess.run(["apt-get", "download", *missing], cwd=debs, check=True)
    files = sorted(f for p in DEBIAN_PACKAGES for f in debs.glob(f"{p}_*.deb"))
    for deb in files:
        subprocess.run(["dpkg", "-x", str(deb), str(out / "root")], check=True)
    return files


def packages(data: Path) -> list[Package]:
    """TeX Live packages with PDFs under data/DOC_ROOT, sorted by name; areas joined by name."""
    found: dict[str, list[str]] = {}
    for pdf in (data / DOC_ROOT).glob("*/*/**/*.pdf"):
        name = pdf.relative_to(data / DOC_ROOT).parts[1]
        found.setdefault(name, []).append(str(pdf.relative_to(data)))
    return [Package(name, tuple(sorted(pdfs))) for name, pdfs in sorted(found.items())]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m hpd_training.texlive", description=__doc__.split("\n\n")[0])
    parser.add_argument("command", choices=("fetch", "manifest", "bundle"))
    parser.add_argument("--out", type=Path, default=Path("data/texlive"), help="data folder")
    parser.add_argument("--to", type=Path, default=Path("data/texlive-train"), help="bundle folder")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--max-mb", type=float, default=40.0, help="bundle size limit")
    args = parser.parse_args(argv)
    if args.command == "fetch":
        for deb in fetch(args.out):
            print(deb)
    elif args.command == "manifest":
        from hpd_training.manifest import build
        print(build(args.out, args.workers).summary())
    else:
        from hpd_training.bundle import write_bundle
        print(write_bundle(args.out, args.to, int(args.max_mb * 1e6)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
