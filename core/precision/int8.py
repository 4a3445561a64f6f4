"""INT8: a Q/DQ graph calibrated on the user's frames, with a per-layer sensitivity analysis
and mixed precision.

Measured on YOLOX-Nano (see DESIGN.md): quantizing every layer destroys the model,
and so does quantizing the head's Sigmoid/Mul/Concat. What works here:

1. Only Conv nodes are quantized (op_types_to_quantize=["Conv"]), inputs only (no
   Q/DQ on conv outputs: TensorRT fuses conv+activation and quantizes the next
   conv's input, the layout NVIDIA's explicit-quantization guide recommends):
   symmetric int8 activations (zero point 0), symmetric per-channel int8 weights,
   MinMax calibration, QDQ format at opset >= 13.
2. Depthwise convolutions get per-channel range equalisation of their input
   (graph.equalize_depthwise), because one per-tensor scale over channels whose
   ranges differ by orders of magnitude is what breaks them.
3. Sensitivity: every Conv is quantized alone (calibrated once, ranges reused) and
   the noise-to-signal ratio of the model outputs is measured on a few frames.
4. Mixed precision: the most sensitive layers are moved back to float, one at a
   time, until detections agree with FP32 on the calibration frames at the target
   F1 (super-resolution: until the output images reach the target PSNR against
   FP32's), while at least ``min_int8_mac_fraction`` of the convolution MACs stay INT8.

The steps live in their own modules: int8_settings (CalibrationSettings, progress),
qdq (ONNX Runtime's quantizer and CPU sessions), sensitivity (steps 2 and 3) and
mixed_precision (step 4); this module gathers their entry points.
"""

from __future__ import annotations

from framelens.core.precision.agreement import MIN_REFERENCE_DETECTIONS, agreement
from framelens.core.precision.int8_settings import (
    METHODS,
    CalibrationSettings,
    Progress,
    StageProgress,
)
from framelens.core.precision.mixed_precision import search_and_write
from framelens.core.precision.qdq import onnxruntime_version
from framelens.core.precision.sensitivity import (
    Analysis,
    analyse,
    channel_absmax,
    output_nsr,
    prepare_float,
)

__all__ = [
    "METHODS",
    "MIN_REFERENCE_DETECTIONS",
    "Analysis",
    "CalibrationSettings",
    "Progress",
    "StageProgress",
    "agreement",
    "analyse",
    "channel_absmax",
    "onnxruntime_version",
    "output_nsr",
    "prepare_float",
    "search_and_write",
]
