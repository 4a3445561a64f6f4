// The colour work around a Y-channel super-resolution model (ESPCN, FSRCNN), in
// OpenCV's YCrCb convention (cv2.COLOR_BGR2YCrCb / COLOR_YCrCb2BGR, 8-bit):
//   split:   BGR -> Y / 255 as float (the model's input), Cr and Cb as uint8
//   upscale: Cr, Cb bicubically (cv2.resize INTER_CUBIC), rounded to uint8
//   merge:   model Y (float, Y / 255) + Cr, Cb -> BGR, RGB or RGBA uint8
// The 8-bit conversions use OpenCV's fixed-point integer formulas, so for the
// same uint8 inputs the results are identical, not merely close.
#include "common.cuh"

#define YUV_SHIFT 14
#define DESCALE(x) (((x) + (1 << (YUV_SHIFT - 1))) >> YUV_SHIFT)

// cv2 RGB2YCrCb_i<uchar>: Y is rounded first, then Cr and Cb are taken from it.
// src_channels 3 (BGR or RGB) or 4 (BGRA or RGBA: the display frame; alpha unread).
extern "C" __global__ void __launch_bounds__(256) fl_packed_to_ycrcb_planes(
    const u8* __restrict__ src, int src_pitch, int w, int h, int src_rgb, int src_channels,
    float* __restrict__ y_out, u8* __restrict__ cr_out, u8* __restrict__ cb_out) {
    const int x = blockIdx.x * blockDim.x + threadIdx.x;
    const int y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x >= w || y >= h) return;
    const u8* p = src + (size_t)y * src_pitch + (size_t)x * src_channels;
    const int c0 = __ldg(p), c1 = __ldg(p + 1), c2 = __ldg(p + 2);
    const int b = src_rgb ? c2 : c0;
    const int r = src_rgb ? c0 : c2;
    const int Y = DESCALE(b * 1868 + c1 * 9617 + r * 4899);
    const size_t i = (size_t)y * w + x;
    y_out[i] = (float)sat8(Y) / 255.0f;  // IEEE division: equals numpy's float32 y / 255
    if (cr_out != nullptr) cr_out[i] = (u8)sat8(DESCALE((r - Y) * 11682 + (128 << YUV_SHIFT)));
    if (cb_out != nullptr) cb_out[i] = (u8)sat8(DESCALE((b - Y) * 9241 + (128 << YUV_SHIFT)));
}

// Bicubic sample of a uint8 plane at precomputed taps, rounded to uint8.
__device__ __forceinline__ float cubic_sample(const u8* __restrict__ p, int pitch,
                                              const CubicTap& tx, const CubicTap& ty) {
    float acc = 0.0f;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
        const u8* row = p + (size_t)ty.i[j] * pitch;
        float hsum = 0.0f;
#pragma unroll
        for (int k = 0; k < 4; ++k) hsum = fmaf(tx.w[k], ld8(row + tx.i[k]), hsum);
        acc = fmaf(ty.w[j], hsum, acc);
    }
    return q8(acc);
}

// Both chroma planes bicubically to (W, H): contiguous uint8 planes in and out.
extern "C" __global__ void __launch_bounds__(256) fl_upscale_chroma(
    const u8* __restrict__ cr, const u8* __restrict__ cb, int w, int h, u8* __restrict__ cr_out,
    u8* __restrict__ cb_out, int W, int H, float scale_x, float scale_y) {
    const int x = blockIdx.x * blockDim.x + threadIdx.x;
    const int y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x >= W || y >= H) return;
    const CubicTap tx = cubic_tap(x, scale_x, w);
    const CubicTap ty = cubic_tap(y, scale_y, h);
    const size_t i = (size_t)y * W + x;
    cr_out[i] = (u8)cubic_sample(cr, w, tx, ty);
    cb_out[i] = (u8)cubic_sample(cb, w, tx, ty);
}

// Model Y (float Y / 255, contiguous W x H) + chroma planes of cw x ch (upscaled
// inline when smaller) -> packed uint8, dst_channels 3 (B, G, R, or R, G, B with
// r_first) or 4 (B, G, R, 255, or R, G, B, 255 with r_first; 4-byte aligned rows).
// cv2 YCrCb2RGB_i<uchar> integer arithmetic on the rounded Y, Cr, Cb.
extern "C" __global__ void __launch_bounds__(256) fl_merge_ycrcb(
    const float* __restrict__ yp, int W, int H, const u8* __restrict__ cr,
    const u8* __restrict__ cb, int cw, int ch, float scale_x, float scale_y, int resample,
    u8* __restrict__ dst, int dst_pitch, int dst_channels, int r_first) {
    const int x = blockIdx.x * blockDim.x + threadIdx.x;
    const int y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x >= W || y >= H) return;
    // Clamp before converting: NaN and out-of-range model outputs become 0..255.
    const int Y = (int)q8(__ldg(yp + (size_t)y * W + x) * 255.0f);
    int Cr, Cb;
    if (resample) {
        const CubicTap tx = cubic_tap(x, scale_x, cw);
        const CubicTap ty = cubic_tap(y, scale_y, ch);
        Cr = (int)cubic_sample(cr, cw, tx, ty);
        Cb = (int)cubic_sample(cb, cw, tx, ty);
    } else {
        const size_t j = (size_t)y * cw + x;
        Cr = __ldg(cr + j);
        Cb = __ldg(cb + j);
    }
    const int dcr = Cr - 128, dcb = Cb - 128;
    const int b = sat8(Y + DESCALE(dcb * 29049));
    const int g = sat8(Y + DESCALE(dcb * -5636 + dcr * -11698));
    const int r = sat8(Y + DESCALE(dcr * 22987));
    u8* row = dst + (size_t)y * dst_pitch;
    if (dst_channels == 4) {
        if (r_first) {
            store_rgba(row, x, (float)r, (float)g, (float)b);
        } else {
            store_rgba(row, x, (float)b, (float)g, (float)r);
        }
    } else {
        u8* p = row + (size_t)x * 3;
        p[0] = (u8)(r_first ? r : b);
        p[1] = (u8)g;
        p[2] = (u8)(r_first ? b : r);
    }
}

// Colour SR models (ESRGAN, Real-ESRGAN): packed uint8 (3 or 4 channels, B first or R
// first) -> the model's planar float input, 3 contiguous w x h planes in the model's
// order (R first with dst_rgb), each value times `scale` (the spec's input_scale).
extern "C" __global__ void __launch_bounds__(256) fl_packed_to_planar(
    const u8* __restrict__ src, int src_pitch, int w, int h, int src_rgb, int src_channels,
    float* __restrict__ dst, int dst_rgb, float scale) {
    const int x = blockIdx.x * blockDim.x + threadIdx.x;
    const int y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x >= w || y >= h) return;
    const u8* p = src + (size_t)y * src_pitch + (size_t)x * src_channels;
    const float c0 = ld8(p), c1 = ld8(p + 1), c2 = ld8(p + 2);
    const bool swap = src_rgb != dst_rgb;
    const size_t plane = (size_t)w * h, i = (size_t)y * w + x;
    dst[i] = (swap ? c2 : c0) * scale;
    dst[plane + i] = c1 * scale;
    dst[2 * plane + i] = (swap ? c0 : c2) * scale;
}

// A colour SR model's planar float output (3 contiguous W x H planes, R first with
// src_rgb) -> packed uint8 (3 or 4 channels, R first with r_first; 4: alpha 255, rows
// 4-byte aligned). Levels as on the host: clip(rint((v / divisor) * 255)), divisor
// being 255 * input_scale (1 for 0..1 models); NaN becomes 0.
extern "C" __global__ void __launch_bounds__(256) fl_planar_to_packed(
    const float* __restrict__ src, int W, int H, int src_rgb, float divisor,
    u8* __restrict__ dst, int dst_pitch, int dst_channels, int r_first) {
    const int x = blockIdx.x * blockDim.x + threadIdx.x;
    const int y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x >= W || y >= H) return;
    const size_t plane = (size_t)W * H, i = (size_t)y * W + x;
    const float p0 = q8((__ldg(src + i) / divisor) * 255.0f);
    const float p1 = q8((__ldg(src + plane + i) / divisor) * 255.0f);
    const float p2 = q8((__ldg(src + 2 * plane + i) / divisor) * 255.0f);
    const float r = src_rgb ? p0 : p2, g = p1, b = src_rgb ? p2 : p0;
    u8* row = dst + (size_t)y * dst_pitch;
    if (dst_channels == 4) {
        if (r_first) {
            store_rgba(row, x, r, g, b);
        } else {
            store_rgba(row, x, b, g, r);
        }
    } else {
        u8* q = row + (size_t)x * 3;
        q[0] = (u8)(r_first ? r : b);
        q[1] = (u8)g;
        q[2] = (u8)(r_first ? b : r);
    }
}
