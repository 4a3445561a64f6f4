"""Many sources on the H200: NVDEC per source, batches across sources on the GPU
pipeline, two device slots on one GPU, against the CPU's single-source runs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from framelens.core.gpu.context import GpuContext
from framelens.core.models.catalog import DEFAULT_MODEL, resolve_model
from framelens.core.pipeline.settings import PipelineSettings
from framelens.core.sessions.runs import run_many, run_to_outputs
from framelens.core.stages.tasks.detect.agreement import AgreementTotals
from framelens.core.types import Detections

pytestmark = pytest.mark.gpu

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "resources" / "samples" / "one-by-one-person-detection.mp4"
FRAMES = 120


def as_detections(path: Path) -> list[Detections]:
    import numpy as np

    out = []
    for frame in json.loads(path.read_text())["frames"]:
        dets = frame["detections"]
        out.append(
            Detections(
                np.array([d["box"] for d in dets], dtype=np.float32).reshape(-1, 4),
                np.array([d["score"] for d in dets], dtype=np.float32),
                np.array([d["class_id"] for d in dets], dtype=np.int32),
            )
        )
    return out


@pytest.mark.parametrize(
    ("slots", "processes"),
    [(["cuda:0"], False), (["cuda:0", "cuda:0"], False), (["cuda:0", "cuda:0"], True)],
)
def test_four_sources_on_the_gpu_detect_what_single_cpu_runs_detect(
    gpu_ctx: GpuContext, tmp_path: Path, slots: list[str], processes: bool
) -> None:
    """One batcher, two device slots in threads, and two in processes of their own
    (``--processes``: each its own CUDA context, NVDEC sessions and engine)."""
    copies = []
    for i in range(4):
        copies.append(tmp_path / f"cam{i}.mp4")
        copies[-1].write_bytes(SAMPLE.read_bytes())
    settings = PipelineSettings(resolve_model(DEFAULT_MODEL), device="cuda:0")
    summary = run_many(
        [str(c) for c in copies], settings, str(tmp_path / "out"), devices=slots,
        videos=False, frames=FRAMES, progress=False, processes=processes,
    )  # fmt: skip
    print(summary.fps, summary.mean_batch, summary.path, summary.device)
    assert summary.path.startswith("gpu pipeline") and summary.mean_batch > 1
    cpu = tmp_path / "cpu.json"
    run_to_outputs(str(SAMPLE), PipelineSettings(resolve_model(DEFAULT_MODEL)),
                   detections=str(cpu), frames=FRAMES, progress=False)  # fmt: skip
    want = as_detections(cpu)
    for i in range(4):
        got = as_detections(tmp_path / "out" / f"cam{i}.json")
        assert len(got) == FRAMES
        totals = AgreementTotals()
        for r, t in zip(want, got, strict=True):
            totals.add_frame(r, t)
        assert totals.f1 >= 0.99, (i, totals.as_dict())


def test_a_run_without_video_export_detects_what_an_exporting_run_detects(
    gpu_ctx: GpuContext, tmp_path: Path
) -> None:
    """Without export the GPU pipeline makes no display frames (only the model input):
    the detections must not change, and the exporting run still writes every frame."""
    import av

    copies = []
    for i in range(2):
        copies.append(tmp_path / f"cam{i}.mp4")
        copies[-1].write_bytes(SAMPLE.read_bytes())
    settings = PipelineSettings(resolve_model(DEFAULT_MODEL), device="cuda:0")
    specs = [str(c) for c in copies]
    run_many(specs, settings, str(tmp_path / "plain"), videos=False, frames=FRAMES,
             progress=False)  # fmt: skip
    run_many(specs, settings, str(tmp_path / "video"), videos=True, frames=FRAMES,
             progress=False)  # fmt: skip
    for i in range(2):
        plain = as_detections(tmp_path / "plain" / f"cam{i}.json")
        video = as_detections(tmp_path / "video" / f"cam{i}.json")
        totals = AgreementTotals()
        for r, t in zip(video, plain, strict=True):
            totals.add_frame(r, t)
        assert len(plain) == FRAMES and totals.f1 >= 0.999, (i, totals.as_dict())
        assert not (tmp_path / "plain" / f"cam{i}.mp4").exists()
        with av.open(str(tmp_path / "video" / f"cam{i}.mp4")) as container:
            assert sum(1 for _ in container.decode(video=0)) == FRAMES


def test_eight_sources_on_one_gpu_spread_over_two_processes_by_default(
    gpu_ctx: GpuContext, tmp_path: Path
) -> None:
    """``framelens run`` with 8 sources on cuda:0 and no --processes: a process per 4
    sources (the default the H200's streams benchmark chose), said on stderr; each
    source's detections those of the CPU's single run."""
    import os
    import subprocess
    import sys

    if len(os.sched_getaffinity(0)) < 4:
        pytest.skip("the default spreads over at most half the cores: 4 needed for 2")
    copies = []
    for i in range(8):
        copies.append(tmp_path / f"cam{i}.mp4")
        copies[-1].write_bytes(SAMPLE.read_bytes())
    done = subprocess.run(
        [sys.executable, "-m", "framelens", "run", *map(str, copies), "--export-dir",
         str(tmp_path / "out"), "--device", "cuda:0", "--frames", "60", "--quiet"],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert "8 sources on cuda:0: 2 processes" in done.stderr
    summary = json.loads(done.stdout)
    assert [d["sources"] for d in summary["devices"]] == [
        [f"cam{i}" for i in range(0, 8, 2)],
        [f"cam{i}" for i in range(1, 8, 2)],
    ]
    cpu = tmp_path / "cpu.json"
    run_to_outputs(str(SAMPLE), PipelineSettings(resolve_model(DEFAULT_MODEL)),
                   detections=str(cpu), frames=60, progress=False)  # fmt: skip
    want = as_detections(cpu)
    for i in range(8):
        totals = AgreementTotals()
        for r, t in zip(want, as_detections(tmp_path / "out" / f"cam{i}.json"), strict=True):
            totals.add_frame(r, t)
        assert totals.f1 >= 0.99, (i, totals.as_dict())


@pytest.mark.parametrize("processes", [False, True])
def test_a_gpu_failing_mid_run_hands_its_sources_to_the_cpu_from_where_each_stopped(
    gpu_ctx: GpuContext, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, processes: bool
) -> None:
    """Two device slots on the H200, each failing at frame 40 (an injected fault, as an
    out-of-memory would): with no other GPU in the run, both groups' sources go on on
    the CPU from the frame each had reached; every output complete, none twice."""
    import av
    from framelens.core.pipeline.gpu_pipeline import FAULT_ENV

    monkeypatch.setenv(FAULT_ENV, "40")  # spawned group processes inherit it
    copies = []
    for i in range(4):
        copies.append(tmp_path / f"cam{i}.mp4")
        copies[-1].write_bytes(SAMPLE.read_bytes())
    messages: list[str] = []
    settings = PipelineSettings(resolve_model(DEFAULT_MODEL), device="cuda:0")
    frames = 80
    summary = run_many(
        [str(c) for c in copies], settings, str(tmp_path / "out"), devices=["cuda:0"] * 2,
        frames=frames, progress=False, processes=processes, on_message=messages.append,
    )  # fmt: skip
    moves = [m for m in messages if m.startswith("cuda:0 failed (frame 40: injected fault")]
    assert len(moves) == 2 and all("2 sources going on on the CPU" in m for m in moves)
    assert [list(d.moved_to) for d in summary.devices] == [["cpu"], ["cpu"]]
    cpu = tmp_path / "cpu.json"
    run_to_outputs(str(SAMPLE), PipelineSettings(resolve_model(DEFAULT_MODEL)),
                   detections=str(cpu), frames=frames, progress=False)  # fmt: skip
    want = as_detections(cpu)
    for i in range(4):
        path = tmp_path / "out" / f"cam{i}.json"
        indices = [f["index"] for f in json.loads(path.read_text())["frames"]]
        assert indices == list(range(frames))
        totals = AgreementTotals()
        for r, t in zip(want, as_detections(path), strict=True):
            totals.add_frame(r, t)
        assert totals.f1 >= 0.99, (i, totals.as_dict())
        with av.open(str(tmp_path / "out" / f"cam{i}.mp4")) as c:
            assert sum(1 for _ in c.decode(video=0)) == frames
