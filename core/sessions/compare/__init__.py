"""Comparison as a consumer of the session's drive: lock-step panes over one source (the
CLI's report, the compare view, a kept report's gaps)."""
