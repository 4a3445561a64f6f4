"""The video wall's real window: results the session makes against results that reach
the screen, and how long the GUI takes to answer input while the wall plays.

Run under a display (Xvfb is fine; on the H200 see tests/gpu/run_on_h200.sh `window`):
    xvfb-run -s "-screen 0 1600x1000x24" .venv/bin/python benchmarks/wall_screen.py \
        --sources 4 --fps 30 --runs 5 --output benchmarks/results/wall-screen-cpu-<date>.json
Each source is a clip cut from the bundled sample (``--size``, ``--fps``), played at its
own real time (the wall's pacing) with the default detector and ByteTrack (tracks on).
``--video`` plays files given instead (the H200's 1080p30 clip, ``--sources`` copies of it),
``--device cuda:0`` on the GPU, ``--processes`` the wall's session in a process of its
own (core/sessions/wall_process.py: its picture through CUDA IPC on a GPU, else through
shared memory; ``picture_transport`` says which, and why not IPC).

Per run, after a warm-up, over ``--seconds``:
- ``results_per_s``: results the session made (every tile's ``frames``);
- ``shown_per_s``: distinct results that reached a paint of the canvas;
- ``replaced``: results drawn over by their tile's next one before a paint, plus those the
  window's hand-off replaced and those core dropped for a slow consumer (each apart too);
- frame latency: each shown result's time from its frame's release (a file played in
  real time is released when its frame is due, as a camera delivers it) to the paint
  that showed it, p50 and p99 (``WallCanvas.shown_latency_ms``);
- ``setup_s``: from the window's creation to every tile's first result (a child
  process started, engines built, decoders opened), beside the steady rates; read
  from the wall's states, which come every 0.5 s, so up to that much late;
- input latency: a thread posts a key press to the canvas every 50 ms with the time it
  posted; the canvas's event filter takes the time it is handled (GIL wait + event queue
  wait + whatever the GUI thread was doing), median and p99;
- ``gui_cpu_ms_per_paint``: the GUI thread's CPU over the run divided by its paints (all
  it did, the paints and the rest): with the paints a second, what the GUI thread's time
  a paint is made of.
The JSON gives the median and spread of every figure over the runs; it is written after
every round, so a call cut short keeps the runs it made. ``--depths 2,5`` alternates the
wall process's queue per tile (``FRAMELENS_WALL_DEPTH``) run by run: each depth's figures
under ``by_depth``, each round's ratio of shown results in ``shown_ratio_runs``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import av
import cv2
import numpy as np
from handoff import queue_depths, tiny_model, use_queue_depth
from host_monitor import machine
from streams import save_json

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "resources" / "samples" / "one-by-one-person-detection.mp4"
PROBE_KEY = 0x01000000 + 0xFFF0  # a key no action of the window binds
POST_EVERY_S = 0.05
SETUP_LIMIT_S = 300.0  # a wall whose every tile has not played by then: the run fails


def make_clips(
    folder: Path, count: int, size: tuple[int, int], fps: int, seconds: float
) -> list[str]:
    """``count`` clips of ``seconds`` cut from the sample at different places."""
    from framelens.core.stages.sources.file import FileSource

    frames_each = round(fps * seconds)
    images: list[np.ndarray] = []
    with FileSource(SAMPLE) as src:
        for frame in src:
            images.append(cv2.resize(frame.image, size))
            if len(images) >= frames_each + 40 * count:
                break
    paths = []
    for n in range(count):
        start = (n * 40) % max(1, len(images) - frames_each)
        path = folder / f"cam{n + 1}.mp4"
        with av.open(str(path), "w") as out:
            stream = out.add_stream("libx264", rate=fps)
            stream.width, stream.height, stream.pix_fmt = size[0], size[1], "yuv420p"
            for k in range(frames_each):
                image = images[(start + k) % len(images)]
                for packet in stream.encode(av.VideoFrame.from_ndarray(image, format="bgr24")):
                    out.mux(packet)
            for packet in stream.encode():
                out.mux(packet)
        paths.append(str(path))
    return paths


def thread_cpu_s(pid: int | None = None) -> dict[str, float]:
    """CPU seconds of the threads of process ``pid`` (this one by default) by name, a
    trailing number dropped (Linux /proc: FrameLens's threads by their names, as
    "fl-worker" (core/threads.py), other Python threads "python", Mesa's "llvmpipe",
    CUDA's "cuda-EvtHandlr"; this process's main thread is "gui", another's "main"),
    empty elsewhere or for a process that is gone."""
    import re

    out: dict[str, float] = {}
    tick = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
    main = os.getpid() if pid is None else pid
    first = "gui" if pid is None else "main"
    for task in Path(f"/proc/{main}/task").glob("*"):
        try:
            stat = (task / "stat").read_text()
        except OSError:
            continue
        name = stat[stat.index("(") + 1 : stat.rindex(")")]
        fields = stat[stat.rindex(")") + 2 :].split()
        kind = first if int(task.name) == main else re.sub(r"[-_:]?\d+$", "", name)
        out[kind] = out.get(kind, 0.0) + (int(fields[11]) + int(fields[12])) / tick
    return out


class WaitSampler:
    """What the GUI thread is doing in the kernel, sampled from a thread of its own
    (Linux): running or runnable ("R"), or asleep and where ("S:futex_wait_queue" is a
    lock, the GIL among them; "S:do_sys_poll" is the event loop waiting for work)."""

    def __init__(self, interval_s: float = 0.003) -> None:
        from collections import Counter

        self.counts: Counter[str] = Counter()
        self._task = Path(f"/proc/self/task/{os.getpid()}")
        self._stop = threading.Event()
        self._interval = interval_s
        self._thread = threading.Thread(target=self._run, name="wait-sampler", daemon=True)

    def start(self) -> None:
        if self._task.exists():
            self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            try:
                stat = (self._task / "stat").read_text()
                wchan = (self._task / "wchan").read_text().strip()
            except OSError:
                return
            state = stat[stat.rindex(")") + 2]
            self.counts[state if state == "R" else f"{state}:{wchan}"] += 1

    def stop(self) -> dict[str, float]:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()
        total = sum(self.counts.values()) or 1
        return {k: round(n / total, 3) for k, n in self.counts.most_common(8)}


class InputProbe:
    """Key presses posted from a thread of its own; the latency of each to its handler."""

    def __init__(self, target: Any) -> None:
        from PySide6.QtCore import QObject

        self.target = target
        self.latencies_ms: list[float] = []
        self._posted: dict[int, float] = {}
        self._stop = threading.Event()
        self._seq = 0
        probe = self

        class Filter(QObject):
            def eventFilter(self, obj: Any, event: Any) -> bool:
                from PySide6.QtCore import QEvent

                if event.type() == QEvent.Type.KeyPress and event.key() == PROBE_KEY:
                    sent = probe._posted.pop(int(event.nativeScanCode()), None)
                    if sent is not None:
                        probe.latencies_ms.append((time.perf_counter() - sent) * 1000.0)
                    return True
                return False

        self._filter = Filter()
        target.installEventFilter(self._filter)
        self._thread = threading.Thread(target=self._post, name="input-probe", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _post(self) -> None:
        from PySide6.QtCore import QCoreApplication, QEvent, Qt
        from PySide6.QtGui import QKeyEvent

        while not self._stop.wait(POST_EVERY_S):
            self._seq += 1
            event = QKeyEvent(
                QEvent.Type.KeyPress, PROBE_KEY, Qt.KeyboardModifier.NoModifier,
                self._seq, 0, 0, "",
            )  # fmt: skip
            self._posted[self._seq] = time.perf_counter()
            QCoreApplication.postEvent(self.target, event)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()
        self.target.removeEventFilter(self._filter)


def one_run(
    specs: list[str],
    seconds: float,
    warmup_s: float,
    profile: bool = False,
    device: str = "cpu",
    processes: bool = False,
    model: str | None = None,
) -> dict[str, Any]:
    from framelens.core.models.catalog import DEFAULT_MODEL, resolve_model
    from framelens.core.pipeline.settings import PipelineSettings
    from framelens.core.sessions.tracks import TrackStages
    from framelens.core.stages.tracking.settings import TrackerSettings
    from framelens.gui.common.settings import Settings
    from framelens.gui.wall.wall_window import WallWindow
    from PySide6.QtCore import QSettings
    from PySide6.QtWidgets import QApplication

    app = QApplication.instance()
    assert app is not None
    ini = Path(tempfile.mkdtemp(prefix="framelens-wall-bench-")) / "settings.ini"
    app_settings = Settings(QSettings(str(ini), QSettings.Format.IniFormat))
    settings = PipelineSettings(model=resolve_model(model or DEFAULT_MODEL), device=device)
    created = time.perf_counter()
    wall = WallWindow(
        specs, settings, app_settings, realtime=True, stages=TrackStages(TrackerSettings()),
        processes=processes,
    )  # fmt: skip
    wall.resize(1600, 960)
    wall.show()

    def pump_until(done: Any, limit_s: float) -> None:
        """The event loop as the application runs it, until ``done()`` or ``limit_s``."""
        from PySide6.QtCore import QEventLoop, QTimer

        loop = QEventLoop()
        end = time.monotonic() + limit_s
        poll = QTimer(interval=20)
        poll.timeout.connect(lambda: (done() or time.monotonic() >= end) and loop.quit())
        poll.start()
        loop.exec()
        poll.stop()

    def playing() -> bool:
        tiles = wall.state.tiles
        return len(tiles) == len(specs) and all(t.frames > 0 for t in tiles)

    pump_until(playing, SETUP_LIMIT_S)
    # the window to every tile's first result, as the wall's states tell it (one every
    # 0.5 s: up to that much late)
    setup_s = time.perf_counter() - created
    if not playing():
        wall.close()
        raise SystemExit(f"the wall showed no result on every tile in {SETUP_LIMIT_S} s")
    pump_until(lambda: False, warmup_s)
    canvas = wall.canvas

    def counts() -> dict[str, float]:
        tiles = wall.state.tiles
        return {
            "t": time.perf_counter(),
            "made": sum(t.frames for t in tiles),
            "core": sum(t.dropped for t in tiles),  # dropped for a consumer behind
            "hand_off": wall.session.superseded,  # replaced on the way to the canvas
            "shown": canvas.tiles_shown,
            "replaced": canvas.tiles_replaced,
            "paints": canvas.frames_painted,
        }

    probe = InputProbe(canvas)
    probe.start()
    sampler = None
    if profile:
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        from stack_sampler import StackSampler

        sampler = StackSampler(interval_s=0.005)
        sampler.__enter__()
    waits = WaitSampler()
    waits.start()
    # the wall's own process (--processes): its threads' cores too
    process = getattr(wall.session, "process", None)
    child = getattr(process, "pid", None)
    cpu0, child0 = thread_cpu_s(), thread_cpu_s(child) if child else {}
    canvas.shown_latency_ms.clear()  # from here: each shown result's release -> paint
    first = counts()
    pump_until(lambda: False, seconds)
    last = counts()
    shown_ms = list(canvas.shown_latency_ms)
    cpu1, child1 = thread_cpu_s(), thread_cpu_s(child) if child else {}
    gui_states = waits.stop()
    if sampler is not None:
        sampler.__exit__(None, None, None)
    probe.stop()
    display_path = canvas.display_path
    # --processes: how the child's picture came (CUDA IPC, or shared memory and why)
    transport = wall.transport.path if wall.transport is not None else None
    wall.close()
    pump_until(lambda: False, 0.5)
    wall.deleteLater()
    span = last["t"] - first["t"]
    # states come every 0.5 s: "made" is as of the last state, so it is measured over the
    # states' span; the canvas's counts are exact at both ends
    lat = sorted(probe.latencies_ms) or [float("nan")]
    out: dict[str, Any] = {
        "seconds": round(span, 2),
        "display_path": display_path,
        "picture_transport": transport,
        "results_per_s": round((last["made"] - first["made"]) / span, 1),
        "shown_per_s": round((last["shown"] - first["shown"]) / span, 1),
        "paints_per_s": round((last["paints"] - first["paints"]) / span, 1),
        "replaced": int(sum(last[k] - first[k] for k in ("replaced", "core", "hand_off"))),
        # where: drawn over in the canvas before a paint, replaced on the way to it (the
        # window's hand-off; with --processes the child's too), dropped by core
        "replaced_in_canvas": int(last["replaced"] - first["replaced"]),
        "replaced_on_the_way": int(last["hand_off"] - first["hand_off"]),
        "dropped_by_core": int(last["core"] - first["core"]),
        "setup_s": round(setup_s, 1),
        # per shown result: from its frame's release (each file played as a camera
        # delivers it) to the paint that showed it, in this window
        "frame_latency_ms_p50": _percentile(shown_ms, 50),
        "frame_latency_ms_p99": _percentile(shown_ms, 99),
        "frame_latencies": len(shown_ms),
        "input_latency_ms_p50": round(statistics.median(lat), 2),
        "input_latency_ms_p99": round(lat[min(len(lat) - 1, int(len(lat) * 0.99))], 2),
        "input_events": len(probe.latencies_ms),
        "gui_thread_states": gui_states,
        # cores each kind of thread used (1.0: a whole core), most first; the wall's
        # process apart (its Python threads share one GIL: near 1.0 together, it is that)
        "cpu_cores": _cores(cpu0, cpu1, span),
        "child_cpu_cores": _cores(child0, child1, span) if child else None,
    }
    # the GUI thread's CPU a paint (all it did, over the paints)
    paints = last["paints"] - first["paints"]
    gui = out["cpu_cores"].get("gui")
    out["gui_cpu_ms_per_paint"] = round(1e3 * gui * span / paints, 2) if gui and paints else None
    if sampler is not None:
        report = sampler.report(top=15)
        out["profile"] = {
            "gil_wait_ms": report["gil_wait_ms"],
            "gui_thread": report["threads"].get("MainThread"),
            "threads": {k: v["samples"] for k, v in report["threads"].items()},
        }
    return out


def _cores(before: dict[str, float], after: dict[str, float], span: float) -> dict[str, float]:
    """Cores each kind of thread used between two ``thread_cpu_s`` readings, most first."""
    used = ((k, round((after[k] - before.get(k, 0.0)) / span, 2)) for k in after)
    return dict(sorted(used, key=lambda kv: -kv[1]))


def _percentile(values: list[float], q: float) -> float | None:
    """None where nothing was measured (JSON has no NaN; a missing figure says so)."""
    return round(float(np.percentile(values, q)), 2) if values else None


def summarise(result: dict[str, Any], keys: list[str], depths: list[int | None]) -> None:
    """The median and spread of every figure: over the runs of the last depth listed at
    the top level, of each depth under ``by_depth``, and with two depths each round's
    ratio of shown results (second over first: the same round, the same machine)."""
    runs: list[dict[str, Any]] = result["runs"]
    for key in keys:
        spread = summary([r for r in runs if r["depth"] == depths[-1]], key)
        result[key], result[f"{key}_spread"] = spread["median"], spread
    if len(depths) < 2:
        return
    result["by_depth"] = {
        str(d): {key: summary([r for r in runs if r["depth"] == d], key) for key in keys}
        for d in depths
    }
    if len(depths) == 2:
        firsts = [r["shown_per_s"] for r in runs if r["depth"] == depths[0]]
        seconds = [r["shown_per_s"] for r in runs if r["depth"] == depths[1]]
        ratios = [round(b / a, 3) for a, b in zip(firsts, seconds, strict=False) if a]
        result["shown_ratio_runs"] = ratios
        result["shown_ratio"] = round(statistics.median(ratios), 3) if ratios else None


def summary(runs: list[dict[str, Any]], key: str) -> dict[str, float | None]:
    values = [float(r[key]) for r in runs if r[key] is not None]
    if not values:
        return {"median": None, "min": None, "max": None}
    return {
        "median": round(statistics.median(values), 2),
        "min": round(min(values), 2),
        "max": round(max(values), 2),
    }


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sources", type=int, default=4)
    parser.add_argument("--fps", type=int, default=30)
    parser.add_argument("--size", default="320x180")
    parser.add_argument("--video", nargs="*", default=None, help="files to play instead")
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--warmup", type=float, default=3.0)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--device", default="cpu", help="cpu, or cuda:0 on the H200")
    parser.add_argument(
        "--processes", action="store_true",
        help="the wall's session in a process of its own, its picture in shared memory",
    )  # fmt: skip
    parser.add_argument("--profile", action="store_true", help="sample every thread's stack")
    parser.add_argument(
        "--tiny-model", type=int, metavar="BOXES",
        help="a constant detector made here (handoff.py's: 32x32 input, BOXES boxes a "
        "frame) instead of the default: inference costs ~nothing, so the CPU shows the "
        "wall's own Python as a GPU's run does",
    )  # fmt: skip
    parser.add_argument(
        "--switch-interval", type=float, default=None,
        help="sys.setswitchinterval for the run (default: as the application sets it)",
    )  # fmt: skip
    parser.add_argument(
        "--depths", default="", type=queue_depths,
        help="an A/B of the wall's queue per tile (results waiting for a paint, "
        "--processes only; FRAMELENS_WALL_DEPTH), e.g. 2,5: each round runs each depth "
        "once; the top-level figures are the last depth's",
    )  # fmt: skip
    parser.add_argument("--label", default="")
    parser.add_argument("--output")
    args = parser.parse_args()
    if args.depths != [None] and not args.processes:
        parser.error("--depths takes a wall in its own process (--processes)")

    from framelens.gui.app import apply_theme
    from PySide6.QtCore import QCoreApplication, Qt

    if args.switch_interval is not None:
        sys.setswitchinterval(args.switch_interval)
    from PySide6.QtWidgets import QApplication

    QCoreApplication.setAttribute(Qt.ApplicationAttribute.AA_ShareOpenGLContexts)
    app = QApplication.instance() or QApplication(sys.argv[:1])
    apply_theme(app)  # type: ignore[arg-type]
    model = None
    if args.tiny_model is not None:
        model = tiny_model(args.tiny_model)
    if args.video:
        specs = list(args.video)
        specs = (specs * args.sources)[: args.sources] if args.sources else specs
    else:
        w, h = (int(v) for v in args.size.split("x"))
        length = args.warmup + args.seconds + 30  # never ends while measured
        folder = Path(tempfile.mkdtemp(prefix="framelens-wall-clips-"))
        specs = make_clips(folder, args.sources, (w, h), args.fps, length)
    keys = ["results_per_s", "shown_per_s", "paints_per_s", "gui_cpu_ms_per_paint",
            "replaced", "setup_s",
            "frame_latency_ms_p50", "frame_latency_ms_p99",
            "input_latency_ms_p50", "input_latency_ms_p99"]  # fmt: skip
    result: dict[str, Any] = {
        "command": "xvfb-run .venv/bin/python benchmarks/wall_screen.py " + " ".join(sys.argv[1:]),
        "label": args.label,
        "machine": machine(),
        "sources": len(specs),
        "device": args.device,
        "processes": args.processes,
        "source_fps": args.fps if not args.video else None,
        "source_size": args.size if not args.video else None,
        "tracks": "bytetrack",
        "model": "default" if args.tiny_model is None else f"constant, {args.tiny_model} boxes",
        "switch_interval_s": sys.getswitchinterval(),
        "runs_asked": args.runs,
        "runs": [],
    }
    depths: list[int | None] = args.depths
    if depths != [None]:
        result["depths"] = depths
    for n in range(args.runs):
        for depth in depths:  # alternated: each round runs every depth once
            use_queue_depth(depth)
            run = one_run(
                specs, args.seconds, args.warmup, args.profile, args.device, args.processes,
                model,
            )  # fmt: skip
            run["depth"] = depth
            print(f"run {n + 1}{'' if depth is None else f' depth {depth}'}: "
                  f"{json.dumps(run)}", flush=True)  # fmt: skip
            result["runs"].append(run)
        summarise(result, keys, depths)
        save_json(args.output, result)  # after every round: a call cut short keeps its runs
    print(json.dumps({k: result[k] for k in keys}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
