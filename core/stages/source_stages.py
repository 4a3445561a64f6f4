"""The per-source stage slot: stateful stages that follow the task, one chain per source.

    executor ──results in decode order──> SourceStages ──per source, in order──> consumers
                                           source 0: [stage, stage, ...]
                                           source 1: [stage, stage, ...]

A stage sees every result of its source once, in frame order, after the task has made
the result's output (detections) and before any consumer (writers, canvas, wall) takes
it: the place where a tracker gives each box its ID and where lines, zones and events
count. Each source gets chains of its own (from the factory), so one source's tracks
never meet another's. When the frames stop following one another (a seek, a restart, a
frame processed again after a settings change) the session resets that source's stages
before the next result: a stage never sees time run backwards.

Stages run on the consumer's thread of the session (core/sessions/session.py) or the
player (core/sessions/playback/worker.py); they need no lock of their own. The time they
take is each result's ``times.track``, a stage of the latency plots and of a run's
medians like the pipeline's own.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from framelens.core.types import FrameResult, SourceInfo

__all__ = [
    "ChainedStages",
    "SourceAwareFactory",
    "SourceStage",
    "SourceStages",
    "StageFactory",
    "chain_stages",
    "prepare_stages",
    "wants_pixels",
]


class SourceStage(Protocol):
    """One stateful step after the task, for one source."""

    def __call__(self, result: FrameResult) -> None:
        """Take the source's next result (it may add to ``result.output``)."""

    def reset(self) -> None:
        """The next result does not follow the last one (seek, restart): forget it."""


StageFactory = Callable[[int], Sequence[SourceStage]]
"""The stages of source number ``n`` of a run (its place among the sources given: the
same in every device group and process), made when its first result comes. A factory
whose stages look at the frames' pixels says so with ``needs_pixels = True`` (the
session then keeps them where a run would drop them: ``wants_pixels``)."""


def prepare_stages(factory: StageFactory | None) -> None:
    """Let ``factory`` ready what its stages will need (``prepare()``: a tracker's
    compiled code loaded) before the first result comes, so that a run's first frames
    do not wait for it."""
    prepare = getattr(factory, "prepare", None)
    if callable(prepare):
        prepare()


def wants_pixels(factory: StageFactory | None) -> bool:
    """Whether ``factory``'s stages look at the frames' pixels (``needs_pixels``)."""
    return bool(getattr(factory, "needs_pixels", False))


@runtime_checkable
class SourceAwareFactory(Protocol):
    """A stage factory that also wants to know what its source is (a tracker's frame
    rate): the session gives it the source's ``SourceInfo`` when it has one."""

    def __call__(self, number: int) -> Sequence[SourceStage]: ...

    def for_source(self, number: int, info: SourceInfo | None) -> Sequence[SourceStage]:
        """The stages of source ``number``, which ``info`` describes (None: unknown)."""
        ...


@dataclass(frozen=True)
class ChainedStages:
    """The stages of ``first`` then those of ``then``, per source (picklable when both
    are)."""

    first: StageFactory
    then: StageFactory

    @property
    def needs_pixels(self) -> bool:
        return wants_pixels(self.first) or wants_pixels(self.then)

    def prepare(self) -> None:
        prepare_stages(self.first)
        prepare_stages(self.then)

    def __call__(self, number: int) -> Sequence[SourceStage]:
        return self.for_source(number, None)

    def for_source(self, number: int, info: SourceInfo | None) -> Sequence[SourceStage]:
        out: list[SourceStage] = []
        for factory in (self.first, self.then):
            if isinstance(factory, SourceAwareFactory):
                out += factory.for_source(number, info)
            else:
                out += factory(number)
        return out


def chain_stages(first: StageFactory | None, then: StageFactory) -> StageFactory:
    """``first``'s stages (if any) followed by ``then``'s."""
    return then if first is None else ChainedStages(first, then)


class SourceStages:
    """The chains of a session's sources, made on demand from ``factory``."""

    def __init__(
        self,
        factory: StageFactory | None,
        ids: Sequence[int] | None = None,
        info: Callable[[int], SourceInfo | None] | None = None,
    ) -> None:
        self._factory = factory
        self._ids = list(ids) if ids is not None else None  # session source -> run's number
        self._info = info  # session source -> what it is (a SourceAwareFactory is told)
        self._chains: dict[int, Sequence[SourceStage]] = {}
        prepare_stages(factory)

    def __bool__(self) -> bool:
        return self._factory is not None

    def __call__(self, result: FrameResult) -> None:
        """``result`` through its source's chain, in order."""
        if self._factory is None:
            return
        began = time.perf_counter()
        for stage in self._chain(result.frame.source_id):
            stage(result)
        result.times.track = (time.perf_counter() - began) * 1000.0

    def _chain(self, source: int) -> Sequence[SourceStage]:
        """The chain of session source ``source``, made on its first result."""
        chain = self._chains.get(source)
        if chain is None:
            number = source if self._ids is None else self._ids[source]
            factory = self._factory
            assert factory is not None
            if isinstance(factory, SourceAwareFactory) and self._info is not None:
                made = factory.for_source(number, self._info(source))
            else:
                made = factory(number)
            chain = self._chains[source] = tuple(made)
        return chain

    def clear(self) -> None:
        """Forget every chain: the sources are new (playback opened another video), and
        their stages are made afresh when their first results come."""
        self._chains.clear()

    def reset(self, source_id: int | None = None) -> None:
        """Reset one source's chain (None: every source's)."""
        for source, chain in self._chains.items():
            if source_id is None or source == source_id:
                for stage in chain:
                    stage.reset()
