"""BlockTexts: the three training texts of a page's blocks in the HPD grammar, for page records."""

from __future__ import annotations

from hpd_core.grammar import Block, format_assembled, format_children, format_parent


class BlockTexts:
    """Mixed into page records with `blocks` (SynthPage, RealPage): the layout branch, the content
    branches (fork order) and the `plain` trajectory."""
    blocks: list[Block]

    @property
    def parent_text(self) -> str:
        return format_parent(self.blocks)

    @property
    def children_texts(self) -> list[str]:
        return format_children(self.blocks)

    @property
    def assembled_text(self) -> str:
        return format_assembled(self.blocks)
