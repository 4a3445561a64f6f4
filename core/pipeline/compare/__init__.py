"""Comparing runs of the same frames: detection and image agreement, reports."""
