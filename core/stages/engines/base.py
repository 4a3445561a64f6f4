"""What every inference backend offers the pipeline.

``Engine`` runs host (numpy) batches; ``DeviceEngine`` is an Engine that also reads its
input from a device buffer and hands its outputs back in device memory (ONNX Runtime's
CUDA provider through IOBinding, TensorRT): what the GPU pipeline needs.

A batch of N frames is one call: the input is (N, 3, H, W) and every output has N as its
leading dimension, in the order of the batch. ``batch`` says which N a graph takes: the
one size of a fixed-batch graph (the exported batch-1 models), or None for a dynamic
batch dimension (core.precision.batch makes a batch-dynamic variant of a batch-1 graph).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
from framelens.core.closing import Closing
from framelens.core.errors import EngineError


def batch_error(fixed: int, n: int) -> EngineError:
    """The one-line error for a batch of ``n`` given to a graph fixed to batch ``fixed``."""
    return EngineError(
        f"the model's graph has a fixed batch of {fixed} and cannot run a batch of {n} "
        "(its batch variant, core.precision.batch, takes any)"
    )


class Engine(Closing, ABC):
    """One loaded model on one device, fed one input batch at a time.

    input_shape holds None for dynamic dimensions. infer() returns the outputs
    in the order of output_names (the model's own output order).
    """

    backend: str
    device: str  # "cpu" | "cuda:N"
    providers: list[str]
    input_name: str
    input_shape: tuple[int | None, ...]
    output_names: list[str]

    @property
    def batch(self) -> int | None:
        """The batch size the graph is fixed to, or None when its batch is dynamic."""
        return self.input_shape[0] if self.input_shape else None

    def accepts_batch(self, n: int) -> bool:
        """Whether a batch of ``n`` frames can be one call."""
        return n >= 1 and (self.batch is None or self.batch == n)

    def check_batch(self, n: int) -> None:
        """EngineError (one line) unless a batch of ``n`` frames can be one call."""
        if n < 1:
            raise EngineError(f"a batch holds at least one frame, got {n}")
        if not self.accepts_batch(n):
            raise batch_error(self.batch or 1, n)

    @abstractmethod
    def infer(self, tensor: npt.NDArray[np.float32]) -> list[npt.NDArray[Any]]:
        """Run the model once on an (N, 3, H, W) batch; every output has leading dim N.

        EngineError (one line) when the graph does not take batch N, or on failure.
        """

    @abstractmethod
    def close(self) -> None:
        """Release the model and device memory. Safe to call twice."""


@dataclass(frozen=True, slots=True)
class DeviceOutput:
    """One model output after ``infer_device``: on the device and (unless the call said
    ``to_host=False``) on the host.

    ``ptr`` is the device pointer, ``host`` a page-locked numpy view of the same values;
    both valid until the next ``infer_device``.
    """

    name: str
    ptr: int
    shape: tuple[int, ...]
    dtype: np.dtype[Any]
    host_copy: npt.NDArray[Any] | None

    @property
    def host(self) -> npt.NDArray[Any]:
        if self.host_copy is None:
            raise EngineError(f"output {self.name} stayed on the device (to_host=False)")
        return self.host_copy


class DeviceEngine(Engine):
    """An Engine that runs on device buffers in the device's primary context, on its
    ``stream`` (core.gpu.context): ONNX Runtime's CUDA provider and TensorRT."""

    stream: Any  # the pycuda stream the engine runs on

    @property
    @abstractmethod
    def input_dtype(self) -> np.dtype[Any]:
        """What the model takes: float32, or float16 for a graph converted without
        ``keep_io_types``."""

    @abstractmethod
    def infer_device(
        self,
        input_ptr: int,
        input_shape: Sequence[int],
        input_dtype: npt.DTypeLike,
        stream: Any = None,
        *,
        to_host: bool = True,
    ) -> list[DeviceOutput]:
        """Run once on the (N, C, H, W) batch at device pointer ``input_ptr``.

        ``input_dtype`` must be the model's (``input_dtype``). ``stream``: where the
        input was written, if not the engine's stream; the engine waits for it there
        and that stream then waits for the outputs. Returns the outputs (leading dim N)
        in ``output_names`` order once their host copies are complete; they stay valid
        until the next call. With ``to_host=False`` (outputs that are images: super-
        resolution) nothing is copied and nothing waits: the outputs are complete in
        stream order, so read them with work queued on the engine's stream (or on
        ``stream``) before the next call. EngineError (one line) on failure or a batch
        the graph does not take.
        """
