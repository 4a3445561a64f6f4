"""Which TensorRT is installed: TensorRT 10/11 (module ``tensorrt``, data-centre and any
NVIDIA GPU) or TensorRT for RTX (module ``tensorrt_rtx``, RTX desktops and workstations).

Both have the strongly typed TensorRT 10/11 API (Builder, OnnxParser,
build_serialized_network, Runtime, execute_async_v3), so one backend drives either.
What differs is found by looking at the module, never at version strings:

- ahead-of-time targets: a flavour with ``ComputeCapability`` (TensorRT-RTX) builds plans
  for the compute capabilities it lists (``sm_75``, ``sm_86``, ...) on any machine, a GPU
  or none; the others build for the GPU they run on;
- where it runs: such a flavour runs only the compute capabilities it can target, so
  ``cannot_run`` says in one line why it refuses a GPU (the H200, 9.0, for TensorRT-RTX
  1.7), before any plan is built.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any

from framelens.core.errors import EngineError

MODULES = {"tensorrt": "tensorrt", "tensorrt_rtx": "tensorrt-rtx"}
"""Module name -> flavour name, in the order they are tried (TensorRT first: where both
are installed on a data-centre GPU, only it runs)."""

INSTALL_HINT = (
    "installer/gpu.sh installs TensorRT-RTX (RTX GPUs) or TensorRT where NVIDIA's "
    "packages are reachable; --backend onnxruntime runs the same graphs"
)


@dataclass(frozen=True)
class Flavour:
    """One installed TensorRT: its module, name ("tensorrt" or "tensorrt-rtx") and version."""

    name: str
    module: Any
    version: str

    @property
    def label(self) -> str:
        """As the plan list shows it: "tensorrt-rtx 1.7.1"."""
        return f"{self.name} {'.'.join(self.version.split('.')[:3])}"

    @property
    def targets(self) -> tuple[str, ...]:
        """The compute capabilities it builds for ahead of time ("sm_86", ...); () for a
        flavour that builds for the GPU it runs on only."""
        enum = getattr(self.module, "ComputeCapability", None)
        if enum is None:
            return ()
        names = [n for n in enum.__members__ if n.upper().startswith("SM")]
        return tuple(sorted((f"sm_{n[2:]}" for n in names), key=_target_order))

    @property
    def ahead_of_time(self) -> bool:
        return bool(self.targets)

    def target_enum(self, target: str) -> Any:
        """The module's ComputeCapability member of "sm_86"; EngineError for others."""
        if target not in self.targets:
            raise EngineError(
                f"{self.label} cannot build for {target} (it builds for "
                f"{', '.join(self.targets) or 'the GPU it runs on only'})"
            )
        return self.module.ComputeCapability.__members__[f"SM{target[3:]}"]

    def cannot_run(self, compute_capability: Sequence[int]) -> str | None:
        """Why engines of this flavour cannot run on a GPU of ``compute_capability``, or
        None when they can (a flavour without targets runs any GPU TensorRT supports)."""
        if not self.ahead_of_time:
            return None
        target = target_of(compute_capability)
        if target in self.targets:
            return None
        major, minor = compute_capability[0], compute_capability[1]
        runs = ", ".join(f"{t[3:-1]}.{t[-1]}" for t in self.targets)
        return (
            f"{self.label} does not run on compute capability {major}.{minor} "
            f"(it runs on {runs}: RTX GPUs)"
        )


def target_of(compute_capability: Sequence[int]) -> str:
    """(8, 6) -> "sm_86"."""
    return f"sm_{compute_capability[0]}{compute_capability[1]}"


def _target_order(target: str) -> tuple[int, int]:
    digits = target[3:]
    return int(digits[:-1]), int(digits[-1])


def parse_targets(text: str, flavour: Flavour) -> tuple[str, ...]:
    """ "sm_86,sm_89" (or "86,8.9") -> ("sm_86", "sm_89"), each one the flavour targets."""
    out = []
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        digits = part.lower().removeprefix("sm_").removeprefix("sm").replace(".", "")
        target = f"sm_{digits}"
        flavour.target_enum(target)  # EngineError names the targets it has
        out.append(target)
    if not out:
        raise EngineError("no target given (e.g. --target sm_86,sm_89)")
    return tuple(dict.fromkeys(out))


@cache
def installed_flavours() -> tuple[Flavour, ...]:
    """Every TensorRT flavour that imports here, in the order MODULES tries them."""
    found = []
    for module_name, name in MODULES.items():
        try:
            module = importlib.import_module(module_name)
        except Exception:  # not installed, or its libraries do not load
            continue
        if not hasattr(module, "Builder") or not hasattr(module, "Runtime"):
            continue
        found.append(Flavour(name, module, str(getattr(module, "__version__", "?"))))
    return tuple(found)


def import_flavour(name: str | None = None) -> Flavour:
    """The first installed flavour (or the one named); EngineError, one line, when none."""
    flavours = installed_flavours()
    for flavour in flavours:
        if name is None or flavour.name == name:
            return flavour
    if name is not None and flavours:
        raise EngineError(
            f"{name} is not installed (installed: {', '.join(f.label for f in flavours)})"
        )
    raise EngineError(f"TensorRT is not installed: {INSTALL_HINT}")


def flavour_for_gpu(compute_capability: Sequence[int]) -> tuple[Flavour | None, str | None]:
    """The installed flavour that runs on a GPU of ``compute_capability``, and, when
    none does, why (one line: what is installed and why it cannot run)."""
    flavours = installed_flavours()
    if not flavours:
        return None, f"TensorRT is not installed: {INSTALL_HINT}"
    reasons = []
    for flavour in flavours:
        reason = flavour.cannot_run(compute_capability)
        if reason is None:
            return flavour, None
        reasons.append(reason)
    return None, "; ".join(reasons)
