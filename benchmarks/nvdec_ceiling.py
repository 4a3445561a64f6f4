"""The hardware's decoding limit: bare decoders spread over several processes.

    python3 benchmarks/nvdec_ceiling.py VIDEO --configs 16x4,16x8,32x8,64x8 --repeats 5

One configuration ``SxP`` is S streams of VIDEO over P spawned processes (S/P decoder
threads each, one CUDA context per process): each thread opens a bare PyNvVideoCodec
decoder (its own demuxer, NVDEC into device memory in the context FrameLens uses, no
copies, no inference: the decoder core/stages/sources/nvdec_readers.py drives, on a CUDA
stream of its own as there), all wait
at a barrier, then each decodes ``frames`` frames. The rate is every frame over the span
from the first start to the last end (process start, CUDA context and decoder opening
left out: they are in ``wall_s``). Several processes, unlike threads of one, are not held
back by one Python lock: this is NVDEC's limit, not a GIL's. On the CPU the same is run
with PyAV decoders (``kind`` says which), so the machinery is testable without a GPU.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import statistics
import sys
import threading
import time
from typing import Any

__all__ = ["measure", "parse_configs"]

_OPEN_S = 120.0  # a process must have opened its decoders by then
_RUN_S = 300.0


def parse_configs(text: str) -> list[tuple[int, int]]:
    """``"16x4,32x8"`` -> [(16, 4), (32, 8)]: streams over processes."""
    out = []
    for part in text.split(","):
        streams, _, procs = part.strip().partition("x")
        s, p = int(streams), int(procs or 1)
        if s < 1 or p < 1 or p > s:
            raise SystemExit(f"--configs: {part!r} is not STREAMSxPROCESSES with 1 <= P <= S")
        out.append((s, p))
    return out


def _open_reader(video: str, device: str) -> Any:
    """A function that decodes the next frame (returns how many came: 0 at the end)."""
    if device.startswith("cuda"):
        import pycuda.driver as cuda
        import PyNvVideoCodec as nvc
        from framelens.core.gpu.context import get_context

        ctx = get_context(device)
        with ctx.active():
            # A stream of its own, as the product's reader has: on the legacy NULL stream
            # (cudastream=0) every decoder's output copy waits for all other work of the
            # process's context, which held the ceiling under the product's own rate
            # (1741 fps against 2384 through `framelens run`, H100, 2026-12-05).
            stream = cuda.Stream()
            demuxer = nvc.CreateDemuxer(filename=video)
            decoder = nvc.CreateDecoder(
                gpuid=ctx.index,
                codec=demuxer.GetNvCodecId(),
                cudacontext=ctx.handle,
                cudastream=int(stream.handle),
                usedevicememory=True,
            )
        packets = iter(demuxer)

        def step() -> int:
            _ = stream  # kept alive as long as its decoder
            with ctx.active():
                for packet in packets:
                    got = len(decoder.Decode(packet))
                    if got:
                        return got
                return 0

        return step
    from framelens.core.stages.sources import open_source

    source = open_source(video)

    def step_cpu() -> int:
        return 0 if source.read() is None else 1

    return step_cpu


def _process(video: str, device: str, threads: int, frames: int, ready: Any, go: Any,
             results: Any) -> None:  # fmt: skip
    """One process: ``threads`` decoders opened, ready told, then all decode at ``go``."""
    opened = threading.Barrier(threads + 1)
    start = threading.Event()
    spans: list[tuple[float, float, int]] = []
    errors: list[str] = []
    if device.startswith("cuda"):  # CUDA and the module set up once, before the threads
        try:
            import PyNvVideoCodec  # noqa: F401
            from framelens.core.gpu.context import get_context

            get_context(device)
        except Exception as exc:
            ready.put(("error", f"{type(exc).__name__}: {exc}".splitlines()[0]))
            return

    def run() -> None:
        try:
            step = _open_reader(video, device)
        except Exception as exc:
            errors.append(f"{type(exc).__name__}: {exc}".splitlines()[0])
            opened.abort()
            return
        try:
            opened.wait()
        except threading.BrokenBarrierError:
            return
        start.wait()
        began, count = time.monotonic(), 0
        try:
            while count < frames and (got := step()):
                count += got
        except Exception as exc:
            errors.append(f"{type(exc).__name__}: {exc}".splitlines()[0])
        spans.append((began, time.monotonic(), min(count, frames)))

    workers = [threading.Thread(target=run, daemon=True) for _ in range(threads)]
    for t in workers:
        t.start()
    try:
        opened.wait(timeout=_OPEN_S)
    except threading.BrokenBarrierError:
        ready.put(("error", errors[0] if errors else "decoders did not open in time"))
        return
    ready.put(("ready", ""))
    go.wait(_OPEN_S)
    start.set()
    for t in workers:
        t.join(_RUN_S)
    results.put({"spans": spans, "errors": errors})


def measure(video: str, streams: int, processes: int, frames: int, device: str) -> dict[str, Any]:
    """One run of ``streams`` decoders over ``processes`` processes: frames per second."""
    mp = multiprocessing.get_context("spawn")
    ready, results, go = mp.Queue(), mp.Queue(), mp.Event()
    per = [streams // processes + (1 if k < streams % processes else 0) for k in range(processes)]
    began = time.monotonic()
    procs = [
        mp.Process(target=_process, args=(video, device, n, frames, ready, go, results),
                   daemon=True)
        for n in per
    ]  # fmt: skip
    for p in procs:
        p.start()
    try:
        for _ in procs:
            state, why = ready.get(timeout=_OPEN_S)
            if state != "ready":
                raise RuntimeError(why)
        go.set()
        parts = [results.get(timeout=_RUN_S) for _ in procs]
    finally:
        go.set()
        for p in procs:
            p.join(10)
            if p.is_alive():
                p.kill()
    spans = [s for part in parts for s in part["spans"]]
    errors = [e for part in parts for e in part["errors"]]
    if errors:
        raise RuntimeError(errors[0])
    total = sum(n for _, _, n in spans)
    span = max(e for _, e, _ in spans) - min(s for s, _, _ in spans)
    return {
        "fps": round(total / span, 1) if span > 0 else 0.0,
        "frames": total,
        "span_s": round(span, 3),
        "wall_s": round(time.monotonic() - began, 2),
    }


def kind(device: str) -> str:
    return "bare PyNvVideoCodec (NVDEC)" if device.startswith("cuda") else "PyAV on the CPU"


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("video")
    parser.add_argument("--device", default="cuda:0")
    parser.add_argument("--configs", default="16x4,16x8,32x8,64x8")
    parser.add_argument("--frames", type=int, default=150, help="frames each stream decodes")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    out = []
    for streams, procs in parse_configs(args.configs):
        runs = [measure(args.video, streams, procs, args.frames, args.device)
                for _ in range(args.repeats)]  # fmt: skip
        fps = [r["fps"] for r in runs]
        out.append({"streams": streams, "processes": procs, "fps": statistics.median(fps),
                    "fps_runs": fps, "kind": kind(args.device)})  # fmt: skip
        print(json.dumps(out[-1]), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
