"""Selecting a block: one class per block, `hpd-b{i}` (i: 1-based reading order), on its box on
the page (app.boxes), its row in the branch tree and its branch output (the child branch that
wrote it), and a marker before its rendered Markdown; `SELECT_JS` highlights all of them when
any is clicked.

Block i's branch is found by order and header: children are forked in the order of the layout
branch's headers, so the next unmatched child with the block's label and box is the one that
wrote it (a block whose header forked no child, or a plain-prompt page, has no branch).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from hpd_core.grammar import Block
from hpd_core.markdown import render_block


def block_of_branch(blocks: Sequence[Block],
                    children: Iterable[tuple[int, str | None, tuple | None]]) -> dict[int, int]:
    """{child branch id: block number} for children given as (branch, label, bbox) in fork order:
    each child takes the next block after its predecessor's with its header (none if there is none)."""
    numbers, start = {}, 0
    headers = [(b.label, b.bbox) for b in blocks]
    for branch, label, bbox in children:
        if (label or "text", bbox) in headers[start:]:
            start = headers.index((label or "text", bbox), start) + 1
            numbers[branch] = start
    return numbers


def marked_markdown(blocks: Sequence[Block]) -> str:
    """The page's Markdown (hpd_core.markdown.to_markdown) with an empty marker element of class
    `hpd-mark hpd-b{i}` before block i's part; blocks that render to nothing have none."""
    parts = (f'<div class="hpd-mark hpd-b{n}"></div>\n\n{md}' for n, b in enumerate(blocks, start=1)
             if (md := render_block(b)))
    return "\n\n".join(parts)


# Runs once in the browser (launch(js=...)). One listener on the document, so it survives Gradio
# re-rendering the panels. A Markdown block is the run of elements from its marker to the next.
SELECT_JS = """
() => {
  const nameOf = (el) => el && [...el.classList].find((c) => /^hpd-b[0-9]+$/.test(c));
  const markdownBlock = (target) => {
    const root = target.closest && target.closest('#markdown .md');
    if (!root) return null;
    let top = target;
    while (top.parentElement !== root) top = top.parentElement;
    for (let el = top; el; el = el.previousElementSibling) if (el.classList.contains('hpd-mark')) return nameOf(el);
    return null;
  };
  const scrollWithin = (el) => {  // the panel that scrolls, not the window
    for (let box = el.parentElement; box && box !== document.body; box = box.parentElement) {
      const overflow = getComputedStyle(box).overflowY;
      if ((overflow === 'auto' || overflow === 'scroll') && box.scrollHeight > box.clientHeight) {
        box.scrollTop += el.getBoundingClientRect().top - box.getBoundingClientRect().top - 8;
        return;
      }
    }
  };
  const select = (name) => {
    document.querySelectorAll('.hpd-selected').forEach((el) => el.classList.remove('hpd-selected'));
    document.querySelectorAll('.' + name).forEach((el) => {
      el.classList.add('hpd-selected');
      if (!el.classList.contains('hpd-mark')) return;
      for (let s = el.nextElementSibling; s && !s.classList.contains('hpd-mark'); s = s.nextElementSibling)
        s.classList.add('hpd-selected');
    });
    document.querySelectorAll('#branches .hpd-branch.' + name + ', #tree tr.' + name + ', #markdown .hpd-mark.' + name)
      .forEach((el) => scrollWithin(el.classList.contains('hpd-mark') ? el.nextElementSibling || el : el));
  };
  document.addEventListener('click', (event) => {
    const hit = event.target.closest && event.target.closest(
      '#page-image .hpd-box, #tree tr[class*="hpd-b"], #branches .hpd-branch[class*="hpd-b"]');
    const name = hit ? nameOf(hit) : markdownBlock(event.target);
    if (name) select(name);
  });
}
"""
