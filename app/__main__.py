"""``python -m framelens``: the same as the ``framelens`` command."""

from __future__ import annotations

import sys

from framelens.cli import main

if __name__ == "__main__":
    sys.exit(main())
