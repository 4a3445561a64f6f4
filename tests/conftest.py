"""Fixtures for the whole suite: expensive results that several test modules share,
built once per session in the session's temporary folder."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from int8_variant import SharedInt8


@pytest.fixture(scope="session")
def yolox_int8(tmp_path_factory: pytest.TempPathFactory) -> SharedInt8:
    """YOLOX-Nano's INT8 variant calibrated on the person sample (tests/int8_variant.py)."""
    import int8_variant

    return int8_variant.build(tmp_path_factory.mktemp("int8-cache"))
