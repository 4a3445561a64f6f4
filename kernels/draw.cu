// Boxes and landmark dots drawn in place on packed uint8 frames (3 or 4 channels), for
// frames that stay on the GPU. Tag text is drawn by the host painters only.
//
// Each shape is 8 int32: x1, y1, x2, y2, colour (bytes c0 c1 c2 c3 in the image's
// channel order, c0 in the low byte), half, kind, 0 (framelens/core/gpu/rects.py).
// Kind 0, a rectangle (x1..x2, y1..y2 inclusive, pixels): half >= 0 draws an outline
// band of width 2 * half + 1 centred on the edges (what cv2.rectangle covers for
// thickness 1 -> half 0, t >= 2 -> (t + 1) / 2, except that cv2 rounds the outer
// corners and these are square, as framelens.core.stages.draw.style draws them);
// half < 0 fills. Kind 1, a disc: the pixels within half of (x1, y1),
// dx * dx + dy * dy <= half * half (what cv2.circle(half, FILLED, LINE_8) covers).
// One thread per image pixel walks the shapes in order and keeps the last one that
// covers it, so overlaps resolve as on the CPU (later shapes on top) and the result
// does not depend on scheduling.
#include "common.cuh"

extern "C" __global__ void __launch_bounds__(256) fl_draw_rects(u8* __restrict__ img, int pitch,
                                                                 int w, int h, int channels,
                                                                 const int* __restrict__ rects,
                                                                 int n) {
    const int x = blockIdx.x * blockDim.x + threadIdx.x;
    const int y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x >= w || y >= h) return;
    int colour = 0;
    bool hit = false;
    const int4* r4 = reinterpret_cast<const int4*>(rects);
    for (int i = 0; i < n; ++i) {
        const int4 box = __ldg(r4 + 2 * i);
        const int4 extra = __ldg(r4 + 2 * i + 1);
        bool covered;
        if (extra.z == 1) {
            const int dx = x - box.x, dy = y - box.y, r = max(extra.y, 0);
            covered = abs(dx) <= r && abs(dy) <= r && dx * dx + dy * dy <= r * r;
        } else {
            const int half = max(extra.y, 0);
            const bool outer = x >= box.x - half && x <= box.z + half && y >= box.y - half &&
                               y <= box.w + half;
            const bool inner = extra.y >= 0 && x > box.x + half && x < box.z - half &&
                               y > box.y + half && y < box.w - half;
            covered = outer && !inner;
        }
        if (covered) {
            hit = true;
            colour = extra.x;
        }
    }
    if (!hit) return;
    u8* p = img + (size_t)y * pitch + (size_t)x * channels;
    for (int c = 0; c < channels; ++c) p[c] = (u8)((unsigned)colour >> (8 * c));
}
