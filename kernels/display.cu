// Frames to RGBA8 for display, written straight into the canvas buffer (a device
// pointer and a row pitch, e.g. a mapped GL pixel-unpack buffer).
//
// Output bytes per pixel: R, G, B, 255 (or B, G, R, 255 with swap_rb). The
// destination pitch must be a multiple of 4 and the pointer 4-byte aligned.
// When the destination size differs from the source, the frame is stretched to
// it bilinearly (cv2.resize INTER_LINEAR geometry on the converted image); the
// caller picks an aspect-correct size.
#include "common.cuh"

extern "C" __global__ void __launch_bounds__(256) fl_nv12_to_rgba(
    const u8* __restrict__ yp, int y_pitch, const u8* __restrict__ uvp, int uv_pitch, int src_w,
    int src_h, u8* __restrict__ dst, int dst_pitch, int dst_w, int dst_h, float scale_x,
    float scale_y, int resample, int swap_rb, float y_off, float y_scale, float crv, float cgu,
    float cgv, float cbu) {
    const int x = blockIdx.x * blockDim.x + threadIdx.x;
    const int y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x >= dst_w || y >= dst_h) return;
    const YuvCoeffs k = make_yuv(y_off, y_scale, crv, cgu, cgv, cbu);
    float3 bgr;
    if (resample) {
        bgr = q8_3(nv12_bilinear(yp, y_pitch, uvp, uv_pitch, linear_tap(x, scale_x, src_w),
                                 linear_tap(y, scale_y, src_h), k));
    } else {
        bgr = nv12_bgr(yp, y_pitch, uvp, uv_pitch, x, y, k);
    }
    u8* row = dst + (size_t)y * dst_pitch;
    if (swap_rb) {
        store_rgba(row, x, bgr.x, bgr.y, bgr.z);
    } else {
        store_rgba(row, x, bgr.z, bgr.y, bgr.x);
    }
}

// Packed 3-channel frames (BGR, or RGB with src_rgb) to RGBA (BGRA with swap_rb).
extern "C" __global__ void __launch_bounds__(256) fl_packed_to_rgba(
    const u8* __restrict__ src, int src_pitch, int src_w, int src_h, u8* __restrict__ dst,
    int dst_pitch, int dst_w, int dst_h, float scale_x, float scale_y, int resample,
    int src_rgb, int swap_rb) {
    const int x = blockIdx.x * blockDim.x + threadIdx.x;
    const int y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x >= dst_w || y >= dst_h) return;
    float3 p;
    if (resample) {
        p = q8_3(packed3_bilinear(src, src_pitch, linear_tap(x, scale_x, src_w),
                                  linear_tap(y, scale_y, src_h)));
    } else {
        p = packed3_at(src, src_pitch, x, y);
    }
    u8* row = dst + (size_t)y * dst_pitch;
    // p.x is the first byte of the source pixel: R when src_rgb, else B.
    if (src_rgb != swap_rb) {
        store_rgba(row, x, p.x, p.y, p.z);
    } else {
        store_rgba(row, x, p.z, p.y, p.x);
    }
}

// A 4-byte-per-pixel image (RGBA or BGRA, order kept, alpha set to 255) into a
// dst_w x dst_h rectangle of another (a tile of the video wall: dst points at the
// tile's first pixel, dst_pitch is the wall's). Bilinear as cv2.resize INTER_LINEAR's
// geometry, or a plain copy at the same size.
extern "C" __global__ void __launch_bounds__(256) fl_rgba_resize(
    const u8* __restrict__ src, int src_pitch, int src_w, int src_h, u8* __restrict__ dst,
    int dst_pitch, int dst_w, int dst_h, float scale_x, float scale_y, int resample) {
    const int x = blockIdx.x * blockDim.x + threadIdx.x;
    const int y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x >= dst_w || y >= dst_h) return;
    float c[3];
    if (resample) {
        const LinearTap tx = linear_tap(x, scale_x, src_w);
        const LinearTap ty = linear_tap(y, scale_y, src_h);
        const u8* r0 = src + (size_t)ty.i0 * src_pitch;
        const u8* r1 = src + (size_t)ty.i1 * src_pitch;
        const int a = tx.i0 * 4, b = tx.i1 * 4;
#pragma unroll
        for (int k = 0; k < 3; ++k) {
            const float top = lerp(ld8(r0 + a + k), ld8(r0 + b + k), tx.w);
            const float bot = lerp(ld8(r1 + a + k), ld8(r1 + b + k), tx.w);
            c[k] = q8(lerp(top, bot, ty.w));
        }
    } else {
        const u8* p = src + (size_t)y * src_pitch + (size_t)x * 4;
#pragma unroll
        for (int k = 0; k < 3; ++k) c[k] = ld8(p + k);
    }
    store_rgba(dst + (size_t)y * dst_pitch, x, c[0], c[1], c[2]);
}
