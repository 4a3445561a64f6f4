"""The compare window: panes in lock-step, their agreement, the INT8 sensitivity view."""
