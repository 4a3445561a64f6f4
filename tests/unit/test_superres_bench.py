"""benchmarks/superres.py, small, on the CPU: the keys issue 29's checks read, the runs
behind each median, the FLOPs from the graph's convolutions, progress lines, and a JSON
that holds what was measured at every moment (a cut run keeps its results)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from onnx_factory import heavy_superres_model

ROOT = Path(__file__).resolve().parents[2]
WIDTH = 16  # a small ESRGAN-like model: quick on the CPU


def command(model: Path, out: Path, video: Path, *extra: str) -> list[str]:
    return [
        sys.executable, str(ROOT / "benchmarks" / "superres.py"), "--device", "cpu",
        "--esrgan", str(model), "--size", "48x32", "--precisions", "fp32,int8",
        "--end-to-end", "int8", "--runs", "5", "--calls", "2", "--e2e-frames", "4",
        "--e2e-frames-slow", "4", "--video", str(video), "--output", str(out), *extra,
    ]  # fmt: skip


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return heavy_superres_model(tmp_path_factory.mktemp("m") / "sr.onnx", width=WIDTH)


def test_the_benchmark_writes_each_precisions_median_call_and_end_to_end_rate(
    model: Path, tmp_path: Path
) -> None:
    out = tmp_path / "h200-superres.json"
    done = subprocess.run(
        command(model, out, tmp_path / "v.mp4"), capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr + done.stdout
    data = json.loads(out.read_text())
    assert set(data["esrgan_x2_540p_ms"]) == {"fp32", "int8"}
    for precision in ("fp32", "int8"):
        calls = data["esrgan_calls"][precision]
        assert data["esrgan_x2_540p_ms"][precision] == calls["median_ms"] > 0
        assert len(calls["runs_ms"]) == 5 and calls["calls"] == 10
        spread = max(calls["runs_ms"]) - min(calls["runs_ms"])  # of the rounded medians
        assert calls["spread_ms"] == pytest.approx(spread, abs=0.011)
        assert calls["p99_ms"] >= calls["p50_ms"] > 0
        assert calls["first_call_ms"] > 0  # the first call's own time, beside the set-up
        plain = data["esrgan_plain_ort"][precision]
        ratio = data["esrgan_product_over_plain"][precision]
        assert ratio == pytest.approx(calls["median_ms"] / plain["median_ms"], abs=0.002)
    e2e = data["esrgan_end_to_end"]["int8"]
    assert data["esrgan_x2_540p_to_1080p_fps"]["int8"] == e2e["fps"] > 0
    assert len(e2e["fps_runs"]) == 5 and len(e2e["wall_s_runs"]) == 5
    assert e2e["plan"]["model"]["value"].endswith("int8")
    # 2 x output pixels x input channels x 3 x 3 per convolution: 3 -> 16 -> 16 -> 16 -> 12
    macs_per_pixel = 9 * (3 * WIDTH + 2 * WIDTH * WIDTH + WIDTH * 12)
    assert data["esrgan"]["flops_per_call"] == 2 * 48 * 32 * macs_per_pixel
    assert data["whole_call_s"] > 0 and "errors" not in data
    lines = [line for line in done.stdout.splitlines() if line.startswith("[")]
    assert any("fp32: the product's engine, one call: median_ms" in line for line in lines)
    assert any("int8: framelens run, 4 frames x 5" in line for line in lines)
    assert not list(tmp_path.glob(".*partial"))  # written through a temporary, renamed


def test_a_run_cut_after_its_first_measurement_keeps_it(model: Path, tmp_path: Path) -> None:
    out = tmp_path / "cut.json"
    proc = subprocess.Popen(
        command(model, out, tmp_path / "v.mp4", "--calls", "40"),
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and proc.poll() is None:
            if out.is_file() and "fp32" in json.loads(out.read_text()).get("esrgan_calls", {}):
                break  # every read parses: the file is only ever replaced whole
            time.sleep(0.05)
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.wait(timeout=30)
    data = json.loads(out.read_text())
    assert data["esrgan_calls"]["fp32"]["median_ms"] > 0
