"""Which transport hands the video wall's picture from its process to this one, and why
(core/sessions/wall_transport.py); CUDA IPC that this process cannot open falls back with
one reason (core/gpu/wall_ipc.py). Run without a GPU here; the IPC transport itself:
tests/gpu/test_wall_ipc_gpu.py."""

from __future__ import annotations

import pytest
from framelens.core.gpu.context import cuda_usable
from framelens.core.gpu.wall_ipc import IpcHandles, ipc_unavailable_reason, open_receiver
from framelens.core.sessions.wall_transport import HOST, IPC, WallTransport, choose_transport


def test_a_wall_on_the_cpu_hands_its_picture_through_shared_memory_and_says_why() -> None:
    transport = choose_transport("cpu")
    assert transport.kind == HOST and not transport.fell_back  # nothing to tell the user
    assert transport.path == "picture through shared memory (the wall runs on the CPU)"


def test_shared_memory_asked_for_is_used_on_cuda_too() -> None:
    assert choose_transport("cuda:0", "host") == WallTransport(HOST, "chosen")


def test_a_wall_on_cuda_uses_ipc_exactly_where_this_process_can_open_its_handles() -> None:
    transport = choose_transport("cuda:0")
    reason = ipc_unavailable_reason(0)
    if reason is None:  # a GPU machine
        assert transport == WallTransport(IPC, device=0)
        assert transport.path == "picture through CUDA IPC"
    else:  # here: no pycuda, no device
        assert transport.kind == HOST and transport.fell_back
        assert transport.reason == f"no CUDA IPC in this process: {reason}"
        assert "\n" not in transport.reason


def test_a_device_that_is_not_one_is_said_and_shared_memory_used() -> None:
    transport = choose_transport("cuda:x")
    assert transport.kind == HOST and transport.fell_back
    assert "unknown CUDA device 'cuda:x'" in transport.reason


def test_an_unknown_transport_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown wall transport 'gl'"):
        choose_transport("cuda:0", "gl")


@pytest.mark.skipif(cuda_usable("cuda:0") is None, reason="the handles would be opened")
def test_handles_this_process_cannot_open_give_one_reason_not_an_exception() -> None:
    handles = IpcHandles(0, 64, 32, 256, (bytes(64), bytes(64)), (bytes(64), bytes(64)))
    sent: list[int] = []
    opened = open_receiver(handles, sent.append)
    assert isinstance(opened, str) and opened == cuda_usable(0)
    assert not sent
