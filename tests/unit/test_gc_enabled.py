"""The unit tests run with Python's own garbage collection.

The GUI tests collect cyclic garbage on the GUI thread only, as the application does
(gui/common/gc_guard.py turns automatic collection off and collects on a Qt timer). The
tests that run after them in the same process spin no Qt event loop: had the collector
stayed on, nothing in a reference cycle would be freed for the rest of the run (every
player, source and frame of the unit tests), which made seeks in later player tests time
out now and then under CI's load."""

from __future__ import annotations

import gc


def test_automatic_collection_is_on_outside_the_gui_tests() -> None:
    assert gc.isenabled()
