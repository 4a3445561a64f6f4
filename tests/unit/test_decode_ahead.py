"""DecodeAhead with a source whose frames borrow pooled buffers, as NVDEC's device frames do.

The frames come from the real sample video (FileSource); each one also takes a slot of a
small pool and must give it back, or the source runs dry and playback stalls after a few
seeks. The real pooled source (core.gpu.decode) is exercised the same way on the H200
(tests/gpu/test_player_gpu.py).
"""

from __future__ import annotations

import random
import threading
from pathlib import Path

from framelens.core.errors import SourceError
from framelens.core.pipeline.decode_ahead import DecodeAhead, End
from framelens.core.stages.sources.file import FileSource
from framelens.core.types import Frame

SAMPLE = (
    Path(__file__).resolve().parents[2]
    / "resources"
    / "samples"
    / "one-by-one-person-detection.mp4"
)
POOL = 6  # fewer than the frames a dozen seeks would strand without releases


class PooledFrame(Frame):
    __slots__ = ("_owner",)

    def __init__(self, frame: Frame, owner: PooledSource) -> None:
        super().__init__(frame.image, frame.index, frame.pts)
        self._owner: PooledSource | None = owner

    def release(self) -> None:
        owner, self._owner = self._owner, None
        if owner is not None:
            owner.give_back()


class PooledSource(FileSource):
    """The sample video, each frame holding one of POOL slots until released."""

    def __init__(self) -> None:
        super().__init__(str(SAMPLE))
        self.out = 0
        self._lock = threading.Lock()

    def read(self) -> Frame | None:
        with self._lock:
            if self.out >= POOL:
                raise SourceError("decoder pool exhausted: frames were dropped unreleased")
            self.out += 1
        frame = super().read()
        if frame is None:
            self.give_back()
            return None
        return PooledFrame(frame, self)

    def give_back(self) -> None:
        with self._lock:
            self.out -= 1


def take(ahead: DecodeAhead) -> Frame:
    item = ahead.get(timeout=10)
    assert item is not None and not isinstance(item, End), item
    assert isinstance(item, tuple), item  # a Failed item would mean the pool ran dry
    return item[0]


def test_seeking_many_times_returns_every_discarded_frame_to_the_pool() -> None:
    source = PooledSource()
    ahead = DecodeAhead(source, depth=3)
    rng = random.Random(7)
    try:
        for _ in range(40):
            target = rng.randrange(0, 1300)
            ahead.seek(target)
            frame = take(ahead)
            assert frame.index == target
            assert isinstance(frame, PooledFrame)
            frame.release()  # what a pipeline does once its kernels have read the frame
        # a few frames in order after all that: the pool still has room
        first = take(ahead)
        second = take(ahead)
        assert second.index == first.index + 1
        for f in (first, second):
            assert isinstance(f, PooledFrame)
            f.release()
    finally:
        ahead.close()
    assert source.out == 0, "frames queued at close were not given back"


def test_a_frame_read_while_seeking_is_given_back() -> None:
    """The reader may finish a frame of the old position after the seek: it is dropped,
    and released, not shown."""
    source = PooledSource()
    ahead = DecodeAhead(source, depth=POOL - 1)
    try:
        for target in (100, 5, 700, 300, 300, 0):
            ahead.seek(target)
            frame = take(ahead)
            assert frame.index == target
            assert isinstance(frame, PooledFrame)
            frame.release()
    finally:
        ahead.close()
    assert source.out == 0
