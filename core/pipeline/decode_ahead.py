"""Decoding ahead of playback: a thread reads a Source into a small bounded queue."""

from __future__ import annotations

import queue
import threading
import time

from framelens.core.stages.sources import Source
from framelens.core.stages.timing import now_ms
from framelens.core.threads import NamedThread
from framelens.core.types import Frame


class End:
    """End of the source, as an item of the decode queue."""


class Failed:
    def __init__(self, error: BaseException) -> None:
        self.error = error


DecodeItem = tuple[Frame, float, float] | End | Failed  # (frame, decode ms, decode start ms)


class DecodeAhead:
    """Reads a Source on its own thread into a bounded queue.

    seek() bumps a generation number; queued frames of an older generation are
    discarded by get(), so nothing decoded before a seek is ever shown after it.
    A discarded frame that holds a pooled buffer (NVDEC's device frames have
    ``release()``) gives it back, so seeking never runs the decoder's pool dry.
    """

    def __init__(self, source: Source, depth: int = 4) -> None:
        self.source = source
        self._queue: queue.Queue[tuple[int, DecodeItem]] = queue.Queue(depth)
        self._lock = threading.Lock()  # guards the source and the generation
        self._wake = threading.Condition(self._lock)
        self._generation = 0
        self._at_end = False
        self._stop = False
        self._thread = NamedThread(target=self._run, name="fl-decode-ahead", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while True:
            with self._lock:
                while self._at_end and not self._stop:
                    self._wake.wait()
                if self._stop:
                    return
                gen = self._generation
                item = self._read()
            self._put(gen, item)

    def _read(self) -> DecodeItem:
        t0 = now_ms()
        try:
            frame = self.source.read()
        except BaseException as exc:  # handed to the consumer, reported there
            self._at_end = True
            return Failed(exc)
        if frame is None:
            self._at_end = True
            return End()
        return (frame, now_ms() - t0, t0)

    def _put(self, gen: int, item: DecodeItem) -> None:
        while not self._stop and gen == self._generation:
            try:
                self._queue.put((gen, item), timeout=0.05)
                return
            except queue.Full:
                continue
        _discard(item)  # a seek or close overtook it

    def get(self, timeout: float) -> DecodeItem | None:
        """The next item of the current generation, or None after ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        while True:
            remaining = deadline - time.monotonic()
            try:
                gen, item = self._queue.get(timeout=max(0.0, remaining))
            except queue.Empty:
                return None
            if gen == self._generation:
                return item
            _discard(item)

    @property
    def waiting(self) -> bool:
        """Whether a decoded frame of the current generation waits to be taken (the end
        of the source or a failure does not count: the frame before it is the newest)."""
        with self._queue.mutex:
            return any(
                gen == self._generation and isinstance(item, tuple)
                for gen, item in self._queue.queue
            )

    def seek(self, index: int) -> None:
        """Reposition the source; frames already queued are invalidated."""
        with self._lock:
            self._generation += 1
            self._drain()
            try:
                self.source.seek(index)
            finally:
                self._at_end = False
                self._wake.notify_all()

    def _drain(self) -> None:
        while True:
            try:
                _, item = self._queue.get_nowait()
            except queue.Empty:
                return
            _discard(item)

    def stop(self) -> None:
        """Stop the thread and give back what it decoded; the source stays open."""
        with self._lock:
            self._stop = True
            self._wake.notify_all()
        self._drain()
        self._thread.join(timeout=5)
        self._drain()  # what the thread put while it was stopping

    def close(self) -> None:
        """Stop the thread and close the source."""
        self.stop()
        self.source.close()


def _discard(item: DecodeItem) -> None:
    """Give a frame nobody will see back to its source's pool, if it came from one."""
    if isinstance(item, tuple):
        release = getattr(item[0], "release", None)
        if release is not None:
            release()
