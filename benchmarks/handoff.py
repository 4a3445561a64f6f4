"""The executor's hand-offs per frame, on the CPU, with a model that costs ~nothing.

    python3 benchmarks/handoff.py [--baseline REV] [--runs 5] [--frames 600]
                                  [--boxes K --track-ab N] [--configs A,B]
                                  [--profile] [--output benchmarks/results/handoff-cpu-...json]

What ``framelens run`` uses (the session over the one executor: core/sessions/session.py,
core/sessions/drive.py, core/pipeline/execute.py), on host pipelines, over frames of the
person sample decoded once and replayed from memory (a Source that hands out the same
arrays again), with a tiny end-to-end detector made here (input 32x32, outputs constant:
no box passes the threshold), so decoding and inference are ~0 and what is left per frame
is the executor's overhead: decode-ahead thread -> worker threads -> in-order delivery ->
the consumer. Reported per configuration (batch 1 with 2 workers, the live path; batch 4
with 2 workers): frames/s, wall and process CPU time per frame, voluntary context switches
per frame (how often a thread blocked: each a hand-off or a wait), median and spread of
``--runs`` runs, each in a fresh process.

``--baseline REV`` runs the same measurement against the code of another revision (a git
worktree of REV in a temporary folder, put first on the import path), alternated run by
run with today's, and reports today's over the baseline's median fps. Before the session
(fee4f09 and earlier) a run went through ``PipelineRunner`` (core/pipeline/runner.py); the
harness drives whichever of the two the revision has.

``--boxes K --track-ab N``: the model finds K boxes in every frame, and each config also
runs with and without ByteTrack (``framelens run --track`` without drawing), alternated N
times: what tracking costs a process where its Python is the limit
(``4src-batch8-2w``) and where decoding and inference leave it time
(``gpu-like-4src-batch8-2w``: one process of the 16-source run in 4 processes).

``--profile`` runs today's code once more per configuration with every thread under
cProfile (Python calls per frame, time in waits by function) and under the stack sampler
(benchmarks/stack_sampler.py: where each thread sits).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from scratch import scratch_folder

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
SAMPLE = ROOT / "resources" / "samples" / "one-by-one-person-detection.mp4"
# name: (batch, workers, decode ms, engine ms): the last two are time spent per frame read
# and per engine call with the GIL released (time.sleep), as NVDEC's decode and ONNX
# Runtime's CUDA call release it; "gpu-like": the H200's batch-1 live path (NVDEC alone
# 547 fps = 1.83 ms a frame; YOLOX-Nano 3.3 ms a call at batch 1: h200-2026-12-01.json),
# where the executor's hand-offs decide how close the run gets to its decoder's rate
CONFIGS = {
    "batch1-2w": (1, 2, 0.0, 0.0),
    "batch4-2w": (4, 2, 0.0, 0.0),
    "gpu-like-batch1-2w": (1, 2, 1.83, 3.3),
    # one process of the 16-source run in 4 processes (h100-streams16-track-2026-12-05.json:
    # 4 sources, batch 8, 2 workers): each source's NVDEC 1.83 ms a frame, an engine call
    # of 8 frames ~8 ms; what is left decides the rate: the process's Python (the GIL)
    "gpu-like-4src-batch8-2w": (8, 2, 1.83, 8.0),
    "4src-batch8-2w": (8, 2, 0.0, 0.0),  # the same with decode and engine ~0: Python-bound
}
# sources read at once (merged), by config (others: one)
SOURCES = {"gpu-like-4src-batch8-2w": 4, "4src-batch8-2w": 4}
INPUT = 32  # the tiny model's input side
FRAME_SIZE = (320, 180)  # replayed frames: small, so the letterbox resize costs little
PACKAGES = ("core", "gui", "kernels", "resources", "models")  # framelens.<name>; framelens = app


# ---- the parent: model, frames, alternated child runs ---------------------------------------


def make_model(path: Path, boxes: int = 0) -> Path:
    """An end-to-end detector (ultralytics end2end layout, dynamic batch, 32x32 input)
    whose outputs are constants plus 0 * mean(input): ONNX Runtime runs it as a graph;
    ``boxes`` (at most 16) boxes score 0.9, in a grid, the same every frame (a tracker
    matches each to its track again: its whole update runs), the rest score 0."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    value = np.zeros((1, 16, 6), np.float32)
    for k in range(min(boxes, 16)):
        x, y = 1 + (k % 4) * 8, 1 + (k // 4) * 8
        value[0, k] = (x, y, x + 6, y + 6, 0.9, 0)
    nodes = [
        helper.make_node("ReduceMean", ["images"], ["mean"], axes=[1, 2, 3], keepdims=1),
        helper.make_node("Reshape", ["mean", "rs"], ["mean3"]),
        helper.make_node("Mul", ["mean3", "zero"], ["nothing"]),
        helper.make_node("Add", ["value", "nothing"], ["output0"]),
    ]
    inits = [
        numpy_helper.from_array(np.array([-1, 1, 1], np.int64), "rs"),
        numpy_helper.from_array(np.zeros((), np.float32), "zero"),
        numpy_helper.from_array(value, "value"),
    ]
    graph = helper.make_graph(
        nodes,
        "handoff",
        [helper.make_tensor_value_info("images", TensorProto.FLOAT, ["batch", 3, INPUT, INPUT])],
        [helper.make_tensor_value_info("output0", TensorProto.FLOAT, ["batch", 16, 6])],
        initializer=inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    meta = {
        "author": "Ultralytics",
        "task": "detect",
        "stride": "32",
        "batch": "1",
        "imgsz": str([INPUT, INPUT]),
        "names": str({0: "person"}),
        "args": str({"batch": 1, "half": False, "nms": False, "dynamic": True}),
        "end2end": "True",
        "description": "Ultralytics YOLOv10n model (handoff benchmark stand-in)",
    }
    for key, text in meta.items():
        entry = model.metadata_props.add()
        entry.key, entry.value = key, text
    onnx.checker.check_model(model)
    onnx.save(model, str(path))
    return path


def queue_depths(text: str) -> list[int | None]:
    """A ``--depths`` option ("2,5") as the wall's queue depths to alternate; [None]: the
    wall's own default only. An argparse ``type``: anything else is the option's error."""
    depths: list[int | None] = [int(d) for d in text.split(",") if d]
    if any(d is not None and d < 1 for d in depths):
        raise ValueError(text)
    return depths or [None]


def use_queue_depth(depth: int | None) -> None:
    """Wall processes started from now on queue ``depth`` results a tile
    (``FRAMELENS_WALL_DEPTH``, which the child inherits); None leaves it as it is."""
    from framelens.core.sessions.wall_process import DEPTH_ENV

    if depth is not None:
        os.environ[DEPTH_ENV] = str(depth)


def tiny_model(boxes: int) -> str:
    """``make_model``'s constant detector of ``boxes`` boxes, in a folder of its own: what
    the benchmarks' ``--tiny-model BOXES`` runs instead of a real detector."""
    return str(make_model(scratch_folder("fl-tiny-") / "tiny.onnx", boxes))


def save_frames(path: Path, count: int) -> Path:
    """The sample's first ``count`` frames at FRAME_SIZE, decoded once (PyAV)."""
    import av
    import cv2
    import numpy as np

    images = []
    with av.open(str(SAMPLE)) as container:
        for frame in container.decode(video=0):
            images.append(cv2.resize(frame.to_ndarray(format="bgr24"), FRAME_SIZE))
            if len(images) == count:
                break
    np.save(path, np.stack(images))
    return path


@contextlib.contextmanager
def revision_tree(rev: str) -> Iterator[Path]:
    """A folder whose ``framelens`` maps onto REV's packages as pyproject.toml's
    package-dir does (framelens = app, framelens.core = core, ...)."""
    with tempfile.TemporaryDirectory(prefix="fl-handoff-") as tmp:
        tree = Path(tmp) / "tree"
        subprocess.run(
            ["git", "-C", str(ROOT), "worktree", "add", "--detach", "-q", str(tree), rev],
            check=True,
        )
        try:
            pkg = Path(tmp) / "path" / "framelens"
            pkg.mkdir(parents=True)
            for entry in (tree / "app").iterdir():  # "framelens" = "app" (pyproject.toml)
                (pkg / entry.name).symlink_to(entry)
            for name in PACKAGES:
                if (tree / name).is_dir():
                    (pkg / name).symlink_to(tree / name)
            yield pkg.parent
        finally:
            subprocess.run(
                ["git", "-C", str(ROOT), "worktree", "remove", "--force", str(tree)], check=False
            )


def child(config: str, args: argparse.Namespace, files: dict[str, str], path: Path | None,
          profile: bool = False, tracked: bool = False) -> dict[str, Any]:  # fmt: skip
    env = dict(os.environ)
    if path is not None:
        env["PYTHONPATH"] = str(path) + os.pathsep + env.get("PYTHONPATH", "")
    cmd = [sys.executable, __file__, "--child", config, "--frames", str(args.frames),
           "--model", files["model"], "--images", files["images"]]  # fmt: skip
    if profile:
        cmd.append("--profile")
    if tracked:
        cmd.append("--track")
    if args.worker_python_us:
        cmd += ["--worker-python-us", str(args.worker_python_us)]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"child {config} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def spread(values: list[float]) -> dict[str, float]:
    return {
        "median": round(statistics.median(values), 3),
        "min": round(min(values), 3),
        "max": round(max(values), 3),
    }


def summarise(runs: list[dict[str, Any]]) -> dict[str, Any]:
    keys = ("fps", "wall_us_per_frame", "cpu_us_per_frame", "switches_per_frame")
    keys += ("decode_alone_fps", "decode_late_us", "decode_gap_us")
    out: dict[str, Any] = {k: spread([r[k] for r in runs]) for k in keys if k in runs[0]}
    out["driver"] = runs[0]["driver"]
    if runs[0].get("decode_bound_fps"):
        # the run's rate over its decoder's alone, measured in the same process just before
        out["of_decoder_alone"] = spread([r["fps"] / r["decode_bound_fps"] for r in runs])
    out["code"] = runs[0]["code"]
    out["fps_runs"] = [round(r["fps"], 1) for r in runs]
    return out


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--frames", type=int, default=600)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--baseline", metavar="REV", help="alternate with REV's code")
    parser.add_argument(
        "--configs", default=",".join(c for c in CONFIGS if c not in SOURCES),
        help=f"a list of {', '.join(CONFIGS)} (default: the one-source ones)",
    )  # fmt: skip
    parser.add_argument("--profile", action="store_true")
    parser.add_argument(
        "--boxes", type=int, default=0, help="boxes the model finds in every frame (<= 16)"
    )
    parser.add_argument(
        "--track-ab", type=int, default=0, metavar="N",
        help="also each config with and without ByteTrack, alternated N times (--boxes)",
    )  # fmt: skip
    parser.add_argument(
        "--worker-python-us", type=float, default=0.0, metavar="US",
        help="each inference worker also spends US microseconds of Python (the GIL held) "
        "per frame: the host work of a GPU pipeline's workers (launches, box decoding)",
    )  # fmt: skip
    parser.add_argument("--output")
    parser.add_argument("--track", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--model", help=argparse.SUPPRESS)
    parser.add_argument("--images", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        got = measure(args.child, args.frames, args.model, args.images, args.profile, args.track,
                      args.worker_python_us)  # fmt: skip
        print(json.dumps(got))
        return 0
    configs = args.configs.split(",")
    head = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
        capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    result: dict[str, Any] = {
        "command": "python3 benchmarks/handoff.py " + " ".join(sys.argv[1:]),
        "machine": f"{os.cpu_count()} CPU cores (shared), no GPU; load {os.getloadavg()[0]:.1f}",
        "what": "session/executor path on host pipelines, frames replayed from memory "
        f"({FRAME_SIZE[0]}x{FRAME_SIZE[1]}), a constant end2end model at {INPUT}x{INPUT}",
        "frames": args.frames,
        "runs": args.runs,
        "revision": head,
        "baseline": args.baseline,
        "boxes_per_frame": args.boxes,
        "worker_python_us_per_frame": args.worker_python_us,
        "sources": {c: SOURCES.get(c, 1) for c in configs},
    }
    with tempfile.TemporaryDirectory(prefix="fl-handoff-data-") as tmp:
        files = {
            "model": str(make_model(Path(tmp) / "handoff.onnx", args.boxes)),
            "images": str(save_frames(Path(tmp) / "frames.npy", 120)),
        }
        with contextlib.ExitStack() as stack:
            base = stack.enter_context(revision_tree(args.baseline)) if args.baseline else None
            for config in configs:
                now: list[dict[str, Any]] = []
                before: list[dict[str, Any]] = []
                for i in range(args.runs):
                    order = [("now", None), ("base", base)] if args.baseline else [("now", None)]
                    if i % 2:
                        order.reverse()
                    for who, path in order:
                        run = child(config, args, files, path)
                        (now if who == "now" else before).append(run)
                        print(f"{config} {who}: {run['fps']:.1f} fps", file=sys.stderr)
                entry: dict[str, Any] = {"now": summarise(now)}
                if before:
                    entry["baseline"] = summarise(before)
                    entry["fps_ratio_now_over_baseline"] = round(
                        entry["now"]["fps"]["median"] / entry["baseline"]["fps"]["median"], 3
                    )
                if args.profile:
                    entry["profile"] = child(config, args, files, None, profile=True)["profile"]
                if args.track_ab:  # tracking's cost in this process: on and off, alternated
                    from tracking_ab import alternate

                    seen: list[int] = []  # tracks on the last frames of a tracked run

                    def tracked_run(
                        tracked: bool, config: str = config, seen: list[int] = seen
                    ) -> float:
                        got = child(config, args, files, None, tracked=tracked)
                        if tracked:
                            seen.append(int(got["tracked"]))
                        return float(got["fps"])

                    entry["tracking"] = alternate(tracked_run, args.track_ab, "bytetrack")
                    entry["tracking"]["tracks_on_last_frames"] = seen
                result[config] = entry
    text = json.dumps(result, indent=2)
    if args.output:
        Path(args.output).write_text(text + "\n")
    print(text)
    return 0


# ---- the child: one measurement of one revision's run path ----------------------------------


TRACKED: list[tuple[int, int]] = []
"""The last run's (source, track ID) of each source's last frame (with ``--track``)."""

DECODER_LOG: dict[str, list[float]] = {"late": [], "gap": []}
"""Per read of the replayed source (the decode-ahead thread's loop): ``late``, how long
after its ``decode_ms`` the reading thread ran again (the OS's wake-up, then waiting for
the GIL); ``gap``, the time from one read's end to the next one's start (the thread's
own work per frame: the hand-off to the workers, and waits for room in its queue)."""


def replay_source(images: Any, fps: float = 30.0, decode_ms: float = 0.0) -> Any:
    """A Source over frames held in memory: each read a new Frame on a held array, after
    ``decode_ms`` without the GIL (a decoder's time), logged in DECODER_LOG."""
    from framelens.core.stages.sources.base import Source
    from framelens.core.types import Frame, SourceInfo

    class Replay(Source):
        def __init__(self) -> None:
            height, width = images.shape[1:3]
            self.info = SourceInfo(
                uri="memory", kind="file", width=width, height=height, fps=fps, frame_count=None
            )
            self._next = 0
            self._ended = 0.0

        def read(self) -> Frame | None:
            if decode_ms:
                start = time.perf_counter()
                if self._ended:
                    DECODER_LOG["gap"].append(start - self._ended)
                time.sleep(decode_ms / 1000.0)
                self._ended = time.perf_counter()
                DECODER_LOG["late"].append(self._ended - start - decode_ms / 1000.0)
            i = self._next
            self._next += 1
            return Frame(images[i % len(images)], i, i / fps)

        def seek(self, index: int) -> None:
            self._next = index

        def close(self) -> None:
            pass

    return Replay()


def measure(
    config: str, frames: int, model: str, images_path: str, profile: bool, track: bool = False,
    python_us: float = 0.0,
) -> dict[str, Any]:  # fmt: skip
    import numpy as np
    from framelens.core.models.catalog import resolve_model
    from framelens.core.pipeline import build
    from framelens.core.pipeline.settings import PipelineSettings

    batch, workers, decode_ms, engine_ms = CONFIGS[config]
    images = np.load(images_path)
    base = PipelineSettings(resolve_model(model), threads=1, batch=batch)
    settings = build.resolve(base)
    pipelines = [
        _slowed(build.host_pipeline(settings), engine_ms, python_us) for _ in range(workers)
    ]
    try:
        sources = SOURCES.get(config, 1)
        run_once = _session_driver(settings, pipelines, images, decode_ms, sources, track)
        run_once(min(frames, 100))  # warm-up: imports, ORT's first calls
        if not profile:
            return _timed(run_once, frames, decode_ms, images)
        return _profiled(run_once, frames)
    finally:
        for p in pipelines:
            p.close()


def _timed(run_once: Any, frames: int, decode_ms: float, images: Any) -> dict[str, Any]:
    import framelens.core

    alone = {}
    if decode_ms:  # the decoder alone, on this thread: its rate is the run's bound
        source = replay_source(images, decode_ms=decode_ms)
        start = time.perf_counter()
        for _ in range(min(frames, 300)):
            source.read()
        alone["decode_alone_fps"] = min(frames, 300) / (time.perf_counter() - start)
        alone["decode_alone_late_us"] = _mean_us(DECODER_LOG["late"])
        DECODER_LOG["late"].clear()
        DECODER_LOG["gap"].clear()
    done, driver, span = run_once(frames)
    if decode_ms:
        alone["decode_late_us"] = _mean_us(DECODER_LOG["late"])
        alone["decode_gap_us"] = _mean_us(DECODER_LOG["gap"])
    return {
        **alone,
        "driver": driver,
        "code": str(Path(framelens.core.__file__).resolve().parent.parent),
        "frames": done,
        "fps": done / span["wall_s"],
        "wall_us_per_frame": span["wall_s"] / done * 1e6,
        "cpu_us_per_frame": span["cpu_s"] / done * 1e6,
        "switches_per_frame": span["switches"] / done,
        "decode_bound_fps": alone.get("decode_alone_fps"),
        "tracked": len(TRACKED),  # tracks on the sources' last frames (--track)
    }


def _mean_us(values: list[float]) -> float:
    return statistics.fmean(values) * 1e6 if values else 0.0


class Span:
    """Wall time, process CPU time and voluntary context switches (a thread that blocked:
    on a lock, a condition, a queue or the GIL) over the frames' loop only."""

    def __enter__(self) -> Span:
        self._usage = resource.getrusage(resource.RUSAGE_SELF).ru_nvcsw
        self._cpu, self._wall = time.process_time(), time.perf_counter()
        return self

    def __exit__(self, *exc: object) -> None:
        self.result = {
            "wall_s": time.perf_counter() - self._wall,
            "cpu_s": time.process_time() - self._cpu,
            "switches": resource.getrusage(resource.RUSAGE_SELF).ru_nvcsw - self._usage,
        }


def _profiled(run_once: Any, frames: int) -> dict[str, Any]:
    """Every thread under a cProfile of its own, and the stack sampler beside them."""
    import cProfile
    import pstats
    import threading

    from stack_sampler import StackSampler

    profiles: dict[str, cProfile.Profile] = {}
    real_run = threading.Thread.run

    def run(self: threading.Thread) -> None:
        prof = cProfile.Profile()
        profiles[self.name] = prof
        prof.enable()
        try:
            real_run(self)
        finally:
            prof.disable()

    threading.Thread.run = run  # type: ignore[method-assign]
    main = cProfile.Profile()
    try:
        main.enable()
        done, _, _ = run_once(frames)
        main.disable()
    finally:
        threading.Thread.run = real_run  # type: ignore[method-assign]
    profiles["consumer"] = main  # opening the session is in its calls too (once a run)
    waits = ("acquire", "wait", "get", "put", "sleep", "wait_for", "join", "notify", "notify_all")
    threads: dict[str, Any] = {}
    for name, prof in profiles.items():
        kind = name.rstrip("0123456789").rstrip("-")
        row = threads.setdefault(
            kind, {"threads": 0, "python_calls_per_frame": 0.0, "condition_waits_per_frame": 0.0}
        )
        row["threads"] += 1
        merged: dict[str, list[float]] = row.setdefault("_waits", {})
        for (f, ln, fn), (_cc, nc, _tt, ct, _callers) in pstats.Stats(prof).stats.items():  # type: ignore[attr-defined]
            row["python_calls_per_frame"] += nc / done
            if f.endswith("threading.py") and fn == "wait":  # a thread blocked on another
                row["condition_waits_per_frame"] += nc / done
            if fn.split(" ")[-1].strip(">'").split(".")[-1] in waits or "lock" in fn:
                key = f"{Path(f).name}:{ln}:{fn}"
                got = merged.setdefault(key, [0.0, 0.0])
                got[0] += nc / done
                got[1] += ct / done * 1000
    for row in threads.values():
        merged = row.pop("_waits")
        row["python_calls_per_frame"] = round(row["python_calls_per_frame"], 1)
        row["condition_waits_per_frame"] = round(row["condition_waits_per_frame"], 2)
        row["waits"] = [
            {"fn": key, "calls_per_frame": round(n, 2), "ms_per_frame": round(ms, 4)}
            for key, (n, ms) in sorted(merged.items(), key=lambda kv: -kv[1][1])[:6]
        ]
    with StackSampler(0.002) as sampler:
        run_once(frames)
    return {"profile": {"frames": done, "threads": threads, "stacks": sampler.report(6)}}


def _slowed(pipeline: Any, engine_ms: float, python_us: float = 0.0) -> Any:
    """The pipeline with each batch's call ``engine_ms`` longer, without the GIL, and
    ``python_us`` per frame longer with it (a Python loop: the GIL held)."""
    if engine_ms or python_us:
        real = pipeline.infer_batch

        def infer_batch(frames: Any, times: Any) -> Any:
            if python_us:
                until = time.perf_counter() + python_us * len(frames) / 1e6
                while time.perf_counter() < until:
                    pass
            if engine_ms:
                time.sleep(engine_ms / 1000.0)
            return real(frames, times)

        pipeline.infer_batch = infer_batch
    return pipeline


def _session_driver(
    settings: Any, pipelines: list[Any], images: Any, decode_ms: float, sources: int = 1,
    track: bool = False,
) -> Any:  # fmt: skip
    """``run_once(frames) -> (frames done, driver, span)`` through the revision's run path:
    ``sources`` replayed sources read at once, each tracked by ByteTrack with ``track``
    (as ``framelens run --track`` without drawing: no trails)."""
    try:
        from framelens.core.pipeline.build import Workers
        from framelens.core.sessions.session import Session, SessionOptions
    except ImportError:  # before the session (fee4f09 and earlier): PipelineRunner
        from framelens.core.pipeline.runner import PipelineRunner, RunRange

        def run_runner(frames: int) -> tuple[int, str, dict[str, float]]:
            source = replay_source(images, decode_ms=decode_ms)
            runner = PipelineRunner(source, pipelines[0], draw=False, extra_pipelines=pipelines[1:])
            with Span() as span:  # the executor is made in run(), as the session's drive
                done = runner.run(RunRange(0, frames))
            return done, "runner", span.result

        return run_runner

    def run_session(frames: int) -> tuple[int, str, dict[str, float]]:
        options = SessionOptions(
            draw="none",
            pixels=False,
            frames=frames,
            wrap=lambda s: _replace(s, images, decode_ms),
        )
        built = Workers(pipelines, "cpu pipeline")
        stages = None
        if track:
            from framelens.core.sessions.tracks import drawn_or_not, with_tracking
            from framelens.core.stages.tracking.settings import TrackerSettings

            tracker = drawn_or_not(TrackerSettings.for_kind("bytetrack"), drawn=False)
            stages = with_tracking(None, tracker)
        session = Session(
            [str(SAMPLE)] * sources, settings, options=options, built=built, stages=stages
        )
        session.open()  # untimed, as benchmarks/h200.py: opening the file is not a hand-off
        done = 0
        last: dict[int, Any] = {}  # each source's last output (its boxes' track IDs)
        try:
            with Span() as span:
                for result in session.results():
                    done += 1
                    last[result.frame.source_id] = result.output
        finally:
            session.release_workers()
            session.close()
        ids = [(k, out.track_ids if track else ()) for k, out in last.items()]
        TRACKED[:] = sorted((k, int(i)) for k, some in ids for i in some if i > 0)
        return done, "session", span.result

    return run_session


def _replace(source: Any, images: Any, decode_ms: float) -> Any:
    source.close()  # opened by the session; its frames come from memory instead
    return replay_source(images, source.info.fps, decode_ms)


if __name__ == "__main__":
    sys.path.insert(0, str(HERE))
    sys.exit(main())
