"""CPU latency and detection agreement of each precision: FP32, FP16, INT8 (full calibration).

    .venv/bin/python benchmarks/precision_cpu.py [--latency-frames 200] [--threads 1]
        [--output benchmarks/results/precision-cpu-<date>.json]

The INT8 variant is built with the default CalibrationSettings (50 frames spread over
the video, agreement measured at conf 0.3) into a fresh temporary cache, so the
calibration time is measured too. Then, on the bundled person sample:

* agreement: FP16 and INT8 against FP32 on every frame of the video, conf 0.3
  (framelens.core.stages.tasks.detect.agreement: per frame and class, greedy by score, IoU >= 0.5);
* latency: the engine's infer() alone (ONNX Runtime CPU, ``--threads`` intra-op
  threads) on the same preprocessed frames for every mode, after a warm-up of 20;
  one run, the modes interleaved frame by frame so that load from other processes
  on a shared machine hits them alike; medians, and ratios to FP32.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
from framelens.cli import sample_video
from framelens.core import __version__
from framelens.core.geometry import Letterbox
from framelens.core.models.catalog import DEFAULT_MODEL, resolve_model
from framelens.core.precision import PRECISIONS, CalibrationSettings, prepare_variant
from framelens.core.stages.engines.onnxruntime_cpu import OnnxRuntimeEngine
from framelens.core.stages.preprocess.cpu import Preprocessor
from framelens.core.stages.sources import open_source
from framelens.core.stages.tasks.detect.agreement import AgreementTotals
from framelens.core.stages.tasks.detect.decoders import make_decoder
from framelens.core.types import Detections
from scratch import scratch_folder

WARMUP = 20
CONF = 0.3


def cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", default=str(sample_video()))
    parser.add_argument("--latency-frames", type=int, default=200)
    parser.add_argument("--threads", type=int, default=1, help="ONNX Runtime intra-op threads")
    parser.add_argument("--cache-dir", default=None, help="default: a fresh temporary one")
    parser.add_argument("--output", default=None)
    parser.add_argument("--note", default="", help="free text stored with the result")
    args = parser.parse_args(argv)
    spec = resolve_model(DEFAULT_MODEL)
    date = datetime.date.today().isoformat()
    output = Path(args.output or f"benchmarks/results/precision-cpu-{date}.json")
    cache = Path(args.cache_dir or scratch_folder("framelens-precision-bench-"))

    variants: dict[str, Any] = {}
    paths: dict[str, Path] = {}
    for precision in PRECISIONS:
        t0 = time.perf_counter()
        v = prepare_variant(
            spec, precision, source=args.source, settings=CalibrationSettings(), cache_dir=cache
        )
        paths[precision] = v.path
        variants[precision] = {
            **v.summary(),
            "prepare_s": round(time.perf_counter() - t0, 2),
        }
        if v.report is not None:
            print(v.report.table(), file=sys.stderr)
            variants[precision]["report"] = v.report.to_dict()

    tensors: list[npt.NDArray[np.float32]] = []
    geometries: list[Letterbox] = []
    with open_source(args.source) as source:
        pre: Preprocessor | None = None
        for frame in source:
            pre = pre or Preprocessor(spec, frame.width, frame.height)
            tensors.append(pre(frame.image).copy())
            geometries.append(pre.geometry)

    decode = make_decoder(spec)
    engines = {
        p: OnnxRuntimeEngine(paths[p], threads=args.threads, spinning=False) for p in PRECISIONS
    }
    dets: dict[str, list[Detections]] = {p: [] for p in PRECISIONS}
    for tensor, geometry in zip(tensors, geometries, strict=True):
        for p, engine in engines.items():
            dets[p].append(decode(engine.infer(tensor), [geometry], CONF, 0.45, None)[0])
    agreement: dict[str, Any] = {}
    for p in PRECISIONS[1:]:
        totals = AgreementTotals()
        for ref, test in zip(dets["fp32"], dets[p], strict=True):
            totals.add_frame(ref, test)
        agreement[p] = totals.as_dict()

    step = max(1, len(tensors) // args.latency_frames)
    picked = tensors[::step][: args.latency_frames]
    for engine in engines.values():
        for t in picked[:WARMUP]:
            engine.infer(t)
    times: dict[str, list[float]] = {p: [] for p in PRECISIONS}
    order = list(PRECISIONS)
    for i, tensor in enumerate(picked):
        for p in order[i % 3 :] + order[: i % 3]:  # rotate who goes first
            t0 = time.perf_counter()
            engines[p].infer(tensor)
            times[p].append((time.perf_counter() - t0) * 1000)
    for engine in engines.values():
        engine.close()
    base = statistics.median(times["fp32"])
    latency = {
        p: {
            "median_ms": round(statistics.median(ts), 2),
            "p90_ms": round(float(np.percentile(ts, 90)), 2),
            "mean_ms": round(statistics.fmean(ts), 2),
            "ratio_to_fp32": round(statistics.median(ts) / base, 3),
        }
        for p, ts in times.items()
    }
    result = {
        "benchmark": "precision-cpu",
        "date": date,
        "command": " ".join([Path(sys.executable).name, *sys.argv]),
        "framelens": __version__,
        "onnxruntime": __import__("onnxruntime").__version__,
        "machine": {
            "cpu": cpu_name(),
            "logical_cpus": os.cpu_count(),
            "python": platform.python_version(),
        },
        "note": args.note,
        "model": spec.name,
        "source": args.source,
        "frames": len(tensors),
        "conf": CONF,
        "threads": args.threads,
        "latency_frames": len(picked),
        "latency": latency,
        "agreement_vs_fp32": agreement,
        "variants": variants,
    }
    text = json.dumps(result, indent=2)
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(text + "\n", encoding="utf-8")
    summary = {
        "latency_median_ms": {p: latency[p]["median_ms"] for p in PRECISIONS},
        "ratio_to_fp32": {p: latency[p]["ratio_to_fp32"] for p in PRECISIONS},
        "f1": {p: round(agreement[p]["f1"], 4) for p in agreement},
        "int8_mac_fraction": variants["int8"].get("int8_mac_fraction"),
        "kept_float": variants["int8"].get("kept_float"),
        "output": str(output),
    }
    print(json.dumps(summary, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
