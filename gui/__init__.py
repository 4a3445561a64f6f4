"""FrameLens's desktop interface (PySide6). Core never imports this package."""

from __future__ import annotations

__all__ = ["main"]


def main(argv: list[str] | None = None, source: str | None = None) -> int:
    """Start the GUI (imported lazily so ``import framelens.gui`` stays cheap)."""
    from framelens.gui.app import main as run

    return run(argv, source)
