// Device helpers shared by FrameLens' kernels (included by every .cu here).
//
// Conventions, the same in every kernel:
// - images are uint8 rows `pitch` bytes apart; pixel centres sit at half-integer
//   coordinates, so resampling matches cv2.resize (INTER_LINEAR, INTER_CUBIC):
//   source x = (dst x + 0.5) * (src_w / dst_w) - 0.5, borders replicated;
// - values that OpenCV would hold as uint8 between two steps are rounded and
//   clamped to 0..255 here too (q8), so the GPU computes the CPU path's function
//   rather than a slightly different one;
// - one thread per output pixel, 2-D blocks of 32 x 8: a warp writes 32
//   consecutive pixels of one row, so every plane is written coalesced.
#pragma once

#include <cuda_fp16.h>

typedef unsigned char u8;

// Read-only loads through the non-coherent cache.
__device__ __forceinline__ float ld8(const u8* __restrict__ p) { return (float)__ldg(p); }

// Round half to even and clamp to 0..255: the value a uint8 image would hold.
__device__ __forceinline__ float q8(float v) { return fminf(fmaxf(rintf(v), 0.0f), 255.0f); }

__device__ __forceinline__ int clampi(int v, int lo, int hi) { return min(max(v, lo), hi); }

// a + (b - a) * w: exact when a == b, so clamped taps at a border stay exact.
__device__ __forceinline__ float lerp(float a, float b, float w) { return fmaf(w, b - a, a); }

// One axis of a bilinear sample (cv2 INTER_LINEAR): taps i0, i1 and the weight of i1.
struct LinearTap {
    int i0, i1;
    float w;
};

__device__ __forceinline__ LinearTap linear_tap(int d, float scale, int n) {
    // cv2 moves a coordinate left of the first centre onto it (weight 0); right
    // of the last centre both taps clamp to n - 1, which gives the same value.
    float f = fmaxf(((float)d + 0.5f) * scale - 0.5f, 0.0f);
    LinearTap t;
    t.i0 = min((int)f, n - 1);  // f >= 0: truncation is floor
    t.i1 = min(t.i0 + 1, n - 1);
    t.w = f - (float)t.i0;
    return t;
}

// One axis of a bicubic sample (cv2 INTER_CUBIC, A = -0.75): four clamped taps.
struct CubicTap {
    int i[4];
    float w[4];
};

__device__ __forceinline__ CubicTap cubic_tap(int d, float scale, int n) {
    const float A = -0.75f;
    float f = ((float)d + 0.5f) * scale - 0.5f;
    float fl = floorf(f);
    float x = f - fl;
    int s = (int)fl;
    CubicTap t;
#pragma unroll
    for (int k = 0; k < 4; ++k) t.i[k] = clampi(s - 1 + k, 0, n - 1);
    // cv2's interpolateCubic, term for term.
    t.w[0] = ((A * (x + 1.0f) - 5.0f * A) * (x + 1.0f) + 8.0f * A) * (x + 1.0f) - 4.0f * A;
    t.w[1] = ((A + 2.0f) * x - (A + 3.0f)) * x * x + 1.0f;
    t.w[2] = ((A + 2.0f) * (1.0f - x) - (A + 3.0f)) * (1.0f - x) * (1.0f - x) + 1.0f;
    t.w[3] = 1.0f - t.w[0] - t.w[1] - t.w[2];
    return t;
}

// YUV -> RGB matrix (see framelens.core.gpu.kernels.YuvMatrix):
//   y' = max(Y - y_off, 0) * y_scale;  u = U - 128;  v = V - 128
//   R = y' + crv v;  G = y' + cgu u + cgv v;  B = y' + cbu u
// The clamp at y_off is OpenCV's (cv2 YUV2BGR_NV12 clamps Y below 16 to 16).
struct YuvCoeffs {
    float y_off, y_scale, crv, cgu, cgv, cbu;
};

__device__ __forceinline__ YuvCoeffs make_yuv(float y_off, float y_scale, float crv, float cgu,
                                              float cgv, float cbu) {
    YuvCoeffs k;
    k.y_off = y_off;
    k.y_scale = y_scale;
    k.crv = crv;
    k.cgu = cgu;
    k.cgv = cgv;
    k.cbu = cbu;
    return k;
}

// One NV12 pixel as quantised B, G, R (what cv2.cvtColor(..., YUV2BGR_NV12) stores):
// chroma is taken from the 2x2 block the pixel belongs to (no chroma
// interpolation, as OpenCV does).
__device__ __forceinline__ float3 nv12_bgr(const u8* __restrict__ yp, int y_pitch,
                                           const u8* __restrict__ uvp, int uv_pitch, int x, int y,
                                           const YuvCoeffs& k) {
    float Y = ld8(yp + (size_t)y * y_pitch + x);
    const u8* c = uvp + (size_t)(y >> 1) * uv_pitch + (size_t)(x >> 1) * 2;
    float u = ld8(c) - 128.0f;
    float v = ld8(c + 1) - 128.0f;
    float yy = fmaxf(Y - k.y_off, 0.0f) * k.y_scale;
    float3 o;
    o.x = q8(fmaf(k.cbu, u, yy));
    o.y = q8(fmaf(k.cgu, u, fmaf(k.cgv, v, yy)));
    o.z = q8(fmaf(k.crv, v, yy));
    return o;
}

__device__ __forceinline__ float3 lerp3(float3 a, float3 b, float w) {
    return make_float3(lerp(a.x, b.x, w), lerp(a.y, b.y, w), lerp(a.z, b.z, w));
}

__device__ __forceinline__ float3 q8_3(float3 a) { return make_float3(q8(a.x), q8(a.y), q8(a.z)); }

// Bilinear sample of an NV12 frame at output pixel (dx, dy), quantised per
// source pixel and after interpolation: convert, then resize, as the CPU does.
__device__ __forceinline__ float3 nv12_bilinear(const u8* __restrict__ yp, int y_pitch,
                                                const u8* __restrict__ uvp, int uv_pitch,
                                                LinearTap tx, LinearTap ty, const YuvCoeffs& k) {
    float3 p00 = nv12_bgr(yp, y_pitch, uvp, uv_pitch, tx.i0, ty.i0, k);
    float3 p01 = nv12_bgr(yp, y_pitch, uvp, uv_pitch, tx.i1, ty.i0, k);
    float3 p10 = nv12_bgr(yp, y_pitch, uvp, uv_pitch, tx.i0, ty.i1, k);
    float3 p11 = nv12_bgr(yp, y_pitch, uvp, uv_pitch, tx.i1, ty.i1, k);
    return q8_3(lerp3(lerp3(p00, p01, tx.w), lerp3(p10, p11, tx.w), ty.w));
}

// Bilinear sample of a packed 3-channel uint8 image (channel order kept).
__device__ __forceinline__ float3 packed3_bilinear(const u8* __restrict__ src, int pitch,
                                                   LinearTap tx, LinearTap ty) {
    const u8* r0 = src + (size_t)ty.i0 * pitch;
    const u8* r1 = src + (size_t)ty.i1 * pitch;
    const int a = tx.i0 * 3, b = tx.i1 * 3;
    // All twelve loads issue before the first use.
    float t0 = ld8(r0 + a), t1 = ld8(r0 + a + 1), t2 = ld8(r0 + a + 2);
    float t3 = ld8(r0 + b), t4 = ld8(r0 + b + 1), t5 = ld8(r0 + b + 2);
    float u0 = ld8(r1 + a), u1 = ld8(r1 + a + 1), u2 = ld8(r1 + a + 2);
    float u3 = ld8(r1 + b), u4 = ld8(r1 + b + 1), u5 = ld8(r1 + b + 2);
    float3 top = make_float3(lerp(t0, t3, tx.w), lerp(t1, t4, tx.w), lerp(t2, t5, tx.w));
    float3 bot = make_float3(lerp(u0, u3, tx.w), lerp(u1, u4, tx.w), lerp(u2, u5, tx.w));
    return q8_3(lerp3(top, bot, ty.w));
}

__device__ __forceinline__ float3 packed3_at(const u8* __restrict__ src, int pitch, int x, int y) {
    const u8* p = src + (size_t)y * pitch + (size_t)x * 3;
    return make_float3(ld8(p), ld8(p + 1), ld8(p + 2));
}

__device__ __forceinline__ void store(float* __restrict__ p, float v) { *p = v; }
__device__ __forceinline__ void store(__half* __restrict__ p, float v) { *p = __float2half_rn(v); }

// 4 bytes at once; the caller guarantees 4-byte alignment (pitch % 4 == 0).
__device__ __forceinline__ void store_rgba(u8* __restrict__ row, int x, float c0, float c1,
                                           float c2) {
    *reinterpret_cast<uchar4*>(row + (size_t)x * 4) =
        make_uchar4((u8)c0, (u8)c1, (u8)c2, (u8)255);
}
