"""The main window's playback controls: the transport bar and the Playback menu (play,
steps, start, end, go to frame, slower / faster, the A-B loop), speed and real-time
pacing, saved as they change. The keys mpv and VLC users know work beside FrameLens's
own: ``,`` ``.`` step, ``[`` ``]`` slower / faster, ``L`` the A-B loop (``S``, a
snapshot: main_sources.py)."""

from __future__ import annotations

from framelens.core.api import Bookmarks, PlayerState
from framelens.gui.player.goto_frame import GoToFrameDialog
from framelens.gui.player.main_window_parts import WindowParts
from framelens.gui.player.timeline import BOOKMARK
from PySide6.QtCore import QObject, Qt
from PySide6.QtGui import QAction, QKeySequence

__all__ = ["PlaybackControls"]


class PlaybackControls(QObject):
    """Play, pause, step and seek from the transport bar, the menu and the keyboard."""

    def __init__(self, parts: WindowParts) -> None:
        super().__init__(parts.window)
        self.parts = parts
        c, t, a = parts.controller, parts.transport, parts.action
        self.play_action = a("&Play / Pause", c.toggle_play, "Space", "play")
        self.back_action = a("Step &Back", lambda: c.step(-1), "Left", "step-back")
        self.forward_action = a("Step &Forward", lambda: c.step(1), "Right", "step-forward")
        self.back_action.setShortcuts([QKeySequence("Left"), QKeySequence(",")])  # mpv's ,
        self.forward_action.setShortcuts([QKeySequence("Right"), QKeySequence(".")])
        self.start_action = a("Go to &Start", lambda: c.seek(0), "Home")
        self.end_action = a("Go to &End", self.seek_end, "End")
        self.goto_action = a(
            "&Go to Frame…",
            self.go_to_frame,
            "Ctrl+G",
            tip="Show a frame by its number, as the counter shows it",
        )
        self.slower_action = a(
            "&Slower", lambda: self.change_speed(-1), "[", tip="The next lower speed (as mpv)"
        )
        self.faster_action = a(
            "F&aster", lambda: self.change_speed(1), "]", tip="The next higher speed (as mpv)"
        )
        self.loop_action = a(
            "A-B &Loop",
            self.press_loop,
            "L",
            tip="Loop start here, then loop end, then no loop (as mpv's l)",
        )
        self.bookmark_action = a(
            "&Bookmark This Frame",
            self.toggle_bookmark,
            "M",
            tip="Mark the frame on screen under the seek bar (again: unmark it)",
        )
        self.next_bookmark_action = a(
            "&Next Bookmark", lambda: self.go_bookmark(1), "PgDown", tip="As mpv's next chapter"
        )
        self.previous_bookmark_action = a(
            "Pre&vious Bookmark", lambda: self.go_bookmark(-1), "PgUp", tip="As mpv's chapters"
        )
        self.bookmarks = Bookmarks()
        for action in [*self.stepping, *self.review]:
            action.setShortcutContext(Qt.ShortcutContext.WindowShortcut)
        self._loop: tuple[int | None, int | None] = (None, None)
        c.stateChanged.connect(self._on_state)
        self.realtime_action = QAction("&Real-time Pacing", parts.window, checkable=True)
        self.realtime_action.setShortcut(QKeySequence("Ctrl+R"))
        self.realtime_action.toggled.connect(t.realtime_button.setChecked)
        t.realtime_button.toggled.connect(self.realtime_action.setChecked)
        t.play_button.clicked.connect(c.toggle_play)
        t.back_button.clicked.connect(lambda: c.step(-1))
        t.forward_button.clicked.connect(lambda: c.step(1))
        t.seekRequested.connect(c.seek)
        t.speed_combo.currentIndexChanged.connect(self._on_speed)
        t.realtime_button.toggled.connect(self._on_realtime)

    @property
    def stepping(self) -> list[QAction]:
        """Play and the moves through the video, in the menu's order."""
        return [
            self.play_action,
            self.back_action,
            self.forward_action,
            self.start_action,
            self.end_action,
        ]

    @property
    def review(self) -> list[QAction]:
        """Speed and the A-B loop, in the menu's order."""
        return [
            self.slower_action,
            self.faster_action,
            self.loop_action,
            self.bookmark_action,
            self.next_bookmark_action,
            self.previous_bookmark_action,
        ]

    def _on_screen(self) -> int:
        shown, state = self.parts.shown, self.parts.controller.state
        return shown.index if shown.index >= 0 else state.index

    def toggle_bookmark(self) -> None:
        """``M``: the frame on screen bookmarked, or no longer."""
        index = self._on_screen()
        if index < 0:
            return
        self.bookmarks = self.bookmarks.toggle(index)
        self.parts.transport.timeline.set_marks(self.bookmarks.frames, BOOKMARK)
        marked = index in self.bookmarks.frames
        self.parts.show_message(
            f"Bookmark at frame {index + 1}" if marked else f"Bookmark {index + 1} removed", 3000
        )

    def press_loop(self) -> None:
        """``L``: A, B, no loop; a source that cannot seek (a camera) has none, said why."""
        refusal = self.parts.controller.seek_refusal()
        if refusal is not None:
            self.parts.show_message(f"No A-B loop: {refusal}", 4000)
            return
        self.parts.controller.press_loop()

    def go_bookmark(self, direction: int) -> None:
        """PgDown / PgUp: the bookmark after / before the frame on screen, paused."""
        index = self._on_screen()
        b = self.bookmarks
        target = b.after(index) if direction > 0 else b.before(index)
        if target is None:
            self.parts.show_message("No bookmark " + ("after" if direction > 0 else "before"), 2000)
            return
        self.parts.controller.pause()
        self.parts.controller.seek(target)

    def change_speed(self, steps: int) -> None:
        """``[`` / ``]``: the speed combo's next lower / higher speed (none past the ends)."""
        combo = self.parts.transport.speed_combo
        index = min(max(0, combo.currentIndex() + steps), combo.count() - 1)
        combo.setCurrentIndex(index)
        realtime = self.parts.transport.realtime_button.isChecked()
        note = "" if realtime else " (in real-time pacing)"
        self.parts.show_message(f"Speed {combo.currentText()}{note}", 2000)

    def _on_state(self, state: PlayerState) -> None:
        if state.status == "empty" and self.bookmarks.frames:
            self.bookmarks = Bookmarks()  # another video (a failed open keeps them)
            self.parts.transport.timeline.set_marks((), BOOKMARK)
        loop = (state.loop.a, state.loop.b)
        if loop == self._loop:
            return
        self._loop = loop
        self.parts.transport.show_loop(*loop)
        if state.status != "empty":
            self.parts.show_message(state.loop.words(), 4000)

    def restore(self) -> None:
        """The saved speed and pacing."""
        s, t, c = self.parts.settings, self.parts.transport, self.parts.controller
        speed_index = t.speed_combo.findData(s.speed)
        t.speed_combo.setCurrentIndex(speed_index if speed_index >= 0 else 2)
        t.realtime_button.setChecked(s.realtime)
        self.realtime_action.setChecked(s.realtime)
        c.set_speed(t.speed_combo.currentData())
        c.set_realtime(s.realtime)

    def _on_speed(self, _index: int) -> None:
        speed = float(self.parts.transport.speed_combo.currentData())
        self.parts.settings.speed = speed
        self.parts.controller.set_speed(speed)

    def _on_realtime(self, on: bool) -> None:
        self.parts.settings.realtime = on
        self.parts.transport.speed_combo.setEnabled(on)
        self.parts.controller.set_realtime(on)

    def seek_end(self) -> None:
        state = self.parts.controller.state
        if state.frame_count:
            self.parts.controller.seek(state.frame_count - 1)

    def go_to_frame(self) -> GoToFrameDialog | None:
        """Playback > Go to Frame… (Ctrl+G): shows the frame typed, paused."""
        c, shown = self.parts.controller, self.parts.shown
        state, refusal = c.state, c.seek_refusal()
        if refusal is not None:
            self.parts.show_error(refusal)
            return None
        current = shown.index if shown.index >= 0 else state.index
        dialog = GoToFrameDialog(state.frame_count, current, self.parts.window)
        dialog.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)

        def go() -> None:
            c.pause()
            c.seek(dialog.index)

        dialog.accepted.connect(go)
        dialog.open()
        return dialog
