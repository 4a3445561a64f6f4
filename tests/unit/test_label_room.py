"""Where a label goes when another is in its place (core/stages/draw/label_room.py)."""

from __future__ import annotations

from framelens.core.stages.draw.label_room import LabelRoom, Pixels

W, H = 320, 240


def _overlap(a: Pixels, b: Pixels) -> int:
    w = min(a[2], b[2]) - max(a[0], b[0]) + 1
    h = min(a[3], b[3]) - max(a[1], b[1]) + 1
    return max(w, 0) * max(h, 0)


def test_a_free_place_is_kept_and_a_taken_one_gives_way_in_order() -> None:
    room = LabelRoom()
    first = room.place((40, 60, 109, 79), (40, 80, 110, 200), W, H)
    assert first == (40, 60, 109, 79)  # nothing placed yet: where it is
    # a box beside the first: its label above its top-left corner would cover the first's;
    # above its top-right corner (right-aligned to the box) it covers nothing
    second = room.place((100, 62, 169, 81), (100, 82, 200, 202), W, H)
    assert second == (131, 62, 200, 81) and _overlap(second, first) == 0
    # a third box under both: above-left and above-right covered, so under the box
    third = room.place((60, 60, 129, 79), (60, 80, 130, 180), W, H)
    assert third == (60, 181, 129, 200)
    assert _overlap(third, first) == 0 and _overlap(third, second) == 0


def test_every_place_covered_takes_the_least_covered_and_stays_inside() -> None:
    room = LabelRoom()
    wall = [room.place((x, y, x + 59, y + 19), (x, y + 20, x + 59, y + 99), W, H)
            for x in range(0, W, 60) for y in range(0, H, 20)]  # fmt: skip
    assert len(wall) == 6 * 12  # the image tiled with labels
    late = room.place((260, 0, 319, 19), (260, 20, 300, 120), W, H)  # inside, as layout gives
    assert late[0] >= 0 and late[1] >= 0 and late[2] <= W - 1 and late[3] <= H - 1
    assert late[2] - late[0] == 59 and late[3] - late[1] == 19  # its size kept
    assert room.covered(late) > 0  # no free place: the least covered one
