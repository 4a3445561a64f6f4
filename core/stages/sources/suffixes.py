"""The file extensions FrameLens takes for a video: one list for every place that picks
videos by name (the Open dialogs' filter, a batch's folders)."""

from __future__ import annotations

__all__ = ["VIDEO_SUFFIXES"]

VIDEO_SUFFIXES = (
    ".mp4", ".m4v", ".mkv", ".mov", ".avi", ".webm", ".ts", ".mts", ".m2ts", ".mpg",
    ".mpeg", ".wmv", ".flv", ".3gp", ".ogv", ".gif",
)  # fmt: skip
"""Containers FFmpeg (PyAV) reads and FileSource plays, lower case with their dot. A file
by another name still opens when given by path: this list is for choosing among files."""
