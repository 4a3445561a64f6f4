// Fused model-input preprocessing: colour conversion, letterbox resize (bilinear,
// the geometry of framelens.core.preprocess), padding, per-channel scale and
// offset, HWC -> CHW, fp32 or fp16, in one pass over the input.
//
// Output: a contiguous NCHW tensor (N = 1) of dst_h x dst_w per plane. Pixel
// (x, y) of the network input is, per output channel c (after colour order):
//   inside the letterbox (pad_x <= x < pad_x + new_w, same in y):
//       bilinear(src, x - pad_x, y - pad_y) * mul_c + add_c
//   outside it: pad_value * mul_c + add_c
// where bilinear is cv2.resize(INTER_LINEAR) of the uint8 frame (NV12: converted
// to uint8 BGR first) as float32, not rounded back to uint8: Preprocessor's
// float resize, with its taps and weights (exact_linear_tap) and arithmetic.
#include "common.cuh"

// Plane order written: B, G, R, or R, G, B when swap_rb (colour order differs).
template <typename T>
__device__ __forceinline__ void write_chw(T* __restrict__ dst, int dst_w, int dst_h, int x, int y,
                                          float3 px, int swap_rb, float m0, float m1, float m2,
                                          float a0, float a1, float a2) {
    const size_t plane = (size_t)dst_w * dst_h;
    const size_t i = (size_t)y * dst_w + x;
    const float c0 = swap_rb ? px.z : px.x;
    const float c2 = swap_rb ? px.x : px.z;
    store(dst + i, fmaf(c0, m0, a0));
    store(dst + plane + i, fmaf(px.y, m1, a1));
    store(dst + 2 * plane + i, fmaf(c2, m2, a2));
}

template <typename T>
__device__ __forceinline__ void preprocess_packed(
    const u8* __restrict__ src, int src_pitch, int src_w, int src_h, T* __restrict__ dst,
    int dst_w, int dst_h, int new_w, int new_h, int pad_x, int pad_y, int swap_rb,
    float pad_value, float m0, float m1, float m2, float a0, float a1, float a2) {
    const int x = blockIdx.x * blockDim.x + threadIdx.x;
    const int y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x >= dst_w || y >= dst_h) return;
    const int dx = x - pad_x, dy = y - pad_y;
    float3 px = make_float3(pad_value, pad_value, pad_value);
    if (dx >= 0 && dx < new_w && dy >= 0 && dy < new_h) {
        px = packed3_bilinear(src, src_pitch, exact_linear_tap(dx, src_w, new_w),
                              exact_linear_tap(dy, src_h, new_h));
    }
    write_chw(dst, dst_w, dst_h, x, y, px, swap_rb, m0, m1, m2, a0, a1, a2);
}

template <typename T>
__device__ __forceinline__ void preprocess_nv12(
    const u8* __restrict__ yp, int y_pitch, const u8* __restrict__ uvp, int uv_pitch, int src_w,
    int src_h, T* __restrict__ dst, int dst_w, int dst_h, int new_w, int new_h, int pad_x,
    int pad_y, int swap_rb, float pad_value, float m0, float m1, float m2, float a0, float a1,
    float a2, YuvCoeffs k) {
    const int x = blockIdx.x * blockDim.x + threadIdx.x;
    const int y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x >= dst_w || y >= dst_h) return;
    const int dx = x - pad_x, dy = y - pad_y;
    float3 px = make_float3(pad_value, pad_value, pad_value);
    if (dx >= 0 && dx < new_w && dy >= 0 && dy < new_h) {
        px = nv12_bilinear(yp, y_pitch, uvp, uv_pitch, exact_linear_tap(dx, src_w, new_w),
                           exact_linear_tap(dy, src_h, new_h), k);
    }
    write_chw(dst, dst_w, dst_h, x, y, px, swap_rb, m0, m1, m2, a0, a1, a2);
}

#define PACKED_PARAMS(T)                                                                       \
    const u8 *__restrict__ src, int src_pitch, int src_w, int src_h, T *__restrict__ dst,      \
        int dst_w, int dst_h, int new_w, int new_h, int pad_x, int pad_y, int swap_rb,         \
        float pad_value, float m0, float m1, float m2, float a0, float a1, float a2
#define PACKED_ARGS                                                                            \
    src, src_pitch, src_w, src_h, dst, dst_w, dst_h, new_w, new_h, pad_x, pad_y, swap_rb,      \
        pad_value, m0, m1, m2, a0, a1, a2

extern "C" __global__ void __launch_bounds__(256) fl_preprocess_packed_f32(PACKED_PARAMS(float)) {
    preprocess_packed<float>(PACKED_ARGS);
}

extern "C" __global__ void __launch_bounds__(256) fl_preprocess_packed_f16(PACKED_PARAMS(__half)) {
    preprocess_packed<__half>(PACKED_ARGS);
}

#define NV12_PARAMS(T)                                                                         \
    const u8 *__restrict__ yp, int y_pitch, const u8 *__restrict__ uvp, int uv_pitch,          \
        int src_w, int src_h, T *__restrict__ dst, int dst_w, int dst_h, int new_w, int new_h, \
        int pad_x, int pad_y, int swap_rb, float pad_value, float m0, float m1, float m2,      \
        float a0, float a1, float a2, float y_off, float y_scale, float crv, float cgu,        \
        float cgv, float cbu
#define NV12_ARGS                                                                              \
    yp, y_pitch, uvp, uv_pitch, src_w, src_h, dst, dst_w, dst_h, new_w, new_h, pad_x, pad_y,   \
        swap_rb, pad_value, m0, m1, m2, a0, a1, a2, make_yuv(y_off, y_scale, crv, cgu, cgv, cbu)

extern "C" __global__ void __launch_bounds__(256) fl_preprocess_nv12_f32(NV12_PARAMS(float)) {
    preprocess_nv12<float>(NV12_ARGS);
}

extern "C" __global__ void __launch_bounds__(256) fl_preprocess_nv12_f16(NV12_PARAMS(__half)) {
    preprocess_nv12<__half>(NV12_ARGS);
}
