// Device helpers shared by FrameLens' kernels (included by every .cu here).
//
// Conventions, the same in every kernel:
// - images are uint8 rows `pitch` bytes apart; pixel centres sit at half-integer
//   coordinates, so resampling matches cv2.resize (INTER_LINEAR, INTER_CUBIC):
//   source x = (dst x + 0.5) * (src_w / dst_w) - 0.5, borders replicated;
// - values that OpenCV would hold as uint8 between two steps are rounded and
//   clamped to 0..255 here too (q8, or OpenCV's own integer formulas), so the GPU
//   computes the CPU path's function rather than a slightly different one;
// - one thread per output pixel, 2-D blocks of 32 x 8: a warp writes 32
//   consecutive pixels of one row, so every plane is written coalesced.
// Float expressions whose rounding matters are written with fmaf and the _rn
// intrinsics, so that nvcc's contraction of a * b + c cannot change them.
#pragma once

#include <cuda_fp16.h>

typedef unsigned char u8;

// Read-only loads through the non-coherent cache.
__device__ __forceinline__ float ld8(const u8* __restrict__ p) { return (float)__ldg(p); }

// Round half to even and clamp to 0..255: the value a uint8 image would hold.
__device__ __forceinline__ float q8(float v) { return fminf(fmaxf(rintf(v), 0.0f), 255.0f); }

__device__ __forceinline__ int clampi(int v, int lo, int hi) { return min(max(v, lo), hi); }

// saturate_cast<uchar> of an int.
__device__ __forceinline__ int sat8(int v) { return min(max(v, 0), 255); }

// a + (b - a) * w: exact when a == b, so clamped taps at a border stay exact.
__device__ __forceinline__ float lerp(float a, float b, float w) { return fmaf(w, b - a, a); }

// One axis of a bilinear sample (cv2 INTER_LINEAR): taps i0, i1 and the weight of i1.
struct LinearTap {
    int i0, i1;
    float w;
};

// The geometry of cv2.resize on uint8 images (display): the coordinate in float.
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

// The geometry of cv2.resize(INTER_LINEAR) on float32 images (model input), for
// output index d of n_dst resampling n_src. OpenCV's x86 builds run that resize
// through IPP, which holds the source coordinate (d + 0.5) * n_src / n_dst - 0.5 in
// double and rounds only its fraction to float. Here the coordinate is exact: the
// rational ((2d + 1) n_src - n_dst) / (2 n_dst), integer part by integer division,
// fraction correctly rounded to float - the same taps and weight (a float
// coordinate instead would be off by up to 1.2e-4 px at 1920 px, 0.03 units).
// Outside the first and last centres both taps are the edge pixel with weight 0.
__device__ __forceinline__ LinearTap exact_linear_tap(int d, int n_src, int n_dst) {
    const int num = (2 * d + 1) * n_src - n_dst;  // < 2^31 for sizes up to 32767
    const int den = 2 * n_dst;
    LinearTap t;
    t.w = 0.0f;
    if (num < 0) {
        t.i0 = t.i1 = 0;
        return t;
    }
    const unsigned q = (unsigned)num / (unsigned)den;
    if (q >= (unsigned)(n_src - 1)) {
        t.i0 = t.i1 = n_src - 1;
        return t;
    }
    t.i0 = (int)q;
    t.i1 = (int)q + 1;
    t.w = __fdiv_rn((float)(num - (int)q * den), (float)den);  // both exact in float
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

// YUV -> RGB matrix (see framelens.core.gpu.kernels.YuvMatrix), in OpenCV's fixed
// point with 20 fractional bits (cv2 YUV2BGR_NV12's ITUR_BT_601_* arithmetic):
//   y' = max(Y - y_off, 0) * y_scale;  u = U - 128;  v = V - 128
//   R = (y' + crv v + 2^19) >> 20;  G = (y' + cgu u + cgv v + 2^19) >> 20;
//   B = (y' + cbu u + 2^19) >> 20;  each saturated to 0..255
// with every coefficient c held as the integer round(c * 2^20). BT.601 limited's
// coefficients are OpenCV's integers / 2^20, exact in float, so that conversion is
// OpenCV's bit for bit; a float formula misrounds ~1 value in 5e5 (near .5).
// The clamp at y_off is OpenCV's (cv2 YUV2BGR_NV12 clamps Y below 16 to 16).
struct YuvCoeffs {
    int y_off, y_scale, crv, cgu, cgv, cbu;
};

__device__ __forceinline__ int yuv_fixed(float c) { return __float2int_rn(c * 1048576.0f); }

__device__ __forceinline__ YuvCoeffs make_yuv(float y_off, float y_scale, float crv, float cgu,
                                              float cgv, float cbu) {
    YuvCoeffs k;
    k.y_off = __float2int_rn(y_off);
    k.y_scale = yuv_fixed(y_scale);
    k.crv = yuv_fixed(crv);
    k.cgu = yuv_fixed(cgu);
    k.cgv = yuv_fixed(cgv);
    k.cbu = yuv_fixed(cbu);
    return k;
}

// One NV12 pixel as B, G, R bytes (what cv2.cvtColor(..., YUV2BGR_NV12) stores),
// as floats: chroma is taken from the 2x2 block the pixel belongs to (no chroma
// interpolation, as OpenCV does). No overflow: |terms| < 2^29 for any matrix here.
__device__ __forceinline__ float3 nv12_bgr(const u8* __restrict__ yp, int y_pitch,
                                           const u8* __restrict__ uvp, int uv_pitch, int x, int y,
                                           const YuvCoeffs& k) {
    const int Y = __ldg(yp + (size_t)y * y_pitch + x);
    const u8* c = uvp + (size_t)(y >> 1) * uv_pitch + (size_t)(x >> 1) * 2;
    const int u = (int)__ldg(c) - 128;
    const int v = (int)__ldg(c + 1) - 128;
    const int yy = max(Y - k.y_off, 0) * k.y_scale + (1 << 19);
    return make_float3((float)sat8((yy + k.cbu * u) >> 20),
                       (float)sat8((yy + k.cgu * u + k.cgv * v) >> 20),
                       (float)sat8((yy + k.crv * v) >> 20));
}

__device__ __forceinline__ float3 lerp3(float3 a, float3 b, float w) {
    return make_float3(lerp(a.x, b.x, w), lerp(a.y, b.y, w), lerp(a.z, b.z, w));
}

__device__ __forceinline__ float3 q8_3(float3 a) { return make_float3(q8(a.x), q8(a.y), q8(a.z)); }

// Bilinear sample of an NV12 frame: each of the four source pixels converted to
// bytes first, then interpolated as float (convert, then resize, as the CPU does).
// Not rounded: the display kernels q8 it, the model input keeps the float.
__device__ __forceinline__ float3 nv12_bilinear(const u8* __restrict__ yp, int y_pitch,
                                                const u8* __restrict__ uvp, int uv_pitch,
                                                LinearTap tx, LinearTap ty, const YuvCoeffs& k) {
    float3 p00 = nv12_bgr(yp, y_pitch, uvp, uv_pitch, tx.i0, ty.i0, k);
    float3 p01 = nv12_bgr(yp, y_pitch, uvp, uv_pitch, tx.i1, ty.i0, k);
    float3 p10 = nv12_bgr(yp, y_pitch, uvp, uv_pitch, tx.i0, ty.i1, k);
    float3 p11 = nv12_bgr(yp, y_pitch, uvp, uv_pitch, tx.i1, ty.i1, k);
    return lerp3(lerp3(p00, p01, tx.w), lerp3(p10, p11, tx.w), ty.w);
}

// Bilinear sample of a packed 3-channel uint8 image (channel order kept), not rounded.
// Rows first, then between them, each step a + (b - a) w with one rounding (fmaf):
// IPP's float linear resize in the same order, hence cv2.resize's float32 result.
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
    return lerp3(top, bot, ty.w);
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
