"""Many sources read as one: DeepStream's stream muxer for FrameLens' one executor.

Each source keeps its own decoder (an NVDEC session on the GPU) on a thread of its own,
filling a small queue; ``read`` hands out the next frame of the source whose turn it is
among those with a frame ready (round robin), stamped with that source's ``source_id``.
So the executor's batches are frames of several sources, one engine call for all, and
results go back to each source by ``Frame.source_id``. A slow source never stalls the
others (its turn is skipped while it has nothing), and a source that fails is recorded
(``failures``) and dropped while the rest go on. Live streams reconnect with backoff
inside their own source (core/stages/sources/stream.py).
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Sequence
from dataclasses import dataclass

from framelens.core.errors import GpuError, SourceError
from framelens.core.stages.sources.base import Source
from framelens.core.threads import NamedThread
from framelens.core.types import Frame, SourceInfo

log = logging.getLogger(__name__)

QUEUE_DEPTH = 4  # frames read ahead per source


@dataclass(frozen=True)
class _Ended:
    error: str | None = None
    gpu: bool = False  # the error was the GPU's (an NVDEC failure), not the source's


class MergedSource(Source):
    """``sources`` read together; ``limits``: at most that many frames of each source
    (None: to its end; one number: the same for every source). A source that fails
    stops alone and its reason is kept in ``failures``; with ``raise_gpu_errors`` a GPU
    failure of its decoder (GpuError) is raised from ``read`` instead, so that the run
    can move every source to another device."""

    def __init__(
        self,
        sources: Sequence[Source],
        *,
        limits: int | Sequence[int | None] | None = None,
        raise_gpu_errors: bool = False,
    ) -> None:
        if not sources:
            raise SourceError("no sources to read")
        self.sources = list(sources)
        for i, source in enumerate(self.sources):
            source.source_id = i
        if limits is None or not isinstance(limits, Sequence):  # one for every source
            limits = [limits] * len(self.sources)
        self._limits = list(limits)
        if len(self._limits) != len(self.sources):
            raise ValueError("one limit per source")
        counts = [s.info.frame_count for s in self.sources]
        total = None if any(c is None for c in counts) else sum(c or 0 for c in counts)
        if total is not None:
            total = sum(
                (c or 0) if n is None else min(n, c or 0)
                for c, n in zip(counts, self._limits, strict=True)
            )
        first = self.sources[0].info
        self.info = SourceInfo(
            uri=" + ".join(s.info.uri for s in self.sources),
            kind="merged",
            width=first.width,
            height=first.height,
            fps=max(s.info.fps for s in self.sources),
            frame_count=total,
        )
        self.failures: dict[int, str] = {}  # source_id -> why it stopped early
        # source_id -> frames read, for a source read to its end (or limit): set by its
        # reader, whether or not those frames have been taken yet
        self.read_all: dict[int, int] = {}
        self.delivered = [0] * len(self.sources)
        self._raise_gpu_errors = raise_gpu_errors
        self._queues: list[queue.Queue[Frame | _Ended]] = [
            queue.Queue(QUEUE_DEPTH) for _ in self.sources
        ]
        self._live = list(range(len(self.sources)))
        self._turn = 0
        self._stop = threading.Event()
        self._ready = threading.Semaphore(0)  # one release per item queued
        self._threads = [
            NamedThread(target=self._decode, args=(i,), name=f"fl-source-{i}", daemon=True)
            for i in range(len(self.sources))
        ]
        for t in self._threads:
            t.start()

    def _decode(self, i: int) -> None:
        source, out = self.sources[i], self._queues[i]
        ended = _Ended()
        try:
            n, limit = 0, self._limits[i]
            while not self._stop.is_set() and (limit is None or n < limit):
                frame = source.read()
                if frame is None:
                    break
                frame.source_id = i
                if not self._put(out, frame):
                    return
                n += 1
            if not self._stop.is_set():
                self.read_all[i] = n
        except Exception as exc:  # this source is done; the others go on
            why = f"{type(exc).__name__}: {exc}" if not str(exc) else str(exc)
            ended = _Ended(why, gpu=isinstance(exc, GpuError))
            log.warning("source %d (%s) failed: %s", i, source.info.uri, ended.error)
        self._put(out, ended)

    def _put(self, out: queue.Queue[Frame | _Ended], item: Frame | _Ended) -> bool:
        while not self._stop.is_set():
            try:
                out.put(item, timeout=0.1)
            except queue.Full:
                continue
            self._ready.release()
            return True
        return False

    def read(self) -> Frame | None:
        """The next frame of any source, in turn; None once every source has ended."""
        while self._live:
            self._ready.acquire()  # something is queued somewhere
            for _ in range(len(self._live)):
                i = self._live[self._turn % len(self._live)]
                try:
                    item = self._queues[i].get_nowait()
                except queue.Empty:
                    self._turn += 1
                    continue
                if isinstance(item, _Ended):
                    if item.gpu and self._raise_gpu_errors:
                        raise GpuError(f"decoding {self.sources[i].info.uri}: {item.error}")
                    self._live.remove(i)
                    if item.error is not None:
                        self.failures[i] = item.error
                    break
                self._turn += 1
                self.delivered[i] += 1
                return item
        return None

    def seek(self, index: int) -> None:
        raise SourceError("several sources are read from their starts; --start needs one source")

    def close(self) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(timeout=10)
        for source in self.sources:
            try:
                source.close()
            except Exception as exc:  # closing one must not keep the others open
                log.warning("closing %s failed: %s", source.info.uri, exc)
