"""CUDA-OpenGL interop: frames go from device memory to a GL texture without a host round trip.

A GL pixel-unpack buffer (PBO) is registered with CUDA once
(``pycuda.gl.RegisteredBuffer``, write-discard); per frame it is mapped, the
display kernel writes RGBA into it, it is unmapped, and ``glTexSubImage2D``
fills the texture from it, all on the GPU. Unmapping orders the CUDA work
before the GL work that follows, so nothing waits on the host.

Qt-free: whoever owns the GL context hands this module its buffers and
textures (the canvas under Qt, the GPU tests under EGL) and keeps that context
current in the calling thread for every call here. CUDA calls run in the
frame's ``GpuContext``, the device's primary context, made current here. With
CUDA >= 3 a buffer registers in any context of the GPU that runs the GL
context, so no special GL-CUDA context (``pycuda.gl.make_context``) is needed.

When interop cannot run (no pycuda, pycuda built without GL, OpenGL not on an
NVIDIA GPU, registration refused) ``DeviceFrameUploader`` falls back to a
device-to-host copy and a plain texture upload, and keeps the reason.

PyOpenGL and pycuda are imported lazily: importing this module needs neither.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager, suppress
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt
from framelens.core.errors import EngineError

if TYPE_CHECKING:
    from framelens.core.gpu.context import GpuContext

INTEROP_PATH = "CUDA-GL interop"
"""What the status bar says while frames are drawn through interop."""

BYTES_PER_PIXEL = 4  # RGBA8


class InteropError(EngineError):
    """A GL buffer could not be registered with CUDA, mapped or used."""


@runtime_checkable
class DeviceFrame(Protocol):
    """A frame in device memory that the display kernel can draw as RGBA.

    ``write_rgba`` enqueues, on ``stream`` (a ``pycuda.driver.Stream``), the
    conversion of the frame into ``height`` rows of ``width`` RGBA8 pixels
    (bytes R, G, B, A; alpha 255) at ``dst_ptr``, rows ``dst_pitch`` bytes
    apart. It is called with ``context`` current; if the frame was produced on
    another stream it makes ``stream`` wait for that work (an event), so no
    host synchronisation is needed.
    """

    @property
    def width(self) -> int: ...

    @property
    def height(self) -> int: ...

    @property
    def context(self) -> GpuContext: ...

    def write_rgba(self, dst_ptr: int, dst_pitch: int, stream: Any) -> None: ...


def fallback_path(reason: str) -> str:
    """What the status bar says when frames go through host memory, and why."""
    return f"texture upload ({reason})"


# ---- what this machine can do ----------------------------------------------------------


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


def _text(raw: object) -> str:
    return raw.decode(errors="replace").strip() if isinstance(raw, bytes) else ""


def gl_reason() -> str | None:
    """Why the current GL context cannot share buffers with CUDA, or None."""
    try:
        from OpenGL import GL

        vendor = _text(GL.glGetString(GL.GL_VENDOR))
        renderer = _text(GL.glGetString(GL.GL_RENDERER))
    except Exception as exc:  # PyOpenGL missing, or no GL library behind it
        return f"OpenGL is not usable ({type(exc).__name__}: {_one_line(exc)})"
    if not vendor:
        return "no current OpenGL context"
    if "nvidia" not in vendor.lower():
        name = renderer.split(" (")[0] or vendor  # "llvmpipe (LLVM 15.0.6, 256 bits)"
        return f"OpenGL runs on {name}, not on an NVIDIA GPU"
    return None


def pycuda_gl_reason() -> str | None:
    """Why pycuda cannot register GL buffers here, or None."""
    try:
        import pycuda.driver as cuda
    except ImportError as exc:
        missing = getattr(exc, "name", None) in ("pycuda", "pycuda.driver")
        return "pycuda is not installed" if missing else f"pycuda does not load ({_one_line(exc)})"
    except Exception as exc:  # no libcuda behind it, and the like
        return f"pycuda does not load ({_one_line(exc)})"
    have_gl = getattr(cuda, "have_gl_ext", None)
    if have_gl is not None and not have_gl():
        return "pycuda was built without OpenGL support (CUDA_ENABLE_GL)"
    try:
        import pycuda.gl  # noqa: F401
    except Exception as exc:
        return f"pycuda.gl does not load ({_one_line(exc)})"
    return None


def interop_unavailable_reason(device: int | str | None = None) -> str | None:
    """Why CUDA-GL interop cannot run in the current GL context, in one line; None if it can.

    Call with the GL context current. ``device`` ("cuda:N" or N) also checks
    that CUDA device (which retains its primary context); None skips that, for
    callers that have a context already. Registration can still be refused
    (e.g. GL on another GPU than CUDA's); ``DeviceFrameUploader`` handles that.
    """
    reason = gl_reason() or pycuda_gl_reason()
    if reason is None and device is not None:
        from framelens.core.gpu.context import cuda_usable

        reason = cuda_usable(device)
    return reason


# ---- a registered pixel buffer -----------------------------------------------------------


def _gl() -> Any:
    from OpenGL import GL

    return GL


def _cuda() -> Any:
    import pycuda.driver as cuda

    return cuda


def _pycuda_gl() -> Any:
    reason = pycuda_gl_reason()
    if reason is not None:
        raise InteropError(reason)
    import pycuda.gl

    return pycuda.gl


class GlPixelBuffer:
    """A GL pixel-unpack buffer registered with CUDA, written by CUDA and read by GL.

    Every method needs the GL context that owns the buffer current in the
    calling thread; CUDA calls run in ``context``. Use ``create()`` for a new
    buffer (deleted by ``close()``), or the constructor for someone else's.
    """

    def __init__(self, buffer: int, size: int, context: GpuContext, *, owned: bool = False) -> None:
        gl_cuda = _pycuda_gl()
        self.buffer = int(buffer)
        self.size = int(size)
        self.context = context
        self._owned = owned
        try:
            with context.active():
                self._registered: Any = gl_cuda.RegisteredBuffer(
                    self.buffer, gl_cuda.graphics_map_flags.WRITE_DISCARD
                )
        except Exception as exc:
            raise InteropError(f"CUDA refused GL buffer {self.buffer}: {_one_line(exc)}") from exc

    @classmethod
    def create(cls, width: int, height: int, context: GpuContext) -> GlPixelBuffer:
        """A new GL_PIXEL_UNPACK_BUFFER of width*height RGBA8 pixels, registered."""
        GL = _gl()
        size = width * height * BYTES_PER_PIXEL
        buffer = int(GL.glGenBuffers(1))
        GL.glBindBuffer(GL.GL_PIXEL_UNPACK_BUFFER, buffer)
        GL.glBufferData(GL.GL_PIXEL_UNPACK_BUFFER, size, None, GL.GL_STREAM_DRAW)
        GL.glBindBuffer(GL.GL_PIXEL_UNPACK_BUFFER, 0)
        try:
            return cls(buffer, size, context, owned=True)
        except BaseException:
            GL.glDeleteBuffers(1, [buffer])
            raise

    @property
    def closed(self) -> bool:
        return self._registered is None

    @contextmanager
    def map(self, stream: Any = None) -> Iterator[tuple[int, int]]:
        """(device pointer, size in bytes) of the buffer for the block, on ``stream``.

        The block runs with the CUDA context current; leaving it unmaps, after
        which GL work on the buffer sees what CUDA wrote on ``stream``.
        """
        if self._registered is None:
            raise InteropError("the pixel buffer is closed")
        with self.context.active():
            try:
                mapping = self._registered.map(stream)
                ptr, size = mapping.device_ptr_and_size()
            except Exception as exc:
                message = f"mapping GL buffer {self.buffer} failed: {_one_line(exc)}"
                raise InteropError(message) from exc
            try:
                yield int(ptr), int(size)
            finally:
                mapping.unmap()

    def upload_to_texture(self, texture: int, width: int, height: int) -> None:
        """Fill the RGBA8 texture (allocated, width x height) from the buffer, on the GPU."""
        if width * height * BYTES_PER_PIXEL > self.size:
            raise InteropError(f"{width}x{height} RGBA does not fit in {self.size} bytes")
        GL = _gl()
        GL.glBindBuffer(GL.GL_PIXEL_UNPACK_BUFFER, self.buffer)
        GL.glBindTexture(GL.GL_TEXTURE_2D, texture)
        try:
            GL.glTexSubImage2D(
                GL.GL_TEXTURE_2D, 0, 0, 0, width, height, GL.GL_RGBA, GL.GL_UNSIGNED_BYTE, None
            )  # None: offset 0 into the bound pixel-unpack buffer
        finally:
            GL.glBindTexture(GL.GL_TEXTURE_2D, 0)
            GL.glBindBuffer(GL.GL_PIXEL_UNPACK_BUFFER, 0)

    def close(self) -> None:
        """Unregister from CUDA (and delete the GL buffer if created here). Idempotent."""
        if self._registered is not None:
            with self.context.active():
                try:
                    self._registered.unregister()
                finally:
                    self._registered = None  # released with the CUDA context current
        if self._owned and self.buffer:
            _gl().glDeleteBuffers(1, [self.buffer])
        self.buffer = 0

    def __enter__(self) -> GlPixelBuffer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# ---- frames into a texture ----------------------------------------------------------------


class _HostStaging:
    """The fallback: the frame drawn into device memory, copied into pinned host memory."""

    def __init__(self, context: GpuContext, width: int, height: int) -> None:
        cuda = _cuda()
        self.context = context
        self.shape = (height, width, BYTES_PER_PIXEL)
        with context.active():
            self._device: Any = cuda.mem_alloc(width * height * BYTES_PER_PIXEL)
            self._host: npt.NDArray[np.uint8] = cuda.pagelocked_empty(self.shape, np.uint8)
            self._stream: Any = cuda.Stream()

    def read(self, frame: DeviceFrame) -> npt.NDArray[np.uint8]:
        cuda = _cuda()
        with self.context.active():
            frame.write_rgba(int(self._device), frame.width * BYTES_PER_PIXEL, self._stream)
            cuda.memcpy_dtoh_async(self._host, self._device, self._stream)
            self._stream.synchronize()
        return self._host

    def close(self) -> None:
        with self.context.active():
            self._device.free()
            self._stream = None  # destroyed with its context current


HOST_COPY_CHOSEN = "host copy chosen"
"""The reason given when the host path was asked for, not forced by the machine."""


class _FrameWriteFailed(Exception):
    """The frame's own write_rgba raised: not a reason to give up interop."""


class DeviceFrameUploader:
    """Fills an RGBA8 GL texture from DeviceFrames, through interop when it runs here.

    The first upload checks this machine (``interop_unavailable_reason``); a
    registration or mapping failure later also switches to the host path for
    good. ``reason`` says why interop is not used (None while it is).
    Owned by the GL context's owner: every call needs that context current.
    ``interop=False`` takes the host path from the start (to compare the two paths).
    """

    def __init__(self, *, interop: bool = True) -> None:
        self._checked = not interop
        self.reason: str | None = None if interop else HOST_COPY_CHOSEN
        self._context: GpuContext | None = None
        self._stream: Any = None
        self._buffer: GlPixelBuffer | None = None
        self._staging: _HostStaging | None = None

    def check(self) -> str | None:
        """The reason interop cannot run here, checked once (GL context current)."""
        if not self._checked:
            self._checked = True
            self.reason = interop_unavailable_reason()
        return self.reason

    @property
    def path(self) -> str:
        """How the next DeviceFrame reaches the texture (after ``check()``)."""
        return (
            INTEROP_PATH
            if self._checked and self.reason is None
            else fallback_path(self.reason or "interop not checked yet")
        )

    def upload(self, frame: DeviceFrame, texture: int) -> bool:
        """Draw ``frame`` into ``texture`` (RGBA8, frame.width x frame.height, allocated).

        True when it went through interop, False through host memory.
        """
        self._use_context(frame.context)
        if self.check() is None:
            try:
                self._upload_interop(frame, texture)
                return True
            except _FrameWriteFailed as exc:
                raise exc.__cause__ or exc from None
            except Exception as exc:
                self._give_up(f"interop failed: {_one_line(exc)}")
        self._upload_host(frame, texture)
        return False

    def _use_context(self, context: GpuContext) -> None:
        if self._context is not context:
            self._release()
            self._context = context

    def _upload_interop(self, frame: DeviceFrame, texture: int) -> None:
        assert self._context is not None
        w, h = frame.width, frame.height
        if self._buffer is None or self._buffer.size != w * h * BYTES_PER_PIXEL:
            if self._buffer is not None:
                self._buffer.close()
                self._buffer = None
            self._buffer = GlPixelBuffer.create(w, h, self._context)
        if self._stream is None:
            with self._context.active():
                self._stream = _cuda().Stream()
        with self._buffer.map(self._stream) as (ptr, _size):
            try:
                frame.write_rgba(ptr, w * BYTES_PER_PIXEL, self._stream)
            except Exception as exc:
                raise _FrameWriteFailed() from exc
        self._buffer.upload_to_texture(texture, w, h)

    def _upload_host(self, frame: DeviceFrame, texture: int) -> None:
        assert self._context is not None
        w, h = frame.width, frame.height
        if self._staging is None or self._staging.shape[:2] != (h, w):
            if self._staging is not None:
                self._staging.close()
            self._staging = _HostStaging(self._context, w, h)
        pixels = self._staging.read(frame)
        GL = _gl()
        GL.glBindTexture(GL.GL_TEXTURE_2D, texture)
        try:
            GL.glTexSubImage2D(
                GL.GL_TEXTURE_2D, 0, 0, 0, w, h, GL.GL_RGBA, GL.GL_UNSIGNED_BYTE, pixels
            )
        finally:
            GL.glBindTexture(GL.GL_TEXTURE_2D, 0)

    def _give_up(self, reason: str) -> None:
        self.reason = reason
        if self._buffer is not None:
            with suppress(Exception):  # it failed already; the reason says why
                self._buffer.close()
            self._buffer = None

    def _release(self) -> None:
        if self._buffer is not None:
            self._buffer.close()
            self._buffer = None
        if self._staging is not None:
            self._staging.close()
            self._staging = None
        if self._stream is not None and self._context is not None:
            with self._context.active():
                self._stream = None
        self._context = None

    def close(self) -> None:
        """Free the buffers (GL context current). The uploader can be used again."""
        self._release()
