"""The main window: playback of one source, its model, precision, detections,
the status bar and the performance plots."""
