"""A run's plan (core/pipeline/plan.py): every choice made once, each with a reason a
user can read, shown by ``framelens run -v`` and kept in the run's JSON summary."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import NoReturn

import cv2
import numpy as np
import pytest
from frame_exact_media import FFPROBE, ffprobe_count, jittered
from framelens.core.models.catalog import DEFAULT_MODEL, DEFAULT_SUPERRES_MODEL, resolve_model
from framelens.core.pipeline import build, decoding
from framelens.core.pipeline.plan import Plan
from framelens.core.pipeline.settings import PipelineSettings
from framelens.core.sessions.opening import run_length
from framelens.core.sessions.runs import run_to_outputs
from framelens.core.sessions.session import Session, SessionOptions
from framelens.core.stages.tasks.superres.tiling import SHORT_RUN_FRAMES
from media_factory import encode_frames
from onnx_factory import heavy_superres_model

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = str(ROOT / "resources" / "samples" / "one-by-one-person-detection.mp4")


@pytest.fixture(scope="module")
def model_settings() -> PipelineSettings:
    return PipelineSettings(resolve_model(DEFAULT_MODEL))


def test_run_v_prints_the_plan_before_the_run_and_the_summary_keeps_it(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "framelens", "run", SAMPLE, "--frames", "3", "--quiet", "-v",
         "--device", "cpu", "--detections", str(tmp_path / "d.json")],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    lines = [line for line in done.stderr.splitlines() if line.startswith("framelens: plan: ")]
    kinds = [line.removeprefix("framelens: plan: ").split(":")[0] for line in lines]
    assert kinds == ["model", "backend", "path", "workers", "batch", f"decoder of {SAMPLE}"]
    assert "path: cpu pipeline (device is cpu)" in lines[2]
    assert done.stderr.index("plan: model") < done.stderr.index("wrote")  # before the run ended
    plan = json.loads(done.stdout)["plan"]
    assert plan["path"] == {"value": "cpu pipeline", "why": "device is cpu"}
    assert plan["decoders"] == [
        {"source": SAMPLE, "value": "cpu", "why": "PyAV decodes: host pipelines take host frames"}
    ]


def test_the_plan_keeps_what_was_asked_and_says_why_of_each_worker_count(
    model_settings: PipelineSettings,
) -> None:
    per_core = build.plan(model_settings, [SAMPLE])
    assert per_core.asked is model_settings  # the settings stay what the user asked for
    assert per_core.worker_count >= 1 and "per core" in per_core.workers.why
    assert per_core.worker_settings is not None and per_core.worker_settings.threads == 1
    threaded = build.plan(PipelineSettings(model_settings.model, threads=2), [SAMPLE])
    assert threaded.worker_count == 1 and threaded.workers.why == "--threads 2: one worker"
    asked = build.plan(model_settings, [SAMPLE], count=3)
    assert (asked.worker_count, asked.workers.why) == (3, "asked for")


@pytest.mark.skipif(
    len(os.sched_getaffinity(0)) < 2 or shutil.which("taskset") is None,
    reason="needs taskset and two cores to pin to one",
)
def test_a_run_pinned_to_one_core_plans_one_cpu_worker(tmp_path: Path) -> None:
    """Workers per core count the cores the run may use (taskset, a container's CPU set):
    before, the machine's count put two single-threaded workers on one pinned core."""
    pinned = subprocess.run(
        ["taskset", "-c", str(min(os.sched_getaffinity(0))), sys.executable, "-m", "framelens",
         "run", SAMPLE, "--frames", "2", "--quiet", "--device", "cpu",
         "--detections", str(tmp_path / "d.json")],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert pinned.returncode == 0, pinned.stderr
    workers = json.loads(pinned.stdout)["plan"]["workers"]
    assert workers == {"value": "1", "why": "one single-threaded worker per core, 1 core"}


def test_one_source_runs_with_the_workers_asked_for(tmp_path: Path) -> None:
    """``framelens run SOURCE --workers N``: before, one source ran with the plan's count
    whatever was asked (the option was read for several sources only), and ``--workers 0``
    passed unseen."""
    out = subprocess.run(
        [sys.executable, "-m", "framelens", "run", SAMPLE, "--frames", "4", "--workers", "1",
         "--quiet", "--detections", str(tmp_path / "d.json")],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    workers = json.loads(out.stdout)["plan"]["workers"]
    assert (workers["value"], workers["why"]) == ("1", "asked for")
    bad = subprocess.run(
        [sys.executable, "-m", "framelens", "run", SAMPLE, "--frames", "4", "--workers", "0",
         "--quiet", "--detections", str(tmp_path / "e.json")],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert bad.returncode == 2 and "Traceback" not in bad.stderr
    assert bad.stderr.strip().splitlines() == ["framelens: error: --workers must be at least 1"]
    assert not (tmp_path / "e.json").exists()


def test_a_heavy_super_resolution_models_short_run_gets_one_gpu_worker_a_long_one_two(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On a GPU, ESRGAN and its kind run a short run's frames with one worker: a second
    worker's first call (cuDNN building its convolutions) slows the first for seconds,
    and two were slower in every run measured, up to 1000 frames (H100: 0.62 of the time
    at 40 frames, 0.95 at 1000). A longer run, workers kept beyond one run (the player,
    the wall, archives: no length) and light models keep two. The run's length is only
    asked for where it can change the count: not with workers asked for, not on the CPU,
    not for a light model (a file's length costs a probe of the file).
    (The GPU itself stands in: this machine has none, and the plan builds nothing.)"""
    monkeypatch.setattr(build, "gpu_unavailable", lambda settings: None)
    heavy = PipelineSettings(resolve_model(str(heavy_superres_model(tmp_path / "sr.onnx"))),
                             device="cuda:0")  # fmt: skip
    asked_length: list[int | None] = []

    def length(frames: int | None) -> Callable[[], int | None]:
        return lambda: asked_length.append(frames) or frames

    for frames in (40, SHORT_RUN_FRAMES):
        one = build.plan(heavy, [SAMPLE], run_frames=length(frames))
        assert (one.worker_count, one.workers.value) == (1, "1")
        assert f"model's run of {frames} frames ends sooner with one worker" in one.workers.why
        assert one.workers.why.endswith("--workers 2 for two")  # what to do otherwise
    for frames in (SHORT_RUN_FRAMES + 1, None):
        two = build.plan(heavy, [SAMPLE], run_frames=length(frames))
        assert two.worker_count == 2 and two.workers.why.startswith("two CUDA streams")
    kept = build.plan(heavy, [SAMPLE])  # the player's, the wall's: no length to ask
    assert kept.worker_count == 2 and kept.workers.why.startswith("two CUDA streams")
    assert asked_length == [40, SHORT_RUN_FRAMES, SHORT_RUN_FRAMES + 1, None]
    asked = build.plan(heavy, [SAMPLE], count=2, run_frames=length(40))
    assert (asked.worker_count, asked.workers.why) == (2, "asked for")
    for light in (resolve_model(DEFAULT_SUPERRES_MODEL), resolve_model(DEFAULT_MODEL)):
        light_run = PipelineSettings(light, device="cuda:0")
        two = build.plan(light_run, [SAMPLE], run_frames=length(40))
        assert two.worker_count == 2 and two.workers.why.startswith("two CUDA streams")
    on_cpu = build.plan(replace(heavy, device="cpu", threads=2), [SAMPLE], run_frames=length(40))
    assert on_cpu.workers.why == "--threads 2: one worker"  # the rule is the GPU's
    assert asked_length == [40, SHORT_RUN_FRAMES, SHORT_RUN_FRAMES + 1, None]


@pytest.mark.skipif(FFPROBE is None, reason="needs ffprobe, the oracle")
def test_a_runs_length_is_known_before_it_opens_as_ffmpeg_counts_the_frames(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What the plan is told of a run's length (opening.run_length): a file's frames as
    FFmpeg decodes them, variable-rate footage included, cut by the run's range; a
    camera's, a stream's or a folder's only from ``--frames``, also where a file in the
    working folder has a camera's name."""
    vfr = jittered(tmp_path / "vfr.mp4").path
    sample, uneven = ffprobe_count(Path(SAMPLE)), ffprobe_count(vfr)
    assert run_length([SAMPLE]) == sample and run_length([str(vfr)]) == uneven
    assert run_length([SAMPLE], start=100) == sample - 100
    assert run_length([SAMPLE], start=100, frames=40) == 40
    assert run_length([SAMPLE], start=sample - 5, frames=40) == 5  # the file ends first
    assert run_length([SAMPLE, str(vfr)], frames=50) == 50 + min(50, uneven)
    shutil.copy(vfr, tmp_path / "0")
    monkeypatch.chdir(tmp_path)  # "0" is camera 0 to open_source, whatever is here
    for live in ("0", "rtsp://127.0.0.1:9/x", str(tmp_path)):
        assert run_length([live]) is None and run_length([live], frames=40) == 40
    assert run_length([SAMPLE, "0"]) is None  # one length unknown: the run's too


def test_a_source_is_planned_as_what_it_opens_a_camera_even_where_a_file_has_its_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``framelens run 0`` opens camera 0 even beside a video file called ``0``: its plan
    says the host reads a camera, not NVDEC a file (the file is ``./0``); a still image of
    any kind the image folders take is never handed to NVDEC."""
    shutil.copy(SAMPLE, tmp_path / "0")
    still = tmp_path / "still.bmp"
    assert cv2.imwrite(str(still), np.zeros((16, 16, 3), np.uint8))
    monkeypatch.chdir(tmp_path)
    assert (
        decoding.decodes_on_device("./0") and decoding.decoder_choice("./0", True).value == "nvdec"
    )
    assert not decoding.decodes_on_device("0")
    assert decoding.decoder_choice("0", True) == decoding.decoder_choice("/dev/video0", True)
    assert "camera" in decoding.decoder_choice("0", True).why
    assert "reads the camera" in decoding.decoder_choice("0", False).why
    assert not decoding.decodes_on_device(str(still))
    assert decoding.decoder_choice(str(still), True).value == "cpu"
    assert "still image" in decoding.decoder_choice(str(still), True).why
    superscript = tmp_path / "\u00b2"  # a digit to str.isdigit, none to int(): a file
    shutil.copy(SAMPLE, superscript)
    assert decoding.decoder_choice(superscript.name, True).value == "nvdec"


def test_a_one_source_run_plans_its_workers_for_the_frames_it_will_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``framelens run`` through a heavy model on a GPU: a short range of a long file
    plans one worker, the whole file two, its last 40 frames one again: the run's range
    reaches the plan before any worker is built. (The GPU stands in: the plan is made and
    told, then the run stops where it would build its workers.)"""
    monkeypatch.setattr(build, "gpu_unavailable", lambda settings: None)

    class Built(Exception):
        pass

    def no_workers(*args: object, **kwargs: object) -> NoReturn:
        raise Built

    monkeypatch.setattr(build, "workers_for", no_workers)
    heavy = PipelineSettings(resolve_model(str(heavy_superres_model(tmp_path / "sr.onnx"))),
                             device="cuda:0")  # fmt: skip
    count = ffprobe_count(Path(SAMPLE)) if FFPROBE is not None else 1394
    plans: list[Plan] = []
    for start, frames in ((0, 40), (0, None), (count - 40, None)):
        with pytest.raises(Built):
            run_to_outputs(SAMPLE, heavy, frames=frames, start=start, on_plan=plans.append)
    assert [p.worker_count for p in plans] == [1, 2, 1]
    assert all("run of 40 frames" in p.workers.why for p in (plans[0], plans[2]))


def test_tensorrt_where_it_cannot_run_is_onnx_runtime_with_the_reason(
    model_settings: PipelineSettings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As on the H200, where TensorRT-RTX builds engines but refuses to run them."""
    why = "TensorRT-RTX does not run compute capability 9.0"
    monkeypatch.setattr(build, "tensorrt_reason", lambda device: why)
    asked = PipelineSettings(model_settings.model, device="cuda:0", backend="tensorrt")
    plan = build.plan(asked, [SAMPLE])
    assert plan.asked.backend == "tensorrt" and plan.settings.backend == "onnxruntime"
    assert (plan.backend.value, plan.backend.why) == ("onnxruntime", f"TensorRT not used ({why})")
    # no usable GPU here: the path says why the GPU pipeline is not used
    assert plan.path.value == "host pipeline, cuda inference"
    assert plan.path.why.startswith("GPU pipeline not used (")


def test_on_the_gpu_pipeline_a_file_as_stored_goes_to_nvdec_and_a_turned_one_to_the_host(
    model_settings: PipelineSettings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The decoder of each source, chosen by what the GPU pipeline can take: NVDEC hands
    a phone's portrait video on its side, so that one is decoded on the host (the GPU
    itself stands in: this machine has none, and the plan builds nothing)."""
    picture = np.full((64, 96, 3), 90, np.uint8)
    upright = encode_frames(tmp_path / "upright.mp4", [picture] * 3)
    turned = encode_frames(tmp_path / "phone.mp4", [picture] * 3, turns=1)
    monkeypatch.setattr(build, "gpu_unavailable", lambda settings: None)
    plan = build.plan(
        PipelineSettings(model_settings.model, device="cuda:0"),
        [str(upright), str(turned), "rtsp://camera.local/stream"],
    )
    assert plan.path.value == "gpu pipeline"
    decoders = {source: (c.value, c.why) for source, c in plan.decoders}
    assert decoders[str(upright)][0] == "nvdec"
    assert decoders[str(turned)] == (
        "cpu",
        "turned 90 degrees for display: the host makes the picture shown",
    )
    assert decoders["rtsp://camera.local/stream"][0] == "cpu"


def test_several_sources_say_why_the_batch_grew(
    model_settings: PipelineSettings, tmp_path: Path
) -> None:
    plans = []
    specs = [SAMPLE] * 4
    session = Session(specs, model_settings, options=SessionOptions(frames=1, draw="none"),
                      on_plan=plans.append)  # fmt: skip
    with session:
        assert sum(1 for _ in session.results()) == 4
    assert len(plans) == 1 and plans[0] is session.plan
    assert plans[0].batch.value == "8"
    assert plans[0].batch.why.startswith("one slot per source of 4, at least 8, at most 32")
    assert [source for source, _ in plans[0].decoders] == specs


def test_a_tasks_default_model_is_said_to_be_its_default_not_the_model_as_given() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "framelens", "run", SAMPLE, "--task", "superres", "--frames", "2",
         "--quiet", "-v", "--device", "cpu"],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "framelens: plan: model: espcn-x2 fp32 (the superres task's default model" in (
        done.stderr
    ), done.stderr
    assert "the model as given" not in done.stderr
    named = build.plan(PipelineSettings(resolve_model("fsrcnn-x2")), [SAMPLE])
    assert named.graph.why == "the model as given"  # a model the user named


def test_an_image_folder_is_said_to_be_read_by_the_image_folder_reader(tmp_path: Path) -> None:
    import cv2

    folder = tmp_path / "stills"
    folder.mkdir()
    for index in range(2):
        cv2.imwrite(str(folder / f"img{index}.png"), np.full((64, 96, 3), 90 + index, np.uint8))
    done = subprocess.run(
        [sys.executable, "-m", "framelens", "run", str(folder), "--frames", "2", "--quiet", "-v",
         "--device", "cpu"],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    (decoder,) = json.loads(done.stdout)["plan"]["decoders"]
    assert decoder["why"].startswith("the image-folder reader loads each image"), decoder
    assert "PyAV" not in done.stderr
    assert "PyAV decodes" in decoding.decoder_choice(SAMPLE, False).why  # a video file still is


def _two_sources_on_two_slots(tmp_path: Path, *extra: str) -> tuple[list[str], str, dict]:
    import shutil

    sources = [str(shutil.copy(SAMPLE, tmp_path / f"{name}.mp4")) for name in ("a", "b")]
    done = subprocess.run(
        [sys.executable, "-m", "framelens", "run", *sources, "--export-dir", str(tmp_path / "D"),
         "--device", "cpu,cpu", "--frames", "2", "--quiet", "-v", *extra],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return sources, done.stderr, json.loads(done.stdout)


def _plan_blocks(stderr: str) -> dict[str, list[str]]:
    """The -v lines by whose plan they say they are, in their order."""
    blocks: dict[str, list[str]] = {}
    for line in stderr.splitlines():
        if line.startswith("framelens: plan of "):
            slot, _, choice = line.removeprefix("framelens: plan of ").partition("): ")
            blocks.setdefault(slot + ")", []).append(choice)
    return blocks


def test_each_device_slots_plan_says_whose_it_is_and_the_summary_keeps_each(
    tmp_path: Path,
) -> None:
    (a, b), stderr, summary = _two_sources_on_two_slots(tmp_path)
    blocks = _plan_blocks(stderr)
    # the slots plan on threads of their own, so their lines come in either order; each
    # line says whose it is
    assert sorted(blocks) == ["device 0 (cpu)", "device 1 (cpu)"], stderr
    assert blocks["device 0 (cpu)"][-1].startswith(f"decoder of {a}: cpu")
    assert blocks["device 1 (cpu)"][-1].startswith(f"decoder of {b}: cpu")
    assert "framelens: plan: " not in stderr  # no line without its device
    first, second = summary["devices"]
    assert [d["source"] for d in first["plan"]["decoders"]] == [a]
    assert [d["source"] for d in second["plan"]["decoders"]] == [b]
    top = summary["plan"]  # the first's choices, as before, with every source's decoder
    assert top["path"] == first["plan"]["path"]
    assert [d["source"] for d in top["decoders"]] == [a, b]
    assert "devices[i].plan" in top["per_device"]


def test_device_slots_in_processes_print_the_plans_their_processes_report(
    tmp_path: Path,
) -> None:
    (a, b), stderr, summary = _two_sources_on_two_slots(tmp_path, "--processes", "2")
    blocks = _plan_blocks(stderr)
    assert sorted(blocks) == ["device 0 (cpu)", "device 1 (cpu)"], stderr
    assert blocks["device 0 (cpu)"][-1].startswith(f"decoder of {a}: cpu")
    assert blocks["device 1 (cpu)"][-1].startswith(f"decoder of {b}: cpu")
    for k, device in enumerate(summary["devices"]):  # what it printed is what it ran with
        assert blocks[f"device {k} (cpu)"][0] == "model: {value} ({why})".format(
            **device["plan"]["model"]
        )
    assert stderr.index("plan of device") < stderr.index("wrote")


def test_nvdecs_buffers_are_counted_for_the_workers_the_plan_gives() -> None:
    """NVDEC decodes into a fixed pool; every worker holds a batch and two more wait
    beside them. Counted for two workers always, before: ``--workers 4`` at batch 4 held
    4 x 4 frames in batches alone, more than the 21 buffers two workers were given, and
    the decoder waited for a buffer no worker would give back in time."""
    for workers, batch in ((1, 1), (2, 1), (2, 4), (4, 4), (8, 8)):
        pool = decoding.decode_pool(workers, batch)
        assert pool >= decoding.DECODE_BUFFERS
        assert pool >= 4 + (workers + 2) * batch + 1  # the queue, the batches, one read
    assert decoding.decode_pool(4, 4) > decoding.decode_pool(2, 4)
