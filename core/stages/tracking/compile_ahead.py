"""``python -m framelens.core.stages.tracking.compile_ahead``: ByteTrack's and OC-SORT's
compiled steps compiled (or loaded from numba's disk cache) once, at install, so that
the first tracked frame of a session does not wait for the compiler (~10-30 s)."""

from __future__ import annotations

from framelens.core.stages.tracking.registry import trackers_uncompiled

__all__ = ["compile_trackers"]


def compile_trackers() -> None:
    """Both compiled trackers ready; nothing where numba cannot run (the references
    track instead: ``trackers_uncompiled`` says why)."""
    if trackers_uncompiled() is not None:
        return
    from framelens.core.stages.tracking import bytetrack_compiled, ocsort_compiled

    bytetrack_compiled.compile_now()
    ocsort_compiled.compile_now()


if __name__ == "__main__":
    compile_trackers()
