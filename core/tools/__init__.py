"""Tools beside the sessions: the benchmark (``framelens bench``), the GPU stack's
doctor (``framelens doctor``) and TensorRT engines built ahead of a run
(``framelens engines``, the engine dialog)."""
