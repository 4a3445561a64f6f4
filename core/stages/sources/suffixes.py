"""The file extensions FrameLens takes for a video or an image: one list for every place
that picks videos or images by name (the Open dialogs' filter, a batch's folders, an image
folder, the decoder a file gets)."""

from __future__ import annotations

__all__ = ["IMAGE_SUFFIXES", "VIDEO_SUFFIXES"]

VIDEO_SUFFIXES = (
    ".mp4", ".m4v", ".mkv", ".mov", ".avi", ".webm", ".ts", ".mts", ".m2ts", ".mpg",
    ".mpeg", ".wmv", ".flv", ".3gp", ".ogv", ".gif",
)  # fmt: skip
"""Containers FFmpeg (PyAV) reads and FileSource plays, lower case with their dot. A file
by another name still opens when given by path: this list is for choosing among files."""

IMAGE_SUFFIXES = frozenset({".png", ".jpg", ".jpeg", ".bmp", ".tif", ".tiff", ".webp"})
"""Still images: an image folder's frames, and files NVDEC never decodes (the host reads
them as a one-frame video)."""
