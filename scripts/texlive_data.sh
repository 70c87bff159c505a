#!/usr/bin/env bash
# The TeX Live data of docs/training.md on a new machine, from the repo root (~30 minutes on 2 cores;
# what is there already is kept): the corpus (`fetch`, 1.3 GB of .deb), its manifest (every page of every
# PDF of a training package), the 106 held-out pages (data/texlive-eval), bundles 1-28 and two
# samples of 32 pages. Bundles 1-4 are the first manifest's pages (`--within 1x6`: one PDF, 6 pages a
# package), which every bundled hpd-tiny-docs trained on; bundles 5-10 the second's (`--within 2x12`;
# docs/training.md, sessions 24, 26 and 27); bundles 11-14 (11,034 pages, session 33) the third's
# (`--within 4x24`), in none of those; bundles 15-19 (13,698 pages, session 34) the fourth's
# (`--within 8x48`); bundles 20-24 (17,323 pages, session 35) the fifth's (`--within 256x96`), in none of
# them; bundles 25-26 (7,031 pages, session 38) the pages 97-192 of each PDF (`--within 256x192`), in none
# of them (a bundle holds a PDF's pages in one file, so take a long PDF's pages some hundreds at a time);
# bundles 27-28 (5,347 pages, session 39) the pages 193-384 (`--within 256x384`). texlive-2col and
# texlive-2col2 hold the pages set in two columns again, texlive-kinds and texlive-kinds2 (6,065 pages,
# session 42) the pages of the rarer kinds of document.
# data/texlive-seen samples bundle 1, data/texlive-unseen8 bundle 8, for `hpd-eval --real`. Pages'
# statuses come from today's `pagelayout.extract`, so bundles rebuilt after it changed differ a little
# from the ones earlier runs read (docs/training.md, session 33). The sizes
# let a device call carry one bundle beside the tree: 5 and 9 with .gpu-site.tar.xz, 6 with the
# starting weights xz-packed (29.8 MB), 10 with them and a full P-MTP (34.3 MB), 7 and 11-24 alone
# (docs/training.md, sessions 26-27).
set -euo pipefail
T=(python -m hpd_training.texlive)
[ -e data/texlive/debs.json ] || "${T[@]}" fetch --out data/texlive >/dev/null
[ -e data/texlive/manifest.json ] || "${T[@]}" manifest --out data/texlive
[ -e data/texlive-eval/manifest.json ] || "${T[@]}" evalset --out data/texlive --to data/texlive-eval
skip=()
bundle() {  # FOLDER MAX_MB [--within PDFSxPAGES]: a bundle without the pages of the ones before it
  [ -e "data/$1/bundle.json" ] || "${T[@]}" bundle --out data/texlive --to "data/$1" --max-mb "$2" "${@:3}" "${skip[@]}"
  skip+=(--skip "data/$1")
}
bundle texlive-train 39.5 --within 1x6
bundle texlive-train2 39.5 --within 1x6
bundle texlive-train3 20 --within 1x6
bundle texlive-train4 39.5 --within 1x6
bundle texlive-train5 38 --within 2x12
bundle texlive-train6 28 --within 2x12
bundle texlive-train7 55 --within 2x12
bundle texlive-train8 30 --within 2x12
bundle texlive-train9 38 --within 2x12
bundle texlive-train10 24.5 --within 2x12
for n in 11 12 13 14; do bundle texlive-train$n 55 --within 4x24; done
for n in 15 16 17 18 19; do bundle texlive-train$n 55 --within 8x48; done
for n in 20 21 22 23 24; do bundle texlive-train$n 55 --within 256x96; done
for n in 25 26; do bundle texlive-train$n 55 --within 256x192; done
for n in 27 28; do bundle texlive-train$n 55 --within 256x384; done
# the pages set in two columns, again (all are in bundles 1-24): named in --real-data to raise their share
[ -e data/texlive-2col/bundle.json ] || "${T[@]}" bundle --out data/texlive --to data/texlive-2col --max-mb 55 --columns 2 --within 256x96
# and more of them, within each PDF's first 384 pages, none in texlive-2col (which holds 55 MB of them)
[ -e data/texlive-2col2/bundle.json ] || "${T[@]}" bundle --out data/texlive --to data/texlive-2col2 --max-mb 55 --columns 2 --within 256x384 --skip data/texlive-2col
# every training page of the rarer kinds of document (all but manuals: slides, theses, papers, letters,
# posters), again (they are in bundles 1-28): named in --real-data to bring their share near the evaluation set's
K=(--kind slides --kind thesis --kind paper-1col --kind paper-2col --kind letter --kind poster)
[ -e data/texlive-kinds/bundle.json ] || "${T[@]}" bundle --out data/texlive --to data/texlive-kinds --max-mb 55 "${K[@]}"
[ -e data/texlive-kinds2/bundle.json ] || "${T[@]}" bundle --out data/texlive --to data/texlive-kinds2 --max-mb 55 "${K[@]}" --skip data/texlive-kinds
[ -e data/texlive-seen/manifest.json ] || "${T[@]}" sample --from data/texlive-train --to data/texlive-seen
[ -e data/texlive-unseen8/manifest.json ] || "${T[@]}" sample --from data/texlive-train8 --to data/texlive-unseen8
