"""The one error formatter: core.errors.error_message, used by the CLI and the GUI."""

from __future__ import annotations

import pytest
from framelens.cli import main
from framelens.core.errors import ConfigError, FrameLensError, SourceError, error_message
from framelens.core.sessions.playback import player


def test_framelens_error_is_its_first_line_as_is() -> None:
    assert error_message(SourceError("cannot open clip.mp4\nffmpeg said: ...")) == (
        "cannot open clip.mp4"
    )
    assert error_message(ConfigError("  padded  ")) == "padded"


def test_other_errors_are_named() -> None:
    assert error_message(ValueError("bad value\nmore")) == "unexpected error: ValueError: bad value"
    assert error_message(KeyError("k")) == "unexpected error: KeyError: 'k'"


def test_empty_text_gives_the_type_name() -> None:
    assert error_message(FrameLensError()) == "FrameLensError"


def test_player_keeps_error_message_importable() -> None:
    assert player.error_message is error_message


def test_cli_prints_one_line_and_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "/nonexistent/clip.mp4"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("framelens: error: ")
    assert err.count("\n") == 1
