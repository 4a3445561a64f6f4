"""The error hierarchy. CLI and GUI turn any FrameLensError into one line, in one place."""


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


class ConfigError(FrameLensError):
    """Options that contradict each other or name something unknown."""


class GpuError(EngineError):
    """The GPU path failed (out of memory, driver or kernel error); runs continue on the CPU."""


class Cancelled(FrameLensError):
    """The run was cancelled by the user; partial outputs were discarded."""
