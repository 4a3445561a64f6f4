// Helpers for timing kernels from Python (framelens.core.gpu.kernel_bench).
#include "common.cuh"

// Busy-waits `cycles` SM clock cycles, so that launches queued behind it run
// back to back however slowly the host enqueues them.
extern "C" __global__ void fl_spin(long long cycles) {
    const long long start = clock64();
    while (clock64() - start < cycles) {
    }
}
