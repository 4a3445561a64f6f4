"""The wall's own process against a consumer of a given paint rate, without a window:
how many results reach a paint when the window paints N times a second.

    .venv/bin/python benchmarks/wall_handoff.py --rates 25,32,40,48 --runs 5 \
        --output benchmarks/results/wall-handoff-cpu-2core-<date>.json

The real WallProcess (core/sessions/wall_process.py: the child process, its publisher
and the hold rule, pictures through shared memory) plays ``--sources`` clips cut from
the bundled sample (320x180 at 30 fps, each in real time, ByteTrack on every tile) with
a constant detector (handoff.py's: inference costs ~nothing, so the child's own Python
and the hand-off are what is measured). The consumer does what WallCanvas does with
each picture, without GL: keeps the newest, gives an older one back unseen for it
(``SharedWallFrame.after``), and every 1/rate s "paints" the one it holds (its renewed
tiles count as shown) and gives it back. Per run, over ``--seconds`` after a warm-up:
``made_per_s`` (the child's results, from its states: every 0.5 s), ``shown_per_s``,
``dropped_by_core`` (results core dropped for a consumer behind, each tile's queue
full), ``replaced_in_handoff`` (results drawn over in pictures given back unseen) and
``pictures_per_s`` (pictures handed over, each a trip through the pipe the window's
thread pays for). ``--late MS,EVERY`` makes every EVERY-th paint MS late; ``--depths``
runs each rate at several depths of the child's queue per tile.
Medians and spreads of the runs per rate; the JSON is written after every run.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import threading
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from handoff import queue_depths, tiny_model, use_queue_depth  # noqa: E402
from host_monitor import machine  # noqa: E402
from scratch import scratch_folder  # noqa: E402
from streams import save_json  # noqa: E402
from wall_screen import make_clips  # noqa: E402

KEYS = ("made_per_s", "shown_per_s", "dropped_by_core", "replaced_in_handoff", "pictures_per_s")


class Consumer:
    """A window's part of the hand-off, painting ``rate`` times a second."""

    def __init__(self, rate: float, late_s: float = 0.0, late_every: int = 0) -> None:
        self.rate = rate
        self._late_s, self._late_every = late_s, late_every
        self.wall: Any = None
        self.shown = 0
        self.replaced = 0
        self.pictures = 0  # pictures the child handed over (each a trip through the pipe)
        self._pending: Any = None
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._paint, name="consumer", daemon=True)

    def on_picture(self, frame: Any) -> None:
        with self._lock:
            self.pictures += 1
            older = self._pending
            if older is not None:  # never painted: the newer one carries its tiles on
                self.wall.release(older.buffer, unseen_for=frame.version)
                frame, lost = frame.after(older)
                self.replaced += lost
            self._pending = frame

    def start(self) -> None:
        self._thread.start()

    def _paint(self) -> None:
        paints = 0
        while not self._stop.wait(1.0 / self.rate):
            paints += 1
            if self._late_every and paints % self._late_every == 0:
                time.sleep(self._late_s)  # a paint late: the GUI thread busy elsewhere
            with self._lock:
                frame, self._pending = self._pending, None
                if frame is not None:
                    self.shown += frame.shown
            if frame is not None:
                self.wall.release(frame.buffer)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()


def late_paints(text: str) -> tuple[float, int]:
    """``--late MS,EVERY`` (an argparse ``type``: anything else is the option's error)."""
    ms, every = text.split(",")
    if float(ms) < 0 or int(every) < 0:
        raise ValueError(text)
    return float(ms), int(every)


def one_run(
    specs: list[str], model: str, rate: float, seconds: float, warmup_s: float,
    late: tuple[float, int] = (0.0, 0),
) -> dict[str, Any]:  # fmt: skip
    from framelens.core.api import PipelineSettings, WallProcess, resolve_model
    from framelens.core.sessions.tracks import TrackStages
    from framelens.core.stages.tracking.settings import TrackerSettings

    consumer = Consumer(rate, *late)
    states: list[Any] = []
    errors: list[str] = []
    wall = WallProcess(
        consumer.on_picture, states.append, errors.append, size=(1280, 720),
        stages=TrackStages(TrackerSettings()), transport="host",
    )  # fmt: skip
    consumer.wall = wall
    wall.open(specs, PipelineSettings(resolve_model(model)))
    wall.play()
    consumer.start()
    try:
        deadline = time.monotonic() + 120
        while not (states and len(states[-1].tiles) == len(specs)
                   and all(t.frames > 0 for t in states[-1].tiles)):  # fmt: skip
            if errors or time.monotonic() > deadline:
                raise SystemExit(f"the wall did not play: {errors or 'no result in 120 s'}")
            time.sleep(0.05)
        time.sleep(warmup_s)
        first = (time.perf_counter(), states[-1], consumer.shown, consumer.replaced,
                 consumer.pictures)  # fmt: skip
        time.sleep(seconds)
        last = (time.perf_counter(), states[-1], consumer.shown, consumer.replaced,
                consumer.pictures)  # fmt: skip
    finally:
        consumer.stop()
        wall.close()
    span = last[0] - first[0]
    made = sum(t.frames for t in last[1].tiles) - sum(t.frames for t in first[1].tiles)
    dropped = sum(t.dropped for t in last[1].tiles) - sum(t.dropped for t in first[1].tiles)
    return {
        "seconds": round(span, 2),
        "made_per_s": round(made / span, 1),
        "shown_per_s": round((last[2] - first[2]) / span, 1),
        "dropped_by_core": dropped,
        "replaced_in_handoff": last[3] - first[3],
        "pictures_per_s": round((last[4] - first[4]) / span, 1),
    }


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rates", default="25,32,40,48", help="the consumer's paints a second")
    parser.add_argument("--sources", type=int, default=16)
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--warmup", type=float, default=3.0)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--boxes", type=int, default=3, help="the constant detector's boxes")
    parser.add_argument(
        "--late", default="0,0", metavar="MS,EVERY", type=late_paints,
        help="every EVERY-th paint comes MS late (a GUI thread busy elsewhere, as the "
        "real window's input latency p99 of 40-80 ms on an H100 says it is); 0,0 none",
    )  # fmt: skip
    parser.add_argument(
        "--depths", default="", type=queue_depths,
        help="results the wall's process queues a tile (FRAMELENS_WALL_DEPTH), e.g. 2,5,8: "
        "each round runs every rate at every depth; the rows are named 'RATE depth N'",
    )  # fmt: skip
    parser.add_argument("--output")
    args = parser.parse_args()

    folder = scratch_folder("framelens-wall-handoff-")
    specs = make_clips(folder, args.sources, (320, 180), 30, args.warmup + args.seconds + 30)
    model = tiny_model(args.boxes)
    rates = [float(r) for r in args.rates.split(",")]
    late_ms, late_every = args.late
    late = (late_ms / 1000.0, late_every)
    result: dict[str, Any] = {
        "command": "python benchmarks/wall_handoff.py " + " ".join(sys.argv[1:]),
        "machine": machine(),
        "sources": args.sources,
        "source": "320x180 at 30 fps, real time, ByteTrack",
        "model": f"constant, {args.boxes} boxes",
        "late_paints": {"ms": late_ms, "every": late_every},
        "rates": {},
    }
    depths: list[int | None] = args.depths
    for n in range(args.runs):  # rates and depths in turn, round after round
        for rate, depth in [(r, d) for r in rates for d in depths]:
            use_queue_depth(depth)
            run = one_run(specs, model, rate, args.seconds, args.warmup, late)
            name = f"{rate:g}" if depth is None else f"{rate:g} depth {depth}"
            print(f"run {n + 1}, {name}: {run}", flush=True)
            row = result["rates"].setdefault(name, {"runs": []})
            row["runs"].append(run)
            for key in KEYS:
                values = [float(r[key]) for r in row["runs"]]
                row[key] = round(statistics.median(values), 1)
                row[f"{key}_min_max"] = [min(values), max(values)]
            save_json(args.output, result)  # after every run: a cut call keeps its runs
    return 0


if __name__ == "__main__":
    sys.exit(main())
