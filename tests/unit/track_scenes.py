"""Detections made up for tracker tests, with the identity of every box known.

A scene is a list of frames; each frame the boxes a detector would give (x1, y1, x2, y2,
score) and, for each box, the object it belongs to (its ground-truth identity). Trackers
are compared by association (:func:`id_f1`), as IDs are numbered differently by each.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt
from framelens.core.stages.tracking import Tracker
from framelens.core.types import Detections
from scipy.optimize import linear_sum_assignment


@dataclass(frozen=True)
class SceneFrame:
    boxes: npt.NDArray[np.float32]  # (N, 4)
    scores: npt.NDArray[np.float32]  # (N,)
    truth: npt.NDArray[np.int64]  # (N,) the object of each box
    image: npt.NDArray[np.uint8] | None = None

    def detections(self) -> Detections:
        return Detections(self.boxes, self.scores, np.zeros(len(self.boxes), dtype=np.int32))


def moving_objects(
    rng: np.random.Generator,
    starts: list[tuple[float, float]],
    velocities: list[tuple[float, float]],
    *,
    frames: int,
    size: tuple[float, float] = (40.0, 80.0),
    noise: float = 1.5,
    drop: float = 0.0,
    low_score: float = 0.0,
    occluded: dict[int, range] | None = None,
) -> list[SceneFrame]:
    """Objects moving at constant velocities (they may cross). Each frame a box is missed
    with probability ``drop``, scores low (0.2-0.45) with probability ``low_score``,
    and is missing while its object is ``occluded`` (object -> frame range)."""
    occluded = occluded or {}
    w, h = size
    out = []
    for f in range(frames):
        boxes, scores, truth = [], [], []
        for obj, ((x, y), (vx, vy)) in enumerate(zip(starts, velocities, strict=True)):
            if f in occluded.get(obj, range(0)) or rng.random() < drop:
                continue
            cx, cy = x + vx * f + rng.normal(0, noise), y + vy * f + rng.normal(0, noise)
            bw, bh = w + rng.normal(0, noise), h + rng.normal(0, noise)
            boxes.append([cx - bw / 2, cy - bh / 2, cx + bw / 2, cy + bh / 2])
            scores.append(
                rng.uniform(0.2, 0.45) if rng.random() < low_score else rng.uniform(0.7, 0.95)
            )
            truth.append(obj)
        out.append(
            SceneFrame(
                np.array(boxes, dtype=np.float32).reshape(-1, 4),
                np.array(scores, dtype=np.float32),
                np.array(truth, dtype=np.int64),
            )
        )
    return out


def tud_campus(
    rng: np.random.Generator, *, noise: float = 2.0, drop: float = 0.05
) -> list[SceneFrame]:
    """TUD-Campus' ground truth (shipped with py-motmetrics) as detections: each box
    jittered by ``noise`` pixels, missed with probability ``drop``, scored 0.6-0.95."""
    spec = importlib.util.find_spec("motmetrics")
    assert spec is not None and spec.submodule_search_locations
    gt = Path(next(iter(spec.submodule_search_locations))) / "data" / "TUD-Campus" / "gt.txt"
    rows = np.loadtxt(gt, delimiter=",")
    out = []
    for frame in range(int(rows[:, 0].min()), int(rows[:, 0].max()) + 1):
        here = rows[(rows[:, 0] == frame) & (rng.random(len(rows)) >= drop)]
        xywh = here[:, 2:6] + rng.normal(0, noise, (len(here), 4))
        boxes = np.concatenate([xywh[:, :2], xywh[:, :2] + np.maximum(xywh[:, 2:], 4)], axis=1)
        out.append(
            SceneFrame(
                boxes.astype(np.float32),
                rng.uniform(0.6, 0.95, len(here)).astype(np.float32),
                here[:, 1].astype(np.int64),
            )
        )
    return out


def run_ours(tracker: Tracker, scene: list[SceneFrame]) -> list[npt.NDArray[np.int64]]:
    """Our tracker's ID for every box of every frame, in the boxes' order."""
    return [tracker.update(f.detections(), f.image) for f in scene]


def run_roboflow(tracker: object, scene: list[SceneFrame]) -> list[npt.NDArray[np.int64]]:
    """Roboflow's tracker's ID for every box (it may reorder boxes: mapped back)."""
    import supervision as sv

    out = []
    for f in scene:
        n = len(f.boxes)
        det = sv.Detections(
            xyxy=f.boxes.astype(np.float64),
            confidence=f.scores.astype(np.float64),
            class_id=np.zeros(n, dtype=int),
            data={"index": np.arange(n)},
        )
        args = (det,) if f.image is None else (det, f.image)  # ByteTrack warns of a frame
        got = tracker.update(*args)  # type: ignore[attr-defined]
        ids = np.full(n, -1, dtype=np.int64)
        if len(got):
            ids[np.asarray(got.data["index"], dtype=np.intp)] = got.tracker_id
        out.append(ids)
    return out


def _id_matches(
    a: list[npt.NDArray[np.int64]], b: list[npt.NDArray[np.int64]]
) -> tuple[float, int, int]:
    """(boxes the best one-to-one map of a's IDs onto b's maps right, boxes a labels,
    boxes b labels); IDs < 0 label nothing."""
    fa = np.concatenate(a)
    fb = np.concatenate(b)
    na, nb = int((fa >= 0).sum()), int((fb >= 0).sum())
    both = (fa >= 0) & (fb >= 0)
    if not both.any():
        return 0.0, na, nb
    ua, ia = np.unique(fa[both], return_inverse=True)
    ub, ib = np.unique(fb[both], return_inverse=True)
    counts = np.zeros((len(ua), len(ub)))
    np.add.at(counts, (ia, ib), 1)
    r, c = linear_sum_assignment(counts, maximize=True)
    return float(counts[r, c].sum()), na, nb


def id_precision(a: list[npt.NDArray[np.int64]], b: list[npt.NDArray[np.int64]]) -> float:
    """Of the boxes ``a`` gives an ID, the share whose ID maps onto b's (IDP): low when
    a swaps IDs or breaks a track into pieces, whatever a leaves unlabelled."""
    tp, na, _ = _id_matches(a, b)
    return tp / na if na else 1.0


def id_f1(a: list[npt.NDArray[np.int64]], b: list[npt.NDArray[np.int64]]) -> float:
    """IDF1 of labelling ``a`` against labelling ``b`` of the same boxes: the best
    one-to-one map of a's IDs onto b's (by boxes shared), 2 x boxes it maps right over
    the boxes labelled (>= 0) by a plus those by b. 1.0: the same partition into tracks."""
    tp, na, nb = _id_matches(a, b)
    return 2 * tp / (na + nb) if na + nb else 1.0


def track_count(ids: list[npt.NDArray[np.int64]]) -> int:
    flat = np.concatenate(ids)
    return len(np.unique(flat[flat >= 0]))


def panning_scene(
    rng: np.random.Generator, *, frames: int = 90, size: tuple[int, int] = (640, 360)
) -> list[SceneFrame]:
    """A hand-held camera over a textured street: it stands, then jerks sideways by
    20-35 pixels every few frames (a box 40 wide then moves more than its IoU can
    follow), while five people walk slowly. Frames are BGR images of the view."""
    import cv2

    width, height = size
    shape = (height + 200, width + 1200)
    world = np.zeros(shape)
    for scale in (1, 3, 9, 27):  # structure at every scale, as a street has
        coarse = rng.normal(0, 1, (shape[0] // scale + 2, shape[1] // scale + 2))
        coarse = cv2.GaussianBlur(coarse, (0, 0), 2.0)
        world += scale * cv2.resize(coarse, (shape[1], shape[0]), interpolation=cv2.INTER_CUBIC)
    world = cv2.normalize(world, None, 0, 255, cv2.NORM_MINMAX).astype(np.uint8)
    world = cv2.cvtColor(cv2.equalizeHist(world), cv2.COLOR_GRAY2BGR)
    starts = [(200.0, 150.0), (300.0, 250.0), (420.0, 140.0), (520.0, 260.0), (650.0, 180.0)]
    speeds = [(0.8, 0.0), (-0.6, 0.2), (0.5, -0.3), (-0.8, 0.0), (0.3, 0.4)]
    pan_x, pan_y = 100.0, 100.0
    out = []
    for f in range(frames):
        if f >= 10 and f % 4 == 0:
            pan_x += rng.uniform(20, 35)
            pan_y += rng.uniform(-4, 4)
        ox, oy = round(pan_x), round(pan_y)
        view = world[oy : oy + height, ox : ox + width].copy()
        boxes, truth = [], []
        for obj, ((x, y), (vx, vy)) in enumerate(zip(starts, speeds, strict=True)):
            cx = x + vx * f - (ox - 100) + 300
            cy = y + vy * f - (oy - 100)
            box = [cx - 20, cy - 40, cx + 20, cy + 40]
            if box[0] < 0 or box[2] > width or box[1] < 0 or box[3] > height:
                continue
            cv2.rectangle(
                view, (int(box[0]), int(box[1])), (int(box[2]), int(box[3])), (0, 0, 255), -1
            )
            boxes.append([v + rng.normal(0, 1.0) for v in box])
            truth.append(obj)
        out.append(
            SceneFrame(
                np.array(boxes, dtype=np.float32).reshape(-1, 4),
                rng.uniform(0.75, 0.95, len(boxes)).astype(np.float32),
                np.array(truth, dtype=np.int64),
                view,
            )
        )
    return out


CROWD_WIDTH, CROWD_HEIGHT = 640.0, 360.0


def crowd(objects: int, frames: int, seed: int) -> list[Detections]:
    """People walking over a small frame (so they cross and occlude one another): boxes
    missed (tracks lost and found again), low scores (the second matching), boxes
    doubled (unconfirmed tracks, duplicates), people leaving and coming, empty frames."""
    rng = np.random.default_rng(seed)

    def spawn() -> list[float]:
        w = rng.uniform(20, 60)
        return [
            rng.uniform(0, CROWD_WIDTH),
            rng.uniform(0, CROWD_HEIGHT),
            *rng.uniform(-5, 5, 2),
            w,
            w * rng.uniform(1.5, 2.5),
        ]

    people = [spawn() for _ in range(objects)]
    out = []
    for _ in range(frames):
        boxes, scores = [], []
        blank = rng.random() < 0.03
        for i, p in enumerate(people):
            p[0] += p[2]
            p[1] += p[3]
            if not (0 <= p[0] <= CROWD_WIDTH and 0 <= p[1] <= CROWD_HEIGHT):
                people[i] = p = spawn()
            if blank or rng.random() < 0.1:
                continue
            for _copy in range(2 if rng.random() < 0.05 else 1):
                j = rng.normal(0, 2.0, 4)
                cx, cy, w, h = p[0] + j[0], p[1] + j[1], p[4] + j[2], p[5] + j[3]
                boxes.append([cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2])
                scores.append(
                    rng.uniform(0.15, 0.5) if rng.random() < 0.15 else rng.uniform(0.5, 0.95)
                )
        order = rng.permutation(len(boxes))
        b = np.array(boxes, np.float32).reshape(-1, 4)[order]
        s = np.array(scores, np.float32)[order]
        out.append(Detections(b, s, np.zeros(len(b), np.int32)))
    return out
