"""FrameLens: desktop workbench for GPU video analysis.

This package is the entry layer, above ``framelens.core`` and ``framelens.gui``: the
command line (``framelens.cli``), which can open the GUI, and ``python -m framelens``.
"""

from __future__ import annotations

from framelens.core import __version__

__all__ = ["__version__"]
