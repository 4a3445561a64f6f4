"""The one preprocessing interface, host and device: frames of ``src_w`` x ``src_h`` ->
the model's input laid out where the task's geometry says, and what the task's decoding
needs of each frame (``geometry``: detection's letterbox, super-resolution's frame size
and region).

Implementations side by side: on the host ``Preprocessor`` (cpu.py: numpy/OpenCV,
returns the tensor) and super-resolution's ``SrPreprocessor``
(core/stages/tasks/superres/color.py); on the device ``CudaFramePreprocessor`` (cuda.py:
the fused CUDA kernel, queued into a device buffer on a stream). tests/gpu holds the
host and device implementations to the same tensor.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol, TypeVar, runtime_checkable

import numpy as np
import numpy.typing as npt
from framelens.core.types import Image

if TYPE_CHECKING:
    from framelens.core.stages.preprocess.cuda import DeviceFrame

GeometryT_co = TypeVar("GeometryT_co", covariant=True)


@runtime_checkable
class FramePreprocessor(Protocol[GeometryT_co]):
    """Made for frames of one size (``src_w`` x ``src_h``); ``geometry`` is what the
    task's decode step receives for each frame it prepared."""

    src_w: int
    src_h: int

    @property
    def geometry(self) -> GeometryT_co: ...


@runtime_checkable
class HostPreprocessor(FramePreprocessor[GeometryT_co], Protocol):
    """A host frame (BGR) -> the model's input tensor (1, C, H, W), reused per call."""

    def __call__(self, image: Image) -> npt.NDArray[np.float32]: ...


@runtime_checkable
class DevicePreprocessor(FramePreprocessor[GeometryT_co], Protocol):
    """A frame in device memory (NVDEC's NV12) or a host frame (uploaded) -> the model's
    input at ``dst_ptr``, queued on ``stream`` (nothing waits)."""

    def __call__(self, frame: DeviceFrame, dst_ptr: int, stream: Any) -> None: ...
