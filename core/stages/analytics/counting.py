"""Counting: one source's tracks against its lines and zones, frame by frame, into events.

The definitions (docs/analytics.md) in code. :class:`Counter` keeps, per track and per
line or zone, the state the hysteresis needs, in arrays (one row per track), so a frame
of 50 tracks and 10 lines and zones costs a few vectorised steps, not 500 Python ones.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import numpy as np
import numpy.typing as npt
from framelens.core.stages.analytics.zones import ANCHORS, LineSpec, ZonesFile, ZoneSpec

__all__ = ["Counter", "Event", "anchor_points"]

F64 = npt.NDArray[np.float64]

EventKind = Literal["cross", "enter", "exit", "loiter"]


@dataclass(frozen=True, slots=True)
class Event:
    """Something a track did: crossed a line (``direction`` in/out), entered, left or
    loitered in a zone (``direction`` ""). ``dwell_s``: an exit's stay, a loiter's so far."""

    frame: int
    time_s: float
    track_id: int
    class_id: int
    kind: EventKind
    name: str
    direction: str = ""
    dwell_s: float | None = None


def anchor_points(boxes: npt.NDArray[np.floating], anchor: str) -> F64:
    """The tested point of each box (x1, y1, x2, y2) for ``anchor`` (zones.ANCHORS)."""
    b = np.asarray(boxes, dtype=np.float64).reshape(-1, 4)
    cx, cy = (b[:, 0] + b[:, 2]) * 0.5, (b[:, 1] + b[:, 3]) * 0.5
    x = {"left": b[:, 0], "right": b[:, 2]}
    y = {"top": b[:, 1], "bottom": b[:, 3]}
    if anchor == "center":
        return np.stack([cx, cy], axis=1)
    vert, _, horiz = anchor.partition("_")
    return np.stack([x.get(horiz, cx), y[vert]], axis=1)


def _edges(polygons: list[F64]) -> tuple[F64, F64, F64, F64, npt.NDArray[np.int64]]:
    """Every zone's edges, zone after zone: y1, y2, x1, the x step per unit of y, and
    where each zone's edges start."""
    y1: list[float] = []
    y2: list[float] = []
    x1: list[float] = []
    step: list[float] = []
    starts: list[int] = []
    for poly in polygons:
        starts.append(len(y1))
        a, b = poly, np.roll(poly, -1, axis=0)
        dy = b[:, 1] - a[:, 1]
        with np.errstate(divide="ignore", invalid="ignore"):
            slope = np.where(dy != 0, (b[:, 0] - a[:, 0]) / np.where(dy != 0, dy, 1), 0.0)
        y1 += list(a[:, 1])
        y2 += list(b[:, 1])
        x1 += list(a[:, 0])
        step += list(slope)
    f = np.asarray
    return (
        f(y1, np.float64),
        f(y2, np.float64),
        f(x1, np.float64),
        f(step, np.float64),
        f(starts, np.int64),
    )


class Counter:
    """One source's lines and zones against its tracks (see the module's docstring)."""

    def __init__(self, spec: ZonesFile, forget_after: int = 3000) -> None:
        self.spec = spec
        self.forget_after = max(1, forget_after)
        lines, zones = spec.lines, spec.zones
        specs: list[LineSpec | ZoneSpec] = [*lines, *zones]
        self._anchors = sorted({s.anchor for s in specs}, key=ANCHORS.index)
        self._l_anchor = np.array([self._anchors.index(s.anchor) for s in lines], np.int64)
        self._z_anchor = np.array([self._anchors.index(s.anchor) for s in zones], np.int64)
        self._p1 = np.array([s.p1 for s in lines], np.float64).reshape(-1, 2)
        self._p2 = np.array([s.p2 for s in lines], np.float64).reshape(-1, 2)
        self._l_min = np.array([s.min_frames for s in lines], np.int64)
        d = self._p2 - self._p1
        self._l_geometry = (self._p1[:, 0], self._p1[:, 1], d[:, 0], d[:, 1])
        self._z_min = np.array([s.min_frames for s in zones], np.int64)
        self._loiter = np.array(
            [math.inf if s.loiter_s is None else s.loiter_s for s in zones], np.float64
        )
        self._polygons = [np.array(s.polygon, np.float64) for s in zones]
        self._ey1, self._ey2, self._ex1, self._estep, self._estart = _edges(self._polygons)
        counts = np.diff(np.append(self._estart, len(self._ey1)))
        self._e_anchor = np.repeat(self._z_anchor, counts)  # each edge's zone's anchor
        self._classes = [frozenset(s.classes) for s in specs]
        self._filtered = any(self._classes)
        self.clear()

    def clear(self) -> None:
        """Forget every track (a seek): each is new when next seen."""
        nl, nz = len(self.spec.lines), len(self.spec.zones)
        self._rows: dict[int, int] = {}
        self._free: list[int] = []
        self._seen = np.zeros(0, np.int64)
        self._side = np.zeros((0, nl), np.int8)  # confirmed side: -1 left, 1 right, 0 none
        self._pend = np.zeros((0, nl), np.int64)  # observations on the other side since
        self._pend_frame = np.zeros((0, nl), np.int64)  # the crossing, its frame and time
        self._pend_time = np.zeros((0, nl), np.float64)
        self._last = np.zeros((0, nl, 2), np.float64)  # last tested point off the line
        self._in = np.zeros((0, nz), np.bool_)  # confirmed inside
        self._run = np.zeros((0, nz), np.int64)  # observations in a row the other way
        self._run_frame = np.zeros((0, nz), np.int64)
        self._run_time = np.zeros((0, nz), np.float64)
        self._stay = np.zeros((0, nz), np.float64)  # the stay's start time
        self._loitered = np.zeros((0, nz), np.bool_)

    def _grow(self, rows: int) -> None:
        old = len(self._seen)
        if rows <= old:
            return
        new = max(rows, 2 * old, 64)

        def more(a: npt.NDArray[np.generic]) -> npt.NDArray[np.generic]:
            out = np.zeros((new, *a.shape[1:]), a.dtype)
            out[:old] = a
            return out

        for attr in ("_seen", "_side", "_pend", "_pend_frame", "_pend_time", "_last", "_in",
                     "_run", "_run_frame", "_run_time", "_stay", "_loitered"):  # fmt: skip
            setattr(self, attr, more(getattr(self, attr)))
        self._free.extend(range(new - 1, old - 1, -1))  # popped from the end: lowest first

    def _row(self, track_id: int) -> int:
        """A new track's row, its state cleared."""
        if not self._free:
            self._grow(len(self._seen) + 1)
        row = self._free.pop()
        self._rows[track_id] = row
        self._side[row] = 0
        self._pend[row] = 0
        self._in[row] = False
        self._run[row] = 0
        self._loitered[row] = False
        return row

    def _forget(self, frame: int) -> None:
        for track_id, row in list(self._rows.items()):
            if self._seen[row] < frame - self.forget_after:
                del self._rows[track_id]
                self._free.append(row)

    def inside(self, frame: int) -> list[int]:
        """Per zone, how many tracks seen at ``frame`` are inside it (confirmed: after
        ``min_frames``, as the enter and exit events say)."""
        nz = len(self.spec.zones)
        if not self._rows or not nz:
            return [0] * nz
        rows = np.fromiter(self._rows.values(), np.int64, len(self._rows))
        now = rows[self._seen[rows] == frame]
        return [int(v) for v in self._in[now].sum(axis=0)]

    def update(
        self,
        frame: int,
        time_s: float,
        boxes: npt.NDArray[np.floating],
        track_ids: npt.NDArray[np.integer],
        class_ids: npt.NDArray[np.integer],
    ) -> list[Event]:
        """One frame's tracked boxes (track ID < 1: no track, ignored); its events."""
        track_ids = np.asarray(track_ids)
        keep = track_ids >= 1
        every = bool(keep.all())
        ids = track_ids if every else track_ids[keep]
        if frame % 256 == 0:
            self._forget(frame)
        if not len(ids):
            return []
        b = np.asarray(boxes, np.float64)
        cls = np.asarray(class_ids)
        if not every:
            b, cls = b[keep], cls[keep]
        listed = ids.tolist()
        known = self._rows
        found = [known.get(i) for i in listed]
        if None in found:
            found = [self._row(i) if r is None else r for i, r in zip(listed, found, strict=True)]
        rows = np.array(found, np.int64)
        self._seen[rows] = frame
        if len(self._anchors) == 1:  # N, A, 2
            points = anchor_points(b, self._anchors[0])[:, None, :]
        else:
            points = np.stack([anchor_points(b, a) for a in self._anchors], axis=1)
        allowed: npt.NDArray[np.bool_] | None = None
        if self._filtered:
            allowed = np.ones((len(ids), len(self._classes)), np.bool_)
            for k, classes in enumerate(self._classes):
                if classes:
                    allowed[:, k] = np.isin(cls, list(classes))
        events: list[Event] = []
        nl = len(self.spec.lines)
        if nl:
            ok = None if allowed is None else allowed[:, :nl]
            self._lines(frame, time_s, rows, ids, cls, points, ok, events)
        if self.spec.zones:
            ok = None if allowed is None else allowed[:, nl:]
            self._zones(frame, time_s, rows, ids, cls, points, ok, events)
        return events

    def _lines(
        self, frame: int, time_s: float, rows: npt.NDArray[np.int64], ids: npt.NDArray[np.integer],
        cls: npt.NDArray[np.integer], points: F64, allowed: npt.NDArray[np.bool_] | None,
        events: list[Event],
    ) -> None:  # fmt: skip
        nl = len(self._l_anchor)
        if points.shape[1] == 1:  # one anchor: every line tests the same point
            p = np.broadcast_to(points, (len(points), nl, 2))
        else:
            p = points[:, self._l_anchor]  # N, L, 2
        x1, y1, dx, dy = self._l_geometry
        cross = dx * (p[..., 1] - y1) - dy * (p[..., 0] - x1)
        s = np.sign(cross).astype(np.int8)
        if allowed is not None:
            s *= allowed
        side = self._side[rows]
        pend = self._pend[rows]
        off = s != 0
        first = off & (side == 0)
        over = off & (s == -side)
        new_side = np.where(first, s, side)
        new_pend = pend.copy()
        new_pend[off & (s == side)] = 0  # back on its side: a pending crossing is off
        # a new side change: did the path from the last point off the line go through it?
        fresh = over & (pend == 0)
        if fresh.any():
            n, k = np.nonzero(fresh)
            a, b = self._last[rows[n], k], p[n, k]
            c, e = self._p1[k], self._p2[k]

            def orient(o: F64, u: F64, v: F64) -> F64:
                return np.asarray(
                    (u[:, 0] - o[:, 0]) * (v[:, 1] - o[:, 1])
                    - (u[:, 1] - o[:, 1]) * (v[:, 0] - o[:, 0])
                )

            through = orient(a, b, c) * orient(a, b, e) <= 0  # the ends on either side of ab
            hit_n, hit_k = n[through], k[through]
            new_pend[hit_n, hit_k] = 0  # counted up below
            self._pend_frame[rows[hit_n], hit_k] = frame
            self._pend_time[rows[hit_n], hit_k] = time_s
            miss_n, miss_k = n[~through], k[~through]
            new_side[miss_n, miss_k] = s[miss_n, miss_k]  # round an end: no crossing
            over[miss_n, miss_k] = False
        new_pend += over
        done = over & (new_pend >= self._l_min)
        if done.any():
            for n, k in zip(*np.nonzero(done), strict=True):
                row = rows[n]
                events.append(
                    Event(int(self._pend_frame[row, k]), float(self._pend_time[row, k]),
                          int(ids[n]), int(cls[n]), "cross", self.spec.lines[k].name,
                          "in" if s[n, k] > 0 else "out")
                )  # fmt: skip
            new_side = np.where(done, s, new_side)
            new_pend = np.where(done, 0, new_pend)
        self._side[rows] = new_side
        self._pend[rows] = new_pend
        if off.all():
            self._last[rows] = p  # a broadcast view is copied here
        else:
            n, k = np.nonzero(off)
            self._last[rows[n], k] = p[n, k]

    def _zones(
        self, frame: int, time_s: float, rows: npt.NDArray[np.int64], ids: npt.NDArray[np.integer],
        cls: npt.NDArray[np.integer], points: F64, allowed: npt.NDArray[np.bool_] | None,
        events: list[Event],
    ) -> None:  # fmt: skip
        if points.shape[1] == 1:  # one anchor: N, 1 against every edge
            px, py = points[:, :, 0], points[:, :, 1]
        else:
            px, py = points[:, self._e_anchor, 0], points[:, self._e_anchor, 1]  # N, edges
        straddle = (self._ey1 > py) != (self._ey2 > py)
        hits = straddle & (px < self._ex1 + (py - self._ey1) * self._estep)
        inside = np.add.reduceat(hits, self._estart, axis=1) % 2 == 1  # N, Z
        was = self._in[rows]
        run = self._run[rows]
        differ = inside != was
        if allowed is not None:
            differ &= allowed
            same = allowed & ~differ
        else:
            same = ~differ
        starts = differ & (run == 0)
        if starts.any():
            n, k = np.nonzero(starts)
            self._run_frame[rows[n], k] = frame
            self._run_time[rows[n], k] = time_s
        run = np.where(same, 0, np.where(differ, run + 1, run))
        flip = differ & (run >= self._z_min)
        now = was.copy()
        if flip.any():
            for n, k in zip(*np.nonzero(flip), strict=True):
                row = rows[n]
                at, t = int(self._run_frame[row, k]), float(self._run_time[row, k])
                name = self.spec.zones[k].name
                if inside[n, k]:
                    events.append(Event(at, t, int(ids[n]), int(cls[n]), "enter", name))
                    self._stay[row, k] = t
                    self._loitered[row, k] = False
                else:
                    dwell = round(t - float(self._stay[row, k]), 6)
                    events.append(Event(at, t, int(ids[n]), int(cls[n]), "exit", name, "", dwell))
            now = np.where(flip, inside, was)
            run = np.where(flip, 0, run)
        self._in[rows] = now
        self._run[rows] = run
        stayed = time_s - self._stay[rows]
        loiter = now & ~self._loitered[rows] & (stayed >= self._loiter)
        if allowed is not None:
            loiter &= allowed
        if loiter.any():
            for n, k in zip(*np.nonzero(loiter), strict=True):
                events.append(
                    Event(frame, time_s, int(ids[n]), int(cls[n]), "loiter",
                          self.spec.zones[k].name, "", round(float(stayed[n, k]), 6))
                )  # fmt: skip
                self._loitered[rows[n], k] = True
