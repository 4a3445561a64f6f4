"""Lock-step comparison on the real model and the real sample: agreement, difference
view, report files, cancel, and the report directory's all-or-nothing rule.

Frames 540.. of the sample hold a person (score ~0.85) and objects scored 0.25-0.4,
so a pane at conf 0.5 keeps the person and drops the rest.
"""

from __future__ import annotations

import csv
import json
import math
import threading
from pathlib import Path

import cv2
import numpy as np
import pytest
from framelens.cli import sample_video
from framelens.core.errors import Cancelled, ConfigError, ExportError
from framelens.core.models.catalog import resolve_model
from framelens.core.pipeline.compare.panes import CompareRunner, CompareStep, PaneSpec, check_panes
from framelens.core.pipeline.compare.records import VARIANT_KEYS, CompareLog
from framelens.core.pipeline.compare.report import REPORT_FILES, write_csv
from framelens.core.pipeline.compare.variants import parse_precisions
from framelens.core.pipeline.settings import PipelineSettings
from framelens.core.sessions.compare.lockstep import LockstepFeed
from framelens.core.sessions.compare.to_report import compare_to_report
from framelens.core.stages.sources import open_source
from framelens.core.stages.tasks import DetectParams
from framelens.core.stages.tasks.detect.diff import detection_diff, draw_difference

SAMPLE = str(sample_video())
START = 540
MODEL = resolve_model("yolox-nano")
LOW = PipelineSettings(model=MODEL, params=DetectParams(conf=0.25), threads=1)
HIGH = PipelineSettings(model=MODEL, params=DetectParams(conf=0.5), threads=1)


def steps(panes: list[PaneSpec], frames: int, **runner_args: object) -> list[CompareStep]:
    out: list[CompareStep] = []
    with (
        open_source(SAMPLE) as source,
        CompareRunner(panes, **runner_args) as runner,  # type: ignore[arg-type]
    ):
        source.seek(START)
        feed = LockstepFeed(source, runner)  # the executor, as the product drives panes
        try:
            while len(out) < frames:
                step = feed.next(30.0)
                assert isinstance(step, CompareStep), step  # neither a timeout nor the end
                out.append(step)
        finally:
            feed.close()
    assert len(out) == frames
    return out


def no_leftovers(folder: Path) -> bool:
    return not [p for p in folder.iterdir() if p.name.startswith(".")]


def test_fp32_against_fp32_agrees_fully() -> None:
    result = steps([PaneSpec("a", LOW), PaneSpec("b", LOW)], 4)
    last = result[-1].panes[1]
    assert last.running.frames == 4 and last.running.tp > 0
    assert last.running.f1 == 1.0 and last.running.mean_iou == pytest.approx(1.0)
    assert last.running.mean_score_diff == 0.0
    for i, step in enumerate(result):
        for pane in step.panes:
            t = pane.times
            assert t.inference > 0 and t.e2e >= t.decode + t.inference
            assert pane.image is None  # detectors output no image: PSNR/SSIM n/a
        assert step.frame.index == START + i
        assert step.panes[0].result.frame is step.panes[1].result.frame  # decoded once
        assert step.difference(1).empty


def test_higher_threshold_pane_misses_but_never_invents() -> None:
    result = steps([PaneSpec("conf 0.25", LOW), PaneSpec("conf 0.5", HIGH)], 4)
    totals = result[-1].panes[1].running
    assert totals.precision == 1.0 and totals.recall < 1.0 and totals.fn > 0
    # earlier snapshots are not changed by later frames
    assert result[0].panes[1].running.frames == 1
    step = next(s for s in result if not s.difference(1).empty)
    diff = step.difference(1)
    assert len(diff.test_only) == 0 and len(diff.ref_only) > 0
    assert (diff.ref_only.scores < 0.5).all()
    image = step.frame.image
    drawn = draw_difference(image, diff, MODEL.labels, ("conf 0.25", "conf 0.5"))
    assert drawn is not image and not np.array_equal(drawn, image)
    same = detection_diff(step.panes[0].result.output, step.panes[0].result.output)
    assert same.empty


def test_image_agreement_when_panes_output_images(tmp_path: Path) -> None:
    # The annotated frames stand in for a model's output image to exercise the plumbing.
    panes = [PaneSpec("a", LOW), PaneSpec("b", LOW), PaneSpec("c", HIGH)]
    result = steps(panes, 2, draw=True, image_of=lambda r: r.annotated)
    for step in result:
        same, other = step.panes[1].image, step.panes[2].image
        assert same is not None and other is not None
        assert same.psnr_db == math.inf and same.ssim == pytest.approx(1.0)
        assert math.isfinite(other.psnr_db) and other.ssim < 1.0
    log = CompareLog(panes, 0)
    for step in result:
        log(step)
    summary = log.summary()
    assert summary["variants"]["b"]["psnr_db"] is None  # infinite: identical images
    assert summary["variants"]["b"]["ssim"] == 1.0
    assert summary["variants"]["c"]["psnr_db"] > 0 and summary["variants"]["c"]["ssim"] < 1
    write_csv(tmp_path / "frames.csv", log)
    rows = list(csv.DictReader((tmp_path / "frames.csv").open()))
    assert [r["b_psnr_db"] for r in rows] == ["inf", "inf"] and float(rows[0]["c_ssim"]) < 1


def test_report_files(tmp_path: Path) -> None:
    report = tmp_path / "report"
    frames = 5
    summary = compare_to_report(
        SAMPLE,
        [PaneSpec("fp32", LOW), PaneSpec("strict", HIGH)],
        report,
        reference="fp32",
        start=START,
        frames=frames,
        progress=False,
    )
    assert summary["report"] == str(report)
    assert {p.name for p in report.iterdir()} <= REPORT_FILES
    data = json.loads((report / "summary.json").read_text())
    assert data["reference"] == "fp32" and list(data["variants"]) == ["fp32", "strict"]
    for variant in data["variants"].values():
        assert set(VARIANT_KEYS) <= set(variant)
        assert variant["latency_ms_median"] > 0 and variant["fps"] > 0
        assert variant["e2e_ms_median"] >= variant["latency_ms_median"]
        assert variant["psnr_db"] is None and variant["ssim"] is None
    ref, strict = data["variants"]["fp32"], data["variants"]["strict"]
    assert (ref["f1"], ref["precision"], ref["recall"], ref["mean_iou"]) == (1, 1, 1, 1)
    assert strict["precision"] == 1 and strict["recall"] < 1
    rows = list(csv.DictReader((report / "frames.csv").open()))
    assert len(rows) == frames
    assert [int(r["index"]) for r in rows] == list(range(START, START + frames))
    assert {"strict_detections", "strict_tp", "strict_fp", "strict_fn"} <= set(rows[0])
    assert {"strict_inference_ms", "strict_e2e_ms", "pts"} <= set(rows[0])
    assert all(int(r["strict_fp"]) == 0 for r in rows)
    pngs = sorted(report.glob("*.png"))
    assert {p.name for p in pngs} == {"latency.png", "agreement.png", "fps.png"}
    for png in pngs:
        image = cv2.imread(str(png))
        assert image is not None and image.shape[0] > 100 and image.shape[1] > 100
    page = (report / "index.html").read_text()
    assert all(f'src="{p.name}"' in page for p in pngs) and "strict" in page
    assert no_leftovers(tmp_path)


def test_report_plots_count_frames_as_the_window_does(tmp_path: Path) -> None:
    """The window's frame counter, the compare view's plots and the report's plots all
    count 1 to N: frames 541-543 of the video (indices 540-542) are plotted at 541-543."""
    from framelens.core.pipeline.compare.report import _per_frame_plot

    panes = [PaneSpec("fp32", LOW), PaneSpec("strict", HIGH)]
    log = CompareLog(panes, 0)
    for step in steps(panes, 3):
        log(step)
    fig = _per_frame_plot(tmp_path / "latency.png", log, [0, 1], "inference_ms", "ms", "t")
    for line in fig.axes[0].lines:
        assert list(line.get_xdata()) == [START + 1, START + 2, START + 3]
    assert "index + 1" in fig.axes[0].get_xlabel()
    ticks = [t for t in fig.axes[0].get_xticks() if START + 1 <= t <= START + 3]
    assert ticks and all(float(t).is_integer() for t in ticks)  # no frame 541.25


def test_cancel_leaves_no_report(tmp_path: Path) -> None:
    cancel = threading.Event()
    calls: list[tuple[int, int]] = []

    def on_progress(done: int, total: int) -> None:
        calls.append((done, total))
        cancel.set()

    with pytest.raises(Cancelled):
        compare_to_report(
            SAMPLE,
            [PaneSpec("a", LOW), PaneSpec("b", HIGH)],
            tmp_path / "report",
            start=START,
            frames=50,
            progress=False,
            on_progress=on_progress,
            cancel=cancel,
        )
    assert calls and calls[0] == (1, 50)
    assert list(tmp_path.iterdir()) == []


def test_report_never_replaces_a_foreign_directory(tmp_path: Path) -> None:
    mine = tmp_path / "notes"
    mine.mkdir()
    (mine / "notes.txt").write_text("keep me")
    panes = [PaneSpec("a", LOW), PaneSpec("b", HIGH)]
    with pytest.raises(ExportError, match=r"notes\.txt"):
        compare_to_report(SAMPLE, panes, mine, start=START, frames=1, progress=False)
    assert (mine / "notes.txt").read_text() == "keep me" and no_leftovers(tmp_path)
    # ...but a previous report is replaced as a whole
    report = tmp_path / "report"
    compare_to_report(SAMPLE, panes, report, start=START, frames=2, progress=False)
    compare_to_report(SAMPLE, panes, report, start=START, frames=1, progress=False)
    assert len(list(csv.DictReader((report / "frames.csv").open()))) == 1
    assert no_leftovers(tmp_path)


def test_pane_and_precision_validation() -> None:
    one = [PaneSpec("a", LOW)]
    with pytest.raises(ConfigError, match="2 to 4"):
        check_panes(one)
    with pytest.raises(ConfigError, match="2 to 4"):
        check_panes([PaneSpec(str(i), LOW) for i in range(5)])
    with pytest.raises(ConfigError, match="repeated"):
        check_panes([PaneSpec("a", LOW), PaneSpec("a", HIGH)])
    with pytest.raises(ConfigError, match="'c' is not one of a, b"):
        check_panes([PaneSpec("a", LOW), PaneSpec("b", HIGH)], "c")
    assert check_panes([PaneSpec("a", LOW), PaneSpec("b", HIGH)], "b") == 1
    assert PaneSpec.of(LOW).label == "yolox-nano fp32 onnxruntime"
    # an upscaler's agreement is an image's: one line that says where it is measured
    upscaler = PipelineSettings(model=resolve_model("espcn-x2"), threads=1)
    with pytest.raises(ConfigError, match=r"^x2: super-resolution .* --task superres"):
        CompareRunner([PaneSpec("fp32", LOW), PaneSpec("x2", upscaler)])

    assert parse_precisions("fp32,fp16,int8") == (["fp32", "fp16", "int8"], "fp32")
    assert parse_precisions("fp16, FP32", "fp32") == (["fp16", "fp32"], "fp32")
    for text, ref, message in [
        ("fp32,fp8", None, "unknown precision fp8"),
        ("fp32,fp32", None, "more than once"),
        ("fp32", None, "2 to 4"),
        ("fp32,fp16", "int8", "not among"),
    ]:
        with pytest.raises(ConfigError, match=message):
            parse_precisions(text, ref)
