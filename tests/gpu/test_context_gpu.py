"""The device's one context: ``active()`` makes it current for a block, nested blocks of
it push nothing more, and leaving the outermost block leaves the thread as it was."""

from __future__ import annotations

import threading

import pytest
from framelens.core.gpu.context import GpuContext

pytestmark = pytest.mark.gpu


def test_nested_blocks_keep_the_context_current_and_the_outer_one_pops_it(
    gpu_ctx: GpuContext,
) -> None:
    import pycuda.driver as cuda

    seen: dict[str, object] = {}

    def in_a_fresh_thread() -> None:  # no context current at the start
        seen["before"] = cuda.Context.get_current()
        with gpu_ctx.active():
            outer = cuda.Context.get_current()
            with gpu_ctx.active():
                seen["inner"] = cuda.Context.get_current() == outer
                free, total = cuda.mem_get_info()  # needs a current context
                seen["works"] = 0 < free <= total
            seen["still"] = cuda.Context.get_current() == outer
        seen["after"] = cuda.Context.get_current()

    thread = threading.Thread(target=in_a_fresh_thread)
    thread.start()
    thread.join()
    assert seen["before"] is None
    assert seen["inner"] and seen["works"] and seen["still"]
    assert seen["after"] is None
