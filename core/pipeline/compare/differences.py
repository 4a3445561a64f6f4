"""The compare view's difference overlays: what each pane found that the reference did
not, and the reverse, drawn on the plain frame, with the colours legends refer to."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from framelens.core.pipeline.compare.panes import CompareStep, PaneSpec
from framelens.core.stages.tasks.detect.diff import (
    REF_ONLY_COLOUR,
    TEST_ONLY_COLOUR,
    draw_difference,
)
from framelens.core.types import Image

__all__ = ["DifferenceColours", "PaneDifferences", "difference_colours", "draw_pane_differences"]


@dataclass(frozen=True)
class DifferenceColours:
    """The difference view's two colours as "#rrggbb", for legends and notes."""

    ref_only: str  # the reference found it, the pane missed it (drawn dashed)
    test_only: str  # only the pane found it


def _hex(bgr: tuple[int, int, int]) -> str:
    b, g, r = bgr
    return f"#{r:02x}{g:02x}{b:02x}"


def difference_colours() -> DifferenceColours:
    """The colours draw_pane_differences uses, for text that refers to them."""
    return DifferenceColours(_hex(REF_ONLY_COLOUR), _hex(TEST_ONLY_COLOUR))


@dataclass(frozen=True)
class PaneDifferences:
    """One compare step's difference overlays, per pane (None for the reference).

    ``images[i]``: the reference's detections that pane i missed and pane i's that the
    reference lacks, drawn on the plain frame. ``counts[i]``: (only in the reference,
    only in pane i).
    """

    images: tuple[Image | None, ...]
    counts: tuple[tuple[int, int] | None, ...]


def draw_pane_differences(step: CompareStep, panes: Sequence[PaneSpec]) -> PaneDifferences:
    """Each pane's difference overlay against the reference, and how many of each."""
    ref = step.panes[step.reference].label
    images: list[Image | None] = []
    counts: list[tuple[int, int] | None] = []
    for i, pane in enumerate(step.panes):
        if i == step.reference:
            images.append(None)
            counts.append(None)
            continue
        diff = step.difference(i)
        labels = panes[i].settings.model.labels
        images.append(draw_difference(step.frame.image, diff, labels, (ref, pane.label)))
        counts.append((len(diff.ref_only), len(diff.test_only)))
    return PaneDifferences(tuple(images), tuple(counts))
