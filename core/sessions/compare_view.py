"""The compare view's Qt-free worker: pane set-up, and the lock-step loop on a thread.

CompareWorker runs on its own thread: it prepares the panes' variants (prepare_panes),
decodes each frame of the source once and hands it to core's CompareRunner, which
runs the 2 to 4 panes in lock-step; it also draws the difference overlays so the
GUI thread only shows images. The Qt side is compare_controller.CompareSession.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from framelens.core.errors import Cancelled, ConfigError, error_message
from framelens.core.models.spec import ModelSpec
from framelens.core.pipeline.compare.differences import draw_pane_differences
from framelens.core.pipeline.compare.kept import KeptFrames
from framelens.core.pipeline.compare.panes import (
    MAX_PANES,
    MIN_PANES,
    CompareRunner,
    CompareStep,
    PaneSpec,
)
from framelens.core.pipeline.compare.report import compare_report_folder
from framelens.core.pipeline.compare.variants import prepare_pane
from framelens.core.pipeline.decode_ahead import End
from framelens.core.pipeline.devices import resolve_device
from framelens.core.pipeline.settings import PipelineSettings, without_classes
from framelens.core.precision.int8_settings import CalibrationSettings
from framelens.core.sessions.compare.live_tracks import LiveTracks, TrackNumbers
from framelens.core.sessions.compare.lockstep import (
    LockstepFeed,
    open_for_panes,
    pane_failover,
    pane_trackers,
)
from framelens.core.stages.source_stages import StageFactory
from framelens.core.stages.sources import Source
from framelens.core.threads import NamedThread
from framelens.core.types import Image

if TYPE_CHECKING:
    from framelens.core.stages.analytics.zones import ZonesFile
    from framelens.core.stages.tracking.settings import TrackerSettings

__all__ = [
    "CompareFrame",
    "CompareWorker",
    "PaneRequest",
    "Resolve",
    "pane_labels",
    "prepare_panes",
    "report_target",
]

Resolve = Callable[[str], ModelSpec]


@dataclass(frozen=True)
class PaneRequest:
    """What the user chose for one pane; None = as in the main window."""

    precision: str = "fp32"
    model: str | None = None  # catalogue name or ONNX path
    device: str | None = None  # "auto" | "cpu" | "cuda:N"


@dataclass(frozen=True)
class CompareFrame:
    """One lock-step frame for the view: core's step and the difference overlays.

    ``differences[i]``: the reference's detections that pane i missed and pane i's
    that the reference lacks, drawn on the plain frame (None for the reference); they
    are drawn for every frame (a millisecond each) so the view's toggle is instant.
    ``diff_counts[i]``: how many of each. ``run`` counts restarts from the
    beginning (Home, Play after the end), so the view knows when to clear its history.
    ``medians[i]``: pane i's median inference ms over every frame compared so far, the
    number the report gives. ``frame_count``: the source's, None when unknown.
    ``tracks``: when the panes track, each pane's tracks against the reference's over
    the frames compared (the report's numbers, recomputed about once a second; None
    until the first are ready or when the panes do not track), and with lines and zones
    each pane's counts (``tracks.counts``).
    """

    step: CompareStep
    differences: tuple[Image | None, ...]
    run: int
    diff_counts: tuple[tuple[int, int] | None, ...] = ()  # (only in reference, only in pane)
    medians: tuple[float, ...] = ()
    frame_count: int | None = None
    tracks: TrackNumbers | None = None


def pane_labels(requests: Sequence[PaneRequest], model_names: Sequence[str]) -> list[str]:
    """Short unique labels: the precision, with the model and device where panes differ."""
    show_model = len(set(model_names)) > 1
    show_device = len({r.device for r in requests}) > 1
    labels: list[str] = []
    for r, model in zip(requests, model_names, strict=True):
        parts = [r.precision.upper()]
        if show_model:
            parts.insert(0, model)
        if show_device and r.device:
            parts.append(r.device.upper() if r.device == "cpu" else r.device)
        label = " ".join(parts)
        n = 2
        while label in labels:
            label = f"{' '.join(parts)} #{n}"
            n += 1
        labels.append(label)
    return labels


def report_target(folder: str, stem: str) -> Path:
    """``folder`` itself when it is empty or an earlier report, else a new subfolder in it."""
    return compare_report_folder(folder, stem)


def prepare_panes(
    base: PipelineSettings,
    requests: Sequence[PaneRequest],
    source: str,
    resolve: Resolve,
    *,
    calibration: CalibrationSettings | None = None,
    on_prepare: Callable[[str, float], None] | None = None,
    cancel: threading.Event | None = None,
) -> list[PaneSpec]:
    """One PaneSpec per request, its variant taken from the cache or prepared now."""
    if not MIN_PANES <= len(requests) <= MAX_PANES:
        raise ConfigError(f"a comparison needs {MIN_PANES} to {MAX_PANES} panes")
    models = [base.model if r.model is None else resolve(r.model) for r in requests]
    labels = pane_labels(requests, [m.name for m in models])
    panes: list[PaneSpec] = []
    n = len(requests)
    for i, (r, model, label) in enumerate(zip(requests, models, labels, strict=True)):
        device = base.device if r.device is None else resolve_device(r.device)
        params = base.params if model == base.model else without_classes(base.params)
        settings = replace(base, model=model, device=device, precision=r.precision, params=params)

        def report(text: str, fraction: float, i: int = i) -> None:
            if on_prepare is not None:  # the pane's share of the whole preparation
                on_prepare(text, (i + fraction) / n)

        panes.append(
            prepare_pane(
                label,
                settings,
                source=source,
                progress=False,
                on_prepare=report,
                cancel=cancel,
                calibration=calibration,
            )
        )
    return panes


class CompareWorker:
    """Prepares the panes, then steps them through the source in lock-step; no Qt.

    Commands (play, pause, home, stop) may come from any thread. The callbacks run on
    the worker's thread: ``on_ready(panes)`` once prepared, ``on_frame(CompareFrame)``
    per frame, ``on_state(text)`` ("playing", "paused", "ended", "stopped"),
    ``on_progress(text, 0..1)`` while preparing, ``on_error(one line)``.

    ``kept`` holds the numbers of every frame computed (KeptFrames, from the moment
    the panes are ready): what "Save report" writes without running the panes again.
    ``tracking``: every pane tracks its boxes with a tracker of its own; ``zones``: and
    counts its tracks against these lines and zones (the counts in ``tracks``, and in
    the saved report).
    """

    def __init__(
        self,
        source: str,
        start: int,
        make_panes: Callable[[Callable[[str, float], None], threading.Event], list[PaneSpec]],
        *,
        on_ready: Callable[[list[PaneSpec]], None],
        on_frame: Callable[[CompareFrame], None],
        on_state: Callable[[str], None],
        on_progress: Callable[[str, float], None],
        on_error: Callable[[str], None],
        tracking: TrackerSettings | None = None,
        zones: ZonesFile | None = None,
    ) -> None:
        self.source = source
        self.tracking = tracking
        self.zones = zones if tracking is not None else None
        self._live_tracks: LiveTracks | None = None
        self._last: CompareFrame | None = None  # the last frame handed out
        self.start_index = max(0, start)
        self._make_panes = make_panes
        self._on_ready, self._on_frame, self._on_state = on_ready, on_frame, on_state
        self._on_progress, self._on_error = on_progress, on_error
        self._commands: queue.Queue[tuple[str, int]] = queue.Queue()
        self._cancel = threading.Event()
        self._playing = True
        self._run = 0
        self.kept: KeptFrames | None = None
        self.frame_count: int | None = None
        self._thread = NamedThread(target=self._main, name="fl-compare", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def play(self) -> None:
        self._commands.put(("play", 0))

    def pause(self) -> None:
        self._commands.put(("pause", 0))

    def home(self, run: int) -> None:
        """Back to the first frame, tagging what follows with ``run`` (a number above any
        before it): nothing computed ahead of the jump is handed out after it. Paused,
        it shows the first frame and stays paused."""
        self._commands.put(("home", run))

    def stop(self, timeout: float = 10.0) -> None:
        """Stop (cancelling a preparation) and wait for the thread to end."""
        self._cancel.set()
        self._commands.put(("stop", 0))
        if self._thread.is_alive() and threading.current_thread() is not self._thread:
            self._thread.join(timeout)

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()

    def _main(self) -> None:
        try:
            panes = self._make_panes(self._on_progress, self._cancel)
            if self._cancel.is_set():
                raise Cancelled("cancelled")
            with (
                open_for_panes(self.source) as source,
                # a pane whose GPU fails goes on on another GPU, else the CPU: the
                # window says so
                CompareRunner(
                    panes,
                    draw=True,
                    stages=self._trackers(source),
                    on_message=self._on_error,
                    failover=pane_failover(panes, self._on_error),
                ) as runner,  # fmt: skip
            ):
                self.kept = KeptFrames(panes, runner.reference, self.tracking, self.zones)
                if self.tracking is not None:
                    self._live_tracks = LiveTracks(self.kept)
                self.frame_count = source.info.frame_count
                self._on_ready(panes)
                self._seek(source, self.start_index)
                self._on_state("playing")
                feed = LockstepFeed(source, runner)
                try:
                    self._loop(feed, panes)
                finally:
                    feed.close()
        except Cancelled:
            pass
        except BaseException as exc:
            self._on_error(error_message(exc))
        finally:
            self._on_state("stopped")

    def _trackers(self, source: Source) -> StageFactory | None:
        if self.tracking is None:
            return None
        return pane_trackers(self.tracking, source.info.fps)

    def _seek(self, source: Source, index: int) -> None:
        count = source.info.frame_count
        if count:
            index = min(index, count - 1)
        if index > 0 and source.info.seekable:
            source.seek(index)

    def _loop(self, feed: LockstepFeed, panes: list[PaneSpec]) -> None:
        ended = False
        show_one = False  # Home while paused: compute and show the first frame
        while not self._cancel.is_set():
            busy = self._playing or show_one
            try:
                command, run = self._commands.get_nowait() if busy else self._commands.get()
            except queue.Empty:
                command, run = "", 0
            if command == "stop":
                return
            if command == "pause" and self._playing:
                self._playing = False
                self._on_state("paused")
            elif command == "home":
                feed.restart()  # drops what was computed ahead of the jump
                self._run = max(run, self._run + 1)
                show_one = not self._playing
                if ended:
                    ended = False
                    self._on_state("paused")
            elif command == "play" and not self._playing:
                if ended:  # from the top again, with fresh totals
                    ended = False
                    feed.restart()
                    self._run += 1
                self._playing = True
                self._on_state("playing")
            if not (self._playing or show_one):
                continue
            step = feed.next(timeout=0.05)
            if step is None:
                continue
            if isinstance(step, End):
                ended, self._playing, show_one = True, False, False
                self._deliver_final_tracks()
                self._on_state("ended")
                continue
            show_one = False
            self._deliver(step, panes)

    def _deliver_final_tracks(self) -> None:
        """At the end: the last frame again, with the track numbers over every frame."""
        last = self._last
        if self._live_tracks is None or last is None:
            return
        self._on_frame(replace(last, tracks=self._live_tracks.final()))

    def _deliver(self, step: CompareStep, panes: list[PaneSpec]) -> None:
        kept = self.kept
        assert kept is not None  # set before the loop starts
        kept.add(step)
        medians = tuple(kept.inference_median(i) for i in range(len(panes)))
        drawn = draw_pane_differences(step, panes)
        tracks = self._live_tracks.latest() if self._live_tracks is not None else None
        frame = CompareFrame(
            step, drawn.images, self._run, drawn.counts, medians, self.frame_count, tracks
        )
        self._last = frame
        self._on_frame(frame)
