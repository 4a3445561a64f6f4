"""The stages a frame passes through: sources, preprocessing, engines, tasks, drawing, sinks;
CPU and GPU implementations side by side.
"""
