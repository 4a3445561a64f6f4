"""Precision variants of a model: FP16 conversion and INT8 Q/DQ calibration, cached."""
