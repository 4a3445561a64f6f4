"""What draws frames and figures: the GL canvas, texture upload, overlays, image views,
the performance plots."""
