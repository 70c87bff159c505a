"""Reading the boxes of `app.boxes.page_html` back, for tests."""

import re

_BOX = re.compile(r'<div class="hpd-box hpd-b(\d+)"[^>]*style="left:([\d.]+)%;top:([\d.]+)%;width:([\d.]+)%;'
                  r'height:([\d.]+)%;--c:([^"]+)"><span class="hpd-box-tag">(\d+)</span>')


def boxes_of(html: str) -> list[tuple[int, int, str, float, float, float, float]]:
    """(number, tag, colour, left, top, width, height) of each box, in percent of the page."""
    return [(int(n), int(tag), c, float(x), float(y), float(w), float(h))
            for n, x, y, w, h, c, tag in _BOX.findall(html)]
