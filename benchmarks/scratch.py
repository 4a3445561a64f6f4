"""A benchmark's scratch folder: clips, a model or settings it makes for its runs, kept
until the benchmark exits and removed then, so that runs leave nothing behind."""

from __future__ import annotations

import atexit
import shutil
import tempfile
from pathlib import Path


def scratch_folder(prefix: str) -> Path:
    """A new temporary folder named ``prefix...``, removed when the process exits."""
    folder = Path(tempfile.mkdtemp(prefix=prefix))
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    return folder
