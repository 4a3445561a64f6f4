"""Batch analysis of archives: the batch window, its table, the results browser."""
