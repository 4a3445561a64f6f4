"""Pipelines: the builder, the executor, playback and comparison, runs and the benchmark."""
