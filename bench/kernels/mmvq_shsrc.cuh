/* The labs' view of the int8 prep's output in shared memory (chain_lab's
 * in-block prep, sb_lab): mmvq_gsrc's layout (planes [T][nsb][768], S, 2^-e,
 * then the per-limb sums at mb) read with generic loads, for mmvq_sb and
 * mmvq_sb_lean. */
#ifndef MEMRA_BENCH_MMVQ_SHSRC_CUH
#define MEMRA_BENCH_MMVQ_SHSRC_CUH

#include "backend/cuda/mmvq.cuh"

struct mmvq_shsrc {
    const uint8_t *planes;
    const float *S, *sinv;
    size_t nsb, sb;
    const uint8_t *mb;
    __device__ __forceinline__ const uint4 *limbs(int tok, int limb, int t) const {
        return (const uint4 *)(planes + (tok * nsb + sb) * MQ_SB_B + limb * 256 + t * 64);
    }
    __device__ __forceinline__ uint4 ld(const uint4 *p) const { return *p; }
    __device__ __forceinline__ float sx(int tok) const { return sinv[tok * nsb + sb]; }
    __device__ __forceinline__ float s(int tok, int j) const { return S[(tok * nsb + sb) * 8 + j]; }
    __device__ __forceinline__ uint32_t mw(int, int tok, int hl, int limb, int t) const {
        return *(const uint32_t *)(mb + (tok * nsb + sb) * MQ_MB_B + hl * 24 + limb * 8 + 4 * t);
    }
};

#endif
