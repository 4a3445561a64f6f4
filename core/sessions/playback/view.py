"""What the window's playback shows, and what may be done with it, without Qt.

The GUI's controller forwards the player's reports here (a state, a result taken by
the screen) and asks before it acts (a snapshot, an export); this module decides:

- which source is current: one asked for while another plays becomes current once
  the player has let the old one go (its state says no source), at once when none is
  open; a failed open leaves the current one playing, and current;
- the frame on screen (``last_result``): forgotten when another source becomes current;
- a snapshot needs a frame on screen; going to a frame needs a source that seeks;
  File > Export needs a file (or a seekable source) open, a model, one export at a
  time, and says "cancelled" when the user stopped it.
"""

from __future__ import annotations

from pathlib import Path

from framelens.core.errors import Cancelled, ExportError, error_message
from framelens.core.pipeline.snapshot import save_frame_snapshot
from framelens.core.sessions.export import ExportJob, ExportRequest, ProgressFn
from framelens.core.sessions.playback.choice import PlaybackChoice
from framelens.core.sessions.playback.state import PlayerState
from framelens.core.types import FrameResult

__all__ = ["PlaybackView"]


class PlaybackView:
    """The player's state, the current source and frame on screen, snapshot and export."""

    def __init__(self, choice: PlaybackChoice) -> None:
        self._choice = choice  # its ``source`` is the current one (INT8 calibrates on it)
        self.state = PlayerState()
        self.last_result: FrameResult | None = None
        self._opening: str | None = None  # asked for while another source is open
        self._export: ExportJob | None = None

    # ---- sources and results ----------------------------------------------------------

    @property
    def source(self) -> str | None:
        """The current source: open in the player (None: none yet)."""
        return self._choice.source

    def opening(self, spec: str) -> None:
        """``spec`` is asked for: current at once if nothing is open, else once the
        player has let the current one go."""
        self._opening = spec
        if self.state.source is None:
            self._opened()

    def open_failed(self, spec: str) -> None:
        """``spec`` could not be opened: the current source stays current."""
        if self._opening == spec:
            self._opening = None
        if self._choice.source == spec and self.state.source is None:
            self._choice.source = None  # nothing was open: nothing is current

    def state_changed(self, state: PlayerState) -> None:
        """The player's new state (its reports, in order)."""
        if self._opening is not None and state.source is None and self.state.source is not None:
            self._opened()  # the new source opens: the current one was let go
        self.state = state

    def shown(self, result: FrameResult) -> None:
        """``result`` reached the screen."""
        self.last_result = result

    def _opened(self) -> None:
        self._choice.source, self._opening, self.last_result = self._opening, None, None

    def seek_refusal(self) -> str | None:
        """Why no frame can be gone to by its number now (None: it can)."""
        info = self.state.source
        if info is None:
            return "open a video first, then go to one of its frames"
        if not info.seekable:
            return f"{info.kind} sources play live: there is no frame to go to"
        return None

    # ---- snapshot and export -----------------------------------------------------------

    def snapshot_refusal(self) -> str | None:
        """Why the frame on screen cannot be saved (None: it can)."""
        return "nothing to save: open a video first" if self.last_result is None else None

    def save_snapshot(self, path: str | Path) -> Path:
        """The frame on screen as a PNG with its overlays (the GPU path draws them on
        screen, not into frames: drawn here for the file); the path written. ExportError
        with nothing on screen or when the file cannot be written."""
        result, refusal = self.last_result, self.snapshot_refusal()
        if result is None or refusal is not None:
            raise ExportError(refusal)
        return save_frame_snapshot(result, path, self._choice.settings)

    def export_refusal(self) -> str | None:
        """Why File > Export cannot be asked for now (None: its dialog may open)."""
        info = self.state.source
        if info is None:
            return "nothing to export: open a video first"
        if not info.seekable and info.kind != "file":
            return "export works on files; record a camera or stream first"
        return None

    @property
    def exporting(self) -> bool:
        return self._export is not None

    def start_export(self, request: ExportRequest) -> ExportJob:
        """The job exporting ``request`` with the model as it runs now (run it with
        ``run_export``); ExportError while another runs or with no model chosen."""
        if self._export is not None:
            raise ExportError("an export is already running")
        settings = self._choice.settings
        if settings is None:
            raise ExportError("choose a model before exporting")
        job = self._export = ExportJob(request, settings)
        return job

    def run_export(self, job: ExportJob, progress: ProgressFn) -> list[str] | str:
        """Run ``job`` on the caller's thread: every path written, or the one line why
        not ("cancelled" after ``cancel_export``). The next export may start after."""
        try:
            return job.run(progress)
        except BaseException as exc:
            return "cancelled" if isinstance(exc, Cancelled) else error_message(exc)
        finally:
            self._export = None

    def cancel_export(self) -> None:
        if self._export is not None:
            self._export.cancel()
