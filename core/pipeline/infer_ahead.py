"""Inference ahead of playback: N worker threads turn decoded frames into results, in order.

The CLI's PipelineRunner runs a whole range once; playback also seeks, pauses and
changes thresholds, so the player uses this smaller pool instead. Each worker
owns one pipeline (a pipeline is not shared between threads). Results
are handed out in decode order, tagged with the settings version they were made
with, so the consumer can redo a result that a threshold change made stale.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass

from framelens.core.pipeline.decode_ahead import DecodeAhead, DecodeItem, End, Failed
from framelens.core.pipeline.frame_pipeline import FrameProcessor
from framelens.core.stages.timing import now_ms
from framelens.core.types import FrameResult, StageTimes


@dataclass(slots=True)
class Processed:
    """A frame processed ahead of time; ``version`` is the settings version it used."""

    result: FrameResult
    start_ms: float  # decode start, for the end-to-end time
    version: int


AheadItem = Processed | End | Failed


class InferAhead:
    """Worker threads between a DecodeAhead and the player.

    ``depth`` bounds how many results may wait (or be in flight) ahead of the
    consumer, so a paused player holds at most that many frames.
    """

    def __init__(
        self, decoder: DecodeAhead, pipelines: Sequence[FrameProcessor], depth: int | None = None
    ) -> None:
        if not pipelines:
            raise ValueError("InferAhead needs at least one pipeline")
        self._decoder = decoder
        self._pipelines = pipelines
        self._depth = depth or 2 * len(pipelines)
        self._take = threading.Lock()  # one worker takes the next frame and its number
        self._cond = threading.Condition()  # guards everything below
        self._generation = 0
        self._next_seq = 0  # number given to the next frame taken
        self._expected = 0  # number the consumer gets next
        self._done: dict[int, AheadItem] = {}
        self._version = 0
        self._stop = False
        self._threads = [
            threading.Thread(target=self._work, args=(p,), name=f"fl-infer-{i}", daemon=True)
            for i, p in enumerate(pipelines)
        ]
        for t in self._threads:
            t.start()

    @property
    def pipelines(self) -> Sequence[FrameProcessor]:
        return self._pipelines

    def _ahead(self) -> int:
        return self._next_seq - self._expected

    def _work(self, pipeline: FrameProcessor) -> None:
        while True:
            with self._cond:
                while not self._stop and self._ahead() >= self._depth:
                    self._cond.wait(0.1)
                if self._stop:
                    return
            with self._take:
                item = self._decoder.get(0.05)
                if item is None:
                    continue
                with self._cond:
                    gen, seq, version = self._generation, self._next_seq, self._version
                    self._next_seq += 1
            done = self._process(pipeline, item, version)
            with self._cond:
                if gen == self._generation:
                    self._done[seq] = done
                    self._cond.notify_all()

    @staticmethod
    def _process(pipeline: FrameProcessor, item: DecodeItem, version: int) -> AheadItem:
        if isinstance(item, End | Failed):
            return item
        frame, decode_ms, start_ms = item
        try:
            result = pipeline.infer(frame, StageTimes(decode=decode_ms))
            if result.frame.on_host:  # frames kept on the GPU are overlaid by the display
                pipeline.draw(result)
        except BaseException as exc:  # handed to the consumer, reported there
            return Failed(exc)
        return Processed(result, start_ms, version)

    def get(self, timeout: float) -> AheadItem | None:
        """The next item in decode order, or None after ``timeout`` seconds."""
        with self._cond:
            if not self._cond.wait_for(lambda: self._expected in self._done, timeout):
                return None
            item = self._done.pop(self._expected)
            self._expected += 1
            self._cond.notify_all()
        if isinstance(item, Processed):
            item.result.times.e2e = now_ms() - item.start_ms
        return item

    @property
    def version(self) -> int:
        return self._version

    def update(self, **changes: object) -> None:
        """Apply threshold/overlay changes to every worker; results made before are stale."""
        for p in self._pipelines:
            p.update(**changes)
        # after the pipelines: a frame taken in between is redone, never shown stale
        with self._cond:
            self._version += 1

    def seek(self, index: int) -> None:
        """Reposition the decoder; nothing processed before is handed out after."""
        with self._take:
            self._decoder.seek(index)
            with self._cond:
                self._generation += 1
                self._next_seq = self._expected = 0
                self._done.clear()
                self._cond.notify_all()

    def close(self, *, close_pipelines: bool = True) -> bool:
        """Stop the workers (each finishes its frame first), then release the pipelines.

        Returns False when a worker is still busy after the wait (a first GPU run can
        take long): its pipeline is then left open rather than pulled from under it.
        """
        with self._cond:
            self._stop = True
            self._cond.notify_all()
        for t in self._threads:
            t.join(timeout=10)
        stopped = not any(t.is_alive() for t in self._threads)
        if close_pipelines and stopped:
            for p in self._pipelines:
                p.close()
        return stopped
