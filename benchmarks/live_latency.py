"""Live latency of real-time playback: how far behind its decode + inference a frame is
when it reaches the screen, with late frames dropped (the product) and with every frame
queued (the old behaviour), side by side in one run.

    python3 benchmarks/live_latency.py --output benchmarks/results/live-latency-cpu-<date>.json
    python3 benchmarks/live_latency.py --device cuda:0 --video 1080p.mp4 --speed 4 ...

The player (core, no GUI) plays the video in real time at ``--speed`` (a rate the model
cannot keep up with where the point is to drop: a file at 4x stands in for a fast
camera); after a warm-up, for ``--seconds`` each shown frame's end-to-end time is taken
as the player reports it (from the frame's time, decoded or due, to the screen), and
its own work (decode + preprocess + inference + postprocess). Reported: medians and p99
of both, the frame interval, shown and dropped rates, and the lag beyond the work in
frame intervals (the target: at most 2).
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
SAMPLE = ROOT / "resources" / "samples" / "one-by-one-person-detection.mp4"


def play(video: str, settings: Any, speed: float, seconds: float, drop: bool) -> dict[str, Any]:
    from framelens.core.sessions.playback.player import Player
    from framelens.core.types import FrameResult, StageTimes

    # what is kept of each shown frame: its index and its times, never the result itself
    # (on CUDA a result's frame is a device buffer of the decoder's pool, which runs dry
    # while results are held: playback stalled after 14 frames on the H200)
    shown: list[tuple[float, int, StageTimes]] = []
    errors: list[str] = []
    first = threading.Event()

    def on_result(result: FrameResult) -> None:
        shown.append((time.perf_counter(), result.frame.index, result.times))
        first.set()

    player = Player(on_result, lambda _state: None, errors.append, drop_late=drop)
    try:
        player.open(video, settings)
        if not first.wait(120):
            raise SystemExit(f"no first frame: {errors}")
        player.set_speed(speed)
        player.play()
        time.sleep(WARM_UP_S)  # warm-up: engines, arenas, the clock's first anchor
        start_index, start = len(shown), time.perf_counter()
        index0 = shown[-1][1]
        time.sleep(seconds)
        window = shown[start_index:]
        elapsed = time.perf_counter() - start
        player.pause()
        dropped = player.state.dropped
    finally:
        player.close()
    if errors:
        raise SystemExit(f"playback failed: {errors[0]}")
    if not window:  # say why rather than fail in numpy (seen on the H200 once)
        raise SystemExit(
            f"no frame shown in {seconds} s of playback at {speed}x (drop_late={drop}): "
            f"{len(shown)} shown before, last index {index0}, state {player.state}"
        )
    times = [t for _s, _i, t in window]
    fps_source = video_rate(video)[0] * speed
    interval_ms = 1000.0 / fps_source
    passed = window[-1][1] - index0
    return {
        "drop_late": drop,
        "shown": len(times),
        "shown_fps": round(len(times) / elapsed, 1),
        "position_fps": round(passed / elapsed, 1),  # frames of the video per second
        "asked_fps": round(fps_source, 1),
        "dropped_total": dropped,
        "interval_ms": round(interval_ms, 2),
        **lag_figures(times, interval_ms),
    }


def lag_figures(times: Sequence[Any], interval_ms: float) -> dict[str, float]:
    """End to end (the frame's time to the screen) against the frame's own work (decode +
    preprocess + inference + postprocess), from shown frames' StageTimes: medians, p99,
    and how many frame intervals the screen is behind that work."""
    e2e = np.array([t.e2e for t in times])
    work = np.array(
        [np.nansum([t.decode, t.preprocess, t.inference, t.postprocess]) for t in times]
    )
    return {
        "e2e_ms_p50": round(float(np.median(e2e)), 2),
        "e2e_ms_p99": round(float(np.percentile(e2e, 99)), 2),
        "work_ms_p50": round(float(np.median(work)), 2),
        "behind_intervals_p50": round(float(np.median(e2e - work)) / interval_ms, 2),
        "behind_intervals_p99": round(float(np.percentile(e2e - work, 99)) / interval_ms, 2),
    }


WARM_UP_S = 2.0


def video_rate(video: str) -> tuple[float, int | None]:
    """The video's frame rate and frame count (None: unknown, a live source)."""
    from framelens.core.stages.sources import open_source

    source = open_source(video)
    try:
        return source.info.fps or 30.0, source.info.frame_count
    finally:
        source.close()


def check_long_enough(video: str, speed: float, seconds: float) -> None:
    """Refuse a video that would end inside the timed window: frames shown after the end
    would not come, and the rates would read low (the first H200 run at 4x ended early)."""
    fps, count = video_rate(video)
    needed = int((WARM_UP_S + seconds) * fps * speed) + 1
    if count is not None and count < needed:
        raise SystemExit(
            f"{Path(video).name} has {count} frames; {WARM_UP_S:g} s of warm-up and "
            f"{seconds:g} s timed at {speed:g}x need {needed} "
            f"(make one: python3 benchmarks/make_1080p.py OUT.mp4 --frames {needed})"
        )


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--video", default=str(SAMPLE))
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--model", default=None, help="catalogue name or path (default model)")
    parser.add_argument("--speed", type=float, default=8.0)
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--output")
    args = parser.parse_args()

    from framelens.core.models.catalog import DEFAULT_MODEL, resolve_model
    from framelens.core.pipeline.settings import PipelineSettings

    check_long_enough(args.video, args.speed, args.seconds)
    settings = PipelineSettings(resolve_model(args.model or DEFAULT_MODEL), device=args.device)
    runs = [play(args.video, settings, args.speed, args.seconds, drop) for drop in (True, False)]
    dropping, queueing = runs
    result = {
        "command": "python3 benchmarks/live_latency.py " + " ".join(sys.argv[1:]),
        "device": args.device,
        "video": Path(args.video).name,
        "model": settings.model.name,
        "speed": args.speed,
        "runs": runs,
        "e2e_p50_ratio_queueing_over_dropping": round(
            queueing["e2e_ms_p50"] / dropping["e2e_ms_p50"], 2
        ),
        "target": {"behind_intervals_p50_at_most": 2},
        "median_of": "frames shown in the timed window",
    }
    text = json.dumps(result, indent=2)
    print(text)
    if args.output:
        Path(args.output).write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
