"""The demo clip shipped with FrameLens."""

from __future__ import annotations

__all__ = ["bundled_sample"]


def bundled_sample() -> str:
    """The demo clip shipped with FrameLens (CC BY 4.0, resources/samples/ATTRIBUTION.md)."""
    from importlib.resources import files

    return str(files("framelens.resources") / "samples" / "one-by-one-person-detection.mp4")
