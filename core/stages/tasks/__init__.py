"""Tasks: what is task-specific (input geometry, output decoding, parameters, overlay,
agreement, export fields).
"""
