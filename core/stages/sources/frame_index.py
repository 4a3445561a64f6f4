"""Where every frame of a video file is: its presentation timestamp, in stream order.

Frame k of a file is the k-th frame it presents (0-based), whatever its timestamps say:
a phone's recording that drops from 30 to 15 fps half way, a GIF of 8 and 9 centisecond
delays. Dividing a timestamp by a frame rate gets those wrong, so the file source looks
frames up here instead: ``FrameIndex`` holds every frame's timestamp, sorted, read from
the demuxed packets (no decoding: one packet is one presented frame, except those an
edit list hides), the keyframes to seek from, and the end of the last frame (so the
duration is the real one). Not covered: interlaced video coded as one field per packet
(some broadcast MPEG-TS), which would count each field as a frame.

Reading the packets of a long file takes a while (a second or so per GB), so an index of
a file worth it is cached under the FrameLens cache (``frame-index/``), keyed by the
file's path, size and modification time: a changed file gets a new one.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import secrets
from bisect import bisect_left, bisect_right
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path

from framelens.core.cache import cache_root, digest
from framelens.core.stages.sources.av_input import (
    AV_ERRORS,
    DECODER_LIMITS,
    open_container,
    reason,
    video_stream,
)

log = logging.getLogger(__name__)

CACHE_FOLDER = "frame-index"
CACHE_MIN_FRAMES = 3000
"""Indexes of files with fewer frames are rebuilt (milliseconds) rather than cached."""
_VERSION = 1


@dataclass(frozen=True, slots=True)
class FrameIndex:
    """Every presented frame's timestamp (stream time base), sorted: ``pts[k]`` is frame
    k's. ``keyframes``: (pts, dts) of the keyframe packets, by pts, to seek from.
    ``end``: where the last frame ends (its timestamp plus its duration)."""

    pts: tuple[int, ...]
    keyframes: tuple[tuple[int, int], ...]
    end: int

    def __len__(self) -> int:
        return len(self.pts)

    def position(self, pts: int) -> int:
        """The frame shown at ``pts``: the one with that timestamp, else the nearest."""
        at = bisect_left(self.pts, pts)
        if at == len(self.pts) or (at > 0 and pts - self.pts[at - 1] < self.pts[at] - pts):
            at -= 1
        return max(0, at)

    def seek_points(self, pts: int) -> list[tuple[int, int]]:
        """Keyframes to start decoding from for the frame at ``pts``: the last one at or
        before it, then earlier ones (for containers whose seeking is coarse), latest
        first. Decoding from one of these reaches ``pts`` with every reference frame."""
        at = bisect_right(self.keyframes, (pts, 2**63))
        return [self.keyframes[i] for i in (at - 1, at - 2, at - 5) if i >= 0]


def frame_index(uri: str) -> FrameIndex | None:
    """The index of ``uri`` (cached for long files), or None when its packets carry no
    timestamps (raw elementary streams), when they restart (streams joined end to end) or
    when they cannot be read: frames are then counted as they are decoded."""
    key = _cache_key(uri)
    path = _cache_file(key) if key is not None else None
    if path is not None:
        cached = _load(path)
        if cached is not None:
            return cached
    built = build_frame_index(uri)
    if built is not None and path is not None and len(built) >= CACHE_MIN_FRAMES:
        _store(path, built)
    return built


def build_frame_index(uri: str) -> FrameIndex | None:
    """Read every packet of the video stream of ``uri``: the index, or None (see
    ``frame_index``). Reading stops at damage; what was read before it is kept."""
    try:
        container = open_container(uri, f"{uri} is not a readable video", options=DECODER_LIMITS)
    except Exception:  # the source that asked reports its own failure to open
        return None
    try:
        stream = video_stream(container, uri)
        stamps: list[int] = []
        keys: list[tuple[int, int]] = []
        end = None
        try:
            for packet in container.demux(stream):
                if packet.size == 0 or packet.is_discard:
                    continue  # the demuxer's flush packet; samples an edit list cuts off
                pts = packet.pts
                if pts is None:
                    return None
                stamps.append(pts)
                if packet.is_keyframe:
                    keys.append((pts, pts if packet.dts is None else packet.dts))
                after = pts + (packet.duration or 0)
                end = after if end is None else max(end, after)
        except AV_ERRORS as exc:
            log.info("%s: indexing its frames stopped early: %s", uri, reason(exc))
    except Exception as exc:  # no index: the reader counts frames instead
        log.info("%s: cannot index its frames: %s", uri, exc)
        return None
    finally:
        container.close()
    if not stamps or not _one_timeline(stamps):
        return None
    stamps.sort()
    last = stamps[-1]
    if end is None or end <= last:
        # packets without durations: the last frame lasts as long as the one before it
        end = last + (last - stamps[-2] if len(stamps) > 1 else 1)
    return FrameIndex(tuple(stamps), tuple(sorted(keys)), end)


REORDER_WINDOW = 64
"""Frames a decoder may hold back to present them in order (B-frames): further than this
from its place in the stream, a timestamp belongs to another timeline."""


def _one_timeline(stamps: list[int]) -> bool:
    """False when the timestamps restart or repeat (streams joined end to end, a live
    feed's clock reset): their order then says nothing of the frames' order, and the
    reader counts frames instead."""
    ranks = sorted(range(len(stamps)), key=stamps.__getitem__)
    if any(stamps[a] == stamps[b] for a, b in pairwise(ranks)):
        return False
    return all(abs(rank - at) <= REORDER_WINDOW for rank, at in enumerate(ranks))


def _cache_key(uri: str) -> str | None:
    try:
        path = Path(uri).resolve()
        stat = path.stat()
    except OSError:
        return None
    if not path.is_file():
        return None
    return digest(_VERSION, str(path), stat.st_size, stat.st_mtime_ns)


def _cache_file(key: str) -> Path:
    return cache_root() / CACHE_FOLDER / f"{key}.json"


def _load(path: Path) -> FrameIndex | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return FrameIndex(
            tuple(int(p) for p in data["pts"]),
            tuple((int(p), int(d)) for p, d in data["keyframes"]),
            int(data["end"]),
        )
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _store(path: Path, index: FrameIndex) -> None:
    """Write the index beside its place and rename it there: complete or absent."""
    data = {"pts": index.pts, "keyframes": index.keyframes, "end": index.end}
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(4)}")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_text(json.dumps(data, separators=(",", ":")), encoding="utf-8")
        os.replace(tmp, path)
    except OSError as exc:  # a cache that cannot be written only costs time
        log.info("cannot cache the frame index in %s: %s", path.parent, exc)
        with contextlib.suppress(OSError):
            tmp.unlink()
