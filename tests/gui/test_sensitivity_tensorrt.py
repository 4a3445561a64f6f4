"""The INT8 sensitivity chart shows the convolutions a TensorRT engine ran in float
although the graph quantized them ("TensorRT kept this layer in float"), read from the
layer list of a plan a GPU has run (core/stages/engines/tensorrt_layers.py)."""

from __future__ import annotations

import os
from pathlib import Path

import onnx
from framelens.core.api import resolve_model
from framelens.core.precision.report import LayerSensitivity, SensitivityReport
from framelens.gui.compare.sensitivity import SensitivityDialog
from pytestqt.qtbot import QtBot


def yolox_report() -> SensitivityReport:
    """A report over the bundled YOLOX-Nano's real convolutions, the last two kept float."""
    graph = onnx.load(resolve_model("yolox-nano").path, load_external_data=False)
    convs = [n.name for n in graph.graph.node if n.op_type == "Conv"]
    layers = [
        LayerSensitivity(name, 1_000_000 + 1000 * i, 1e-4 * (1 + i % 7), i >= len(convs) - 2)
        for i, name in enumerate(convs)
    ]
    return SensitivityReport(
        layers=layers, agreement_target=0.95, agreement_f1=0.97, agreement_conf=0.3,
        target_reached=True, min_int8_mac_fraction=0.8, calibration_frames=8,
        sensitivity_frames=2, method="percentile",
    )  # fmt: skip


def test_the_chart_marks_layers_tensorrt_kept_in_float(qtbot: QtBot, tmp_path: Path) -> None:
    report = yolox_report()
    by_trt = {report.layers[3].name, report.layers[10].name}
    dialog = SensitivityDialog(report, "yolox-nano")
    qtbot.addWidget(dialog)
    dialog.set_report(report, "yolox-nano", by_trt)
    dialog.show()
    qtbot.waitExposed(dialog)
    chart = dialog.chart
    assert chart.bar_count == len(report.layers)
    assert sorted(chart.tensorrt_bars.opts["x"]) == [4.0, 11.0]  # bars 4 and 11, 1-based
    assert len(chart.float_bars.opts["x"]) == 2  # the graph's own float layers stay apart
    items = [chart.float_list.item(i) for i in range(chart.float_list.count())]
    marked = [i for i in items if "TensorRT kept this layer in float" in i.toolTip()]
    assert [i.text().split()[0] for i in marked] == [report.layers[3].name, report.layers[10].name]
    assert chart.float_title.text() == "Kept in float (2 + 2 by TensorRT)"
    dialog.set_report(report, "yolox-nano")  # no plan run on a GPU: nothing marked
    assert len(chart.tensorrt_bars.opts["x"]) == 0
    dialog.set_report(report, "yolox-nano", by_trt)
    out = Path(os.environ.get("FRAMELENS_SCREENSHOTS", tmp_path))
    dialog.grab().save(str(out / "sensitivity-tensorrt.png"))
