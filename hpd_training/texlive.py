"""The TeX Live documentation corpus: Debian 12's `texlive-*-doc` packages, downloaded and
unpacked (`fetch`), listed as TeX Live packages (`packages`) and split by package (`split_of`).

    python -m hpd_training.texlive fetch --out data/texlive      # ~1.3 GB of .deb, 1.7 GB unpacked
    python -m hpd_training.texlive manifest --out data/texlive   # pages, kinds, splits (manifest.py)
    python -m hpd_training.texlive bundle --out data/texlive --to data/texlive-train   (bundle.py)
    python -m hpd_training.texlive evalset --out data/texlive --to data/texlive-eval   (the evaluation pages)
    python -m hpd_training.texlive sample --from data/texlive-train --to data/texlive-seen   (a bundle's pages)
    python -m hpd_training.texlive check --from data/texlive-train20   (every page a training sample)

A TeX Live package is a CTAN folder `usr/share/doc/texlive-doc/<area>/<package>/`; its name
without the area is the split key (`latex/base` and `latex-dev/base` hold the same documents).
A package is held out (split "eval", never trained on) when the first 8 hex digits of the
SHA-256 of its name, mod 100, are below HELD_OUT_PERCENT, or below PUBLISHERS_HELD_OUT_PERCENT
for a package of texlive-publishers-doc (journal and thesis classes: nearly all two-column
papers of the corpus are their samples; at 10 % none was held out); the rest is "train". Which
Debian package holds which TeX Live package is listed by `fetch` in `debs.json` (from
`dpkg-deb -c`). The split depends on nothing else, so a rebuild gives the same one.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from hpd_training.dockind import KINDS

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
PUBLISHERS = "texlive-publishers-doc"
PUBLISHERS_HELD_OUT_PERCENT = 30
DEBS = "debs.json"


@dataclass(frozen=True)
class Package:
    name: str                # CTAN folder name, the split key
    pdfs: tuple[str, ...]    # paths relative to the data folder, sorted
    debs: tuple[str, ...] = ()  # the Debian packages holding it

    @property
    def split(self) -> str:
        return split_of(self.name, self.debs)


def split_of(name: str, debs: Sequence[str] = ()) -> str:
    percent = PUBLISHERS_HELD_OUT_PERCENT if PUBLISHERS in debs else HELD_OUT_PERCENT
    return "eval" if int(hashlib.sha256(name.encode()).hexdigest()[:8], 16) % 100 < percent else "train"


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
    write_debs(out, files)
    return files


def write_debs(out: Path, files: Sequence[Path]) -> None:
    """out/DEBS: TeX Live package name -> the Debian packages holding it (`dpkg-deb -c`)."""
    holders: dict[str, set[str]] = {}
    prefix = "./" + str(DOC_ROOT.relative_to("root")) + "/"
    for deb in files:
        listing = subprocess.run(["dpkg-deb", "-c", str(deb)], check=True, capture_output=True, text=True).stdout
        for line in listing.splitlines():
            path = line.split()[-1]
            parts = path[len(prefix):].split("/") if path.startswith(prefix) else []
            if len(parts) >= 3:
                holders.setdefault(parts[1], set()).add(deb.name.split("_")[0])
    (out / DEBS).write_text(json.dumps({k: sorted(v) for k, v in sorted(holders.items())}, indent=0))


def packages(data: Path) -> list[Package]:
    """TeX Live packages with PDFs under data/DOC_ROOT, sorted by name; areas joined by name;
    their Debian packages from data/DEBS, which `fetch` writes after unpacking every package:
    without it the publishers' packages would be split at HELD_OUT_PERCENT, moving held-out
    packages into training."""
    if not (data / DEBS).exists():
        raise FileNotFoundError(f"{data / DEBS} is missing: `fetch` writes it once every package is unpacked "
                                f"(`debs` writes it again); the split depends on it")
    found: dict[str, list[str]] = {}
    for pdf in (data / DOC_ROOT).glob("*/*/**/*.pdf"):
        name = pdf.relative_to(data / DOC_ROOT).parts[1]
        found.setdefault(name, []).append(str(pdf.relative_to(data)))
    holders = json.loads((data / DEBS).read_text())
    return [Package(name, tuple(sorted(pdfs)), tuple(holders.get(name, ()))) for name, pdfs in sorted(found.items())]


def _within(text: str) -> tuple[int, int]:
    pdfs, _, pages = text.partition("x")
    if not (pdfs.isdigit() and pages.isdigit()):
        raise argparse.ArgumentTypeError(f"{text!r} is not PDFSxPAGES, e.g. 2x12")
    return int(pdfs), int(pages)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m hpd_training.texlive", description=__doc__.split("\n\n")[0])
    parser.add_argument("command", choices=("fetch", "debs", "manifest", "bundle", "evalset", "sample", "check"))
    parser.add_argument("--out", type=Path, default=Path("data/texlive"), help="data folder")
    parser.add_argument("--to", type=Path, default=Path("data/texlive-train"), help="bundle folder")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--max-mb", type=float, default=39.5, help="bundle size limit (its PDFs)")
    parser.add_argument("--skip", type=Path, action="append", default=[],
                        help="bundle: leave out the pages of this earlier bundle (repeatable)")
    parser.add_argument("--within", type=_within, metavar="PDFSxPAGES",
                        help="bundle: of the pages of a shorter manifest (1x6: bundles 1-4; 2x12: 5-10; 4x24: 11-14; "
                             "8x48: 15-19)")
    parser.add_argument("--columns", type=int, choices=(1, 2),
                        help="bundle: only the pages set in this many columns (texlive-2col: 2)")
    parser.add_argument("--kind", dest="kinds", action="append", choices=KINDS,
                        help="bundle: only the pages of documents of this kind (repeatable; texlive-kinds: all but manual)")
    parser.add_argument("--from", dest="source", type=Path, help="sample, check: the bundle to take pages from")
    parser.add_argument("--pages", type=int, default=32, help="sample: how many pages")
    parser.add_argument("--model", type=Path, default=Path("assets/hpd-tiny-docs"),
                        help="check: the checkpoint whose tokenizer and tiles the samples take")
    args = parser.parse_args(argv)
    if args.command == "fetch":
        for deb in fetch(args.out):
            print(deb)
    elif args.command == "debs":  # list debs.json again for data fetched before it existed
        write_debs(args.out, sorted((args.out / "debs").glob("*.deb")))
    elif args.command == "manifest":
        from hpd_training.manifest import build
        print(build(args.out, args.workers).summary())
    elif args.command == "evalset":
        from hpd_training.bundle import write_evaluation
        print(write_evaluation(args.out, args.to))
    elif args.command in ("sample", "check"):
        from hpd_training.bundle import INDEX, check_bundle, write_sample
        if args.source is None or not (args.source / INDEX).exists():
            parser.error(f"{args.command} wants --from BUNDLE, a folder with a bundle.json (got {args.source})")
        if args.command == "sample":
            print(write_sample(args.source, args.to, args.pages))
            return 0
        checked = check_bundle(args.source, args.model, args.workers, progress=True)
        print(checked.summary())
        return 1 if checked.failed else 0
    else:
        from hpd_training.bundle import write_bundle
        print(write_bundle(args.out, args.to, int(args.max_mb * 1e6), args.skip, args.within, args.columns,
                           frozenset(args.kinds) if args.kinds else None))
    return 0


if __name__ == "__main__":
    sys.exit(main())
