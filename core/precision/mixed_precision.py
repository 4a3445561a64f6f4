"""Mixed precision: the most sensitive convolutions go back to float, one at a time,
until the outputs agree with FP32 (detections by F1, super-resolution by PSNR: see
agreement.py); then the final Q/DQ graph is written and verified (step 4 in int8.py)."""

from __future__ import annotations

import math
from pathlib import Path

import onnx
from framelens.core.models.spec import ModelSpec
from framelens.core.precision.agreement import agreement_for
from framelens.core.precision.calibration import CalibrationFrames
from framelens.core.precision.graph import equalize_depthwise, gated_model
from framelens.core.precision.int8_settings import CalibrationSettings, StageProgress
from framelens.core.precision.qdq import cpu_session, quantize_qdq
from framelens.core.precision.report import LayerSensitivity, SearchStep, SensitivityReport
from framelens.core.precision.sensitivity import Analysis, Prepared, Trials


def search_and_write(
    prep: Prepared,
    spec: ModelSpec,
    frames: CalibrationFrames,
    settings: CalibrationSettings,
    analysis: Analysis,
    work: Path,
    out: Path,
    progress: StageProgress,
) -> SensitivityReport:
    """Mixed precision: move the most sensitive convs to float until the target is met,
    then write the final Q/DQ graph to ``out`` and verify it."""
    sensitivity = analysis.sensitivity
    dw = prep.depthwise if settings.equalize_depthwise else []
    equalized = equalize_depthwise(prep.model, analysis.absmax, [c.name for c in dw])
    if not (work / "all_int8.onnx").is_file():
        onnx.save(equalized, str(work / "float.onnx"))
        quantize_qdq(work / "float.onnx", work / "all_int8.onnx", work / "ranges.json", settings)
    trials = Trials(
        gated_model(equalized, onnx.load(str(work / "all_int8.onnx"))), spec, settings.threads
    )
    macs = {c.name: c.macs for c in prep.convs}
    total = sum(macs.values())
    quantizable = [c.name for c in prep.convs if c.name in set(trials.gated.convs)]
    measure = agreement_for(trials, frames, settings)
    target = measure.target

    def evaluate(floats: list[str]) -> tuple[float, float]:
        int8 = frozenset(quantizable) - set(floats)
        return measure.of_trial(int8), sum(macs[n] for n in int8) / total

    floats: list[str] = []
    budget = settings.max_search_steps
    f1, fraction = evaluate(floats)
    steps = [SearchStep(0, None, fraction, f1)]
    best_f1, best_floats = f1, list(floats)
    order = sorted(quantizable, key=lambda n: -sensitivity.get(n, 0.0))
    for name in order:
        if f1 >= target or len(floats) >= budget:
            break
        if fraction - macs[name] / total < settings.min_int8_mac_fraction:
            continue  # over the MAC budget: try the next, smaller one
        progress("search", len(floats) / max(1, budget), f"{len(floats) + 1} float layers")
        floats.append(name)
        f1, fraction = evaluate(floats)
        steps.append(SearchStep(len(floats), name, fraction, f1))
        if f1 > best_f1:
            best_f1, best_floats = f1, list(floats)
    chosen = floats if f1 >= target else best_floats
    progress("quantize", 0.0)

    # The final graph: equalisation only where the conv stays INT8 (in float it is moot).
    int8_dw = [c.name for c in dw if c.name not in chosen]
    final_float = equalize_depthwise(prep.model, analysis.absmax, int8_dw)
    onnx.save(final_float, str(work / "final_float.onnx"))
    quantize_qdq(work / "final_float.onnx", out, work / "ranges.json", settings, exclude=chosen)
    progress("quantize", 0.7, "verifying")
    final_f1 = measure.of_session(cpu_session(out, settings.threads))
    chosen_set = set(chosen)
    dw_names = {c.name for c in dw}
    layers = [
        LayerSensitivity(
            name=c.name,
            macs=c.macs,
            sensitivity=sensitivity.get(c.name, math.nan),
            kept_float=c.name in chosen_set or c.name not in set(quantizable),
            depthwise=c.depthwise,
            equalized=c.name in dw_names and c.name not in chosen_set,
        )
        for c in prep.convs
    ]
    progress("quantize", 1.0)
    return SensitivityReport(
        layers=layers,
        agreement_target=target,
        agreement_f1=final_f1,
        agreement_conf=measure.conf,
        target_reached=final_f1 >= target,
        min_int8_mac_fraction=settings.min_int8_mac_fraction,
        calibration_frames=len(frames),
        sensitivity_frames=min(settings.sensitivity_frames, len(frames)),
        method=settings.method,
        search=steps,
        reference_detections=measure.reference_count,
        agreement_metric=measure.metric,
    )
