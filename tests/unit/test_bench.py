"""`framelens bench` measures both loops on the same frames and reports them as JSON."""

from __future__ import annotations

import json
from pathlib import Path

from framelens.cli import main


def test_bench_writes_fps_of_both_loops_and_stage_medians(tmp_path: Path) -> None:
    out = tmp_path / "bench.json"
    assert main(["bench", "--frames", "12", "--output", str(out)]) == 0
    data = json.loads(out.read_text())
    assert data["naive_fps"] > 0 and data["pipeline_fps"] > 0
    # fps are rounded to 0.01 in the JSON, the ratio is computed before rounding
    assert abs(data["speedup"] - data["pipeline_fps"] / data["naive_fps"]) < 0.005
    for key in ("naive_stage_ms", "pipeline_stage_ms"):
        stages = data[key]
        assert {"decode", "preprocess", "inference", "postprocess", "draw", "encode", "e2e"} <= set(
            stages
        )
        assert stages["e2e"] >= stages["inference"] > 0
