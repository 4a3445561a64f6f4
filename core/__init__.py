"""FrameLens core: sources, models, pipeline, export. Imports no Qt."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("framelens")
except PackageNotFoundError:  # running from a source tree that is not installed
    __version__ = "0.0.0+unknown"
