"""Fixtures for the GPU tests: the device's primary context, skipping without a GPU."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from framelens.core.gpu.context import GpuContext, cuda_usable, get_context


@pytest.fixture(scope="session")
def gpu_ctx() -> GpuContext:
    """The GpuContext of cuda:0; the test is skipped, with the reason, when CUDA is not usable."""
    reason = cuda_usable("cuda:0")
    if reason is not None:
        pytest.skip(reason)
    return get_context("cuda:0")


@pytest.fixture
def gpu_stream(gpu_ctx: GpuContext) -> Iterator[Any]:
    """A fresh pycuda stream in the primary context, synchronised after the test."""
    import pycuda.driver as cuda

    with gpu_ctx.active():
        stream = cuda.Stream()
    yield stream
    with gpu_ctx.active():
        stream.synchronize()
