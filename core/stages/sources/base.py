"""The interface every video source implements."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator

from framelens.core.closing import Closing
from framelens.core.types import Frame, SourceInfo


class Source(Closing, ABC):
    """Frames from a file, camera, network stream or image folder.

    Frames are BGR uint8, HxWx3, C-contiguous. ``Frame.index`` is the frame's index in
    the source and ``Frame.pts`` its time in seconds. A source is not thread-safe: use
    it from one thread at a time.
    """

    info: SourceInfo
    source_id: int = 0
    """Stamped on every frame read (``Frame.source_id``): which source of a run it is."""

    # what a source may declare of itself; the defaults are those of a plain file
    decoder_name: str = "cpu"
    """The decoder that gives the frames (NVDEC sources name theirs)."""

    @property
    def fallback_reason(self) -> str | None:
        """Why a source asked for on the GPU decodes on the host (None: it does not)."""
        return None

    @property
    def recorded(self) -> bool:
        """Read when asked for, with a recording's timestamps (a file, a folder, a
        recording over HTTP), so it can be played at its own time; a camera's or a live
        feed's frames come at theirs."""
        return self.info.kind in ("file", "folder")

    @property
    def reconnecting(self) -> bool:
        """A live stream down and being reconnected with backoff (streams only)."""
        return False

    @property
    def frames_there(self) -> int | None:
        """How many frames a file found cut short holds (None while none is known to be
        missing)."""
        return None

    @property
    def dropped(self) -> int | None:
        """Frames let go because its reader did not take them in time (a file played as
        a camera delivers it: core/stages/sources/paced.py); None for a source that waits
        for its reader."""
        return None

    def damage_note(self) -> str | None:
        """What a damaged file held, once read to its end (None: nothing to say)."""
        return None

    @abstractmethod
    def read(self) -> Frame | None:
        """The next frame, or None once a file or folder has no more frames."""

    @abstractmethod
    def seek(self, index: int) -> None:
        """Make the next ``read`` return frame ``index``; SourceError if not possible."""

    @abstractmethod
    def close(self) -> None:
        """Release the device, file or connection. Safe to call more than once."""

    def __iter__(self) -> Iterator[Frame]:
        while (frame := self.read()) is not None:
            yield frame

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.info.uri!r}>"
