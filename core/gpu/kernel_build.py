"""Building and loading FrameLens' CUDA modules: sources, digests, nvcc, the cubin cache.

The CUDA C sources in ``framelens/kernels/*.cu`` are the truth. ``KernelLoader``
builds them for the device's architecture with nvcc through pycuda at first use
(cached under ``platformdirs.user_cache_dir("framelens")/cuda``); where nvcc is
missing or fails it loads the PTX shipped beside the sources (``kernels/build.py``
makes it; the driver compiles it for the GPU at load), after checking from its
header that it was built from these very sources.

pycuda is imported only when a module is loaded: this module imports without it.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import logging
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

from framelens.core.errors import EngineError

log = logging.getLogger(__name__)

KERNEL_SOURCES = ("preprocess", "display", "sr_color", "draw", "candidates", "bench")
"""The .cu files in framelens/kernels, one per job; each is one CUDA module."""

PTX_ARCH = "compute_75"
"""Virtual architecture of the shipped PTX: Turing and every later GPU can load it."""

NVCC_OPTIONS: tuple[str, ...] = ("-O3", "-std=c++17")
"""Options for every build, run-time (pycuda) and shipped (kernels/build.py) alike."""

PTX_HEADER = "// framelens-kernel-source-sha256:"
"""First line of a shipped PTX file: the digest of the sources it was built from."""

_INCLUDE = re.compile(rb'^\s*#\s*include\s*"([^"]+)"', re.MULTILINE)


class KernelError(EngineError):
    """The CUDA kernels could not be built or loaded, or a launch was given bad arguments."""


# -- sources ---------------------------------------------------------------------------------


def kernels_dir() -> Path:
    """The folder holding the .cu sources and shipped .ptx files (the source tree in a dev
    install: links are resolved, so ``kernels/build.py`` writes where git sees it)."""
    # found, not imported: framelens.kernels' build script imports this module
    spec = importlib.util.find_spec("framelens.kernels")
    if spec is None or spec.origin is None:
        raise KernelError("the framelens.kernels package is missing from this install")
    return Path(spec.origin).resolve().parent


def _source_bytes(path: Path, seen: set[Path]) -> bytes:
    """The file followed by every local header it includes, line endings normalised."""
    if path in seen:
        return b""
    seen.add(path)
    text = path.read_bytes().replace(b"\r\n", b"\n")
    parts = [path.name.encode(), b"\0", text]
    for name in _INCLUDE.findall(text):
        header = path.parent / name.decode()
        if header.is_file():
            parts.append(_source_bytes(header, seen))
    return b"".join(parts)


def source_digest(name: str, directory: Path | None = None) -> str:
    """sha256 of ``<name>.cu`` and the local headers it includes (recorded in its PTX)."""
    folder = directory if directory is not None else kernels_dir()
    return hashlib.sha256(_source_bytes(folder / f"{name}.cu", set())).hexdigest()


def ptx_digest(ptx: bytes) -> str | None:
    """The source digest recorded in a shipped PTX file's first line, if any."""
    first = ptx.split(b"\n", 1)[0].decode("ascii", "replace").strip()
    if not first.startswith(PTX_HEADER):
        return None
    return first[len(PTX_HEADER) :].strip() or None


def find_nvcc() -> str | None:
    """nvcc on PATH, else under CUDA_HOME / CUDA_PATH / /usr/local/cuda."""
    found = shutil.which("nvcc")
    if found:
        return found
    for root in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"):
        if root:
            candidate = Path(root) / "bin" / ("nvcc.exe" if os.name == "nt" else "nvcc")
            if candidate.is_file():
                return str(candidate)
    return None


@functools.cache
def nvcc_version(nvcc: str) -> str:
    """The last line of ``nvcc --version`` (its build), part of the cache key."""
    out = subprocess.run(
        [nvcc, "--version"], capture_output=True, text=True, check=True, timeout=60
    ).stdout
    lines = [line for line in out.splitlines() if line.strip()]
    return lines[-1] if lines else "unknown"


def kernel_cache_dir() -> Path:
    from platformdirs import user_cache_dir

    return Path(user_cache_dir("framelens")) / "cuda"


# -- loading ---------------------------------------------------------------------------------


class KernelLoader:
    """Loads the CUDA modules for ``arch`` (e.g. "sm_90"); the caller makes the context current.

    ``build``: "auto" (nvcc for the device, else the shipped PTX), "nvcc" or "ptx".
    ``origin`` says per module how it was obtained; ``fallback_reason`` why nvcc
    was not used, when it was not.
    """

    def __init__(
        self,
        arch: str,
        *,
        build: str = "auto",
        cache_dir: Path | None = None,
        directory: Path | None = None,
    ) -> None:
        if build not in ("auto", "nvcc", "ptx"):
            raise ValueError(f"build must be auto, nvcc or ptx, not {build!r}")
        self.arch = arch
        self._dir = directory if directory is not None else kernels_dir()
        self._cache = cache_dir if cache_dir is not None else kernel_cache_dir()
        self._build = build
        self.origin: dict[str, str] = {}
        self.fallback_reason: str | None = None

    def load(self, name: str) -> Any:
        """The pycuda module of ``<name>.cu`` (a cubin built or cached, else the PTX)."""
        import pycuda.driver as cuda

        if self._build in ("auto", "nvcc"):
            try:
                binary, how = self._compile(name)
            except Exception as exc:  # pycuda's CompileError, ExecError, OSError...
                if self._build == "nvcc":
                    raise KernelError(f"nvcc could not build {name}.cu: {exc}") from exc
                self.fallback_reason = self.fallback_reason or f"nvcc: {exc}".splitlines()[0]
                log.info("using shipped PTX for %s.cu (%s)", name, self.fallback_reason)
            else:
                self.origin[name] = f"nvcc {self.arch} ({how})"
                return cuda.module_from_buffer(binary)
        ptx = self._shipped_ptx(name)
        try:
            module = cuda.module_from_buffer(ptx + b"\0")
        except Exception as exc:
            raise KernelError(f"the driver could not load {name}.ptx: {exc}") from exc
        self.origin[name] = f"ptx {PTX_ARCH} (driver JIT)"
        return module

    def _compile(self, name: str) -> tuple[bytes, str]:
        """A cubin for this device: from the cache when the sources, options and nvcc
        are unchanged, else built with nvcc through pycuda and cached."""
        from pycuda.compiler import compile as nvcc_compile

        nvcc = find_nvcc()
        if nvcc is None:
            raise KernelError("nvcc not found (PATH, CUDA_HOME, /usr/local/cuda)")
        key = hashlib.sha256(
            "|".join(
                (source_digest(name, self._dir), self.arch, *NVCC_OPTIONS, nvcc_version(nvcc))
            ).encode()
        ).hexdigest()[:32]
        cached = self._cache / f"{name}-{self.arch}-{key}.cubin"
        if cached.is_file():
            return cached.read_bytes(), "cached"
        source = (self._dir / f"{name}.cu").read_text(encoding="utf-8")
        cubin = bytes(
            nvcc_compile(
                source,
                nvcc=nvcc,
                options=list(NVCC_OPTIONS),
                no_extern_c=True,
                arch=self.arch,
                cache_dir=False,
                include_dirs=[str(self._dir)],
            )
        )
        try:  # the cache is an optimisation: a read-only home must not stop the GPU path
            self._cache.mkdir(parents=True, exist_ok=True)
            tmp = cached.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_bytes(cubin)
            os.replace(tmp, cached)
        except OSError as exc:
            log.warning("could not cache %s: %s", cached, exc)
        return cubin, "built"

    def _shipped_ptx(self, name: str) -> bytes:
        path = self._dir / f"{name}.ptx"
        if not path.is_file():
            raise KernelError(
                f"no nvcc ({self.fallback_reason or 'not tried'}) and no shipped {path.name}"
            )
        ptx = path.read_bytes()
        if ptx_digest(ptx) != source_digest(name, self._dir):
            raise KernelError(
                f"{path.name} was not built from the current {name}.cu: "
                "run python kernels/build.py (needs nvcc)"
            )
        return ptx
