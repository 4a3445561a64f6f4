"""Annotators: one overlay style, drawn by OpenCV here, by QPainter on the canvas and by a CUDA
kernel on the GPU.
"""
