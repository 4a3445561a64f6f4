"""Where the GUI tests save the screenshots they take: the folder an environment
variable names (``docs`` refreshes the ones the docs show), else one folder per kind
under the system's temporary folder, ``framelens-shots-<user>/<kind>``, which each run
overwrites instead of leaving a new folder behind."""

from __future__ import annotations

import getpass
import os
import tempfile
from pathlib import Path

ROOT = Path(tempfile.gettempdir()) / f"framelens-shots-{getpass.getuser()}"


def shots_dir(variable: str, kind: str) -> Path:
    """The folder for ``kind``'s screenshots, made if missing."""
    folder = Path(os.environ.get(variable) or ROOT / kind)
    folder.mkdir(parents=True, exist_ok=True)
    return folder
