"""The real window on an NVIDIA GPU: play a video on CUDA in the main window, take a
screenshot, and time the display path.

Needs an X server whose clients get NVIDIA's GLX (on the H200: Xvfb with
``__GLX_VENDOR_LIBRARY_NAME=nvidia``, started by ``tests/gpu/run_on_h200.sh window``),
PySide6, pycuda with GL and a CUDA device.

1. The main window plays VIDEO on cuda:0 (NVDEC -> kernels -> ONNX Runtime CUDA ->
   display kernel -> canvas): the status bar's display field, the GL renderer, the
   player's fps and the frames shown are recorded; a screenshot is written.
2. The canvas alone, as pyqtgraph's VideoSpeedTest measures it: one VideoCanvas at the
   video's size is given a new frame and repainted as fast as it goes, for each path:
   ``interop`` (a device frame written into a GL pixel buffer registered with CUDA),
   ``device via host`` (the same device frame copied to host memory, then uploaded:
   what a machine without interop does) and ``host upload`` (a BGR array from host
   memory, the CPU path). Medians of the canvas's own upload+paint time and the
   loop's frames per second, after a warm-up; ratios against ``device via host``.
3. The video wall of ``--wall`` copies of the video: its display path (one picture drawn
   by a kernel, through interop on CUDA), its throughput, a screenshot (SHOT-wall.png).
4. Overlays per display path: a known box over a black frame, looked for in the
   canvas's rendering, and how many of the frames played had detections.

    python3 benchmarks/qt_window_gpu.py --video V.mp4 --output OUT.json --screenshot OUT.png
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
from scratch import scratch_folder


def _wait(app: Any, seconds: float, until: Any = None) -> bool:
    """Run Qt's own event loop for ``seconds``, or until ``until()`` is true (checked every
    20 ms). The real loop, not processEvents between sleeps: the GUI thread must wake up
    for queued results as the application's would, or the figures measure the sleeps."""
    from PySide6.QtCore import QEventLoop, QTimer

    if until is not None and until():
        return True
    loop, end = QEventLoop(), time.monotonic() + seconds
    met: list[bool] = [False]
    failed: list[BaseException] = []

    def check() -> None:
        try:
            if until is not None and until():
                met[0] = True
        except BaseException as exc:  # raised again below, not printed every 20 ms
            failed.append(exc)
        if met[0] or failed or time.monotonic() >= end:
            loop.quit()

    timer = QTimer(interval=20)
    timer.timeout.connect(check)
    timer.start()
    loop.exec()
    timer.stop()
    if failed:
        raise failed[0]
    return met[0] or until is None


def play_in_window(
    app: Any, video: str, device: str, seconds: float, screenshot: Path
) -> dict[str, Any]:
    from framelens.gui.common.settings import Settings
    from framelens.gui.player.main_window import MainWindow
    from PySide6.QtCore import QSettings

    ini = scratch_folder("framelens-window-") / "framelens.ini"
    window = MainWindow(settings=Settings(QSettings(str(ini), QSettings.Format.IniFormat)))
    window.resize(1600, 1000)
    window.show()
    _wait(app, 10, lambda: window.canvas.renderer != "")
    window.choose_device(device)
    window.open_source(video)
    _wait(app, 120, lambda: window.state.source is not None and not window.state.loading_model)
    boxes: list[int] = []  # detections of each frame handed to the canvas
    times: list[Any] = []  # their StageTimes (never the results: they hold device buffers)
    show_detections = window.detections.show

    def counting(result: Any) -> None:
        boxes.append(len(result.output))
        times.append(result.times)
        show_detections(result)

    window.detections.show = counting  # type: ignore[method-assign]
    window.controller.play()
    started, shown0 = time.monotonic(), window.results_shown
    display_paths: set[str] = set()
    while time.monotonic() < started + seconds:
        _wait(app, 0.25)
        display_paths.add(window.display_label.text())
    elapsed = time.monotonic() - started
    state = window.state
    from framelens.gui.common.screenshots import grab_window

    # the canvas's own framebuffer over the window's grab: QWidget.grab leaves out what
    # QPainter drew over the GL frame (the overlays), which made the first H200
    # screenshot look as if it had none
    grab_window(window).save(str(screenshot))
    result = {
        "renderer": window.canvas.renderer,
        "display_path": window.display_label.text(),
        "display_paths_seen": sorted(display_paths),
        "status_bar": {
            "source": window.source_label.text(),
            "model": window.model_label.text(),
            "backend": window.backend_label.text(),
            "display": window.display_label.text(),
            "fps": window.fps_label.text(),
        },
        "player_fps": round(float(state.fps), 1),
        "results_per_s": round((window.results_shown - shown0) / elapsed, 1),
        "dropped": int(getattr(state, "dropped", 0)),
        **_latency(times, state),
        "frames_with_detections": sum(1 for n in boxes if n),
        "frames_counted": len(boxes),
        "seconds": round(elapsed, 1),
        "screenshot": screenshot.name,
    }
    window.controller.pause()
    window.close()
    _wait(app, 1.0)
    return result


def _latency(times: list[Any], state: Any) -> dict[str, Any]:
    """Rough edge 8 in the real window: live_latency.py's figures for the frames played
    (those whose end to end was measured)."""
    from live_latency import lag_figures

    timed = [t for t in times if np.isfinite(t.e2e)]
    if not timed:
        return {"e2e_ms_p50": None}
    fps = (state.source.fps if state.source is not None else 0.0) or 30.0
    interval = 1000.0 / (fps * float(state.speed))
    return {"interval_ms": round(interval, 2), **lag_figures(timed, interval)}


def play_wall(
    app: Any, video: str, device: str, sources: int, seconds: float, screenshot: Path
) -> dict[str, Any]:
    """The video wall of ``sources`` copies of the video on ``device``: its tiles drawn into
    one picture (on CUDA by a kernel into a device buffer, shown through interop)."""
    from framelens.gui.common.screenshots import grab_window
    from framelens.gui.common.settings import Settings
    from framelens.gui.player.main_window import MainWindow
    from PySide6.QtCore import QSettings

    ini = scratch_folder("framelens-window-") / "framelens.ini"
    window = MainWindow(settings=Settings(QSettings(str(ini), QSettings.Format.IniFormat)))
    window.show()
    _wait(app, 10, lambda: window.canvas.renderer != "")
    window.choose_device(device)
    _wait(app, 60, lambda: window.controller.settings is not None)
    wall = window.open_wall([video] * sources)
    if wall is None:
        return {"error": "the wall did not open"}
    wall.resize(1600, 1000)
    _wait(app, 120, lambda: all(t.shown > 0 for t in wall.state.tiles) and wall.state.fps > 0)
    started, shown0 = time.monotonic(), wall.results_shown
    _wait(app, seconds)
    elapsed = time.monotonic() - started
    grab_window(wall).save(str(screenshot))
    state = wall.state
    result = {
        "sources": sources,
        "display_path": wall.canvas.display_path,
        "summary": wall.summary_label.text(),
        "wall_fps": round(float(state.fps), 1),
        "results_shown_per_s": round((wall.results_shown - shown0) / elapsed, 1),
        "mean_batch": round(float(state.mean_batch), 2),
        "path": state.path,
        "errors": wall.errors[:3],
        "screenshot": screenshot.name,
    }
    wall.close()
    window.close()
    _wait(app, 1.0)
    return result


def time_canvas(app: Any, frames: list[Any], interop: bool, repeats: int) -> dict[str, Any]:
    """Give the canvas a new frame and repaint it, ``repeats`` times after a warm-up."""
    from framelens.gui.display.canvas import VideoCanvas

    first = frames[0]
    width = int(first.shape[1]) if isinstance(first, np.ndarray) else int(first.width)
    height = int(first.shape[0]) if isinstance(first, np.ndarray) else int(first.height)
    canvas = VideoCanvas(interop=interop)
    canvas.resize(width, height)
    canvas.show()
    _wait(app, 10, lambda: canvas.renderer != "")
    draw_ms: list[float] = []
    canvas.drawTimeMs.connect(draw_ms.append)
    warmup = 30
    loop_s: list[float] = []
    for i in range(warmup + repeats):
        t0 = time.perf_counter()
        canvas.set_image(frames[i % len(frames)])
        canvas.repaint()  # paintGL now: upload + draw + composition into the window
        app.processEvents()
        if i >= warmup:
            loop_s.append(time.perf_counter() - t0)
    path = canvas.display_path
    canvas.close()
    canvas.deleteLater()
    _wait(app, 0.2)
    kept = draw_ms[-repeats:]
    return {
        "display_path": path,
        "frames": repeats,
        "draw_ms_p50": round(statistics.median(kept), 3) if kept else None,
        "loop_ms_p50": round(1000 * statistics.median(loop_s), 3),
        "fps": round(1.0 / statistics.median(loop_s), 1),
    }


def overlay_check(app: Any, cuda: bool) -> dict[str, Any]:
    """Is a box painted over each kind of frame? A black 640x360 frame with one known
    box, per display path; the class colour looked for on the box's bottom edge in the
    canvas's own rendering (as tests/gui/test_display_path.py does under Mesa)."""
    from framelens.core.stages.draw.style import OverlayStyle, class_colour
    from framelens.core.types import Detections
    from framelens.gui.display.canvas import VideoCanvas
    from PySide6.QtGui import QImage

    black = np.zeros((360, 640, 3), dtype=np.uint8)
    dets = Detections(
        np.array([[100, 80, 400, 300]], dtype=np.float32),
        np.array([0.9], dtype=np.float32),
        np.array([0], dtype=np.int32),
    )
    frames: dict[str, tuple[Any, bool]] = {"host upload": (black, True)}
    if cuda:
        from framelens.core.gpu.buffers import cuda_driver
        from framelens.core.gpu.context import get_context
        from framelens.core.gpu.images import upload_bgr

        context = get_context(0)
        with context.active():
            stream = cuda_driver().Stream()
        device = upload_bgr(context, black, stream)
        frames = {"interop": (device, True), "device via host": (device, False), **frames}
    b, g, r = class_colour(0)
    seen: dict[str, Any] = {}
    for name, (frame, interop) in frames.items():
        canvas = VideoCanvas(interop=interop)
        canvas.resize(640, 360)
        canvas.show()
        _wait(app, 10, lambda c=canvas: c.renderer != "")
        canvas.set_image(frame, (dets, ("person",), OverlayStyle()))
        _wait(app, 0.5)
        shot = canvas.grab_frame_image().convertToFormat(QImage.Format.Format_RGB888)
        rect = canvas.image_rect()
        scale = rect.width() / 640
        x, y = round(rect.left() + 250 * scale), round(rect.top() + 300 * scale)
        colours = [shot.pixelColor(x, y + dy) for dy in (-1, 0, 1)]
        rgb = [(c.red(), c.green(), c.blue()) for c in colours]
        seen[name] = {
            "display_path": canvas.display_path,
            "box_painted": (r, g, b) in rgb,
            "edge_rgb": rgb,
            "want_rgb": [r, g, b],
        }
        canvas.close()
        canvas.deleteLater()
        _wait(app, 0.2)
    return seen


def canvas_alone(app: Any, width: int, height: int, repeats: int, cuda: bool) -> dict[str, Any]:
    rng = np.random.default_rng(0)
    host = [rng.integers(0, 256, (height, width, 3), dtype=np.uint8) for _ in range(4)]
    paths: dict[str, dict[str, Any]] = {}
    if cuda:
        from framelens.core.gpu.buffers import cuda_driver
        from framelens.core.gpu.context import get_context
        from framelens.core.gpu.images import upload_bgr

        context = get_context(0)
        with context.active():
            stream = cuda_driver().Stream()
        # the pipeline's own display frames (what the display kernel hands the canvas)
        device = [upload_bgr(context, h, stream) for h in host]
        paths["interop"] = time_canvas(app, list(device), True, repeats)
        paths["device via host"] = time_canvas(app, list(device), False, repeats)
    paths["host upload"] = time_canvas(app, list(host), True, repeats)
    base = paths.get("device via host", paths["host upload"])["fps"]
    for row in paths.values():
        row["fps_vs_device_via_host" if cuda else "fps_vs_host_upload"] = (
            round(row["fps"] / base, 2) if base else None
        )
    return {"width": width, "height": height, "paths": paths}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--video", required=True)
    parser.add_argument("--output", required=True)
    parser.add_argument("--screenshot", required=True)
    parser.add_argument("--device", default="cuda:0", help="cuda:0, or cpu for a dry run")
    parser.add_argument("--seconds", type=float, default=20.0, help="playback in the window")
    parser.add_argument("--repeats", type=int, default=300, help="canvas frames per path")
    parser.add_argument("--wall", type=int, default=16, help="sources of the video wall run")
    args = parser.parse_args()

    from framelens.gui.app import apply_theme
    from PySide6.QtWidgets import QApplication

    app = QApplication(["framelens"])
    apply_theme(app)
    report: dict[str, Any] = {
        "command": " ".join(["python3", *sys.argv]),
        "date": time.strftime("%Y-%m-%d"),
    }
    report["window"] = play_in_window(
        app, args.video, args.device, args.seconds, Path(args.screenshot)
    )
    print(json.dumps(report["window"], indent=1), flush=True)
    shot = Path(args.screenshot)
    report["wall"] = play_wall(
        app, args.video, args.device, args.wall, 10.0, shot.with_name(f"{shot.stem}-wall.png")
    )
    print(json.dumps(report["wall"], indent=1), flush=True)
    report["overlay"] = overlay_check(app, cuda=args.device.startswith("cuda"))
    print(json.dumps(report["overlay"], indent=1), flush=True)
    report["canvas_alone"] = canvas_alone(
        app, 1920, 1080, args.repeats, cuda=args.device.startswith("cuda")
    )
    print(json.dumps(report["canvas_alone"], indent=1), flush=True)
    Path(args.output).write_text(json.dumps(report, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
