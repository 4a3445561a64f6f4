"""Where a box's label goes so that it covers no label placed before it.

A label sits above its box's top-left corner. In a crowd (people side by side, one
behind another) that place is often taken by a neighbour's label; then the label tries,
in turn, above the box's top-right corner, under its bottom-left corner and just inside
its top edge, and takes the first place that covers no label placed before it (else the
one that covers least). Boxes are placed in painting order, so the first box keeps its
label where a lone box's goes. Rectangles are pixel edges x1, y1, x2, y2, both ends
included, kept inside a ``width`` x ``height`` image.
"""

from __future__ import annotations

__all__ = ["LabelRoom", "Pixels"]

Pixels = tuple[int, int, int, int]
"""x1, y1, x2, y2: the pixels from (x1, y1) to (x2, y2), both included."""

_CELL = 128  # pixels: the labels placed are looked up by the 128 x 128 squares they touch


def _other_places(label: Pixels, box: Pixels, width: int, height: int) -> list[Pixels]:
    """The places a box's label may take besides its own: above the box's top-right
    corner, under its bottom-left corner, just inside its top edge."""
    lw, lh = label[2] - label[0] + 1, label[3] - label[1] + 1
    x1, y1, x2, y2 = box
    out = []
    for x, y in ((x2 + 1 - lw, y1 - lh), (x1, y2 + 1), (x1, y1)):
        x = max(0, min(x, width - lw))
        y = max(0, min(y, height - lh))
        out.append((x, y, min(width - 1, x + lw - 1), min(height - 1, y + lh - 1)))
    return out


class LabelRoom:
    """The labels placed so far on one image (a frame's layout makes one)."""

    def __init__(self) -> None:
        self._cells: dict[tuple[int, int], list[tuple[int, Pixels]]] = {}
        self._count = 0

    def covered(self, place: Pixels) -> int:
        """Pixels of ``place`` the labels placed cover."""
        x1, y1, x2, y2 = place
        total, seen = 0, set()
        for cx in range(x1 // _CELL, x2 // _CELL + 1):
            for cy in range(y1 // _CELL, y2 // _CELL + 1):
                for k, (a1, b1, a2, b2) in self._cells.get((cx, cy), ()):
                    if k in seen:
                        continue
                    seen.add(k)
                    w = min(a2, x2) - max(a1, x1) + 1
                    h = min(b2, y2) - max(b1, y1) + 1
                    if w > 0 and h > 0:
                        total += w * h
        return total

    def place(self, label: Pixels, box: Pixels, width: int, height: int) -> Pixels:
        """Where box ``box``'s label, now at ``label`` (inside the image, as the layout
        puts it), goes: ``label`` itself when it covers no label placed, else the first
        other place that covers none, else the least covered; the place is then taken."""
        spot, least = label, self.covered(label)
        if least:
            for other in _other_places(label, box, width, height):
                covered = self.covered(other)
                if covered < least:
                    spot, least = other, covered
                    if not covered:
                        break
        entry = (self._count, spot)
        self._count += 1
        x1, y1, x2, y2 = spot
        for cx in range(x1 // _CELL, x2 // _CELL + 1):
            for cy in range(y1 // _CELL, y2 // _CELL + 1):
                self._cells.setdefault((cx, cy), []).append(entry)
        return spot
