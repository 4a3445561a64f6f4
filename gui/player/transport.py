"""The transport bar: play/pause, step, seek slider, position, speed and pacing."""

from __future__ import annotations

from framelens.gui.common.widgets import format_time, icon
from framelens.gui.player.timeline import LOOP, Timeline
from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtGui import QMouseEvent
from PySide6.QtWidgets import (
    QComboBox,
    QHBoxLayout,
    QLabel,
    QSlider,
    QStyle,
    QStyleOptionSlider,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

SPEEDS = (0.25, 0.5, 1.0, 1.5, 2.0, 4.0)


class SeekSlider(QSlider):
    """A slider that seeks where its track is clicked (as every video player does),
    instead of paging by a step; the handle then follows the drag from there."""

    def mousePressEvent(self, event: QMouseEvent) -> None:
        if event.button() == Qt.MouseButton.LeftButton and self.maximum() > self.minimum():
            opt = QStyleOptionSlider()
            self.initStyleOption(opt)
            style = self.style()
            handle = style.subControlRect(
                QStyle.ComplexControl.CC_Slider, opt, QStyle.SubControl.SC_SliderHandle, self
            )
            if not handle.contains(event.position().toPoint()):
                groove = style.subControlRect(
                    QStyle.ComplexControl.CC_Slider, opt, QStyle.SubControl.SC_SliderGroove, self
                )
                span = max(1, groove.width() - handle.width())
                x = round(event.position().x() - groove.x() - handle.width() / 2)
                self.setValue(
                    QStyle.sliderValueFromPosition(
                        self.minimum(), self.maximum(), x, span, opt.upsideDown
                    )
                )  # the handle is under the cursor now: the press below starts a drag
        super().mousePressEvent(event)


class TransportBar(QWidget):
    """Play/pause, steps, seek slider with frame and time, speed and pacing."""

    seekRequested = Signal(int)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("transportBar")
        self.setAttribute(Qt.WidgetAttribute.WA_StyledBackground, True)
        self.play_button = self._button("play", "Play / pause (Space)", "playButton")
        self.back_button = self._button("step-back", "Previous frame (Left)")
        self.forward_button = self._button("step-forward", "Next frame (Right)")
        self.slider = SeekSlider(Qt.Orientation.Horizontal)
        self.slider.setObjectName("seekSlider")
        self.slider.setFocusPolicy(Qt.FocusPolicy.NoFocus)
        self.slider.setRange(0, 0)
        self.slider.setToolTip("Seek (frame accurate)")
        self.timeline = Timeline(self.slider)
        self.time_label = QLabel("—")
        self.time_label.setObjectName("timeLabel")
        self.speed_combo = QComboBox()
        self.speed_combo.setFocusPolicy(Qt.FocusPolicy.NoFocus)
        for speed in SPEEDS:
            self.speed_combo.addItem(f"{speed:g}×", speed)
        self.speed_combo.setToolTip("Playback speed (real-time mode)")
        self.realtime_button = QToolButton()
        self.realtime_button.setCheckable(True)
        self.realtime_button.setChecked(True)
        self.realtime_button.setIcon(icon("realtime"))
        self.realtime_button.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextBesideIcon)
        self.realtime_button.setFocusPolicy(Qt.FocusPolicy.NoFocus)
        self.realtime_button.toggled.connect(self._label_realtime)
        self._label_realtime(True)

        # The seek bar has a row of its own, the whole width of the video, as players
        # have it (VLC, mpv's controller): in a narrow window the buttons beside it
        # would leave it a few pixels.
        lay = QVBoxLayout(self)
        lay.setContentsMargins(10, 4, 10, 6)
        lay.setSpacing(2)
        lay.addWidget(self.slider)
        lay.addWidget(self.timeline)  # the seek bar's marks (A-B loop, bookmarks, events)
        row = QHBoxLayout()
        row.setContentsMargins(0, 0, 0, 0)
        row.setSpacing(8)
        row.addWidget(self.back_button)
        row.addWidget(self.play_button)
        row.addWidget(self.forward_button)
        row.addWidget(self.time_label)
        row.addStretch(1)
        row.addWidget(self.speed_combo)
        row.addWidget(self.realtime_button)
        lay.addLayout(row)

        self._frame_count: int | None = None
        self._fps = 0.0
        self._duration: float | None = None
        self._shown: tuple[int, float] | None = None  # the position shown last
        # While dragging, seek at most every 40 ms to the latest position.
        self._drag_timer = QTimer(self)
        self._drag_timer.setSingleShot(True)
        self._drag_timer.setInterval(40)
        self._drag_timer.timeout.connect(lambda: self.seekRequested.emit(self.slider.value()))
        self.slider.valueChanged.connect(self._on_slider)
        self.slider.sliderReleased.connect(lambda: self.seekRequested.emit(self.slider.value()))

    def _button(self, name: str, tip: str, object_name: str = "transportButton") -> QToolButton:
        b = QToolButton()
        b.setObjectName(object_name)
        b.setIcon(icon(name))
        b.setToolTip(tip)
        b.setFocusPolicy(Qt.FocusPolicy.NoFocus)  # keys belong to the window's shortcuts
        b.setAutoRaise(False)
        return b

    def _label_realtime(self, on: bool) -> None:
        self.realtime_button.setText("Real-time" if on else "Max speed")
        self.realtime_button.setToolTip(
            "Paced by the video's timestamps and the speed (click for as fast as possible)"
            if on
            else "As fast as possible: every frame, no waiting (click for real-time)"
        )

    def _on_slider(self, value: int) -> None:
        if self.slider.isSliderDown():
            if not self._drag_timer.isActive():
                self._drag_timer.start()
        else:
            self.seekRequested.emit(value)

    def set_source(
        self, frame_count: int | None, fps: float, duration: float | None = None
    ) -> None:
        """A new source: its frames, average rate and duration in seconds (to the end of
        its last frame; when unknown, frame count over rate)."""
        self._frame_count, self._fps = frame_count, fps
        if duration is None and frame_count and fps > 0:
            duration = frame_count / fps
        self._duration = duration
        # A fixed width: a label that changes size re-lays out (and repaints) the window.
        widest = f"{frame_count or 999999}/{frame_count or 999999}  0:00:00.0 / 0:00:00.0"
        metrics = self.time_label.fontMetrics()
        self.time_label.setFixedSize(metrics.horizontalAdvance(widest) + 16, metrics.height() + 8)
        self.slider.blockSignals(True)
        self.slider.setRange(0, max(0, (frame_count or 1) - 1))
        self.slider.setEnabled(bool(frame_count))
        self.slider.setPageStep(max(1, round(fps * 5)) if fps > 0 else 50)
        self.slider.blockSignals(False)

    def set_count(self, frame_count: int | None) -> None:
        """The frames really there (a file found cut short): the slider and the counter
        count them from now on, the frame on screen still shown."""
        self.set_source(frame_count, self._fps)
        if self._shown is not None:
            self.show_position(*self._shown)

    def show_position(self, index: int, pts: float) -> None:
        self._shown = (index, pts)
        if not self.slider.isSliderDown():
            self.slider.blockSignals(True)
            self.slider.setValue(index)
            self.slider.blockSignals(False)
        count = self._frame_count
        # one convention in the window: frame N of the count the status bar gives
        # ("501/1394" beside "1394 frames"), 1-based as a user counts frames
        frame = f"{index + 1}/{count}" if count else f"{index + 1}"
        total = f" / {format_time(self._duration)}" if count and self._duration else ""
        self.time_label.setText(f"{frame}  {format_time(pts)}{total}")

    def show_loop(self, a: int | None, b: int | None) -> None:
        """The A-B loop's ends under the seek bar (None: not set)."""
        self.timeline.set_marks([f for f in (a, b) if f is not None], LOOP)

    def show_playing(self, playing: bool) -> None:
        self.play_button.setIcon(icon("pause" if playing else "play"))
