"""Bookmarks (core/sessions/playback/bookmarks.py): M marks or unmarks, PgUp / PgDown
go to the one before / after the frame on screen."""

from __future__ import annotations

from framelens.core.sessions.playback.bookmarks import Bookmarks


def test_m_marks_in_order_and_again_unmarks() -> None:
    b = Bookmarks().toggle(300).toggle(40).toggle(900)
    assert b.frames == (40, 300, 900)
    assert b.toggle(300).frames == (40, 900)


def test_the_bookmark_after_and_before_a_frame() -> None:
    b = Bookmarks((40, 300, 900))
    assert [b.after(i) for i in (0, 40, 299, 300, 900)] == [40, 300, 300, 900, None]
    assert [b.before(i) for i in (0, 40, 41, 300, 1000)] == [None, None, 40, 40, 900]
    assert Bookmarks().after(0) is None
