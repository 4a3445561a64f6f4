"""One context-manager shape for everything that holds a resource until close()."""

from __future__ import annotations

from types import TracebackType
from typing import Self


class Closing:
    """``with thing:`` closes it at the end of the block, whatever happens.

    Subclasses implement ``close()`` (safe to call more than once).
    """

    def close(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
