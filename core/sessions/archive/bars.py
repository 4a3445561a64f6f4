"""A batch's bars: one for the whole batch (frames of every input) and one per worker
(the input it is on, its frames and fps), made by the caller's factory (core/progress.py:
the command line's terminal bars)."""

from __future__ import annotations

from framelens.core.progress import Bar, Progress, make_bar
from framelens.core.sessions.archive.types import InputProgress


class BatchBars:
    """Fed every InputProgress of a batch; ``close()`` when it ends."""

    def __init__(self, total_frames: int, progress: Progress = False) -> None:
        self._progress = progress
        self.overall = make_bar(progress, total=total_frames or None, desc="batch")
        self._workers: dict[str, Bar] = {}
        self._frames: dict[str, int] = {}
        self._on: dict[str, str] = {}  # worker -> the input it is on

    def __call__(self, event: InputProgress) -> None:
        if event.state in ("running", "done"):
            self._frames[event.path] = event.frames_done
        elif event.state in ("pending", "failed"):
            self._frames.pop(event.path, None)
        self.overall.n = sum(self._frames.values())
        self.overall.refresh()
        if event.state != "running" or not event.worker:
            return
        bar = self._workers.get(event.worker)
        if bar is None:
            bar = make_bar(self._progress, position=len(self._workers) + 1, leave=False)
            self._workers[event.worker] = bar
        if self._on.get(event.worker) != event.path:  # a new file: its own rate and time
            self._on[event.worker] = event.path
            bar.reset(total=event.frames_total or None)
        name = event.path.rsplit("/", 1)[-1]
        bar.set_description_str(f"{event.worker}: {name[-30:]}", refresh=False)
        bar.n = event.frames_done
        bar.set_postfix_str(f"{event.fps:.1f} fps", refresh=False)
        bar.refresh()

    def close(self) -> None:
        for bar in self._workers.values():
            bar.close()
        self.overall.close()
