/* The warp-per-row dot product core shared by matmul.cu and moe.cu.
 *
 * One warp computes the dot products of one weight row (any supported type)
 * with up to NT activation rows. The row is walked 256 elements (8 groups of
 * 32) per step: lane l owns quarter q = l % 4 (8 elements) of group
 * 8 * step + l / 4, so a warp reads 256 contiguous activations (two 16-byte
 * loads per lane, coalesced) and the weight bytes of 8 consecutive groups.
 * Each lane dequantizes its 8 weights once (dq8) and multiplies them into
 * every token's accumulators: 2 independent fp32 chains per token (even /
 * odd elements), merged as c0 + c1, then summed over the warp with a fixed
 * butterfly. The order of every operation depends only on the row length,
 * never on NT, nt or the other tokens: a token's result is bit-identical
 * whatever batch it is computed in (batch invariance). FMAs are written out
 * (fmaf) so the compiler cannot contract differently per NT.
 *
 * Contract: x rows 16-byte aligned, x_stride a multiple of 4 floats, the row
 * length a multiple of 32 (of the type's block size for the bigger blocks). */
#ifndef MEMRA_CUDA_MATVEC_CUH
#define MEMRA_CUDA_MATVEC_CUH

#include "backend/cuda/quant.cuh"

template <int TYPE, int NT>
__device__ __forceinline__ void warp_row_dot(const uint8_t *__restrict__ row, int64_t n_groups,
                                             const float *__restrict__ x, int64_t x_stride, int nt, float *res) {
    const int lane = threadIdx.x & 31, q = lane & 3;
    float acc[NT][2];
#pragma unroll
    for (int t = 0; t < NT; t++) acc[t][0] = acc[t][1] = 0.0f;
#pragma unroll 4
    for (int64_t g = lane >> 2; g < n_groups; g += 8) {
        float v[8];
        dq8<TYPE>(row, g, q, v);
#pragma unroll
        for (int t = 0; t < NT; t++) {
            if (t < nt) {
                const float4 *xp = (const float4 *)(x + (int64_t)t * x_stride + g * 32 + 8 * q);
                float4 a = __ldg(xp), b = __ldg(xp + 1);
                acc[t][0] = fmaf(v[0], a.x, acc[t][0]);
                acc[t][1] = fmaf(v[1], a.y, acc[t][1]);
                acc[t][0] = fmaf(v[2], a.z, acc[t][0]);
                acc[t][1] = fmaf(v[3], a.w, acc[t][1]);
                acc[t][0] = fmaf(v[4], b.x, acc[t][0]);
                acc[t][1] = fmaf(v[5], b.y, acc[t][1]);
                acc[t][0] = fmaf(v[6], b.z, acc[t][0]);
                acc[t][1] = fmaf(v[7], b.w, acc[t][1]);
            }
        }
    }
#pragma unroll
    for (int t = 0; t < NT; t++) res[t] = warp_sum(__fadd_rn(acc[t][0], acc[t][1]));
}

#endif
