"""The canvas's display path (CUDA-GL interop or texture upload) and the status bar line for it.

Under Xvfb OpenGL is Mesa's llvmpipe, so interop cannot run: the canvas must
say so with the reason, and device frames must still reach the screen through
host memory. The CUDA driver is replaced by a host-memory stand-in for that.
The interop path itself is simulated too: "registering" a GL buffer maps it
into host memory (glMapBufferRange), so the canvas's side of it runs here; the
real thing runs on the H200 (tests/gpu/test_interop.py).
"""

from __future__ import annotations

import ctypes
import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
import pytest
from framelens.core.gpu import interop
from framelens.gui.display.canvas import VideoCanvas
from framelens.gui.player.main_window import MainWindow
from OpenGL import GL
from PySide6.QtGui import QImage
from pytestqt.qtbot import QtBot

pytestmark = pytest.mark.gui

FALLBACK = re.compile(r"^texture upload \((?P<reason>.+)\)$")


def wait_for_gl(window: MainWindow, qtbot: QtBot) -> None:
    qtbot.waitUntil(lambda: "no OpenGL context" not in window.canvas.display_path, timeout=10_000)


def test_status_bar_states_display_path_and_reason(window: MainWindow, qtbot: QtBot) -> None:
    wait_for_gl(window, qtbot)
    path = window.canvas.display_path
    assert window.display_label.text() == path
    assert window.display_label.isVisible()
    match = FALLBACK.match(path)
    assert match, f"no interop under Xvfb, yet the status bar says {path!r}"
    if window.canvas.software_gl:
        assert match["reason"].endswith("not on an NVIDIA GPU"), path
        assert window.canvas.renderer.split()[0] in match["reason"]


# ---- a device frame through the host fallback --------------------------------------------


class _HostAllocation:
    """Host memory posing as a device allocation: int() gives its address."""

    def __init__(self, nbytes: int) -> None:
        self.array = np.zeros(nbytes, dtype=np.uint8)

    def __int__(self) -> int:
        return int(self.array.ctypes.data)

    def free(self) -> None:
        pass


class _Stream:
    def synchronize(self) -> None:
        pass


class _FakeDriver:
    """The few pycuda.driver calls of the fallback path, on host memory."""

    Stream = _Stream
    mem_alloc = _HostAllocation

    @staticmethod
    def pagelocked_empty(shape: tuple[int, ...], dtype: Any) -> np.ndarray:
        return np.empty(shape, dtype=dtype)

    @staticmethod
    def memcpy_dtoh_async(dst: np.ndarray, src: _HostAllocation, stream: _Stream) -> None:
        dst.reshape(-1)[:] = src.array


class _FakeContext:
    @contextmanager
    def active(self) -> Iterator[_FakeContext]:
        yield self


class _SolidFrame:
    """A DeviceFrame whose 'display kernel' paints one RGBA colour."""

    def __init__(self, width: int, height: int, rgba: tuple[int, int, int, int]) -> None:
        self.width, self.height = width, height
        self.context: Any = _FakeContext()
        self.rgba = np.empty((height, width, 4), dtype=np.uint8)
        self.rgba[:] = rgba
        self.writes = 0

    def write_rgba(self, dst_ptr: int, dst_pitch: int, stream: Any) -> None:
        row = self.width * 4
        for y in range(self.height):
            ctypes.memmove(dst_ptr + y * dst_pitch, self.rgba[y].ctypes.data, row)
        self.writes += 1


def test_device_frame_falls_back_to_texture_upload(
    window: MainWindow, qtbot: QtBot, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(interop, "_cuda", lambda: _FakeDriver)
    wait_for_gl(window, qtbot)
    frame = _SolidFrame(64, 36, (230, 40, 20, 255))
    assert isinstance(frame, interop.DeviceFrame)
    window.canvas.set_image(frame)
    qtbot.waitUntil(lambda: frame.writes == 1, timeout=10_000)
    assert window.canvas.image_size == (64, 36)
    assert FALLBACK.match(window.display_label.text())

    shot = window.canvas.grab_frame_image().convertToFormat(QImage.Format.Format_RGB888)
    centre = shot.pixelColor(shot.width() // 2, shot.height() // 2)
    assert (centre.red(), centre.green(), centre.blue()) == (230, 40, 20)


def centre_rgb(canvas: VideoCanvas) -> tuple[int, int, int]:
    shot = canvas.grab_frame_image().convertToFormat(QImage.Format.Format_RGB888)
    colour = shot.pixelColor(shot.width() // 2, shot.height() // 2)
    return colour.red(), colour.green(), colour.blue()


class _Mapping:
    def __init__(self, buffer: int, ptr: int, size: int) -> None:
        self.buffer, self.ptr, self.size = buffer, ptr, size

    def device_ptr_and_size(self) -> tuple[int, int]:
        return self.ptr, self.size

    def unmap(self) -> None:
        GL.glBindBuffer(GL.GL_PIXEL_UNPACK_BUFFER, self.buffer)
        GL.glUnmapBuffer(GL.GL_PIXEL_UNPACK_BUFFER)
        GL.glBindBuffer(GL.GL_PIXEL_UNPACK_BUFFER, 0)


class _RegisteredBuffer:
    """pycuda.gl.RegisteredBuffer, simulated: mapping maps the GL buffer into host memory."""

    live = 0

    def __init__(self, buffer: int, flags: int) -> None:
        assert GL.glIsBuffer(buffer)
        self.buffer = buffer
        _RegisteredBuffer.live += 1

    def map(self, stream: Any = None) -> _Mapping:
        GL.glBindBuffer(GL.GL_PIXEL_UNPACK_BUFFER, self.buffer)
        size = int(GL.glGetBufferParameteriv(GL.GL_PIXEL_UNPACK_BUFFER, GL.GL_BUFFER_SIZE))
        bits = GL.GL_MAP_WRITE_BIT | GL.GL_MAP_INVALIDATE_BUFFER_BIT
        ptr = GL.glMapBufferRange(GL.GL_PIXEL_UNPACK_BUFFER, 0, size, bits)
        GL.glBindBuffer(GL.GL_PIXEL_UNPACK_BUFFER, 0)
        return _Mapping(self.buffer, int(ctypes.cast(ptr, ctypes.c_void_p).value or 0), size)

    def unregister(self) -> None:
        _RegisteredBuffer.live -= 1


class _FakePycudaGl:
    RegisteredBuffer = _RegisteredBuffer

    class graphics_map_flags:  # pycuda's name
        WRITE_DISCARD = 2


def test_device_frames_through_simulated_interop(
    qtbot: QtBot, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(interop, "gl_reason", lambda: None)
    monkeypatch.setattr(interop, "pycuda_gl_reason", lambda: None)
    monkeypatch.setattr(interop, "_pycuda_gl", lambda: _FakePycudaGl)
    monkeypatch.setattr(interop, "_cuda", lambda: _FakeDriver)
    canvas = VideoCanvas()
    qtbot.addWidget(canvas)
    canvas.resize(480, 270)
    paths: list[str] = []
    canvas.displayPathChanged.connect(paths.append)
    canvas.show()
    qtbot.waitExposed(canvas)
    assert canvas.display_path == "texture upload (frames arrive in host memory)"

    for size, rgba in [((64, 36), (20, 200, 90, 255)), ((50, 30), (250, 250, 10, 255))]:
        frame = _SolidFrame(*size, rgba)
        canvas.set_image(frame)
        qtbot.waitUntil(lambda f=frame: f.writes == 1, timeout=10_000)
        assert canvas.display_path == interop.INTEROP_PATH
        assert centre_rgb(canvas) == rgba[:3]
    assert _RegisteredBuffer.live == 1  # the second size replaced the first buffer

    canvas.set_image(np.full((36, 64, 3), (255, 0, 0), dtype=np.uint8))  # BGR: blue
    qtbot.waitUntil(lambda: canvas.display_path.startswith("texture upload"), timeout=10_000)
    assert centre_rgb(canvas) == (0, 0, 255)
    assert paths[-2:] == [interop.INTEROP_PATH, "texture upload (frames arrive in host memory)"]
    canvas.close()
    canvas.deleteLater()  # the GL context goes: the buffer must be unregistered first
    qtbot.waitUntil(lambda: _RegisteredBuffer.live == 0, timeout=10_000)


def test_canvas_paints_overlays_over_a_frame_kept_on_the_device(
    window: MainWindow, qtbot: QtBot
) -> None:
    """GPU frames come without overlays drawn in; the canvas paints them, in annotate()'s
    colours, at the box's place on screen."""
    from framelens.core.stages.draw.style import OverlayStyle, class_colour
    from framelens.core.types import Detections

    wait_for_gl(window, qtbot)
    canvas = window.canvas
    black = np.zeros((360, 640, 3), dtype=np.uint8)
    dets = Detections(
        np.array([[100, 80, 400, 300]], dtype=np.float32),
        np.array([0.9], dtype=np.float32),
        np.array([0], dtype=np.int32),
    )
    canvas.set_image(black, (dets, ("person",), OverlayStyle()))
    qtbot.wait(300)
    shot = canvas.grab_frame_image().convertToFormat(QImage.Format.Format_RGB888)
    r = canvas.image_rect()
    scale = r.width() / 640
    b, g, red = class_colour(0)
    # the box's bottom edge, halfway along: the class colour
    x = round(r.left() + 250 * scale)
    y = round(r.top() + 300 * scale)
    near = [shot.pixelColor(x, y + dy) for dy in (-1, 0, 1)]
    assert any((c.red(), c.green(), c.blue()) == (red, g, b) for c in near)
    # inside the box, away from the tag: untouched video
    inside = shot.pixelColor(round(r.left() + 250 * scale), round(r.top() + 200 * scale))
    assert (inside.red(), inside.green(), inside.blue()) == (0, 0, 0)
    canvas.set_image(black)  # without an overlay: nothing painted over
    qtbot.wait(300)
    shot = canvas.grab_frame_image().convertToFormat(QImage.Format.Format_RGB888)
    c = shot.pixelColor(x, y)
    assert (c.red(), c.green(), c.blue()) == (0, 0, 0)
