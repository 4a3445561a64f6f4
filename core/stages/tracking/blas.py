"""OpenBLAS's thread pool held to one thread in a process that tracks.

The trackers' Kalman filters multiply stacks of 8x8 matrices (``@``: the BLAS's gemm).
OpenBLAS's pool has a thread per core; small products wake it and its threads spin a
while before they sleep. On the GPU machine (16 cores) every process of a several-source
run would keep up to 16 such threads, spinning beside the decoders and inference workers
of every process, for products one thread does in a microsecond. So the first tracker a
process makes holds the BLAS to one thread (threadpoolctl, for the whole process: the
product has no large matrix products). A user who set the pool's size
(``OPENBLAS_NUM_THREADS``, ``OMP_NUM_THREADS``) keeps it.
"""

from __future__ import annotations

import os
import threading

__all__ = ["BLAS_THREAD_VARIABLES", "one_blas_thread"]

BLAS_THREAD_VARIABLES = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")
"""Where a user sets the BLAS's threads: their choice stands."""

_lock = threading.Lock()
_done = False


def one_blas_thread() -> None:
    """Hold the process's BLAS to one thread (once; not where a variable of
    ``BLAS_THREAD_VARIABLES`` is set)."""
    global _done
    with _lock:
        if _done:
            return
        _done = True
        if any(os.environ.get(name) for name in BLAS_THREAD_VARIABLES):
            return
        from threadpoolctl import threadpool_limits

        threadpool_limits(limits=1, user_api="blas")
