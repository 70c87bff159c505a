"""Quality of a parsed page against its ground truth: text, layout, order, tables.

Predictions and ground truth are `list[Block]` in reading order (see `grammar`).
Every per-page metric rests on one matching of blocks, `match_blocks`:

* Matching: a pair (pred, gt) is a candidate when IoU(bbox) >= 0.5; candidates are taken
  greedily by IoU descending (ties: lower gt index, then lower pred index), each block at
  most once. Greedy, as in COCO evaluation, not Hungarian: at IoU >= 0.5 two boxes of one
  page rarely compete for the same partner, and scipy is not a dependency. Blocks with
  `bbox=None` or an empty box never match. Labels are not used for matching.
* Text (OmniDocBench-style page edit distance): a block's text is `block.text`, or "" for
  labels without content (`image`, `chart`, `seal`), which therefore count for nothing.
  Tables count with their HTML text. For each matched pair the cost is the Levenshtein
  distance of the two texts over max(len); an unmatched gt block costs len(gt text) over
  len(gt text), an unmatched predicted block len(pred text) over len(pred text).
  Page edit distance = sum of costs / sum of lengths (0 when both sums are 0). Texts are
  compared as written, characters, no whitespace or case normalisation.
* Detection: tp = matched pairs, fp = unmatched predictions, fn = unmatched gt blocks.
  Label accuracy = matched pairs with equal labels / matched pairs.
* Reading order: the matched blocks, listed in predicted order and written as their rank
  in gt order, against 0..m-1; normalised Levenshtein distance of the two sequences
  (None when nothing matched). Swapping two of m blocks gives 2/m.
* Tables: every gt block labelled `table` gets a TEDS score: `teds(pred.text, gt.text)`
  when it is matched, else 0 (a missed table counts as a failed table, as in OmniDocBench).

`aggregate` sums counts over pages (edit distance and detection are micro-averaged);
reading order is the mean over pages, TEDS the mean over all gt tables. `edits_by_kind` splits
the edits by the gt label of matched blocks and into missed and extra blocks.
"""

from __future__ import annotations

import html
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from html.parser import HTMLParser

from apted import APTED, Config
from rapidfuzz.distance import LCSseq, Levenshtein

from hpd_core.grammar import BBox, Block, area, has_content, intersection, iou

IOU_THRESHOLD = 0.5
TABLE_LABEL = "table"


# ---------------------------------------------------------------- text

def text_edit_distance(pred: str, gt: str) -> float:
    """Levenshtein distance / max(len(pred), len(gt)); 0 for two empty strings."""
    return Levenshtein.normalized_distance(pred, gt)


def _text(block: Block) -> str:
    return block.text if has_content(block.label) else ""


# ---------------------------------------------------------------- matching

def match_blocks(pred: Sequence[Block], gt: Sequence[Block],
                 threshold: float = IOU_THRESHOLD) -> list[tuple[int, int]]:
    """One-to-one (pred index, gt index) pairs with IoU >= threshold, greedy by IoU."""
    scored = ((iou(p.bbox, g.bbox), gi, pi)
              for pi, p in enumerate(pred) for gi, g in enumerate(gt))
    candidates = sorted((-v, gi, pi) for v, gi, pi in scored if v >= threshold and v > 0)
    used_pred: set[int] = set()
    used_gt: set[int] = set()
    pairs = []
    for _, gi, pi in candidates:
        if pi not in used_pred and gi not in used_gt:
            used_pred.add(pi)
            used_gt.add(gi)
            pairs.append((pi, gi))
    return sorted(pairs)


# ---------------------------------------------------------------- tables (TEDS)

@dataclass
class TableNode:
    """A node of a table tree; `text` (whitespace collapsed) is set for td/th only."""
    tag: str
    colspan: int = 1
    rowspan: int = 1
    text: str = ""
    children: list[TableNode] = field(default_factory=list)

    def size(self) -> int:
        return 1 + sum(c.size() for c in self.children)


_TABLE_TAGS = frozenset({"table", "thead", "tbody", "tr", "td", "th"})
_CELL_TAGS = frozenset({"td", "th"})
# An opening tag implicitly closes these open tags (`<td>a<td>b`, `<tr>..<tr>`).
_CLOSED_BY = {
    "td": _CELL_TAGS,
    "th": _CELL_TAGS,
    "tr": _CELL_TAGS | {"tr"},
    "thead": _CELL_TAGS | {"tr", "thead", "tbody"},
    "tbody": _CELL_TAGS | {"tr", "thead", "tbody"},
}


class _TableParser(HTMLParser):
    """Builds the tree of the first <table>; other tags are dropped, their text kept."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.root: TableNode | None = None
        self.stack: list[TableNode] = []  # open nodes, root first; empty once root closed

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        outside = not self.stack and (self.root is not None or tag != "table")
        if tag not in _TABLE_TAGS or outside:
            return
        while len(self.stack) > 1 and self.stack[-1].tag in _CLOSED_BY.get(tag, ()):
            self.stack.pop()
        values = dict(attrs)
        node = TableNode(tag, _span(values.get("colspan")), _span(values.get("rowspan")))
        if self.stack:
            self.stack[-1].children.append(node)
        else:
            self.root = node
        self.stack.append(node)

    def handle_endtag(self, tag: str) -> None:
        for depth in range(len(self.stack) - 1, -1, -1):  # close the innermost `tag`
            if self.stack[depth].tag == tag:
                del self.stack[depth:]
                return

    def handle_data(self, data: str) -> None:
        if self.stack and self.stack[-1].tag in _CELL_TAGS:
            self.stack[-1].text += data


def _span(raw: str | None) -> int:
    try:
        return max(int(raw), 1) if raw is not None else 1
    except ValueError:
        return 1


def parse_table(html: str) -> TableNode | None:
    """The tree of the first <table> in `html`, or None if there is none. Never raises."""
    parser = _TableParser()
    try:
        parser.feed(html)
        parser.close()
    except AssertionError:  # html.parser's answer to unknown marked sections: `<![x[`
        pass  # keep the tree read so far
    if parser.root is not None:
        _collapse_spaces(parser.root)
    return parser.root


def _collapse_spaces(node: TableNode) -> None:
    node.text = " ".join(node.text.split())
    for child in node.children:
        _collapse_spaces(child)


class _TedsConfig(Config):
    valuecls = float

    def rename(self, a: TableNode, b: TableNode) -> float:
        if (a.tag, a.colspan, a.rowspan) != (b.tag, b.colspan, b.rowspan):
            return 1.0
        return text_edit_distance(a.text, b.text) if a.tag in _CELL_TAGS else 0.0

    def children(self, node: TableNode) -> list[TableNode]:
        return node.children


def teds(pred_html: str, gt_html: str) -> float:
    """Tree-edit-distance similarity (Zhong et al. 2020): 1 - TED / max(nodes).

    Nodes are table/thead/tbody/tr/td/th with colspan/rowspan; renaming costs 1 when tag
    or spans differ, else the cells' normalised text edit distance. Clamped at 0 (TED can
    exceed max(nodes): a deep chain against a wide tree). 0 when the prediction holds no
    table; ValueError when the ground truth holds none.
    """
    gt_tree = parse_table(gt_html)
    if gt_tree is None:
        raise ValueError(f"ground truth has no <table>: {gt_html[:80]!r}")
    pred_tree = parse_table(pred_html)
    if pred_tree is None:
        return 0.0
    distance = APTED(pred_tree, gt_tree, _TedsConfig()).compute_edit_distance()
    return max(0.0, 1.0 - distance / max(pred_tree.size(), gt_tree.size()))


# ---------------------------------------------------------------- pages

@dataclass(frozen=True)
class PageScores:
    edit_errors: int      # Levenshtein edits + unmatched characters
    edit_length: int      # sum of max-lengths: the denominator
    tp: int
    fp: int
    fn: int
    label_hits: int       # matched pairs with equal labels (<= tp)
    reading_order: float | None  # None when no block matched
    table_scores: tuple[float, ...]  # TEDS per gt table, gt order
    edits: tuple[tuple[str, int, int, int], ...]  # (kind, blocks, edits, length): see `_edit_counts`

    @property
    def edit_distance(self) -> float:
        return self.edit_errors / self.edit_length if self.edit_length else 0.0


def evaluate_page(pred: Sequence[Block], gt: Sequence[Block]) -> PageScores:
    pairs = match_blocks(pred, gt)
    edits = _edit_counts(pred, gt, pairs)
    return PageScores(
        edit_errors=sum(e for _, _, e, _ in edits), edit_length=sum(n for _, _, _, n in edits),
        tp=len(pairs), fp=len(pred) - len(pairs), fn=len(gt) - len(pairs),
        label_hits=sum(pred[p].label == gt[g].label for p, g in pairs),
        reading_order=_reading_order(pairs),
        table_scores=_table_scores(pred, gt, pairs), edits=edits)


def _edit_counts(pred: Sequence[Block], gt: Sequence[Block],
                 pairs: list[tuple[int, int]]) -> tuple[tuple[str, int, int, int], ...]:
    """Edits and lengths by kind of block, (kind, blocks, edits, length): matched pairs by their
    gt label, then "missed" gt blocks and "extra" predicted ones (all their characters)."""
    counts: dict[str, tuple[int, int, int]] = {}

    def add(kind: str, errors: int, length: int) -> None:
        blocks, e, n = counts.get(kind, (0, 0, 0))
        counts[kind] = (blocks + 1, e + errors, n + length)

    for p, g in pairs:
        a, b = _text(pred[p]), _text(gt[g])
        add(gt[g].label, Levenshtein.distance(a, b), max(len(a), len(b)))
    for kind, blocks, matched in (("missed", gt, {g for _, g in pairs}), ("extra", pred, {p for p, _ in pairs})):
        for i, block in enumerate(blocks):
            if i not in matched:
                add(kind, len(_text(block)), len(_text(block)))
    return tuple((kind, *counts[kind]) for kind in counts)


def _reading_order(pairs: list[tuple[int, int]]) -> float | None:
    if not pairs:
        return None
    gt_rank = {g: r for r, g in enumerate(sorted(g for _, g in pairs))}
    predicted = [gt_rank[g] for _, g in sorted(pairs)]  # pairs sorted by pred index
    return Levenshtein.normalized_distance(predicted, list(range(len(pairs))))


def _table_scores(pred: Sequence[Block], gt: Sequence[Block],
                  pairs: list[tuple[int, int]]) -> tuple[float, ...]:
    pred_of = {g: p for p, g in pairs}
    return tuple(teds(pred[pred_of[g]].text, b.text) if g in pred_of else 0.0
                 for g, b in enumerate(gt) if b.label == TABLE_LABEL)


# ---------------------------------------------------------------- corpus

@dataclass(frozen=True)
class Summary:
    edit_distance: float          # sum of edits / sum of lengths over pages
    precision: float
    recall: float
    f1: float
    label_accuracy: float | None  # None when no block matched
    reading_order: float | None   # mean over pages with a matched block
    teds: float | None            # mean over gt tables; None when there are none
    pages: int

    def as_dict(self) -> dict[str, float | int | None]:
        return asdict(self)


def aggregate(scores: Sequence[PageScores]) -> Summary:
    """Micro-averaged text and detection, mean reading order, mean TEDS per table.

    With nothing predicted, precision is 1 if nothing was to be found, else 0; with
    nothing to find, recall is 1 if nothing was predicted, else 0.
    """
    if not scores:
        raise ValueError("aggregate needs at least one page")
    errors, length = sum(s.edit_errors for s in scores), sum(s.edit_length for s in scores)
    tp, fp, fn = (sum(getattr(s, k) for s in scores) for k in ("tp", "fp", "fn"))
    precision = tp / (tp + fp) if tp + fp else float(fn == 0)
    recall = tp / (tp + fn) if tp + fn else float(fp == 0)
    orders = [s.reading_order for s in scores if s.reading_order is not None]
    tables = [t for s in scores for t in s.table_scores]
    return Summary(
        edit_distance=errors / length if length else 0.0,
        precision=precision, recall=recall,
        f1=2 * precision * recall / (precision + recall) if precision + recall else 0.0,
        label_accuracy=sum(s.label_hits for s in scores) / tp if tp else None,
        reading_order=_mean(orders), teds=_mean(tables), pages=len(scores))


def edits_by_kind(scores: Sequence[PageScores]) -> dict[str, dict[str, float | int]]:
    """Where the page edit distance comes from, over all pages: per kind of block (matched
    blocks by gt label, "missed", "extra"), the blocks, the edit distance within them and their
    share of all edits. Kinds in descending share."""
    totals: dict[str, list[int]] = {}
    for score in scores:
        for kind, blocks, errors, length in score.edits:
            row = totals.setdefault(kind, [0, 0, 0])
            row[0], row[1], row[2] = row[0] + blocks, row[1] + errors, row[2] + length
    all_errors = sum(e for _, e, _ in totals.values())
    rows = {kind: {"blocks": b, "edit_distance": e / n if n else 0.0, "share_of_edits": e / all_errors if all_errors else 0.0}
            for kind, (b, e, n) in totals.items()}
    return dict(sorted(rows.items(), key=lambda item: -item[1]["share_of_edits"]))


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


# ---------------------------------------------------------------- columns
#
# A page set in two columns whose layout branch writes one column and ends the page (or starts in
# the second and never goes back) loses half its text at once, and the block scores hide why. A
# truth block is in a column when it is column-wide (at least a tenth of the page) and lies wholly
# in the page's left or right half (with a 2% gutter); a page has two columns when each holds
# at least COLUMN_BLOCKS of them. A block is reached when predicted boxes cover at least half its
# area (split or merged predictions reach it too); a column is unread when fewer than a quarter of
# its blocks are reached.

COLUMN_BLOCKS = 3


def unread_column(pred: Sequence[Block], gt: Sequence[Block]) -> bool | None:
    """Whether the prediction left a column of a two-column page unread; None when the truth is
    not set in two columns (module comment above)."""
    wide = [b.bbox for b in gt if b.bbox is not None and b.bbox[2] - b.bbox[0] >= 100]
    columns = ([box for box in wide if box[2] <= 520], [box for box in wide if box[0] >= 480])
    if min(len(column) for column in columns) < COLUMN_BLOCKS:
        return None
    boxes = [b.bbox for b in pred if b.bbox is not None]
    return any(sum(_covered(box, boxes) for box in column) < len(column) / 4 for column in columns)


def _covered(box: BBox, boxes: Sequence[BBox]) -> bool:
    return area(box) > 0 and sum(intersection(box, b) for b in boxes) >= area(box) / 2


# ---------------------------------------------------------------- real pages (text layer as truth)
#
# A real page's truth is its text layer (hpd_training.pagelayout), which gives the words and their
# type sizes but not the LaTeX of formulas or anything of images. So the page's text is the
# content of its blocks in order, except labels in UNSCORED_LABELS, with the grammar, HTML tags
# and Markdown emphasis/heading marks stripped and whitespace collapsed (`plain_text`); both
# sides are read the same way. Words are whitespace-separated tokens with a letter or digit
# (`words`): a table of contents' dot leaders are tokens too, and any output with dots would match
# them on any such page (chletter's page 2: 934 of its 1,084 tokens).
# - text edit distance: Levenshtein of the two plain texts / max(len) (order-aware).
# - word F1: multiset overlap of the words (order-free).
# - words read by type size: a truth word is read when an order-aware alignment (longest common
#   subsequence of the word sequences) pairs it with an equal predicted word; shares per
#   SIZE_BUCKETS bucket of the word's type size in pt.

UNSCORED_LABELS = frozenset({"formula", "image", "chart", "seal"})
SIZE_BUCKETS = (("<9", 0.0, 9.0), ("9-11.5", 9.0, 11.5), ("11.5-14", 11.5, 14.0), (">=14", 14.0, float("inf")))
_TAGS = re.compile(r"<[^>]*>")
_MARKDOWN = re.compile(r"\*\*|__|`|^#+\s+", re.MULTILINE)


def plain_text(blocks: Sequence[Block]) -> str:
    """The page's scored text: content of blocks not in UNSCORED_LABELS, without tags and
    Markdown marks, whitespace collapsed to single spaces."""
    parts = (_MARKDOWN.sub("", html.unescape(_TAGS.sub(" ", b.text)))
             for b in blocks if b.label not in UNSCORED_LABELS)
    return " ".join(" ".join(parts).split())


def words(tokens: Iterable[str]) -> list[str]:
    """The tokens that are words: those with a letter or digit."""
    return [t for t in tokens if any(c.isalnum() for c in t)]


def word_f1(pred: Sequence[str], truth: Sequence[str]) -> float:
    """F1 of the multiset overlap; 1 when both are empty."""
    if not pred and not truth:
        return 1.0
    common = sum((Counter(pred) & Counter(truth)).values())
    return 2 * common / (len(pred) + len(truth))


def words_read(pred: Sequence[str], truth: Sequence[str]) -> list[bool]:
    """Per truth word: paired with an equal predicted word by the longest common subsequence."""
    read = [False] * len(truth)
    for op in LCSseq.opcodes(list(truth), list(pred)):
        if op.tag == "equal":
            read[op.src_start:op.src_end] = [True] * (op.src_end - op.src_start)
    return read


def size_bucket(size: float) -> str:
    return next(name for name, lo, hi in SIZE_BUCKETS if lo <= size < hi)


@dataclass(frozen=True)
class TextScores:
    edit_errors: int     # Levenshtein distance of the plain texts
    edit_length: int     # max of their lengths
    common_words: int    # multiset overlap
    pred_words: int
    truth_words: int
    read_by_size: tuple[tuple[str, int, int], ...]  # (bucket, words read, words) per SIZE_BUCKETS

    @property
    def edit_distance(self) -> float:
        return self.edit_errors / self.edit_length if self.edit_length else 0.0

    @property
    def word_f1(self) -> float:
        total = self.pred_words + self.truth_words
        return 2 * self.common_words / total if total else 1.0


def score_text(pred: Sequence[Block], truth_words: Sequence[tuple[str, float]]) -> TextScores:
    """A page's text scores: prediction blocks against the truth's (word, type size pt) in order."""
    a = plain_text(pred)
    b = " ".join(w for w, _ in truth_words)
    sized = [(w, s) for w, s in truth_words if words([w])]
    pred_words, truth = words(a.split()), [w for w, _ in sized]
    read = words_read(pred_words, truth)
    buckets = [size_bucket(s) for _, s in sized]
    by_size = tuple((name, sum(r for r, k in zip(read, buckets) if k == name), buckets.count(name))
                    for name, _, _ in SIZE_BUCKETS)
    return TextScores(Levenshtein.distance(a, b), max(len(a), len(b)),
                      sum((Counter(pred_words) & Counter(truth)).values()), len(pred_words), len(truth), by_size)


def aggregate_text(scores: Sequence[TextScores]) -> dict[str, float | int | None]:
    """Micro-averaged edit distance and word F1, and the share of words read per size bucket."""
    errors, length = sum(s.edit_errors for s in scores), sum(s.edit_length for s in scores)
    common, total = sum(s.common_words for s in scores), sum(s.pred_words + s.truth_words for s in scores)
    out: dict[str, float | int | None] = {
        "pages": len(scores), "text_edit_distance": errors / length if length else 0.0,
        "word_f1": 2 * common / total if total else 1.0}
    for name, _, _ in SIZE_BUCKETS:
        read = sum(r for s in scores for k, r, _ in s.read_by_size if k == name)
        words = sum(n for s in scores for k, _, n in s.read_by_size if k == name)
        out[f"read {name} pt"] = read / words if words else None
        out[f"words {name} pt"] = words
    return out
