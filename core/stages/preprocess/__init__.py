"""Preprocessing: one interface; the CPU implementation (cpu.py) and the CUDA one (cuda.py)
side by side.
"""
