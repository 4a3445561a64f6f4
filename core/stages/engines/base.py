"""What every inference backend offers the pipeline."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any

import numpy as np
import numpy.typing as npt
from framelens.core.closing import Closing


class Engine(Closing, ABC):
    """One loaded model on one device, fed one input tensor at a time.

    input_shape holds None for dynamic dimensions. infer() returns the outputs
    in the order of output_names (the model's own output order).
    """

    backend: str
    device: str  # "cpu" | "cuda:N"
    providers: list[str]
    input_name: str
    input_shape: tuple[int | None, ...]
    output_names: list[str]

    @abstractmethod
    def infer(self, tensor: npt.NDArray[np.float32]) -> list[npt.NDArray[Any]]:
        """Run the model on a (1, 3, H, W) tensor; raises EngineError on failure."""

    @abstractmethod
    def close(self) -> None:
        """Release the model and device memory. Safe to call twice."""
