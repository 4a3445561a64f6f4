"""api.frames_at: the frames of a video at given indices (the results browser's
thumbnails), read from a real clip whose frames carry their index in their pixels."""

from __future__ import annotations

from pathlib import Path

import pytest
from framelens.core import api
from media_factory import read_index, write_clip


@pytest.fixture(scope="module")
def clip(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_clip(tmp_path_factory.mktemp("frames_at") / "clip.mp4", frames=300, gop=25)


def test_each_frame_asked_for_once_in_order_with_its_own_pixels(clip: Path) -> None:
    # near ones are read on, far ones sought, one behind another sought back to
    got = list(api.frames_at(clip, [250, 5, 7, 100, 101, 5, 299, 0]))
    assert [i for i, _ in got] == [0, 5, 7, 100, 101, 250, 299]
    assert [read_index(image) for _, image in got] == [0, 5, 7, 100, 101, 250, 299]
    assert got[0][1].shape == (96, 128, 3)


def test_a_frame_past_the_end_or_a_missing_file_is_a_source_error(
    clip: Path, tmp_path: Path
) -> None:
    reader = api.frames_at(clip, [10, 400])
    assert next(reader)[0] == 10
    with pytest.raises(api.FrameLensError, match="400"):
        next(reader)
    with pytest.raises(api.FrameLensError):
        list(api.frames_at(tmp_path / "gone.mp4", [0]))
    assert list(api.frames_at(clip, [])) == []
