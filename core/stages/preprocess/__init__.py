"""Preprocessing: one interface (base.py: ``HostPreprocessor`` and ``DevicePreprocessor``,
both ``FramePreprocessor``s); the CPU implementation (cpu.py) and the CUDA one (cuda.py)
side by side.
"""
