"""Headless OpenGL for the GPU tests: an EGL context on a 1x1 pbuffer, no display, no Qt.

The H200 test machine has no X server; NVIDIA's EGL gives it a full desktop
OpenGL 4.6 context all the same. ``open_context()`` finds it:

1. The EGL vendor library. glvnd's libEGL reads its vendor list once per
   process, so the choice is probed in a child process first: the default
   vendors, then, when they give no NVIDIA device, NVIDIA's vendor file
   (``NVIDIA_VENDOR_FILE``, where the container runtime mounts the driver)
   through ``__EGL_VENDOR_LIBRARY_FILENAMES``. A caller that set that variable
   already (``/tmp/kit/env.sh`` does) is trusted and nothing is probed.
2. The display: EGL devices (EGL_EXT_device_enumeration +
   EGL_EXT_platform_device, which need no window system), the device that
   EGL_NV_device_cuda ties to the wanted CUDA device first; then
   ``eglGetDisplay(EGL_DEFAULT_DISPLAY)``.

PyOpenGL picks its platform when first imported: this module sets
``PYOPENGL_PLATFORM=egl`` only inside ``open_context()``, and refuses (with a
reason) when PyOpenGL was already loaded for GLX, e.g. by the GUI tests in the
same pytest process: run tests/gpu in a process of its own.

Every failure becomes ``EglUnavailable`` whose message says what was tried: a
skip reason. ``python tests/gpu/egl.py`` prints what this machine offers.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass, field
from typing import Any

NVIDIA_VENDOR_FILE = "/usr/local/nvidia/share/glvnd/egl_vendor.d/10_nvidia.json"
VENDOR_ENV = "__EGL_VENDOR_LIBRARY_FILENAMES"
_EGL_CUDA_DEVICE_NV = 0x323A  # EGL_NV_device_cuda


class EglUnavailable(RuntimeError):
    """No EGL/OpenGL context could be made; the message is a skip reason."""


@dataclass
class EglContext:
    """A current-able desktop OpenGL context on a pbuffer."""

    display: Any
    surface: Any
    context: Any
    vendor: str
    renderer: str
    version: str
    source: str  # which EGL display it came from
    notes: list[str] = field(default_factory=list)

    @property
    def nvidia(self) -> bool:
        return "nvidia" in self.vendor.lower()

    def describe(self) -> str:
        text = f"{self.renderer} ({self.vendor}, OpenGL {self.version}) via {self.source}"
        return "; ".join([text, *self.notes])

    def make_current(self) -> None:
        from OpenGL import EGL

        if not EGL.eglMakeCurrent(self.display, self.surface, self.surface, self.context):
            raise EglUnavailable("eglMakeCurrent failed")

    def release(self) -> None:
        from OpenGL import EGL

        EGL.eglMakeCurrent(self.display, EGL.EGL_NO_SURFACE, EGL.EGL_NO_SURFACE, EGL.EGL_NO_CONTEXT)

    def close(self) -> None:
        from OpenGL import EGL

        self.release()
        EGL.eglDestroySurface(self.display, self.surface)
        EGL.eglDestroyContext(self.display, self.context)
        EGL.eglTerminate(self.display)


def _text(raw: object) -> str:
    return raw.decode(errors="replace") if isinstance(raw, bytes) else str(raw or "")


def _device_displays(cuda_device: int | None) -> list[tuple[str, Any]]:
    """EGL displays of the EGL devices, the wanted CUDA device's first."""
    from OpenGL import EGL
    from OpenGL.EGL.EXT.device_base import egl_get_devices, eglQueryDeviceStringEXT
    from OpenGL.EGL.EXT.platform_base import eglGetPlatformDisplayEXT
    from OpenGL.raw.EGL.EXT.platform_device import EGL_PLATFORM_DEVICE_EXT

    client = _text(EGL.eglQueryString(EGL.EGL_NO_DISPLAY, EGL.EGL_EXTENSIONS))
    if "EGL_EXT_platform_device" not in client or "EGL_EXT_device_enumeration" not in client:
        return []
    ranked: list[tuple[int, str, Any]] = []
    for i, device in enumerate(egl_get_devices(16)):
        try:
            extensions = _text(eglQueryDeviceStringEXT(device, EGL.EGL_EXTENSIONS))
        except Exception:
            extensions = ""
        cuda_index = _cuda_index(device) if "EGL_NV_device_cuda" in extensions else None
        rank = 2
        if cuda_index is not None:
            rank = 0 if cuda_device is None or cuda_index == cuda_device else 1
        label = f"EGL device {i}"
        if cuda_index is not None:
            label += f" (CUDA device {cuda_index})"
        ranked.append((rank, label, device))
    out: list[tuple[str, Any]] = []
    for _, label, device in sorted(ranked, key=lambda r: r[0]):
        try:
            display = eglGetPlatformDisplayEXT(EGL_PLATFORM_DEVICE_EXT, device, None)
        except Exception:
            continue
        if display:
            out.append((label, display))
    return out


def _cuda_index(device: Any) -> int | None:
    import numpy as np
    from OpenGL.EGL.EXT.device_base import eglQueryDeviceAttribEXT

    value = np.zeros(2, dtype=np.int32)  # an EGLAttrib is pointer-sized; PyOpenGL types it int32
    try:
        if eglQueryDeviceAttribEXT(device, _EGL_CUDA_DEVICE_NV, value):
            return int(value.view(np.int64)[0])
    except Exception:
        pass
    return None


def _context_on(display: Any) -> tuple[Any, Any]:
    """(surface, context) of a desktop OpenGL context on an initialised display."""
    from OpenGL import EGL

    config_attribs = [
        EGL.EGL_SURFACE_TYPE, EGL.EGL_PBUFFER_BIT,
        EGL.EGL_RENDERABLE_TYPE, EGL.EGL_OPENGL_BIT,
        EGL.EGL_RED_SIZE, 8, EGL.EGL_GREEN_SIZE, 8, EGL.EGL_BLUE_SIZE, 8,
        EGL.EGL_ALPHA_SIZE, 8,
        EGL.EGL_NONE,
    ]  # fmt: skip
    configs = (EGL.EGLConfig * 1)()
    count = EGL.EGLint()
    if not EGL.eglChooseConfig(display, config_attribs, configs, 1, count) or count.value < 1:
        raise EglUnavailable("no EGL config with a pbuffer and desktop OpenGL")
    if not EGL.eglBindAPI(EGL.EGL_OPENGL_API):
        raise EglUnavailable("eglBindAPI(EGL_OPENGL_API) failed")
    surface = EGL.eglCreatePbufferSurface(
        display, configs[0], [EGL.EGL_WIDTH, 1, EGL.EGL_HEIGHT, 1, EGL.EGL_NONE]
    )
    if not surface:
        raise EglUnavailable("eglCreatePbufferSurface failed")
    context = EGL.eglCreateContext(display, configs[0], EGL.EGL_NO_CONTEXT, [EGL.EGL_NONE])
    if not context:
        EGL.eglDestroySurface(display, surface)
        raise EglUnavailable("eglCreateContext failed")
    return surface, context


def _open(cuda_device: int | None) -> EglContext:
    """Create the context in this process (PyOpenGL must be on its EGL platform)."""
    from OpenGL import EGL, GL

    candidates = _device_displays(cuda_device)
    candidates.append(("EGL_DEFAULT_DISPLAY", EGL.eglGetDisplay(EGL.EGL_DEFAULT_DISPLAY)))
    failures: list[str] = []
    for source, display in candidates:
        if not display:
            failures.append(f"{source}: no display")
            continue
        major, minor = EGL.EGLint(), EGL.EGLint()
        try:
            if not EGL.eglInitialize(display, major, minor):
                raise EglUnavailable("eglInitialize failed")
            surface, context = _context_on(display)
            if not EGL.eglMakeCurrent(display, surface, surface, context):
                raise EglUnavailable("eglMakeCurrent failed")
        except Exception as exc:
            failures.append(f"{source}: {exc}")
            continue
        return EglContext(
            display=display,
            surface=surface,
            context=context,
            vendor=_text(GL.glGetString(GL.GL_VENDOR)),
            renderer=_text(GL.glGetString(GL.GL_RENDERER)),
            version=_text(GL.glGetString(GL.GL_VERSION)),
            source=f"{source}, EGL {major.value}.{minor.value}",
        )
    raise EglUnavailable("no EGL display gave an OpenGL context (" + "; ".join(failures) + ")")


def _probe(env: dict[str, str], cuda_device: int | None) -> dict[str, Any]:
    """What _open() gives in a fresh process with this environment."""
    args = [sys.executable, os.path.abspath(__file__), "--probe"]
    if cuda_device is not None:
        args.append(str(cuda_device))
    try:
        done = subprocess.run(
            args, env={**env, "PYOPENGL_PLATFORM": "egl"}, capture_output=True, text=True,
            timeout=120, check=False,
        )  # fmt: skip
    except (OSError, subprocess.TimeoutExpired) as exc:
        return {"ok": False, "error": f"probe did not run ({exc})"}
    lines = done.stdout.strip().splitlines()
    try:
        return dict(json.loads(lines[-1]))
    except (IndexError, ValueError):
        tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
        return {"ok": False, "error": f"probe exited {done.returncode}: {tail}"}


def _summary(probe: dict[str, Any]) -> str:
    if probe.get("ok"):
        return f"{probe['renderer']} ({probe['vendor']})"
    return str(probe.get("error", "failed"))


def _choose_vendor(cuda_device: int | None, notes: list[str]) -> None:
    """Set __EGL_VENDOR_LIBRARY_FILENAMES when the default vendors give no NVIDIA GL."""
    if VENDOR_ENV in os.environ:
        notes.append(f"{VENDOR_ENV}={os.environ[VENDOR_ENV]} (set by the caller)")
        return
    default = _probe(dict(os.environ), cuda_device)
    if default.get("ok") and "nvidia" in str(default.get("vendor", "")).lower():
        return
    if not os.path.isfile(NVIDIA_VENDOR_FILE):
        notes.append(f"default EGL: {_summary(default)}; no {NVIDIA_VENDOR_FILE}")
        return
    nvidia = _probe({**os.environ, VENDOR_ENV: NVIDIA_VENDOR_FILE}, cuda_device)
    if nvidia.get("ok"):
        os.environ[VENDOR_ENV] = NVIDIA_VENDOR_FILE
        notes.append(
            f"default EGL gave {_summary(default)}; used {VENDOR_ENV}={NVIDIA_VENDOR_FILE}"
        )
    else:
        notes.append(
            f"default EGL: {_summary(default)}; "
            f"with {VENDOR_ENV}={NVIDIA_VENDOR_FILE}: {_summary(nvidia)}"
        )


_opened: EglContext | EglUnavailable | None = None


def open_context(cuda_device: int | None = 0) -> EglContext:
    """The process's EGL context (made once, then reused), current in the calling thread.

    Raises EglUnavailable with a one-line reason for a skip.
    """
    global _opened
    if _opened is None:
        _opened = _open_once(cuda_device)
    if isinstance(_opened, EglUnavailable):
        raise _opened
    _opened.make_current()
    return _opened


def _open_once(cuda_device: int | None) -> EglContext | EglUnavailable:
    notes: list[str] = []
    if "OpenGL" in sys.modules:
        from OpenGL import platform

        name = type(platform.PLATFORM).__name__
        if "EGL" not in name:
            return EglUnavailable(
                f"PyOpenGL is already loaded for {name}, not EGL: run tests/gpu "
                "in a pytest process of its own"
            )
    else:
        _choose_vendor(cuda_device, notes)
        os.environ["PYOPENGL_PLATFORM"] = "egl"
    try:
        context = _open(cuda_device)
    except Exception as exc:
        return EglUnavailable("; ".join([f"EGL: {exc}", *notes]))
    context.notes = notes
    return context


# ---- reading GL objects back (context current) ----------------------------------------------


def read_buffer(buffer: int, size: int) -> Any:
    """The first ``size`` bytes of a GL buffer object, as a uint8 numpy array."""
    import numpy as np
    from OpenGL import GL

    out = np.zeros(size, dtype=np.uint8)
    GL.glBindBuffer(GL.GL_COPY_READ_BUFFER, buffer)
    try:
        GL.glGetBufferSubData(GL.GL_COPY_READ_BUFFER, 0, size, out)
    finally:
        GL.glBindBuffer(GL.GL_COPY_READ_BUFFER, 0)
    return out


def new_texture(width: int, height: int) -> int:
    """An RGBA8 texture of width x height, contents undefined."""
    from OpenGL import GL

    texture = int(GL.glGenTextures(1))
    GL.glBindTexture(GL.GL_TEXTURE_2D, texture)
    GL.glTexImage2D(
        GL.GL_TEXTURE_2D, 0, GL.GL_RGBA8, width, height, 0, GL.GL_RGBA, GL.GL_UNSIGNED_BYTE, None
    )
    GL.glBindTexture(GL.GL_TEXTURE_2D, 0)
    return texture


def read_texture(texture: int, width: int, height: int) -> Any:
    """An RGBA8 texture's level 0 as a (height, width, 4) uint8 numpy array."""
    import numpy as np
    from OpenGL import GL

    out = np.zeros((height, width, 4), dtype=np.uint8)
    GL.glBindTexture(GL.GL_TEXTURE_2D, texture)
    GL.glPixelStorei(GL.GL_PACK_ALIGNMENT, 1)
    try:
        GL.glGetTexImage(GL.GL_TEXTURE_2D, 0, GL.GL_RGBA, GL.GL_UNSIGNED_BYTE, out)
    finally:
        GL.glBindTexture(GL.GL_TEXTURE_2D, 0)
    return out


def gl_error() -> int:
    """glGetError(): 0 when no GL call failed since the last check."""
    from OpenGL import GL

    return int(GL.glGetError())


if __name__ == "__main__":
    if "--probe" in sys.argv:
        rest = sys.argv[sys.argv.index("--probe") + 1 :]
        try:
            ctx = _open(int(rest[0]) if rest else None)
            print(json.dumps({"ok": True, "vendor": ctx.vendor, "renderer": ctx.renderer,
                              "version": ctx.version, "source": ctx.source}))  # fmt: skip
        except Exception as exc:
            print(json.dumps({"ok": False, "error": str(exc) or type(exc).__name__}))
    else:
        try:
            print(open_context().describe())
        except EglUnavailable as exc:
            print(f"unavailable: {exc}")
