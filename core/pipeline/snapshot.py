"""A snapshot of the frame on screen with its overlays, whichever path made it."""

from __future__ import annotations

from pathlib import Path

from framelens.core.pipeline.settings import PipelineSettings
from framelens.core.stages.draw.opencv import annotate
from framelens.core.stages.draw.style import DEFAULT_STYLE
from framelens.core.stages.sinks import save_snapshot
from framelens.core.stages.tasks import task_for
from framelens.core.types import FrameResult

__all__ = ["save_frame_snapshot"]


def save_frame_snapshot(
    result: FrameResult, path: str | Path, settings: PipelineSettings | None = None
) -> Path:
    """Save ``result``'s frame as PNG with its overlays and return the path written.

    The CPU path hands annotated frames; the GPU path leaves the overlays to the screen,
    so they are drawn here with ``settings``' labels and overlay style. Raises
    ExportError (a FrameLensError) when the file cannot be written.
    """
    image = result.annotated
    if image is None and settings is not None:  # the task draws its own overlay
        task = task_for(settings.model)
        image = task.annotate(result.frame.image, result.output, settings.overlay)
    elif image is None:
        image = annotate(result.frame.image, result.output, (), DEFAULT_STYLE)
    return save_snapshot(image, path)
