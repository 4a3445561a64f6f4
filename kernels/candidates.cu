// Detection candidates gathered on the device: the rows of a (frames, rows, cols)
// float32 model output whose gate column (YOLOv5/YOLOX objectness) beats the
// confidence threshold, copied into one compact list for the whole batch, so that
// only those rows cross to the host instead of the whole output (16 x 3549 x 85
// floats, 19 MB, per YOLOX batch of 16; a few dozen rows pass at conf 0.25).
//
// The test is the host decoder's first step, `pred[:, gate] > conf` in float32
// (framelens/core/stages/tasks/detect/candidates.py), so both paths pick the same
// rows. Slots come from one atomic counter, so the list's order depends on
// scheduling: each slot records its flat row number (frame * rows + row) and the
// host sorts by it. A batch with more candidates than `capacity` counts them all
// but stores only `capacity`; the host then decodes the whole output instead.
//
// One thread per output row, grid (ceil(rows / 256), frames): the gate loads are
// strided by cols floats (one sector each), the copies of the few passing rows are
// row-contiguous.
#include "common.cuh"

extern "C" __global__ void __launch_bounds__(256)
    fl_gather_candidates(const float* __restrict__ out, int rows, int cols, int gate,
                         float conf, int capacity, int* __restrict__ count,
                         int* __restrict__ where, float* __restrict__ picked) {
    const int r = blockIdx.x * blockDim.x + threadIdx.x;
    const int f = blockIdx.y;
    if (r >= rows) return;
    const size_t flat = (size_t)f * rows + r;
    const float* row = out + flat * cols;
    if (!(__ldg(row + gate) > conf)) return;
    const int slot = atomicAdd(count, 1);
    if (slot >= capacity) return;
    where[slot] = (int)flat;
    float* dst = picked + (size_t)slot * cols;
    for (int c = 0; c < cols; ++c) dst[c] = __ldg(row + c);
}
