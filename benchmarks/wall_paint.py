"""What one paint of the video wall costs the GUI thread: the real WallCanvas, 16 tiles of
tracked people (boxes, tags and trails), painted synchronously (``repaint``) and timed.

    xvfb-run -s "-screen 0 1600x1000x24" .venv/bin/python benchmarks/wall_paint.py \
        --baseline 328f207 --output benchmarks/results/wall-paint-cpu-<date>.json

Two cases per run: every tile renewed before each paint (a new result for each: the wall
at its busiest) and none renewed (a paint for another reason: a caption, an input).
Frames are host images already drawn into the picture before the timing; what is timed is
the paint itself (overlays, captions, the picture's texture). Each run is a process of its
own; ``--baseline REV`` alternates runs with REV's code (benchmarks/handoff.py's worktree),
``--shared`` with the canvas fed as the wall's own process feeds it (one picture a paint,
each tile's overlay laid out in that process, as ``TileOverlay.shapes``).
The JSON has per case the median paint in ms of every run (wall clock, and the GUI
thread's own CPU time), their median and spread ((max - min) / median) and, with a
baseline, the ratios of medians. Under Xvfb the GL
is Mesa's software renderer: a GPU's GL does the rasterising in far less, so this measures
the CPU's share of a paint, which is what the GUI thread pays on any machine.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]


def scene(tiles: int, boxes: int, step: int) -> list[Any]:
    """Each tile's detections at time ``step``: ``boxes`` people walking, with track IDs
    and trails of their last 30 centres (as ByteTrack's stage gives them)."""
    from framelens.core.types import Detections

    out = []
    for t in range(tiles):
        # walking right, back to the left every 100 steps: the people stay in the frame
        xs = 200.0 + 500.0 * np.arange(boxes) + 3.0 * (step % 100) + 20.0 * t
        ys = np.full(boxes, 300.0) + 40.0 * np.sin(0.1 * step + t)
        b = np.stack([xs, ys, xs + 160.0, ys + 420.0], 1).astype(np.float32)
        k = np.arange(30, dtype=np.float32)[:, None]
        trails = tuple(
            np.concatenate([b[i, 0] + 80.0 - 3.0 * (29 - k), b[i, 1] + 210.0 + 0 * k], 1).astype(
                np.float32
            )
            for i in range(boxes)
        )
        ids = np.arange(1, boxes + 1, dtype=np.int64) + 10 * t
        out.append(Detections(b, np.full(boxes, 0.85, np.float32),
                              np.zeros(boxes, np.int32), None, ids, trails))  # fmt: skip
    return out


def child(args: argparse.Namespace) -> dict[str, Any]:
    from framelens.core.api import DEFAULT_STYLE, Frame, TileState
    from framelens.gui.wall.wall_canvas import WallCanvas
    from PySide6.QtWidgets import QApplication

    app = QApplication.instance() or QApplication([])
    canvas = WallCanvas()
    canvas.resize(1600, 900)
    names = [f"cam{k + 1}" for k in range(args.tiles)]
    canvas.set_sources(names)
    canvas.set_states([TileState(n, f"{n}.mp4", "playing", fps=30.0, latency_ms=20.0)
                       for n in names])  # fmt: skip
    canvas.show()
    deadline = time.monotonic() + 10
    while not canvas.isVisible() and time.monotonic() < deadline:
        app.processEvents()
    image = np.full((1080, 1920, 3), 90, np.uint8)
    labels = ("person",)
    if args.shared:  # as from the wall's own process: one picture, overlays laid out there
        from framelens.core.api import layout, wall_grid
        from framelens.core.gpu.wall_composite import tile_rects
        from framelens.core.sessions.wall_process import SharedWallFrame, TileOverlay

        canvas.release_shared = lambda buffer, unseen_for: None
        grid = wall_grid(args.tiles, "auto")
        rects = tile_rects([(1920, 1080)] * args.tiles, grid, 1920, 1080)
    out: dict[str, list[float]] = {"every tile renewed": [], "none renewed": []}
    cpu: dict[str, list[float]] = {case: [] for case in out}
    step = 0
    for k in range(args.warmup + args.paints):
        for case in ("every tile renewed", "none renewed"):
            if case == "every tile renewed":
                step += 1
                if args.shared:
                    overlays = {
                        tile: TileOverlay(dets, (), (1920, 1080), rects[tile] or (0, 0, 1, 1),
                                          layout(dets, labels, DEFAULT_STYLE, 1920, 1080))
                        for tile, dets in enumerate(scene(args.tiles, args.boxes, step))
                    }  # fmt: skip
                    canvas.set_shared(SharedWallFrame(step % 2, step, image, overlays, 0),
                                      labels, DEFAULT_STYLE)  # fmt: skip
                for tile, dets in enumerate(scene(args.tiles, args.boxes, step)):
                    if args.shared:
                        break
                    canvas.set_frame(tile, Frame(image, step, step / 30.0),
                                     (dets, labels, DEFAULT_STYLE))  # fmt: skip
            app.processEvents()
            began, began_cpu = time.perf_counter(), time.thread_time()
            canvas.repaint()
            app.processEvents()
            if k >= args.warmup:
                out[case].append((time.perf_counter() - began) * 1e3)
                cpu[case].append((time.thread_time() - began_cpu) * 1e3)
    canvas.close()
    medians = {case: statistics.median(ms) for case, ms in out.items()}
    medians.update({f"{case} cpu": statistics.median(ms) for case, ms in cpu.items()})
    return medians


def layer_ab(args: argparse.Namespace, baseline: str | None) -> dict[str, Any]:
    """The wall's overlay layer alone (``TileLayer.paint`` into an image, no GL): every
    tile renewed each paint, two sides alternated paint by paint in this one process, so
    the machine's drift falls on both alike; the GUI thread's CPU a paint. Sides: with
    ``baseline`` (a revision), REV's gui/wall/tile_layer.py against today's (the rest of
    the code today's on both); else today's layer with its tags' text written in glyphs
    (the wall's threshold) against outlined (threshold 0)."""
    import hashlib
    from types import ModuleType

    from framelens.core.api import DEFAULT_STYLE, layout
    from framelens.gui.wall import tile_layer
    from PySide6.QtCore import QRectF
    from PySide6.QtGui import QImage, QPainter
    from PySide6.QtWidgets import QApplication

    app = QApplication.instance() or QApplication([])
    font = tile_layer.caption_font(QApplication.font())
    w, h, side = 1600, 900, round(args.tiles**0.5)
    cw, ch = (w - 2 * (side - 1)) / side, (h - 2 * (side - 1)) / side
    cells = [QRectF(c * (cw + 2), r * (ch + 2), cw, ch) for r in range(side) for c in range(side)]
    wall_threshold = tile_layer.GLYPHS_BELOW_PX
    sides: dict[str, tuple[ModuleType, float]]
    today = Path(tile_layer.__file__).read_bytes()
    texts = {"glyphs": today, "outlines": today, "now": today}  # each side's source
    commit = None
    if baseline is None:
        sides = {"glyphs": (tile_layer, wall_threshold), "outlines": (tile_layer, 0.0)}
    else:

        def git(*words: str) -> str:
            done = subprocess.run(["git", "-C", str(ROOT), *words],
                                  capture_output=True, text=True, check=True)  # fmt: skip
            return done.stdout

        commit = git("rev-parse", "--short", baseline).strip()
        shown = f"{commit}:gui/wall/tile_layer.py"
        source = git("show", shown)
        before = ModuleType("baseline_tile_layer")
        before.__file__ = shown
        sys.modules[before.__name__] = before  # its dataclasses look their module up there
        try:
            exec(compile(source, shown, "exec"), before.__dict__)
        finally:
            del sys.modules[before.__name__]
        sides = {"now": (tile_layer, wall_threshold),
                 "baseline": (before, getattr(before, "GLYPHS_BELOW_PX", 0.0))}  # fmt: skip
        texts["baseline"] = source.encode()
    layers = {name: module.TileLayer() for name, (module, _) in sides.items()}
    target = QImage(w, h, QImage.Format.Format_ARGB32_Premultiplied)
    runs: dict[str, list[float]] = {name: [] for name in sides}
    step = 0
    try:
        for _ in range(args.runs):
            ms: dict[str, list[float]] = {name: [] for name in sides}
            for k in range(args.warmup + args.paints):
                step += 1
                shapes = [(d, layout(d, ("person",), DEFAULT_STYLE, 1920, 1080))
                          for d in scene(len(cells), args.boxes, step)]  # fmt: skip
                for name in sides if k % 2 else reversed(sides):
                    module, threshold = sides[name]
                    module.GLYPHS_BELOW_PX = threshold
                    views = [
                        module.TileView(cell, cell, (d, ("person",), DEFAULT_STYLE), None,
                                        (1920, 1080), f"cam{i + 1} 30.0 fps", "", laid)
                        for i, (cell, (d, laid)) in enumerate(zip(cells, shapes, strict=True))
                    ]  # fmt: skip
                    painter = QPainter(target)
                    began = time.thread_time()
                    layers[name].paint(painter, views, (w, h), 1.0, font)
                    spent = time.thread_time() - began
                    painter.end()
                    if k >= args.warmup:
                        ms[name].append(spent * 1e3)
            for name in sides:
                runs[name].append(round(statistics.median(ms[name]), 2))
    finally:
        tile_layer.GLYPHS_BELOW_PX = wall_threshold
    del app  # kept alive while painting
    out: dict[str, Any] = {"glyphs_below_px": wall_threshold, "baseline_revision": commit}
    for name, values in runs.items():
        module, threshold = sides[name]
        med = statistics.median(values)
        spread = round((max(values) - min(values)) / med, 3)
        out[name] = {"layer_cpu_ms": round(med, 2), "layer_cpu_ms_runs": values,
                     "layer_cpu_ms_spread": spread, "glyphs_below_px": threshold,
                     "layer_module": module.__name__,
                     "layer_source_sha1": hashlib.sha1(texts[name]).hexdigest()}  # fmt: skip
    first, second = sides
    key = f"{first}_over_{second}"
    out[key] = round(out[first]["layer_cpu_ms"] / out[second]["layer_cpu_ms"], 3)
    out[f"{key}_runs"] = [round(a / b, 3) for a, b in zip(runs[first], runs[second], strict=True)]
    return out


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tiles", type=int, default=16)
    parser.add_argument("--boxes", type=int, default=3, help="tracked people a tile")
    parser.add_argument("--paints", type=int, default=60, help="timed paints a case a run")
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--baseline", metavar="REV", help="alternate with REV's code")
    parser.add_argument(
        "--shared", action="store_true",
        help="the canvas as the wall's own process feeds it (one picture, each tile's "
        "overlay laid out there), alternated with the in-process canvas (no --baseline)",
    )  # fmt: skip
    parser.add_argument(
        "--glyphs", action="store_true",
        help="the overlay layer alone, small tags in glyphs against outlined, alternated "
        "paint by paint in one process (no GL)",
    )  # fmt: skip
    parser.add_argument(
        "--layer-baseline", metavar="REV",
        help="the overlay layer alone, REV's gui/wall/tile_layer.py against today's, "
        "alternated paint by paint in one process (no GL)",
    )  # fmt: skip
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--output")
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args)))
        return 0
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from handoff import revision_tree
    from streams import save_json

    if args.glyphs and args.layer_baseline:
        parser.error("--glyphs and --layer-baseline are two A/Bs: one at a time")
    if (args.glyphs or args.layer_baseline) and (args.baseline or args.shared):
        parser.error("--glyphs and --layer-baseline time the layer alone: no --baseline, --shared")
    if args.glyphs or args.layer_baseline:
        layer = {"command": "python3 benchmarks/wall_paint.py " + " ".join(sys.argv[1:]),
                 "tiles": args.tiles, "boxes_per_tile": args.boxes,
                 "paints_per_run": args.paints, "cpu_cores": os.cpu_count(),
                 **layer_ab(args, None if args.glyphs else args.layer_baseline)}  # fmt: skip
        print(json.dumps(layer, indent=1))
        save_json(args.output, layer)
        return 0
    if args.shared and args.baseline:
        parser.error("--shared compares with today's in-process canvas: no --baseline")

    def one(path: Path | None, shared: bool = False) -> dict[str, float]:
        env = dict(os.environ)
        if path is not None:
            env["PYTHONPATH"] = str(path) + os.pathsep + env.get("PYTHONPATH", "")
        cmd = [sys.executable, __file__, "--child", "--tiles", str(args.tiles),
               "--boxes", str(args.boxes), "--paints", str(args.paints),
               "--warmup", str(args.warmup)] + (["--shared"] if shared else [])  # fmt: skip
        done = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True)
        result: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
        return result

    sides: dict[str, list[dict[str, float]]] = {"now": []}
    with contextlib.ExitStack() as stack:
        base = stack.enter_context(revision_tree(args.baseline)) if args.baseline else None
        order: list[tuple[str, Path | None]] = [("now", None)]
        if base is not None:
            order.append(("baseline", base))
        if args.shared:
            order.append(("shared", None))
        for name, _ in order[1:]:
            sides[name] = []
        for k in range(args.runs):
            for name, path in order if k % 2 == 0 else order[::-1]:
                sides[name].append(one(path, shared=name == "shared"))
                print(f"run {k + 1} {name}: {json.dumps(sides[name][-1])}", flush=True)
    report: dict[str, Any] = {
        "command": "python3 benchmarks/wall_paint.py " + " ".join(sys.argv[1:]),
        "tiles": args.tiles, "boxes_per_tile": args.boxes, "paints_per_case": args.paints,
        "cpu_cores": os.cpu_count(), "baseline": args.baseline,
    }  # fmt: skip
    for case in ("every tile renewed", "none renewed"):
        entry: dict[str, Any] = {}
        for name, runs in sides.items():
            entry[name] = {}
            for key, figure in ((case, "paint_ms"), (f"{case} cpu", "gui_thread_cpu_ms")):
                ms = [r[key] for r in runs]
                med = statistics.median(ms)
                entry[name][figure] = round(med, 2)
                entry[name][f"{figure}_runs"] = [round(m, 2) for m in ms]
                entry[name][f"{figure}_spread"] = round((max(ms) - min(ms)) / med, 3)
        if "baseline" in entry:
            for figure in ("paint_ms", "gui_thread_cpu_ms"):
                entry[f"{figure}_now_over_baseline"] = round(
                    entry["now"][figure] / entry["baseline"][figure], 3
                )
        if "shared" in entry:
            for figure in ("paint_ms", "gui_thread_cpu_ms"):
                entry[f"{figure}_shared_over_now"] = round(
                    entry["shared"][figure] / entry["now"][figure], 3
                )
        report[case] = entry
    print(json.dumps(report, indent=1))
    save_json(args.output, report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
