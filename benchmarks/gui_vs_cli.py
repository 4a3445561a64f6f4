"""GUI in as-fast-as-possible mode against the CLI pipeline, same frames, one process.

Run under a display (Xvfb is fine):
    xvfb-run -s "-screen 0 1600x1000x24" .venv/bin/python benchmarks/gui_vs_cli.py \
        --frames 300 --output benchmarks/results/gui-vs-cli-cpu-<date>.json
Both sides: the bundled sample from frame 0, the default model, no export. The GUI
fps counts results shown by the main window after a warm-up of 20 frames.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

from framelens.cli import sample_video
from framelens.core.models.catalog import DEFAULT_MODEL, resolve_model
from framelens.core.pipeline.settings import PipelineSettings
from framelens.core.sessions.runs import run_to_outputs
from scratch import scratch_folder

WARMUP = 20


def gui_fps(source: str, frames: int) -> float:
    from framelens.gui.app import apply_theme
    from framelens.gui.common.settings import Settings
    from framelens.gui.player.main_window import MainWindow
    from PySide6.QtCore import QSettings
    from PySide6.QtWidgets import QApplication

    app = QApplication.instance() or QApplication(sys.argv[:1])
    apply_theme(app)  # type: ignore[arg-type]
    ini = scratch_folder("framelens-bench-") / "settings.ini"
    win = MainWindow(settings=Settings(QSettings(str(ini), QSettings.Format.IniFormat)))
    win.resize(1360, 860)
    win.show()
    win.transport.realtime_button.setChecked(False)
    win.open_source(source)
    t_warm = None
    deadline = time.monotonic() + 300
    while win.results_shown < WARMUP + frames and time.monotonic() < deadline:
        app.processEvents()
        if t_warm is None and win.results_shown >= WARMUP:
            t_warm = time.perf_counter()
        time.sleep(0.001)
    measured = win.results_shown - WARMUP
    fps = measured / (time.perf_counter() - (t_warm or time.perf_counter()))
    win.close()
    return fps


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--frames", type=int, default=300)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--output")
    args = parser.parse_args()
    source = str(sample_video())
    settings = PipelineSettings(model=resolve_model(DEFAULT_MODEL))
    run_to_outputs(source, settings, frames=WARMUP, progress=False)  # warm-up
    cli_runs: list[float] = []
    gui_runs: list[float] = []
    workers = 0
    for _ in range(args.repeats):  # alternated, so a busy moment hits both sides
        cli = run_to_outputs(source, settings, frames=args.frames, progress=False)
        cli_runs.append(cli.fps)
        workers = cli.inference_workers
        gui_runs.append(round(gui_fps(source, args.frames), 2))
    cli_fps, gui = statistics.median(cli_runs), statistics.median(gui_runs)
    result = {
        "command": "xvfb-run .venv/bin/python benchmarks/gui_vs_cli.py " + " ".join(sys.argv[1:]),
        "frames": args.frames,
        "repeats": args.repeats,
        "cli_pipeline_fps": cli_fps,
        "cli_inference_workers": workers,
        "gui_fast_fps": gui,
        "gui_over_cli": round(gui / cli_fps, 3),
        "target": 0.8,
        "runs": {"cli_fps": cli_runs, "gui_fps": gui_runs},
    }
    text = json.dumps(result, indent=2)
    print(text)
    if args.output:
        Path(args.output).write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
