"""zones.json: the lines and zones a run counts, as frozen dataclasses.

    {"lines": [{"name": "gate", "points": [[x1, y1], [x2, y2]], "anchor": "bottom_center",
                "classes": ["car"], "min_frames": 2}],
     "zones": [{"name": "bay", "polygon": [[x, y], ...], "classes": [...], "loiter_s": 120,
                "min_frames": 2}]}

A file that cannot be used raises ConfigError with one line naming the file and the
problem; points outside the frame are warnings (``ZonesFile.warnings``). The definitions
are docs/analytics.md's.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from framelens.core.errors import ConfigError, ExportError
from framelens.core.stages.sinks.atomic import write_bytes_atomic

__all__ = [
    "ANCHORS",
    "ZONES_SUFFIX",
    "LineSpec",
    "ZoneSpec",
    "ZonesFile",
    "load_zones",
    "parse_zones",
    "save_zones",
    "zones_as_json",
    "zones_beside",
]

ZONES_SUFFIX = ".zones.json"
"""A video's lines and zones beside it, as the window saves them: ``clip.mp4.zones.json``."""

ANCHORS = (
    "bottom_center",
    "center",
    "top_center",
    "top_left",
    "top_right",
    "bottom_left",
    "bottom_right",
)
"""The point of a box a line or zone tests (the first is the default)."""

Point = tuple[float, float]


@dataclass(frozen=True, slots=True)
class LineSpec:
    """A counting line: the segment p1 -> p2; crossing it from left to right is ``in``."""

    name: str
    p1: Point
    p2: Point
    anchor: str = "bottom_center"
    classes: tuple[int, ...] = ()  # class IDs it sees (empty: every class)
    min_frames: int = 2


@dataclass(frozen=True, slots=True)
class ZoneSpec:
    """A zone: a simple polygon; ``loiter_s`` None: no loitering event."""

    name: str
    polygon: tuple[Point, ...]
    anchor: str = "bottom_center"
    classes: tuple[int, ...] = ()
    loiter_s: float | None = None
    min_frames: int = 2


@dataclass(frozen=True, slots=True)
class ZonesFile:
    """What a zones.json describes, and its warnings (one line each)."""

    lines: tuple[LineSpec, ...] = ()
    zones: tuple[ZoneSpec, ...] = ()
    warnings: tuple[str, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.lines or self.zones)

    @property
    def names(self) -> tuple[str, ...]:
        """Every line's name, then every zone's."""
        return tuple(s.name for s in self.lines) + tuple(s.name for s in self.zones)


def load_zones(
    path: str | Path,
    labels: Mapping[int, str] | Sequence[str] | None = None,
    size: tuple[int, int] | None = None,
) -> ZonesFile:
    """Read ``path`` (ConfigError, one line, when it cannot be used). ``labels``: the
    model's class names (a class named in the file must be one of them; numbers are
    class IDs); ``size``: the frame's (width, height), for the warnings."""
    where = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8-sig")  # Notepad's byte-order mark too
    except OSError as exc:
        raise ConfigError(f"cannot read {where}: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise ConfigError(f"{where}: not a UTF-8 text file") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{where}: bad JSON at line {exc.lineno}: {exc.msg}") from None
    return parse_zones(data, where, labels, size)


def parse_zones(
    data: Any,
    where: str = "zones",
    labels: Mapping[int, str] | Sequence[str] | None = None,
    size: tuple[int, int] | None = None,
) -> ZonesFile:
    """``data`` (a zones.json's object) as a ZonesFile; ``where`` names it in errors."""
    names = dict(enumerate(labels)) if isinstance(labels, Sequence) else dict(labels or {})
    if not isinstance(data, dict):
        raise ConfigError(f'{where}: expected an object {{"lines": [...], "zones": [...]}}')
    unknown = sorted(set(data) - {"lines", "zones"})
    if unknown:
        raise ConfigError(f"{where}: unknown key {unknown[0]!r} (lines, zones)")
    warnings: list[str] = []
    seen: set[str] = set()
    lines: list[LineSpec] = []
    zones: list[ZoneSpec] = []
    for kind in ("lines", "zones"):
        items = data.get(kind, [])
        if not isinstance(items, list):
            raise ConfigError(f"{where}: {kind!r} must be a list")
        for n, item in enumerate(items):
            what = f"{where}: {kind[:-1]} {n + 1}"
            if not isinstance(item, dict):
                raise ConfigError(f"{what}: expected an object")
            name = item.get("name")
            if not isinstance(name, str) or not name.strip():
                raise ConfigError(f"{what}: needs a name")
            what = f"{where}: {kind[:-1]} {name!r}"
            if name in seen:
                raise ConfigError(f"{what}: the name is used twice")
            seen.add(name)
            allowed = {"name", "anchor", "classes", "min_frames"}
            allowed |= {"points"} if kind == "lines" else {"polygon", "loiter_s"}
            extra = sorted(set(item) - allowed)
            if extra:
                raise ConfigError(
                    f"{what}: unknown key {extra[0]!r} ({', '.join(sorted(allowed))})"
                )
            anchor = item.get("anchor", ANCHORS[0])
            if anchor not in ANCHORS:
                raise ConfigError(f"{what}: unknown anchor {anchor!r} ({', '.join(ANCHORS)})")
            classes = _classes(item.get("classes", []), names, what)
            min_frames = item.get("min_frames", 2)
            if isinstance(min_frames, bool) or not isinstance(min_frames, int) or min_frames < 1:
                raise ConfigError(f"{what}: min_frames must be a whole number >= 1")
            key = "points" if kind == "lines" else "polygon"
            points = _points(item.get(key), what, key)
            warnings += _outside(points, size, what)
            if kind == "lines":
                if len(points) != 2:
                    raise ConfigError(f"{what}: needs 2 points, has {len(points)}")
                if points[0] == points[1]:
                    raise ConfigError(f"{what}: its 2 points are the same")
                lines.append(LineSpec(name, points[0], points[1], anchor, classes, min_frames))
            else:
                if len(points) < 3:
                    raise ConfigError(
                        f"{what}: a polygon needs at least 3 points, has {len(points)}"
                    )
                if _self_intersecting(points):
                    raise ConfigError(f"{what}: the polygon crosses itself")
                if _area(points) == 0:
                    raise ConfigError(f"{what}: the polygon has no area (its points are in a line)")
                loiter = item.get("loiter_s")
                if loiter is not None and (
                    isinstance(loiter, bool)
                    or not isinstance(loiter, int | float)
                    or not math.isfinite(loiter)
                    or loiter <= 0
                ):
                    raise ConfigError(f"{what}: loiter_s must be a positive number of seconds")
                zones.append(
                    ZoneSpec(name, tuple(points), anchor, classes,
                             None if loiter is None else float(loiter), min_frames)
                )  # fmt: skip
    return ZonesFile(tuple(lines), tuple(zones), tuple(warnings))


def zones_as_json(
    spec: ZonesFile, labels: Mapping[int, str] | Sequence[str] | None = None
) -> dict[str, Any]:
    """``spec`` as a zones.json object (``parse_zones`` reads it back the same); classes
    by name where ``labels`` names them, else by number; defaults left out."""
    names = dict(enumerate(labels)) if isinstance(labels, Sequence) else dict(labels or {})

    def common(s: LineSpec | ZoneSpec) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if s.anchor != ANCHORS[0]:
            out["anchor"] = s.anchor
        if s.classes:
            out["classes"] = [names.get(c, c) for c in s.classes]
        if s.min_frames != 2:
            out["min_frames"] = s.min_frames
        return out

    def point(p: Point) -> list[float | int]:
        return [int(v) if float(v).is_integer() else v for v in p]

    lines = [
        {"name": s.name, "points": [point(s.p1), point(s.p2)], **common(s)} for s in spec.lines
    ]
    zones = []
    for z in spec.zones:
        item: dict[str, Any] = {"name": z.name, "polygon": [point(p) for p in z.polygon]}
        item.update(common(z))
        if z.loiter_s is not None:
            item["loiter_s"] = z.loiter_s
        zones.append(item)
    return {"lines": lines, "zones": zones}


def save_zones(
    spec: ZonesFile, path: str | Path, labels: Mapping[int, str] | Sequence[str] | None = None
) -> Path:
    """Write ``spec`` to ``path`` as zones.json, whole or not at all (a temporary file
    renamed); ConfigError (one line) when it cannot be written."""
    text = json.dumps(zones_as_json(spec, labels), indent=2) + "\n"
    try:
        return write_bytes_atomic(path, text.encode("utf-8"))
    except ExportError as exc:
        raise ConfigError(str(exc)) from None


def zones_beside(video: str | Path) -> Path:
    """Where the window keeps a video's lines and zones: ``<video>.zones.json``."""
    return Path(f"{video}{ZONES_SUFFIX}")


def _classes(value: Any, names: Mapping[int, str], what: str) -> tuple[int, ...]:
    if not isinstance(value, list):
        raise ConfigError(f"{what}: classes must be a list of class names")
    by_name = {v: k for k, v in names.items()}
    out: list[int] = []
    for c in value:
        if isinstance(c, int) and not isinstance(c, bool) and c >= 0:
            out.append(c)
        elif isinstance(c, str) and c in by_name:
            out.append(by_name[c])
        elif isinstance(c, str) and c.isdigit() and not names:
            out.append(int(c))
        else:
            known = ", ".join(list(by_name)[:8]) + (", ..." if len(by_name) > 8 else "")
            hint = f" (the model's: {known})" if names else " (no class names known: use numbers)"
            raise ConfigError(f"{what}: unknown class {c!r}{hint}")
    return tuple(out)


def _points(value: Any, what: str, key: str) -> list[Point]:
    if not isinstance(value, list):
        raise ConfigError(f"{what}: {key!r} must be a list of [x, y] points")
    out: list[Point] = []
    for p in value:
        if (
            not isinstance(p, list | tuple)
            or len(p) != 2
            or not all(isinstance(v, int | float) and not isinstance(v, bool) for v in p)
            or not all(math.isfinite(v) for v in p)
        ):
            raise ConfigError(f"{what}: point {p!r} is not [x, y]")
        out.append((float(p[0]), float(p[1])))
    return out


def _outside(points: list[Point], size: tuple[int, int] | None, what: str) -> list[str]:
    if size is None:
        return []
    w, h = size
    bad = [p for p in points if not (0 <= p[0] <= w and 0 <= p[1] <= h)]
    if not bad:
        return []
    x, y = bad[0]
    return [f"{what}: point ({x:g}, {y:g}) is outside the {w}x{h} frame"]


def _cross(o: Point, a: Point, b: Point) -> float:
    return (a[0] - o[0]) * (b[1] - o[1]) - (a[1] - o[1]) * (b[0] - o[0])


def segments_cross(a: Point, b: Point, c: Point, d: Point) -> bool:
    """Whether segments ab and cd share a point (touching counts)."""
    d1, d2 = _cross(c, d, a), _cross(c, d, b)
    d3, d4 = _cross(a, b, c), _cross(a, b, d)
    if ((d1 > 0 and d2 < 0) or (d1 < 0 and d2 > 0)) and (
        (d3 > 0 and d4 < 0) or (d3 < 0 and d4 > 0)
    ):
        return True

    def on(p: Point, q: Point, r: Point) -> bool:  # r on segment pq, collinear
        return min(p[0], q[0]) <= r[0] <= max(p[0], q[0]) and min(p[1], q[1]) <= r[1] <= max(
            p[1], q[1]
        )

    return (
        (d1 == 0 and on(c, d, a))
        or (d2 == 0 and on(c, d, b))
        or (d3 == 0 and on(a, b, c))
        or (d4 == 0 and on(a, b, d))
    )


def _area(points: list[Point]) -> float:
    """The polygon's area (the shoelace formula); 0 when its points lie on one line."""
    n = len(points)
    twice = sum(
        points[i][0] * points[(i + 1) % n][1] - points[(i + 1) % n][0] * points[i][1]
        for i in range(n)
    )
    return abs(twice) / 2


def _self_intersecting(points: list[Point]) -> bool:
    n = len(points)
    edges = [(points[i], points[(i + 1) % n]) for i in range(n)]
    for i in range(n):
        for j in range(i + 1, n):
            if j == i + 1 or (i == 0 and j == n - 1):  # neighbours share a corner
                continue
            if segments_cross(*edges[i], *edges[j]):
                return True
    return False
