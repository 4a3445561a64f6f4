"""What tracking costs a run: the same run with and without a tracker, alternated.

    python3 benchmarks/tracking_ab.py --frames 200 --repeats 7 \\
        --output benchmarks/results/tracking-cpu-2core-<date>.json         # the CPU row
    python3 benchmarks/h200.py --quick --track                              # one 1080p stream
    python3 benchmarks/streams.py --sources 1,16 --track                    # several sources

Each pair of runs is made in one process on warm engines, in turn (with, without;
then without, with: neither side always goes first), ``--repeats`` times each; the
report holds every run's fps, the medians, their spread ((max - min) / median) and the
ratio of the medians, against the target: tracking keeps at least 95% of the fps.
On a machine shared with other work the wall clock's fps swing with its load; the
CPU alone (this file) also records the CPU time the process spent per frame on each
side (``cpu_ms_per_frame``), which that load does not add to, and the tracker's own
milliseconds per frame timed inside a run.

Run alone (this file), it measures ``framelens run`` of the person sample on one device
(default the CPU) as the command line runs it: the detections JSON written, no video,
ByteTrack (or ``--track KIND``) on every frame. ``--sources N``: N sources in one run
(``framelens run`` of N files: one session, batches spanning sources), each a copy of
the sample's frames from ``--start`` cut into a clip first.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
TARGET = 0.95
"""Tracking on keeps at least this share of the fps without it (issue 27)."""


def spread(values: list[float]) -> float:
    """(max - min) / median: how far apart the runs of one side were."""
    return round((max(values) - min(values)) / statistics.median(values), 3)


def alternate(run: Callable[[bool], float], repeats: int, kind: str) -> dict[str, Any]:
    """``run(tracked)`` gives one run's fps; with and without tracking alternated,
    ``repeats`` times each (ABBA order), and the comparison."""
    runs: dict[bool, list[float]] = {True: [], False: []}
    for k in range(repeats):
        for tracked in (True, False) if k % 2 == 0 else (False, True):
            fps = run(tracked)
            runs[tracked].append(round(fps, 2))
            print(f"  {'with' if tracked else 'without'} {kind}: {fps:.1f} fps",
                  file=sys.stderr, flush=True)  # fmt: skip
    with_, without = statistics.median(runs[True]), statistics.median(runs[False])
    ratio = round(with_ / without, 3)
    return {
        "tracker": kind,
        "repeats": repeats,
        "fps_without": runs[False],
        "fps_with": runs[True],
        "median_without": round(without, 2),
        "median_with": round(with_, 2),
        "spread_without": spread(runs[False]),
        "spread_with": spread(runs[True]),
        "ratio_of_medians": ratio,
        "target_ratio": TARGET,
        "met": ratio >= TARGET,
    }


class TimedStages:
    """A stage factory whose stages are timed (perf_counter per call): the tracker's own
    milliseconds per frame, a figure the load of a shared machine hardly moves."""

    def __init__(self, factory: Any) -> None:
        self.factory, self.ms = factory, []

    def __call__(self, number: int) -> list[Any]:
        return self.for_source(number, None)

    def for_source(self, number: int, info: Any) -> list[Any]:
        return [self._timed(stage) for stage in self.factory.for_source(number, info)]

    def _timed(self, stage: Any) -> Any:
        ms = self.ms

        class Timed:
            def __call__(self, result: Any) -> None:
                t0 = time.perf_counter()
                stage(result)
                ms.append((time.perf_counter() - t0) * 1000)

            def reset(self) -> None:
                stage.reset()

        return Timed()


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", default="cpu")
    parser.add_argument(
        "--video", default=str(HERE.parent / "resources/samples/one-by-one-person-detection.mp4")
    )
    parser.add_argument("--start", type=int, default=230, help="first frame (people in view)")
    parser.add_argument("--frames", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--threads", type=int, default=None, help="ONNX Runtime threads")
    parser.add_argument("--track", default="bytetrack", choices=("bytetrack", "ocsort", "botsort"))
    parser.add_argument("--sources", type=int, default=1, help="sources in one run")
    parser.add_argument("--note", default="")
    parser.add_argument("--output")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as clips:
        if args.sources > 1:  # the frames from --start as a clip each source plays
            args.video = cut(args.video, args.start, args.frames, Path(clips) / "clip.mp4")
            args.start = 0
        return measure(args)


def cut(video: str, start: int, frames: int, path: Path) -> str:
    """Frames ``start`` to ``start + frames`` of ``video`` as an H.264 clip (PyAV)."""
    import av

    with av.open(video) as src, av.open(str(path), "w") as out:
        stream = src.streams.video[0]
        enc = out.add_stream("libx264", rate=stream.average_rate or 30)
        enc.width, enc.height, enc.pix_fmt = stream.width, stream.height, "yuv420p"
        for k, frame in enumerate(src.decode(stream)):
            if k >= start + frames:
                break
            if k >= start:
                frame.pts = None
                out.mux(enc.encode(frame))
        out.mux(enc.encode())
    return str(path)


def measure(args: argparse.Namespace) -> int:
    from framelens.core.models.catalog import DEFAULT_MODEL, resolve_model
    from framelens.core.pipeline.build import default_batch
    from framelens.core.pipeline.settings import PipelineSettings
    from framelens.core.sessions.runs import run_many, run_to_outputs
    from framelens.core.stages.tracking.settings import TrackerSettings

    settings = PipelineSettings(resolve_model(DEFAULT_MODEL), device=args.device,
                                threads=args.threads)  # fmt: skip
    settings = default_batch(settings, args.video)
    tracker = TrackerSettings.for_kind(args.track)
    tracks: list[int | None] = []

    cpu_ms: dict[bool, list[float]] = {True: [], False: []}

    def run(tracked: bool) -> float:
        cpu0 = time.process_time()
        with tempfile.TemporaryDirectory() as tmp:
            if args.sources > 1:
                summary = run_many(
                    [args.video] * args.sources, settings, tmp, videos=False,
                    frames=args.frames, tracker=tracker if tracked else None,
                )  # fmt: skip
            else:
                summary = run_to_outputs(
                    args.video, settings, detections=str(Path(tmp) / "d.json"),
                    start=args.start, frames=args.frames, tracker=tracker if tracked else None,
                )  # fmt: skip
        # the CPU time this process spent per frame (every thread): what other work on a
        # shared machine takes from the wall clock, it does not add here
        cpu_ms[tracked].append(round((time.process_time() - cpu0) * 1000 / summary.frames, 3))
        if tracked:
            tracks.append(sum(s.tracks or 0 for s in summary.sources))
        return summary.fps

    run(True)  # warm-up: the model loaded, the caches filled
    run(False)
    cpu_ms[True].clear()
    cpu_ms[False].clear()
    from framelens.core.sessions.tracks import TrackStages, drawn_or_not

    timed = TimedStages(TrackStages(drawn_or_not(tracker, False)))  # as the runs: no video
    with tempfile.TemporaryDirectory() as tmp:
        e2e = run_to_outputs(
            args.video, settings, detections=str(Path(tmp) / "d.json"), start=args.start,
            frames=args.frames, stages=timed,
        ).fps  # fmt: skip
    tracker_ms = statistics.median(timed.ms)
    began = time.time()
    ab = alternate(run, args.repeats, args.track)
    result = {
        "command": "python3 benchmarks/tracking_ab.py " + " ".join(sys.argv[1:]),
        "what": "framelens run of the person sample (detections JSON, no video), with and "
        "without tracking, alternated in one process",
        "device": args.device,
        "cpus": os.cpu_count(),
        "load_average": [round(v, 2) for v in os.getloadavg()],
        "video": Path(args.video).name,
        "sources": args.sources,
        "start": args.start,
        "frames": args.frames,
        "tracks": tracks[-1],
        "minutes": round((time.time() - began) / 60, 1),
        "note": args.note,
        "tracker_ms_per_frame": {
            "median": round(tracker_ms, 3),
            "p99": round(sorted(timed.ms)[int(0.99 * (len(timed.ms) - 1))], 3),
            "share_of_a_frame_at_the_fps_without": round(
                tracker_ms * ab["median_without"] / 1000, 4
            ),
            "run_fps": round(e2e, 2),
        },
        "cpu_ms_per_frame": {
            "without": cpu_ms[False],
            "with": cpu_ms[True],
            "median_without": round(statistics.median(cpu_ms[False]), 3),
            "median_with": round(statistics.median(cpu_ms[True]), 3),
            "fps_ratio_if_cpu_bound": round(
                statistics.median(cpu_ms[False]) / statistics.median(cpu_ms[True]), 3
            ),
        },
        "tracking": ab,
    }
    text = json.dumps(result, indent=2)
    print(text)
    if args.output:
        Path(args.output).write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
