"""The error hierarchy, and the one place an error becomes the line a user reads.

CLI and GUI turn every exception into one line with ``error_message``.
"""


class FrameLensError(Exception):
    """Base of every error a user should see as a one-line message."""


class SourceError(FrameLensError):
    """A video file, camera, stream or image folder could not be opened or read."""


class ModelError(FrameLensError):
    """A model file is missing, malformed, or of a layout FrameLens cannot decode."""


class EngineError(FrameLensError):
    """An inference backend could not be created or failed while running."""


class ExportError(FrameLensError):
    """Annotated video, detections or a snapshot could not be written."""


class TrackFileError(FrameLensError):
    """A detections, tracks or ground-truth file is not one FrameLens reads (MOT Challenge
    text or a FrameLens detections JSON); the message names the file and the line."""


class ConfigError(FrameLensError):
    """Options that contradict each other or name something unknown."""


class GpuError(EngineError):
    """The GPU path failed (out of memory, driver or kernel error); runs continue on the CPU."""


class Cancelled(FrameLensError):
    """The run was cancelled by the user; partial outputs were discarded."""


def error_message(exc: BaseException) -> str:
    """One line for the user: a FrameLensError's first line as is, anything else named.

    An unexpected exception reads "unexpected error: Type: text" (its first line), so a
    bug is told apart from a problem the user can fix; an empty text gives the type name.
    """
    if isinstance(exc, FrameLensError):
        text = str(exc)
    else:
        text = f"unexpected error: {type(exc).__name__}: {exc}"
    return text.strip().splitlines()[0] if text.strip() else type(exc).__name__
