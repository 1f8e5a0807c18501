/* The decode matvec (T < 16) of Q4_K rows on the INTEGER tensor cores, fed
 * by a conversion done once per token (bench/results/2026-12-03e-h200.md,
 * section 3; lab: bench/kernels/mmvq_lab.cu).
 *
 * Two launches per matmul group:
 *  - k_mmvq_prep (a block per 8 super-blocks of a token) converts x, with
 *    the layer's input norm when there is one (x * inv * w, rmsnorm's
 *    formula; inv from the row's sum of squares in a fixed order), into
 *    limb planes: per (token, super-block) X = rint(v 2^e) with max|X| in
 *    [2^20, 2^21) (22 bits), split into three signed 8-bit limbs X = 2^16
 *    l0 + 2^8 l1 + l2, in the order of the MMA's B fragments, plus the
 *    sub-block sums S_j of X and 2^-e. It lets the matvec launch at once
 *    (PDL).
 *  - k_mmvq multiplies the raw Q4_K nibbles (A, u8) by the limbs (B, s8)
 *    with mma.sync m16n8k32 -> s32: exact integer sums; the 6-bit sub-scale
 *    by an integer multiply-add; per super-block, in fp32, acc_n = fma(d
 *    2^-e, A_n, acc_n) per column (token, limb) and the min term dmin 2^-e
 *    M_n, M_n = sum_j m_j S_jn an exact integer from two more MMAs over the
 *    limb's sub-block sums S_jn (mmvq_sb_lean); per row, after the warps'
 *    partial columns are added in warp order, (2^16 acc_0
 *    + 2^8 acc_1) + acc_2. Column n = 3 (token % 2) + limb: one MMA serves
 *    two tokens. Its first super-block's weights are requested before it
 *    waits for the prep (they are constants of the step).
 * Why: k_mmv (mmv.cuh) builds exact fp16 weights and hi + lo activations in
 * every block, ~1,000 instructions per warp and super-block. Converting x
 * inside every block costs what the integer core saves (the drop-in version,
 * bench/kernels/mmvq_inkernel.cuh, was 3-10% slower in the model); once per
 * token, the pair captured in a graph took 18-29% less time per matvec than
 * k_mmv with the norm fused (H200, run 8 of the results file above).
 *
 * Bits: a row's value depends only on the row length (the K split, mmv_ks)
 * and its token's own x and norm: never on T, the token's pair, the grid or
 * which rows share a block; matmul, matmul_multi and matmul_swiglu give a
 * row the same bits. Error: ~2.5e-6 of max|y| (k_mmv: 5e-7), within the
 * gate's 1e-5. A NaN or Inf among a super-block's x makes its 2^-e NaN.
 *
 * Block layout: a warp owns one 16-row tile (two for swiglu: gate and up)
 * and a fixed super-block range of it (ks = mmv_ks(in / 256) warps per
 * block); mmvq_tl has the measurements.
 *
 * Q6_K rows (mmvq_raw6, mmvq_sb6: q - 32 as s8, two MMAs per sub-block for
 * its 16-element scales) use the same prep and epilogue. On the file's
 * layout they are not faster than mmv6.cuh (H200), so matmul.cu takes
 * them there only under MEMRA_MMVQ6=1; tile-major, through k_mmvq_tm's
 * ring, they are (common.cuh), and matmul.cu takes every tile-major Q6_K
 * row. (A Q8_0 variant, the int8 weights as A, was 30% slower than
 * k_matvec_multi and was removed: bench/results/2026-12-03f-h200.md.)
 *
 * Tile-major Q4_K and Q6_K weights (common.cuh) take k_mmvq_tm below:
 * k_mmvq's work and bits, the weight bytes through a per-warp cp.async
 * ring.
 *
 * Contract: in % 256 == 0, rows 16-byte aligned for Q4_K (so are its
 * 144-byte blocks), 2-byte for Q6_K, x and
 * the norm weight 16-byte aligned, T in 1..15, mmvq_buf_bytes(T, in / 256)
 * <= MQ_BUF_BYTES (the backend's buffer, cuda_impl.mq). */
#ifndef MEMRA_CUDA_MMVQ_CUH
#define MEMRA_CUDA_MMVQ_CUH

#include <stdlib.h>
#include <string.h>

#include <type_traits>

#include "backend/cuda/mmv.cuh"

#define MQ_SB_B 768             /* limb bytes per (token, super-block): [limb][t][sub-block][8] */
#define MQ_MB_B 48              /* per (token, super-block): [lo, hi][limb][sub-block] bytes of S_jl (mmvq_sb_lean) */
#define MQ_BUF_BYTES CUDA_MQ_BYTES /* cuda_impl.mq */

/* The prep's output for T tokens of nsb super-blocks: planes [T][nsb][768],
 * then S [T][nsb][8] and 2^-e [T][nsb] as floats, then the per-limb
 * sub-block sums [T][nsb][MQ_MB_B] (mmvq_convert). */
static inline size_t mmvq_buf_bytes(int T, int nsb) {
    return (size_t)T * nsb * (MQ_SB_B + 9 * sizeof(float) + MQ_MB_B);
}

/* Whether a T-token matmul of rows of `in` (a multiple of 256) fits the
 * backend's buffer (else the caller keeps its other path). */
static inline bool mmvq_fits(int64_t T, int64_t in) { return mmvq_buf_bytes((int)T, (int)(in / 256)) <= MQ_BUF_BYTES; }

__device__ __forceinline__ void mmvq_imma(int *c, uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3, uint32_t b0,
                                          uint32_t b1) {
    asm("mma.sync.aligned.m16n8k32.row.col.s32.u8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
        : "+r"(c[0]), "+r"(c[1]), "+r"(c[2]), "+r"(c[3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

/* Lane L's 8 values v of one (token, super-block), elements 8 L .. 8 L + 7
 * (sub-block j = L / 4, quarter q = L % 4), the warp max mx and whether any
 * value of the super-block is NaN or Inf: limb l's 8 bytes at planes + l
 * LB + q QB + 8 j (the prep's layout: LB 256, QB 64), S_j (q == 0) at S[j],
 * 2^-e (lane 0) at *sinv. */
template <int LB = 256, int QB = 64>
__device__ __forceinline__ void mmvq_convert(const float *v, float mx, bool bad, int lane, uint8_t *planes, float *S,
                                             float *sinv, uint8_t *mbs = nullptr) {
    /* mx in [2^(ex - 1), 2^ex): X = v 2^(21 - ex), clamped to fp32's normal range */
    const int ex = mx > 0.0f ? (int)((__float_as_uint(mx) >> 23) & 255u) - 126 : 0;
    int es = 21 - ex;
    es = es > 126 ? 126 : es < -126 ? -126 : es;
    const float sc = __uint_as_float((uint32_t)(es + 127) << 23);
    int sum = 0;
    uint32_t lw[3][2] = {{0u, 0u}, {0u, 0u}, {0u, 0u}};
#pragma unroll
    for (int i = 0; i < 8; i++) {
        const int X = __float2int_rn(__fmul_rn(v[i], sc));
        sum += X;
        const int l2 = (int)(int8_t)(X & 0xFF), X1 = (X - l2) >> 8;
        const int l1 = (int)(int8_t)(X1 & 0xFF), l0 = (X1 - l1) >> 8;
        const int sh = 8 * (i & 3);
        lw[0][i >> 2] |= ((uint32_t)l0 & 0xFFu) << sh;
        lw[1][i >> 2] |= ((uint32_t)l1 & 0xFFu) << sh;
        lw[2][i >> 2] |= ((uint32_t)l2 & 0xFFu) << sh;
    }
    sum += __shfl_xor_sync(0xFFFFFFFFu, sum, 1);
    sum += __shfl_xor_sync(0xFFFFFFFFu, sum, 2);
    const int j = lane >> 2, q = lane & 3;
    if (mbs) { /* S_jl = the sum of limb l over sub-block j (|S_jl| <= 4096) = 256 hi + lo, lo a signed byte */
#pragma unroll
        for (int l = 0; l < 3; l++) {
            int sl = 0;
#pragma unroll
            for (int i = 0; i < 8; i++) sl += (int)(int8_t)(uint8_t)(lw[l][i >> 2] >> (8 * (i & 3)));
            sl += __shfl_xor_sync(0xFFFFFFFFu, sl, 1);
            sl += __shfl_xor_sync(0xFFFFFFFFu, sl, 2);
            const int lo = (int)(int8_t)(sl & 0xFF), hi = (sl - lo) >> 8;
            if (q == 0) mbs[l * 8 + j] = (uint8_t)lo, mbs[24 + l * 8 + j] = (uint8_t)hi;
        }
    }
#pragma unroll
    for (int l = 0; l < 3; l++) *(uint2 *)(planes + l * LB + q * QB + j * 8) = make_uint2(lw[l][0], lw[l][1]);
    if (q == 0) S[j] = (float)sum;
    if (lane == 0) *sinv = bad ? __int_as_float(0x7FC00000) : __uint_as_float((uint32_t)(127 - es) << 23);
}

/* k_mmvq_prep's sum of squares of a token's row xr, in its fixed order:
 * warp w's part (its lane l sums float4s i0 = 32 w + l, + 256, .. in order,
 * then the warp's butterfly), and the 8 parts' tree. chain_lab computes the
 * same parts with fewer warps. */
__device__ __forceinline__ float mmvq_prep_part(const float *xr, int64_t in, int64_t i0) {
    float ss = 0.0f;
    for (int64_t i = i0; i < in / 4; i += 256) {
        const float4 v = __ldg((const float4 *)xr + i);
        ss = fmaf(v.x, v.x, ss), ss = fmaf(v.y, v.y, ss), ss = fmaf(v.z, v.z, ss), ss = fmaf(v.w, v.w, ss);
    }
    return warp_sum(ss);
}
__device__ __forceinline__ float mmvq_prep_inv(const float *red, int64_t in, float eps) {
    const float tot = ((red[0] + red[1]) + (red[2] + red[3])) + ((red[4] + red[5]) + (red[6] + red[7]));
    return 1.0f / sqrtf(tot / (float)in + eps);
}

/* One warp's part of k_mmvq_prep: super-block sb of a token (lane L's
 * elements 8 L .. 8 L + 7 in u0, u1, the norm weight's in w0, w1; inv the
 * norm's factor, used when nw) converted into its planes, S and 2^-e (LB,
 * QB: mmvq_convert's plane strides; moe.cu's int8 kernels pad them). */
template <int LB = 256, int QB = 64>
__device__ __forceinline__ void mmvq_prep_sb(float4 u0, float4 u1, float4 w0, float4 w1, bool nw, float inv,
                                             int lane, uint8_t *planes, float *S, float *sinv, uint8_t *mbs = nullptr) {
    float v[8] = {u0.x, u0.y, u0.z, u0.w, u1.x, u1.y, u1.z, u1.w};
    if (nw) {
        const float wv[8] = {w0.x, w0.y, w0.z, w0.w, w1.x, w1.y, w1.z, w1.w};
#pragma unroll
        for (int i = 0; i < 8; i++) v[i] = __fmul_rn(__fmul_rn(v[i], inv), wv[i]);
    }
    float m = 0.0f, z = 0.0f;
#pragma unroll
    for (int i = 0; i < 8; i++) m = fmaxf(m, fabsf(v[i])), z = fmaf(v[i], 0.0f, z);
    const float mx = warp_max(m);
    const bool bad = __any_sync(0xFFFFFFFFu, !(z == 0.0f)); /* NaN or Inf: the max may drop them */
    mmvq_convert<LB, QB>(v, mx, bad, lane, planes, S, sinv, mbs);
}

/* Launch contract: grid (ceil(nsb / 8), T) with nsb = in / 256, block 256;
 * buf holds mmvq_buf_bytes(T, nsb). Block (b, t): warp w converts
 * super-block 8 b + w of token t. With nw, every block of the token first
 * takes the row's sum of squares in the same fixed order (thread i:
 * float4s i, i + 256, .. in order; the warps' sums in a fixed tree; the
 * super-block's own x is requested first, so both loads are in flight
 * together), inv = 1 / sqrt(ss / in + eps) and v = (x inv) w; without,
 * v = x. Splitting a token over blocks shortens the chain the matvec waits
 * for; every block computes the same inv. */
static __global__ void __launch_bounds__(256) k_mmvq_prep(const float *__restrict__ x, const float *__restrict__ nw,
                                                   float eps, int64_t in, int T, uint8_t *__restrict__ buf) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory"); /* the matvec may start loading its weights */
#endif
    pdl_start();
    __shared__ float red[8];
    const int t = blockIdx.y, lane = threadIdx.x & 31, w = threadIdx.x >> 5, nsb = (int)(in / 256);
    const int sb = 8 * blockIdx.x + w;
    uint8_t *planes = buf;
    float *S = (float *)(buf + (size_t)T * nsb * MQ_SB_B), *sinv = S + (size_t)T * nsb * 8;
    const float *xr = x + (int64_t)t * in;
    float4 u0 = make_float4(0.0f, 0.0f, 0.0f, 0.0f), u1 = u0, w0 = u0, w1 = u0;
    if (sb < nsb) {
        const float4 *xp = (const float4 *)(xr + (int64_t)sb * 256 + 8 * lane);
        u0 = __ldg(xp), u1 = __ldg(xp + 1);
        if (nw) {
            const float4 *wq = (const float4 *)(nw + (int64_t)sb * 256 + 8 * lane);
            w0 = __ldg(wq), w1 = __ldg(wq + 1);
        }
    }
    float inv = 1.0f;
    if (nw) {
        const float ss = mmvq_prep_part(xr, in, threadIdx.x);
        if (lane == 0) red[w] = ss;
        __syncthreads();
        inv = mmvq_prep_inv(red, in, eps);
    }
    if (sb >= nsb) return;
    const size_t ts = (size_t)t * nsb + sb;
    uint8_t *mbs = (uint8_t *)(sinv + (size_t)T * nsb) + ts * MQ_MB_B;
    mmvq_prep_sb(u0, u1, w0, w1, nw != nullptr, inv, lane, planes + ts * MQ_SB_B, S + ts * 8, sinv + ts, mbs);
}

/* k_mmvq_prep's launch for T tokens of rows of `in` */
static inline void mmvq_prep_launch(const float *x, const float *nw, float eps, int64_t in, int T, uint8_t *buf,
                                    cudaStream_t s) {
    cuda_launch(k_mmvq_prep, dim3((unsigned)((in / 256 + 7) / 8), (unsigned)T), 256, 0, s, x, nw, eps, in, T, buf);
}

/* One 16-row tile's raw bytes of one super-block for MMA lane (g, t): rows
 * g and g + 8, the 16-byte head (d, dmin, scales) and the qs bytes
 * 32 p + 8 t .. + 7 (p = 0..3: sub-blocks 2 p in the low nibbles, 2 p + 1 in
 * the high ones). */
struct mmvq_raw {
    uint4 head[2];
    uint2 qs[2][4];
    __device__ __forceinline__ void load(const uint8_t *r0, const uint8_t *r1, int sb, int t) {
        const uint8_t *b[2] = {r0 + (int64_t)sb * 144, r1 + (int64_t)sb * 144};
#pragma unroll
        for (int r = 0; r < 2; r++) {
            head[r] = __ldg((const uint4 *)b[r]);
#pragma unroll
            for (int p = 0; p < 4; p++) qs[r][p] = __ldg((const uint2 *)(b[r] + 16 + 32 * p + 8 * t));
        }
    }
    /* the same from a tile's super-block in shared memory (row i at 144 i: k_mmvq_tm's ring slot) */
    __device__ __forceinline__ void load_sh(const uint8_t *tile, int g, int t) {
#pragma unroll
        for (int r = 0; r < 2; r++) {
            const uint8_t *b = tile + (g + 8 * r) * 144;
            head[r] = *(const uint4 *)b;
#pragma unroll
            for (int p = 0; p < 4; p++) qs[r][p] = *(const uint2 *)(b + 16 + 32 * p + 8 * t);
        }
    }
};

/* Where mmvq_sb_lean finds one super-block's activations: the prep's planes in
 * global memory (this file), or a warp's staging area in shared memory
 * (bench/kernels/mmvq_inkernel.cuh). limbs(tok, limb, t): lane group t's
 * 64 bytes of a limb plane; sx(tok): 2^-e; s(tok, j): S_j. */
struct mmvq_gsrc {
    const uint8_t *planes;
    const float *S, *sinv;
    size_t nsb, sb;
    /* lane (g, t < 2)'s word of S_jl bytes, j = 4 t .. 4 t + 3 (hl: 0 lo, 1 hi; mmvq_sb_lean); the region
     * follows 2^-e, whose count is T nsb, so it starts at sinv + T nsb */
    __device__ __forceinline__ uint32_t mw(int T, int tok, int hl, int limb, int t) const {
        const uint8_t *mb = (const uint8_t *)(sinv + (size_t)T * nsb);
        return __ldg((const uint32_t *)(mb + (tok * nsb + sb) * MQ_MB_B + hl * 24 + limb * 8 + 4 * t));
    }
    __device__ __forceinline__ const uint4 *limbs(int tok, int limb, int t) const {
        return (const uint4 *)(planes + (tok * nsb + sb) * MQ_SB_B + limb * 256 + t * 64);
    }
    __device__ __forceinline__ uint4 ld(const uint4 *p) const { return __ldg(p); }
    __device__ __forceinline__ float sx(int tok) const { return __ldg(sinv + tok * nsb + sb); }
    __device__ __forceinline__ float s(int tok, int j) const { return __ldg(S + (tok * nsb + sb) * 8 + j); }
};

/* Lane (g, t)'s B column of each token pair p: token 2 p + g / 3, limb
 * g % 3 (g < 6; else nullptr), and 2^-e of its C columns 2 t, 2 t + 1 (0
 * for the unused ones): what mmvq_sb and mmvq_sb6 read of src. */
template <int NP, class SRC>
__device__ __forceinline__ void mmvq_cols(const SRC &src, int T, int g, int t, const uint4 *(&bp)[NP],
                                          float (&sx)[NP][2]) {
#pragma unroll
    for (int p = 0; p < NP; p++) {
        const int tok = 2 * p + (g >= 3);
        bp[p] = g < 6 && tok < T ? src.limbs(tok, g % 3, t) : nullptr;
#pragma unroll
        for (int e = 0; e < 2; e++) {
            const int n = 2 * t + e, tk = 2 * p + n / 3;
            sx[p][e] = n < 6 && tk < T ? src.sx(tk) : 0.0f;
        }
    }
}

/* The start of every mmvq_sb*: the integer sums A zeroed, and B's k-th
 * 16 bytes of each token pair (zeros past T). */
template <int TL, int NP>
__device__ __forceinline__ void mmvq_azero(int (&A)[TL][NP][4]) {
#pragma unroll
    for (int tl = 0; tl < TL; tl++)
#pragma unroll
        for (int p = 0; p < NP; p++) A[tl][p][0] = A[tl][p][1] = A[tl][p][2] = A[tl][p][3] = 0;
}

template <int NP, class SRC>
__device__ __forceinline__ void mmvq_bload(const SRC &src, const uint4 *const (&bp)[NP], int k, uint4 (&bb)[NP]) {
#pragma unroll
    for (int p = 0; p < NP; p++) bb[p] = bp[p] ? src.ld(bp[p] + k) : make_uint4(0u, 0u, 0u, 0u);
}

/* s8 x s8 -> s32 (the Q6_K rows below) */
__device__ __forceinline__ void mmvq_imma8(int *c, uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3, uint32_t b0,
                                           uint32_t b1) {
    asm("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
        : "+r"(c[0]), "+r"(c[1]), "+r"(c[2]), "+r"(c[3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

/* Q6_K rows (mmvq_raw6, mmvq_sb6). A = q - 32 as s8 (mma.sync m16n8k32
 * s8 x s8). Q6_K's scales cover 16 elements, and in the planes' k order
 * lanes t = 0, 1 hold a 32-element sub-block's first 16 and t = 2, 3 its
 * second, so each sub-block takes two MMAs, A zeroed in the other group's
 * lanes: C_lo, C_hi. The int8 scales are applied to them as integers, A_n
 * += sc_2j C_lo + sc_2j+1 C_hi (|A_n| < 2^27 over a super-block: 16 groups
 * of |sc| <= 128 times 16 products of |q - 32| <= 32 and |limb| <= 128), then
 * per super-block acc_n = fma(d 2^-e, A_n, acc_n) as Q4_K's.
 *
 * Q6_K layout (256 elements, 210 bytes): ql[128] low nibbles, qh[64] high 2
 * bits, scales[16] int8, d fp16. Sub-block j (32 elements; h = j / 4, c =
 * j % 4): element l has nibble c / 2 of ql[64 h + 32 (c & 1) + l] and bits
 * 2 c of qh[32 h + l], scale scales[2 j + l / 16]. Lane (g, t) takes bytes
 * l = 8 t .. 8 t + 7 of each: four 8-byte ql pieces and two qh pieces per
 * row, and scales 4 t .. 4 t + 3 (the MMA's rows g, g + 8 need all 16:
 * shuffled from the four lanes of g). Blocks are 210 bytes, so a super-block
 * starts 4-byte aligned or 2 bytes past a word (by sb's and, for an odd count
 * per row, the row's parity); mmvq_ld8 loads either. */
__device__ __forceinline__ uint2 mmvq_ld8(const uint8_t *p) {
    const uint32_t *w = (const uint32_t *)((uintptr_t)p & ~(uintptr_t)3);
    const uint32_t u0 = __ldg(w), u1 = __ldg(w + 1);
    if (((uintptr_t)p & 2) == 0) return make_uint2(u0, u1);
    const uint32_t u2 = __ldg(w + 2);
    return make_uint2(__funnelshift_r(u0, u1, 16), __funnelshift_r(u1, u2, 16));
}

__device__ __forceinline__ uint32_t mmvq_ld4(const uint8_t *p) {
    const uint32_t *w = (const uint32_t *)((uintptr_t)p & ~(uintptr_t)3);
    if (((uintptr_t)p & 2) == 0) return __ldg(w);
    return __funnelshift_r(__ldg(w), __ldg(w + 1), 16);
}

struct mmvq_raw6 {
    uint2 ql[2][2][2]; /* [row g, g + 8][h][c & 1]: the lane's 8 ql bytes */
    uint2 qh[2][2];    /* [row][h]: its 8 qh bytes */
    uint32_t sc[2];    /* [row]: scales 4 t .. 4 t + 3 (mmvq_sb6 takes the others from the lanes t of its g) */
    uint32_t d[2];     /* [row] fp16 bits */
    __device__ __forceinline__ void load(const uint8_t *r0, const uint8_t *r1, int sb, int t) {
        const uint8_t *b[2] = {r0 + (int64_t)sb * 210, r1 + (int64_t)sb * 210};
#pragma unroll
        for (int r = 0; r < 2; r++) {
#pragma unroll
            for (int h = 0; h < 2; h++) {
#pragma unroll
                for (int c = 0; c < 2; c++) ql[r][h][c] = mmvq_ld8(b[r] + 64 * h + 32 * c + 8 * t);
                qh[r][h] = mmvq_ld8(b[r] + 128 + 32 * h + 8 * t);
            }
            sc[r] = mmvq_ld4(b[r] + 192 + 4 * t);
            d[r] = __ldg((const unsigned short *)(b[r] + 208));
        }
    }
    /* the same from a ring slot of 16 rows with their 210-byte blocks intact
     * (k_mmvq_tm: row i at 210 i, 2-byte aligned where i is odd): aligned
     * words, funnel-shifted by the row's offset, as mmvq_ld8 does */
    __device__ __forceinline__ void load_sh(const uint8_t *slot, int g, int t) {
        auto ld8 = [&](int o) {
            const uint32_t *w = (const uint32_t *)(slot + (o & ~3));
            const uint32_t sh = (uint32_t)(o & 2) * 8u, u0 = w[0], u1 = w[1], u2 = w[2];
            return make_uint2(__funnelshift_r(u0, u1, sh), __funnelshift_r(u1, u2, sh));
        };
#pragma unroll
        for (int r = 0; r < 2; r++) {
            const int b = 210 * (g + 8 * r);
#pragma unroll
            for (int h = 0; h < 2; h++) {
#pragma unroll
                for (int c = 0; c < 2; c++) ql[r][h][c] = ld8(b + 64 * h + 32 * c + 8 * t);
                qh[r][h] = ld8(b + 128 + 32 * h + 8 * t);
            }
            const int o = b + 192 + 4 * t;
            const uint32_t *w = (const uint32_t *)(slot + (o & ~3));
            sc[r] = __funnelshift_r(w[0], w[1], (uint32_t)(o & 2) * 8u);
            d[r] = *(const unsigned short *)(slot + b + 208);
        }
    }
};

/* The s8 values q - 32 of one word of 6-bit codes (bytes in 0..63): q ^ 32
 * is q - 32 in 6-bit two's complement; its bit 5 copied into bits 6, 7. */
__device__ __forceinline__ uint32_t mmvq_q6s8(uint32_t lw, uint32_t hw, int c) {
    const uint32_t q = ((lw >> (4 * (c >> 1))) & 0x0F0F0F0Fu) | (((hw >> (2 * c)) & 0x03030303u) << 4);
    const uint32_t x = q ^ 0x20202020u;
    return x | ((x & 0x20202020u) * 6u);
}

/* Rows g, g + 8's scales 4 k .. 4 k + 3 (sw[row]) for mmvq_sb6's k-th step: from lane (g, k), which loaded them */
__device__ __forceinline__ void mmvq_q6_scales(const mmvq_raw6 &w, int g, int k, uint32_t (&sw)[2]) {
#pragma unroll
    for (int r = 0; r < 2; r++) sw[r] = __shfl_sync(0xFFFFFFFFu, w.sc[r], 4 * g + k);
}

/* Sub-block j = 2 k + hj of rows g, g + 8 for the MMAs: the s8 words of q - 32 (a[row][bytes 0-3, 4-7]) and the
 * scales 2 j, 2 j + 1 (s0[row], s1[row]: bytes 2 hj, 2 hj + 1 of sw) */
__device__ __forceinline__ void mmvq_q6_sub(const mmvq_raw6 &w, const uint32_t (&sw)[2], int k, int hj,
                                            uint32_t (&a)[2][2], int (&s0)[2], int (&s1)[2]) {
    const int j = 2 * k + hj, h = j >> 2, c = j & 3;
#pragma unroll
    for (int r = 0; r < 2; r++) {
        a[r][0] = mmvq_q6s8(w.ql[r][h][c & 1].x, w.qh[r][h].x, c);
        a[r][1] = mmvq_q6s8(w.ql[r][h][c & 1].y, w.qh[r][h].y, c);
        s0[r] = (int)(int8_t)(uint8_t)(sw[r] >> (16 * hj));
        s1[r] = (int)(int8_t)(uint8_t)(sw[r] >> (16 * hj + 8));
    }
}

/* The Q6_K super-block (acc as mmvq_sb_lean's; Q6_K has no min term) */
template <int NP, class SRC, int TL = 2>
__device__ __forceinline__ void mmvq_sb6(const mmvq_raw6 *w, float (*acc)[NP][4], const SRC &src, int T, int g,
                                         int t) {
    const uint4 *bp[NP];
    float sx[NP][2];
    mmvq_cols<NP>(src, T, g, t, bp, sx);
    const uint32_t lo = t < 2 ? 0xFFFFFFFFu : 0u, hi = ~lo; /* the lanes of a sub-block's first, second 16 */
    int A[TL][NP][4];
    mmvq_azero(A);
#pragma unroll
    for (int k = 0; k < 4; k++) {
        uint4 bb[NP];
        mmvq_bload<NP>(src, bp, k, bb);
#pragma unroll
        for (int tl = 0; tl < TL; tl++) {
            uint32_t sw[2];
            mmvq_q6_scales(w[tl], g, k, sw);
#pragma unroll
            for (int hj = 0; hj < 2; hj++) { /* sub-block j = 2 k + hj */
                uint32_t a[2][2];
                int s0[2], s1[2];
                mmvq_q6_sub(w[tl], sw, k, hj, a, s0, s1);
#pragma unroll
                for (int p = 0; p < NP; p++) {
                    const uint32_t b0 = hj ? bb[p].z : bb[p].x, b1 = hj ? bb[p].w : bb[p].y;
                    int c0[4] = {0, 0, 0, 0}, c1[4] = {0, 0, 0, 0};
                    mmvq_imma8(c0, a[0][0] & lo, a[1][0] & lo, a[0][1] & lo, a[1][1] & lo, b0, b1);
                    mmvq_imma8(c1, a[0][0] & hi, a[1][0] & hi, a[0][1] & hi, a[1][1] & hi, b0, b1);
#pragma unroll
                    for (int i = 0; i < 4; i++) A[tl][p][i] += s0[i >> 1] * c0[i] + s1[i >> 1] * c1[i];
                }
            }
        }
    }
#pragma unroll
    for (int tl = 0; tl < TL; tl++)
#pragma unroll
        for (int r = 0; r < 2; r++) {
            const float d = __half2float(__ushort_as_half((unsigned short)w[tl].d[r]));
#pragma unroll
            for (int p = 0; p < NP; p++)
#pragma unroll
                for (int e = 0; e < 2; e++)
                    acc[tl][p][2 * r + e] =
                        fmaf(__fmul_rn(d, sx[p][e]), (float)A[tl][p][2 * r + e], acc[tl][p][2 * r + e]);
        }
}

/* What every Q4_K super-block of the prep's planes takes (k_mmvq, k_mmvq_tm, k_mmvq_tm2, the MoE int8
 * kernels): the older mmvq_sb's work (bench/kernels/mmvq_sb_ref.cuh) in fewer instructions and a shorter chain.
 *  - The high nibbles are masked in place (16 q); the low ones' scales are taken times 16, so one integer sum
 *    A = 16 sum_j sc_j (q_j . X) (|A| < 2^30) holds both, shifted back once (A >> 4, exact).
 *  - The 6-bit scales come out by byte permutes.
 *  - The min term is an integer per limb column n, M_n = sum_j m_j S_jn, from two more MMAs per tile and token
 *    pair: A = the rows' mins at k = j < 8, B = the lo and hi bytes of the limb's sub-block sums S_jn that the
 *    prep writes (mmvq_convert); |M_n| < 2^22, exact in fp32. No lane loads float S, none waits on a chain of
 *    8 FMAs, and no lanes idle on it.
 *  - Per column: acc = fma(d 2^-e, A, acc), then acc = fma(-dmin 2^-e, M, acc).
 * SRC: mmvq_gsrc's members, with mw(T, tok, hl, limb, t) for the sums' words (moe.cu's moe_q8_src: a staging area).
 * Why (bench/results/2026-12-07h-h100.md, H100): one warp's super-block with the weights in shared memory and
 * the planes read from global memory as here, 918 cycles in mmvq_sb and 687 in this (541-559 with the planes in
 * shared memory); full grids of 16 warps an SM 1.46-1.48 and 1.84 x copy (2.04-2.06). Gates
 * (kernels 9b and 27b, model) pass. Decode@0 tok/s, two rounds: 9b q4_k_m 345.9 / 346.3 -> 350.7 / 351.2, 27b
 * q4_k_m 119.4 / 119.3 -> 120.5 / 121.5, 35b-a3b q4_k_m 474.7 / 469.5 -> 473.8 / 477.5. The rounding of the
 * min term differs from mmvq_sb's: ~1.5e-6 of max |y| apart. */
template <int NP, class SRC, int TL = 2>
__device__ __forceinline__ void mmvq_sb_lean(const mmvq_raw *w, float (*acc)[NP][4], const SRC &src, int T, int g,
                                             int t) {
    uint32_t scw[TL][2][2], am[TL][2];
#pragma unroll
    for (int tl = 0; tl < TL; tl++)
#pragma unroll
        for (int r = 0; r < 2; r++) {
            const uint4 h = w[tl].head[r];
            scw[tl][r][0] = h.y & 0x3F3F3F3Fu;
            scw[tl][r][1] = (h.w & 0x0F0F0F0Fu) | ((h.y >> 2) & 0x30303030u);
            const uint32_t m0 = h.z & 0x3F3F3F3Fu, m1 = ((h.w >> 4) & 0x0F0F0F0Fu) | ((h.z >> 2) & 0x30303030u);
            am[tl][r] = t == 0 ? m0 : t == 1 ? m1 : 0u;
        }
    const uint4 *bp[NP];
    float sx[NP][2];
    mmvq_cols<NP>(src, T, g, t, bp, sx);
    int A[TL][NP][4]; /* 16 sum sc (lo nibbles . B) + sum sc (16 hi nibbles . B): |A| < 2^30, a multiple of 16 */
    mmvq_azero(A);
#pragma unroll
    for (int k = 0; k < 4; k++) {
        uint4 bb[NP];
        mmvq_bload<NP>(src, bp, k, bb);
#pragma unroll
        for (int tl = 0; tl < TL; tl++) {
            uint32_t lo[2][2], hi[2][2];
#pragma unroll
            for (int r = 0; r < 2; r++) {
                const uint2 q = w[tl].qs[r][k];
                lo[r][0] = q.x & 0x0F0F0F0Fu, lo[r][1] = q.y & 0x0F0F0F0Fu;
                hi[r][0] = q.x & 0xF0F0F0F0u, hi[r][1] = q.y & 0xF0F0F0F0u;
            }
            const int j0 = 2 * k, j1 = 2 * k + 1;
            int s0[2], s1[2];
#pragma unroll
            for (int r = 0; r < 2; r++) {
                s0[r] = (int)__byte_perm(scw[tl][r][j0 >> 2], 0u, 0x4440u | (uint32_t)(j0 & 3)) << 4;
                s1[r] = (int)__byte_perm(scw[tl][r][j1 >> 2], 0u, 0x4440u | (uint32_t)(j1 & 3));
            }
#pragma unroll
            for (int p = 0; p < NP; p++) {
                int c0[4] = {0, 0, 0, 0}, c1[4] = {0, 0, 0, 0};
                mmvq_imma(c0, lo[0][0], lo[1][0], lo[0][1], lo[1][1], bb[p].x, bb[p].y);
                mmvq_imma(c1, hi[0][0], hi[1][0], hi[0][1], hi[1][1], bb[p].z, bb[p].w);
#pragma unroll
                for (int i = 0; i < 4; i++) A[tl][p][i] += s0[i >> 1] * c0[i] + s1[i >> 1] * c1[i];
            }
        }
    }
#pragma unroll
    for (int p = 0; p < NP; p++) {
        const int tok = 2 * p + (g >= 3);
        const bool has = t < 2 && g < 6 && tok < T;
        const uint32_t blo = has ? src.mw(T, tok, 0, g % 3, t) : 0u, bhi = has ? src.mw(T, tok, 1, g % 3, t) : 0u;
#pragma unroll
        for (int tl = 0; tl < TL; tl++) {
            int cl[4] = {0, 0, 0, 0}, ch[4] = {0, 0, 0, 0};
            mmvq_imma(cl, am[tl][0], am[tl][1], 0u, 0u, blo, 0u);
            mmvq_imma(ch, am[tl][0], am[tl][1], 0u, 0u, bhi, 0u);
#pragma unroll
            for (int r = 0; r < 2; r++) {
                const uint32_t hx = w[tl].head[r].x;
                const float d = __half2float(__ushort_as_half((unsigned short)(hx & 0xFFFF)));
                const float dm = __half2float(__ushort_as_half((unsigned short)(hx >> 16)));
#pragma unroll
                for (int e = 0; e < 2; e++) {
                    const int i = 2 * r + e;
                    const int a = A[tl][p][i] >> 4, m = cl[i] + 256 * ch[i];
                    acc[tl][p][i] = fmaf(__fmul_rn(d, sx[p][e]), (float)a, acc[tl][p][i]);
                    acc[tl][p][i] = fmaf(-__fmul_rn(dm, sx[p][e]), (float)m, acc[tl][p][i]);
                }
            }
        }
    }
}

/* A raw super-block's type by the weight type, and mmvq_sb_lean or mmvq_sb6
 * by the raw type (k_mmvq, k_mmvq_tm and k_mmvq_tm2 take either) */
template <int TYPE>
using mmvq_raw_t = typename std::conditional<TYPE == MEMRA_TYPE_Q6_K, mmvq_raw6, mmvq_raw>::type;

template <int NP, class SRC, int TL, class R>
__device__ __forceinline__ void mmvq_sb_raw(const R *w, float (*acc)[NP][4], const SRC &src, int T, int g, int t) {
    if constexpr (std::is_same<R, mmvq_raw6>::value)
        mmvq_sb6<NP, SRC, TL>(w, acc, src, T, g, t);
    else
        mmvq_sb_lean<NP, SRC, TL>(w, acc, src, T, g, t);
}

/* The block's TL 16-row tiles (TL = 2, k_mmv's mapping: block b of weight
 * wi owns rows 32 (b - blk0[wi]) .. + 31, or for swiglu rows 16 (b -
 * blk0[0]) .. + 15 of gate (tile 0) and up (tile 1); TL = 1: rows 16 (b -
 * blk0[wi]) .. + 15, or for swiglu gate rows 8 (b - blk0[0]) .. + 7 as the
 * tile's rows 0..7 and the same up rows as its rows 8..15): lane group g's
 * rows g, g + 8 of each tile (clamped to the weight), the tiles' first rows
 * and row counts. Returns wi. */
template <int TL = 2>
__device__ __forceinline__ int mmvq_tiles(const mmv_args &a, int g, const uint8_t *(&rows)[TL][2],
                                          int64_t (&rbase)[TL], int64_t (&nrow)[TL]) {
    const int wi = cuda_blk_owner(a.blk0, (int)blockIdx.x);
    if (TL == 1 && a.swiglu) { /* the tile's rows g: gate row 8 b + g, rows g + 8: up row 8 b + g */
        rbase[0] = (int64_t)((int)blockIdx.x - a.blk0[0]) * 8, nrow[0] = a.n_out[0];
        const int64_t row = rbase[0] + g < nrow[0] ? rbase[0] + g : nrow[0] - 1;
        rows[0][0] = a.W[0] + row * (int64_t)a.row_bytes, rows[0][1] = a.W[1] + row * (int64_t)a.row_bytes;
        return 0;
    }
    const int64_t tile0 = (int64_t)((int)blockIdx.x - a.blk0[wi]) * (a.swiglu ? 16 : 16 * TL);
#pragma unroll
    for (int tl = 0; tl < TL; tl++) {
        const int w = a.swiglu ? tl : wi;
        rbase[tl] = a.swiglu ? tile0 : tile0 + 16 * tl;
        nrow[tl] = a.n_out[w];
#pragma unroll
        for (int r = 0; r < 2; r++) {
            const int64_t row = rbase[tl] + g + 8 * r;
            rows[tl][r] = a.W[w] + (row < nrow[tl] ? row : nrow[tl] - 1) * (int64_t)a.row_bytes;
        }
    }
    return wi;
}

#define MQ_PART(k, tl, p, row, n) part[((((k) * TL + (tl)) * NP + (p)) * 16 + (row)) * 8 + (n)]
/* mmvq_finish's first half: a warp's accumulators of K range k into part */
template <int NP, int TL = 2>
__device__ __forceinline__ void mmvq_part_store(const float (*acc)[NP][4], float *part, int k) {
    const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
#pragma unroll
    for (int tl = 0; tl < TL; tl++)
#pragma unroll
        for (int p = 0; p < NP; p++)
#pragma unroll
            for (int r = 0; r < 2; r++) {
                MQ_PART(k, tl, p, g + 8 * r, 2 * t) = acc[tl][p][2 * r];
                MQ_PART(k, tl, p, g + 8 * r, 2 * t + 1) = acc[tl][p][2 * r + 1];
            }
}

/* Its second half, after a __syncthreads: the ks ranges' columns added in range order, the outputs written (ks:
 * the K split, which is the block's warp count except in k_mmvq_tm's two-range form) */
template <int NP, int TL = 2>
__device__ __forceinline__ void mmvq_part_sums(const float *part, const mmv_args &a, int wi, const int64_t *rbase,
                                               const int64_t *nrow, const float *tok_inv, int ks) {
    auto col = [&](int tl, int p, int row, int n) {
        float v = MQ_PART(0, tl, p, row, n);
        for (int k = 1; k < ks; k++) v = __fadd_rn(v, MQ_PART(k, tl, p, row, n));
        return v;
    };
    auto value = [&](int tl, int p, int row, int tk) {
        const int n = 3 * tk;
        const float v =
            __fadd_rn(__fadd_rn(__fmul_rn(65536.0f, col(tl, p, row, n)), __fmul_rn(256.0f, col(tl, p, row, n + 1))),
                      col(tl, p, row, n + 2));
        return tok_inv ? __fmul_rn(v, tok_inv[2 * p + tk]) : v;
    };
    if (TL == 1 && a.swiglu) { /* rows 0..7 gate, 8..15 up (mmvq_tiles) */
        for (int i = threadIdx.x; i < NP * 16; i += blockDim.x) {
            const int tk = i & 1, row = (i >> 1) & 7, p = i >> 4, tok = 2 * p + tk;
            const int64_t orow = rbase[0] + row;
            if (tok >= a.T || orow >= nrow[0]) continue;
            a.y[0][(int64_t)tok * nrow[0] + orow] = silu_f(value(0, p, row, tk)) * value(0, p, row + 8, tk);
        }
        return;
    }
    const int n_res = (a.swiglu ? 1 : TL) * NP * 32;
    for (int i = threadIdx.x; i < n_res; i += blockDim.x) {
        const int tk = i & 1, row = (i >> 1) & 15, p = (i >> 5) % NP, tl = (i >> 5) / NP;
        const int tok = 2 * p + tk;
        const int64_t orow = rbase[tl] + row;
        if (tok >= a.T || orow >= nrow[tl]) continue;
        const float v = value(tl, p, row, tk);
        if (a.swiglu) {
            a.y[0][(int64_t)tok * nrow[0] + orow] = silu_f(v) * value(1, p, row, tk);
        } else {
            float *yp = a.y[wi] + (int64_t)tok * nrow[tl] + orow;
            *yp = a.accumulate ? *yp + v : v;
        }
    }
}

/* The end of a k_mmvq block (and of the lab's in-kernel version): the
 * warps' accumulators to part ([ks][TL][NP][16][8] floats, shared), then one
 * (tile, pair, row, token of the pair) per thread: the columns added in warp
 * order, the limbs combined, times tok_inv[token] when given (the lab's
 * input norm), written (swiglu: silu(gate) up; else y or y += ). Every
 * thread of the block calls it. */
template <int NP, int TL = 2>
__device__ __forceinline__ void mmvq_finish(const float (*acc)[NP][4], float *part, const mmv_args &a, int wi,
                                            const int64_t *rbase, const int64_t *nrow, const float *tok_inv) {
    mmvq_part_store<NP, TL>(acc, part, threadIdx.x >> 5);
    __syncthreads();
    mmvq_part_sums<NP, TL>(part, a, wi, rbase, nrow, tok_inv, blockDim.x >> 5);
}
#undef MQ_PART

/* Launch contract: grid (blk0[4]: mmv_blocks for TL = 2, mmvq_blocks1 for
 * TL = 1), block 32 ks (ks = mmv_ks(in / 256)),
 * dynamic shared memory mmvq_smem_bytes(NP, TL, ks), T <= 2 NP; buf
 * written by k_mmvq_prep for these T tokens (a.nw is ignored: the prep
 * applied the norm). TL: 16-row tiles per warp (mmvq_tiles, mmvq_tl);
 * MINB: the launch bound's blocks of 256 per SM (registers <= 256 / MINB;
 * 3 and 4 at TL = 1 spilled and did not help). Neither changes a bit: a
 * row's arithmetic and order depend on its length only. */
static inline size_t mmvq_smem_bytes(int np, int tl, int ks) { return (size_t)ks * tl * np * 16 * 8 * sizeof(float); }

template <int TYPE, int NP, int TL, int MINB>
__global__ void __launch_bounds__(32 * MMV_KS_MAX, MINB) k_mmvq(mmv_args a, const uint8_t *__restrict__ buf) {
    using raw = mmvq_raw_t<TYPE>;
    extern __shared__ __align__(16) float mq_part[]; /* [ks][TL][NP][16][8] */
    const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3, wp = threadIdx.x >> 5;
    const int ks = blockDim.x >> 5;
    const uint8_t *rows[TL][2];
    int64_t rbase[TL], nrow[TL];
    const int wi = mmvq_tiles<TL>(a, g, rows, rbase, nrow);
    const int nsb = (int)(a.in / 256);
    const int sb0 = wp * nsb / ks, sb1 = (wp + 1) * nsb / ks;
    /* the first super-block's weights before the wait for the prep */
    raw cur[TL];
    if (sb0 < sb1)
#pragma unroll
        for (int tl = 0; tl < TL; tl++) cur[tl].load(rows[tl][0], rows[tl][1], sb0, t);
    pdl_start();
    const uint8_t *planes = buf;
    const float *S = (const float *)(buf + (size_t)a.T * nsb * MQ_SB_B), *sinv = S + (size_t)a.T * nsb * 8;
    float acc[TL][NP][4];
#pragma unroll
    for (int tl = 0; tl < TL; tl++)
#pragma unroll
        for (int p = 0; p < NP; p++) acc[tl][p][0] = acc[tl][p][1] = acc[tl][p][2] = acc[tl][p][3] = 0.0f;
#pragma unroll 1
    for (int sb = sb0; sb < sb1; sb++) {
        if (sb > sb0)
#pragma unroll
            for (int tl = 0; tl < TL; tl++) cur[tl].load(rows[tl][0], rows[tl][1], sb, t);
        const mmvq_gsrc src{planes, S, sinv, (size_t)nsb, (size_t)sb};
        mmvq_sb_raw<NP, mmvq_gsrc, TL>(cur, acc, src, a.T, g, t);
    }
    pdl_trigger();
    mmvq_finish<NP, TL>(acc, mq_part, a, wi, rbase, nrow, nullptr);
}

/* blk0 for TL = 1: a block per 16 rows of each weight, or per 8 rows of a
 * swiglu pair (the weights in use are those mmv_blocks gave blocks) */
static inline void mmvq_blocks1(mmv_args *a) {
    const int per = a->swiglu ? 8 : 16;
    int b = 0;
    for (int i = 0; i < 4; i++) {
        const bool used = a->blk0[i + 1] > a->blk0[i];
        a->blk0[i] = b;
        b += used ? (int)((a->n_out[i] + per - 1) / per) : 0;
    }
    a->blk0[4] = b;
}

/* ---- k_mmvq_tm: tile-major Q4_K and Q6_K weights through a per-warp cp.async ring ----
 *
 * What: k_mmvq for the tile-major layout (common.cuh): the same block and
 * warp layout (the same tiles, the same super-block range per warp), the
 * same arithmetic (mmvq_sb_raw), epilogue (mmvq_finish) and pdl_trigger() after
 * the loop, so every row has k_mmvq's bits on the file's layout. Only the
 * way the weight bytes reach the registers differs: each warp has a ring of
 * D slots in shared memory; a slot holds one super-block of the warp's TL
 * tiles (TL x 2,304 bytes, row i of a tile at 144 i), filled by the lanes'
 * 16-byte cp.async (one commit group per super-block). Tile-major, a
 * tile's super-block is one 2,304-byte run (for swiglu at TL = 1, whose
 * tile is 8 gate rows and the same 8 up rows, two 1,152-byte half runs).
 * D - 1 super-blocks are in flight while one is multiplied; the first D - 1
 * are requested before the wait for the prep (constants of the step, as
 * k_mmvq's first). This is the lab's k_cr<D, 1> (bench/kernels/
 * mmvq_tm_lab.cu) for every T, TL and swiglu layout of k_mmvq.
 * Why (bench/results/2026-12-03g-h200.md, section 2; H200, us per prep +
 * matvec pair at T = 1, 64 per CUDA graph over weight copies > L2): the
 * production pair on the file's layout 16.2-16.6 / 15.3-15.9 / 24.9-25.2 /
 * 29.5-30.5 us (41 / 43 / 48 / 40% of copy) on {4096, 12288} / {12288,
 * 4096} / {5120, 17408} / {17408, 5120}; k_cr<2, 1> 14.3 / 12.8 / 21.6 /
 * 28.5 us (47 / 53 / 55 / 42%), k_cr<4, 1> 15.2 / 14.1 / 22.8 / 24.9 us;
 * every output memcmp-equal to production's. Register loads at the
 * tile-major addresses gained 9-11%, the same ring on the file's layout
 * nothing.
 * D: mmvq_tm_d, a function of the row length (and TL), never of T. */
#define MMVQ_TM_D 2 /* ring slots; 4 for long warp ranges (mmvq_tm_d) */

/* D = 4 where a warp walks 8 or more super-blocks (nsb / ks >= 8: rows of
 * 16,384 or more, 27b's ffn_down {17408, 5120}: 24.9 against 28.5 us),
 * else 2 (D = 4 lost 5-10% at 4-6 super-blocks a warp). TL = 2 keeps 2:
 * unmeasured, and its slots are twice as large. */
static inline int mmvq_tm_d(int nsb, int ks, int tl) {
    /* MEMRA_TM_D=2 or 4: that depth for every TL = 1 launch (a timing switch, the same bits). H100, decode
     * tok/s at depth 0, two rounds (bench/results/2026-12-06b-h100.md): 9b q4_k_m 316.9 / 317.2 with this rule,
     * 311.0 / 310.8 at D = 4 everywhere; 35b-a3b 433.1 / 428.1 and 411.6 / 412.0 (D = 3: 427-428, not kept). */
    static int over = -1;
    if (over < 0) {
        const char *e = getenv("MEMRA_TM_D");
        over = e && (!strcmp(e, "2") || !strcmp(e, "4")) ? atoi(e) : 0;
    }
    if (tl != 1) return MMVQ_TM_D;
    return over ? over : nsb / ks >= 8 ? 4 : MMVQ_TM_D;
}

/* Bytes of one warp's ring, and k_mmvq_tm's dynamic shared memory: the
 * rings, then mmvq_finish's partials (apart: a warp may still read its ring
 * while another writes its partials). */
__host__ __device__ static constexpr int mmvq_tm_warp_bytes(int d, int tl, int sbb = Q4K_TM_SB) { return d * tl * sbb; }
static inline size_t mmvq_tm_smem_bytes(int d, int np, int tl, int ks, int sbb = Q4K_TM_SB) {
    return (size_t)ks * mmvq_tm_warp_bytes(d, tl, sbb) + mmvq_smem_bytes(np, tl, ks);
}

/* The block's tiles as mmvq_tiles sets them (rbase, nrow, the return
 * value), without the row pointers. */
template <int TL>
__device__ __forceinline__ int mmvq_tile_rows(const mmv_args &a, int64_t (&rbase)[TL], int64_t (&nrow)[TL]) {
    if (TL == 1 && a.swiglu) {
        rbase[0] = (int64_t)((int)blockIdx.x - a.blk0[0]) * 8, nrow[0] = a.n_out[0];
        return 0;
    }
    const int wi = cuda_blk_owner(a.blk0, (int)blockIdx.x);
    const int64_t tile0 = (int64_t)((int)blockIdx.x - a.blk0[wi]) * (a.swiglu ? 16 : 16 * TL);
#pragma unroll
    for (int tl = 0; tl < TL; tl++) {
        rbase[tl] = a.swiglu ? tile0 : tile0 + 16 * tl;
        nrow[tl] = a.n_out[a.swiglu ? tl : wi];
    }
    return wi;
}

/* mmvq_tiles for tile-major weights: hb[tl][h], the super-block-0 address of
 * rows 8 h .. 8 h + 7 of the warp's tile tl (8 contiguous blocks of 144
 * bytes, Q6_K 210; a tile past the weight's end, TL = 2 with n_out % 32 ==
 * 16, reads the last tile, and mmvq_finish stores none of it); swiglu at TL = 1: half
 * 0 = gate rows 8 b .. 8 b + 7, half 1 = the same up rows. Needs n_out % 16
 * == 0 (c_weight_load's rule). */
template <int TL, int TYPE = MEMRA_TYPE_Q4_K>
__device__ __forceinline__ void mmvq_tm_tiles(const mmv_args &a, const uint8_t *(&hb)[TL][2]) {
    int64_t rbase[TL], nrow[TL];
    const int wi = mmvq_tile_rows<TL>(a, rbase, nrow);
    if (TL == 1 && a.swiglu) {
        hb[0][0] = a.W[0] + tm_row_off(TYPE, a.row_bytes, rbase[0], true);
        hb[0][1] = a.W[1] + tm_row_off(TYPE, a.row_bytes, rbase[0], true);
        return;
    }
#pragma unroll
    for (int tl = 0; tl < TL; tl++) {
        const int64_t r = rbase[tl] < nrow[tl] ? rbase[tl] : nrow[tl] - 16;
        hb[tl][0] = a.W[a.swiglu ? tl : wi] + tm_row_off(TYPE, a.row_bytes, r, true);
        hb[tl][1] = hb[tl][0] + 8 * tm_bb(TYPE);
    }
}

/* A warp's cp.async ring of D slots over its n super-blocks (relative
 * index i; issue(i) has every lane copy its chunks of the i-th into slot i %
 * D): mmvq_ring_start puts 0 .. D - 2 in flight (one commit group each,
 * empty past n), mmvq_ring_next(i) puts i + D - 1 in flight and returns when
 * every lane's chunks of the i-th have landed. k_mmvq_tm, k_mmvq_tm2 and the
 * labs' rings. */
template <int D, class F, class I>
__device__ __forceinline__ void mmvq_ring_start(F issue, I n) {
#pragma unroll
    for (I k = 0; k < D - 1; k++) {
        if (k < n) issue(k);
        mmv_cp_commit();
    }
}
template <int D, class F, class I>
__device__ __forceinline__ void mmvq_ring_next(F issue, I i, I n) {
    __syncwarp(); /* the slot refilled now was read at i - 1 by every lane */
    if (i + D - 1 < n) issue(i + D - 1);
    mmv_cp_commit();
    mmv_cp_wait<D - 1>(); /* this lane's chunks of the i-th */
    __syncwarp();         /* and every lane's */
}

/* Launch contract: k_mmvq's (grid, block 32 ks, buf, T <= 2 NP, TL,
 * MINB) for TYPE = Q4_K or Q6_K with every a.W tile-major; dynamic shared
 * memory mmvq_tm_smem_bytes(D, NP, TL, ks, SBB). Warp w: tile(s) as
 * k_mmvq, super-blocks [w nsb / ks, (w + 1) nsb / ks) through its ring of
 * D slots. Q6_K (the lab's k_cr6<D, 1>): slots of 3,360 bytes, the rows'
 * 210-byte blocks read from them by mmvq_raw6::load_sh, mmvq_sb6's
 * arithmetic, so k_mmvq<Q6_K>'s bits on the file's layout. */
template <int NP, int TL, int MINB, int D, int MAXT = 32 * MMV_KS_MAX, int TYPE = MEMRA_TYPE_Q4_K>
__global__ void __launch_bounds__(MAXT, MINB) k_mmvq_tm(mmv_args a, const uint8_t *__restrict__ buf) {
    constexpr int SBB = (int)tm_sb_stride(TYPE, true); /* a tile's super-block */
    using raw = mmvq_raw_t<TYPE>;
    extern __shared__ __align__(16) uint8_t mt_sh[]; /* [ks][D][TL][SBB] rings, then [ks][TL][NP][16][8] floats */
    const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3, wp = threadIdx.x >> 5;
    const int ks = blockDim.x >> 5;
    const uint8_t *hb[TL][2];
    mmvq_tm_tiles<TL, TYPE>(a, hb);
    const int nsb = (int)(a.in / 256);
    const int sb0 = wp * nsb / ks, sb1 = (wp + 1) * nsb / ks, n = sb1 - sb0;
    uint8_t *ring = mt_sh + (size_t)wp * mmvq_tm_warp_bytes(D, TL, SBB);
    const bool halves = TL == 1 && a.swiglu; /* a slot's 8-row halves from two weights */
    /* every lane: its 16-byte chunks of super-block sb0 + i into slot i % D (tile tl's run at tl SBB) */
    auto issue = [&](int i) {
        const int64_t so = (int64_t)(sb0 + i) * SBB;
        uint8_t *slot = ring + (i % D) * (TL * SBB);
        if (halves) {
            for (int c = lane; c < SBB / 16; c += 32) {
                const bool h = c >= SBB / 32;
                mmv_cp16(slot + 16 * c, (h ? hb[0][1] : hb[0][0]) + so + 16 * (h ? c - SBB / 32 : c));
            }
            return;
        }
        if constexpr (TL == 1) {
            for (int c = lane; c < SBB / 16; c += 32) mmv_cp16(slot + 16 * c, hb[0][0] + so + 16 * c);
        } else {
            int l = lane;
            /* opaque to the compiler, which otherwise keeps the chunk addresses over the loop (spills) */
            asm volatile("" : "+r"(l));
            for (int c = l; c < 2 * SBB / 16; c += 32) {
                const bool t1 = c >= SBB / 16;
                mmv_cp16(slot + 16 * c, (t1 ? hb[1][0] : hb[0][0]) + so + 16 * (t1 ? c - SBB / 16 : c));
            }
        }
    };
    mmvq_ring_start<D>(issue, n); /* before the wait for the prep */
    pdl_start();
    const uint8_t *planes = buf;
    const float *S = (const float *)(buf + (size_t)a.T * nsb * MQ_SB_B), *sinv = S + (size_t)a.T * nsb * 8;
    float acc[TL][NP][4];
#pragma unroll
    for (int tl = 0; tl < TL; tl++)
#pragma unroll
        for (int p = 0; p < NP; p++) acc[tl][p][0] = acc[tl][p][1] = acc[tl][p][2] = acc[tl][p][3] = 0.0f;
    raw cur[TL];
#pragma unroll 1
    for (int sb = sb0; sb < sb1; sb++) {
        const int i = sb - sb0;
        mmvq_ring_next<D>(issue, i, n);
        const uint8_t *slot = ring + (i % D) * (TL * SBB);
#pragma unroll
        for (int tl = 0; tl < TL; tl++) cur[tl].load_sh(slot + tl * SBB, g, t);
        const mmvq_gsrc src{planes, S, sinv, (size_t)nsb, (size_t)sb};
        mmvq_sb_raw<NP, mmvq_gsrc, TL>(cur, acc, src, a.T, g, t);
    }
    pdl_trigger();
    int64_t rbase[TL], nrow[TL]; /* only now: fewer registers held over the loop */
    const int wi = mmvq_tile_rows<TL>(a, rbase, nrow);
    mmvq_finish<NP, TL>(acc, (float *)(mt_sh + (size_t)ks * mmvq_tm_warp_bytes(D, TL, SBB)), a, wi, rbase, nrow,
                        nullptr);
}

/* ---- k_mmvq_tm2: k_mmvq_tm with two K ranges a warp ----
 *
 * What: k_mmvq_tm at TL = 1 for plain (not swiglu) launches, with half the
 * warps: warp w of W = ks / 2 walks K range w, then range w + W, through
 * one ring (the second range's first super-blocks are in flight while the
 * first ends), into one accumulator set a range; the ks ranges' partials
 * are added in range order as k_mmvq_tm adds them, so every row has its
 * bits (the same ranges, mmvq_sb_raw per super-block in order, the same sums).
 * Why: 27b's ffn_down {17408, 5120} (ks = 8, 320 blocks) runs at 2 blocks
 * of 8 warps an SM (128 registers), 264 at once: 1.21 waves, 48% of copy
 * in ncu (bench/results/2026-12-06f-h100.md). Blocks of 4 warps fit 4 an
 * SM, so the 320 blocks are resident at once and each warp's stream is
 * twice as long. Measured (H100, bench/results/2026-12-06g-h100-h200.md):
 * gates pass, 27b logits cmp-equal, 27b q4_k_m decode@0 105.2 / 105.8 ->
 * 107.6 / 107.6 tok/s (+2%). On by default where mmvq_tm2_use says;
 * MEMRA_MMVQ_TM2=0 turns it off. TYPE = Q6_K (27b's other ffn_down layers,
 * tile-major since 2026-12-06g): mmvq_raw6 and mmvq_sb6 as in k_mmvq_tm,
 * opt-in (MEMRA_MMVQ_TM2_Q6=1): mmvq_tm2_use. */
template <int NP, int D, int TYPE = MEMRA_TYPE_Q4_K>
__global__ void __launch_bounds__(16 * MMV_KS_MAX, 4) k_mmvq_tm2(mmv_args a, const uint8_t *__restrict__ buf) {
    constexpr int SBB = (int)tm_sb_stride(TYPE, true); /* a tile's super-block */
    using raw = mmvq_raw_t<TYPE>;
    extern __shared__ __align__(16) uint8_t mt_sh[]; /* [W][D][SBB] rings, then [2 W][NP][16][8] floats */
    const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3, wp = threadIdx.x >> 5;
    const int W = blockDim.x >> 5, ks = 2 * W;
    const uint8_t *hb[1][2];
    mmvq_tm_tiles<1, TYPE>(a, hb);
    const int nsb = (int)(a.in / 256);
    const int r0 = wp * nsb / ks, r1 = (wp + 1) * nsb / ks, q0 = (wp + W) * nsb / ks, q1 = (wp + W + 1) * nsb / ks;
    const int na = r1 - r0, n = na + (q1 - q0);
    uint8_t *ring = mt_sh + (size_t)wp * mmvq_tm_warp_bytes(D, 1, SBB);
    auto sb_of = [&](int i) { return i < na ? r0 + i : q0 + (i - na); };
    /* every lane: its 16-byte chunks of the warp's i-th super-block into slot i % D */
    auto issue = [&](int i) {
        const uint8_t *src = hb[0][0] + (int64_t)sb_of(i) * SBB;
        uint8_t *slot = ring + (i % D) * SBB;
        for (int c = lane; c < SBB / 16; c += 32) mmv_cp16(slot + 16 * c, src + 16 * c);
    };
    mmvq_ring_start<D>(issue, n);
    pdl_start();
    const float *S = (const float *)(buf + (size_t)a.T * nsb * MQ_SB_B), *sinv = S + (size_t)a.T * nsb * 8;
    float acc[2][1][NP][4];
#pragma unroll
    for (int r = 0; r < 2; r++)
#pragma unroll
        for (int p = 0; p < NP; p++) acc[r][0][p][0] = acc[r][0][p][1] = acc[r][0][p][2] = acc[r][0][p][3] = 0.0f;
    raw cur[1];
    auto step = [&](int i, float (*ac)[NP][4]) {
        mmvq_ring_next<D>(issue, i, n);
        cur[0].load_sh(ring + (i % D) * SBB, g, t);
        const mmvq_gsrc src{buf, S, sinv, (size_t)nsb, (size_t)sb_of(i)};
        mmvq_sb_raw<NP, mmvq_gsrc, 1>(cur, ac, src, a.T, g, t);
    };
#pragma unroll 1
    for (int i = 0; i < na; i++) step(i, acc[0]);
#pragma unroll 1
    for (int i = na; i < n; i++) step(i, acc[1]);
    pdl_trigger();
    int64_t rbase[1], nrow[1];
    const int wi = mmvq_tile_rows<1>(a, rbase, nrow);
    float *part = (float *)(mt_sh + (size_t)W * mmvq_tm_warp_bytes(D, 1, SBB));
    mmvq_part_store<NP, 1>(acc[0], part, wp);
    mmvq_part_store<NP, 1>(acc[1], part, wp + W);
    __syncthreads();
    mmvq_part_sums<NP, 1>(part, a, wi, rbase, nrow, nullptr, ks);
}

/* Whether a T < 16 launch of `type` (TL = 1, blk0 from mmvq_blocks1) takes
 * k_mmvq_tm2: Q4_K unless MEMRA_MMVQ_TM2=0; Q6_K (27b's other ffn_down
 * layers, the same 320 blocks at 2 an SM) only under MEMRA_MMVQ_TM2_Q6=1
 * (gated, logits cmp-equal; H100, 27b q4_k_m decode@0: +1.5% beside swiglu
 * at TL = 2, -0.3% beside TL = 1, the default: bench/results/
 * 2026-12-06h-h100.md); tile-major, not swiglu, T <= 2,
 * an even K split of 8 (rows of 8,192 or more), and more blocks than 2 an
 * SM hold (the 8-warp kernel's residency). The bits do not depend on it. */
static inline bool mmvq_tm2_use(uint32_t type, const mmv_args &a, int ks, int sms) {
    static int on = -1, on6 = -1;
    const bool t_on = type == MEMRA_TYPE_Q6_K ? env_opt_in("MEMRA_MMVQ_TM2_Q6", &on6) : env_on("MEMRA_MMVQ_TM2", &on);
    return t_on && a.tm && !a.swiglu && a.T <= 2 && ks == MMV_KS_MAX && a.blk0[4] > 2 * sms;
}

/* One launch of kernel K (k_mmvq or k_mmvq_tm: grid blk0[4], block 32 ks,
 * smem bytes; smax: the most any launch of K takes, set once). pdl: with
 * programmatic stream serialization. */
template <auto K>
static cudaError_t mmvq_launch_k(const mmv_args &a, const uint8_t *buf, cudaStream_t s, int ks, bool pdl, size_t smem,
                                 size_t smax) {
    cudaError_t e = cuda_smem_limit<K>((int)smax);
    if (e != cudaSuccess) return e;
    cudaLaunchAttribute at[1];
    at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    at[0].val.programmaticStreamSerializationAllowed = 1;
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = (unsigned)a.blk0[4], cfg.blockDim = 32u * (unsigned)ks;
    cfg.dynamicSmemBytes = smem;
    cfg.stream = s, cfg.attrs = at, cfg.numAttrs = pdl ? 1 : 0;
    return cudaLaunchKernelEx(&cfg, K, a, buf);
}

/* Rows of 6,144 (ks = 6: 27b's ssm_out and attn_output {6144, 5120}, 320
 * blocks) take k_mmvq_tm at 3 blocks an SM (192 threads, <= 113 registers)
 * instead of 2 (114 registers against the bound of 128): 396 slots for the
 * 320 blocks instead of 264 (ncu: 1.21 waves, DRAM at 27% of peak,
 * 2026-12-06c run 7). The same arithmetic, so the same bits (27b logits
 * cmp-equal); ptxas gives it 90 registers, no spills. H100, 27b q4_k_m
 * decode@0: 103.4 / 103.5 -> 105.0 / 105.0 tok/s (run 8).
 * MEMRA_MMVQ_TM3=0: the 2-block kernel. */
static inline int mmvq_tm3(void) {
    static int on = -1;
    return env_on("MEMRA_MMVQ_TM3", &on);
}

/* k_mmvq_tm's tight form: T <= 2 (NP = 1), one tile a warp, blocks of
 * exactly ks warps, launch-bounded so that an SM holds MMVQ_TIGHT_WARPS
 * warps (MINB = 24 / ks blocks: <= 85 registers; ptxas gives Q4_K 72-90
 * without spills, Q6_K 80-96 with 4 bytes spilled at most) instead of 12-16
 * (the 256-thread bound's 128 registers: 4 blocks of 4 warps, 2 of 6 or 8).
 * More warps, more super-blocks in flight (each warp's ring holds one while
 * it multiplies another): what tm3 did for ks = 6 (27b +1.5%), for every ks.
 * The same arithmetic: the same bits. H100, decode@0 tok/s, two interleaved
 * rounds (bench/results/2026-12-07-h100.md): every ks tight, 27b q4_k_m
 * 114.2 / 114.1 -> 117.2 / 117.1 (+2.6%), 9b 340.3 / 342.8 -> 316.4 / 313.3
 * (-8%), 35b-a3b 448.7 / 445.2 -> 400.0 / 396.8 (-11%). By K split (runs
 * 3, 5): 27b 114.7 / 114.9 -> ks >= 5 118.1 / 118.3, ks >= 6 115.9 / 115.3,
 * ks 5-6 116.2 / 116.3 (against 114.7 / 114.9 and 118.0 / 117.7 in that
 * run); 9b 341.3 / 344.5 -> ks 8 326.0 / 323.6. So on 27b ks 5 gains ~2%,
 * ks 6 (where tm3 runs otherwise) loses ~0.7%, and ks 8 (its Q6_K
 * ffn_down: the Q4_K one takes k_mmvq_tm2) gains ~1.5%, while 9b's ks 8
 * (ffn_down, Q4_K and Q6_K) loses 5.5%. The default is the rule run 5
 * timed, tight at ks 5 and 6 (27b +1.3%; 9b and 35b-a3b have no such
 * launch). Q6_K at ks 8 is tight too where its grid exceeds one wave of
 * the default form (125 registers: 2 blocks of 8 warps an SM; blocks > 2
 * sms), which the tight form's 3 blocks an SM still hold in one: 27b's
 * ffn_down (320 blocks on 132 SMs), not 9b's (256). H100, decode@0 tok/s,
 * two interleaved rounds (bench/results/2026-12-07c-h100.md), Q6_K at ks 8
 * tight everywhere: 27b 115.5 / 115.7 -> 117.4 / 117.6 (+1.6%), 9b 343.1 /
 * 340.9 -> 331.0 / 330.8 (-3.5%); by this rule, as built (2026-12-07d):
 * 27b 118.8 / 120.1 against 116.9 / 116.9 with it off.
 * MEMRA_MMVQ_TIGHT_Q6K8=0: not that one.
 * MEMRA_MMVQ_TIGHT=N: tight for ks >= N instead (N = 1: all); =0: none. */
#define MMVQ_TIGHT_WARPS 24

static inline bool mmvq_tight(int ks, int type, int blocks, int sms) {
    static int min_ks = -1, q6k8 = -1;
    if (min_ks < 0) {
        const char *e = getenv("MEMRA_MMVQ_TIGHT");
        const int v = e ? atoi(e) : -1;
        min_ks = v < 0 ? 0 : v > 0 ? v : MMV_KS_MAX + 1; /* 0: the default rule */
    }
    if (min_ks) return ks >= min_ks;
    return ks == 5 || ks == 6 ||
           (ks == 8 && type == MEMRA_TYPE_Q6_K && blocks > 2 * sms && env_on("MEMRA_MMVQ_TIGHT_Q6K8", &q6k8));
}

template <int TYPE, int D, int KS>
static cudaError_t mmvq_launch_tight_k(const mmv_args &a, const uint8_t *buf, cudaStream_t s, bool pdl) {
    constexpr int MINB = MMVQ_TIGHT_WARPS / KS;
    const size_t sm = mmvq_tm_smem_bytes(D, 1, 1, KS, (int)tm_sb_stride(TYPE, true));
    return mmvq_launch_k<k_mmvq_tm<1, 1, MINB, D, 32 * KS, TYPE>>(a, buf, s, KS, pdl, sm, sm);
}

/* The tight launch of a tile-major T <= 2, TL = 1 matvec of K split ks (ring depth as the default's: Q4_K
 * mmvq_tm_d, Q6_K 2); false where it has no variant (depth 4 below ks = 8). */
template <int TYPE>
static bool mmvq_launch_tight(const mmv_args &a, const uint8_t *buf, cudaStream_t s, int ks, bool pdl,
                              cudaError_t *e) {
    if constexpr (TYPE == MEMRA_TYPE_Q4_K)
        if (mmvq_tm_d((int)(a.in / 256), ks, 1) == 4) {
            if (ks != 8) return false;
            *e = mmvq_launch_tight_k<TYPE, 4, 8>(a, buf, s, pdl);
            return true;
        }
    switch (ks) {
    case 1: *e = mmvq_launch_tight_k<TYPE, MMVQ_TM_D, 1>(a, buf, s, pdl); break;
    case 2: *e = mmvq_launch_tight_k<TYPE, MMVQ_TM_D, 2>(a, buf, s, pdl); break;
    case 3: *e = mmvq_launch_tight_k<TYPE, MMVQ_TM_D, 3>(a, buf, s, pdl); break;
    case 4: *e = mmvq_launch_tight_k<TYPE, MMVQ_TM_D, 4>(a, buf, s, pdl); break;
    case 5: *e = mmvq_launch_tight_k<TYPE, MMVQ_TM_D, 5>(a, buf, s, pdl); break;
    case 6: *e = mmvq_launch_tight_k<TYPE, MMVQ_TM_D, 6>(a, buf, s, pdl); break;
    case 7: *e = mmvq_launch_tight_k<TYPE, MMVQ_TM_D, 7>(a, buf, s, pdl); break;
    default: *e = mmvq_launch_tight_k<TYPE, MMVQ_TM_D, 8>(a, buf, s, pdl); break;
    }
    return true;
}

template <int TYPE, int NP, int TL, int MINB>
static cudaError_t mmvq_launch_np(const mmv_args &a, const uint8_t *buf, cudaStream_t s, int ks, bool pdl,
                                  int sms) {
    if constexpr (NP == 1 && TL == 1)
        if (a.tm && mmvq_tight(ks, TYPE, a.blk0[4], sms)) {
            cudaError_t e;
            if (mmvq_launch_tight<TYPE>(a, buf, s, ks, pdl, &e)) return e;
        }
    if constexpr (TYPE == MEMRA_TYPE_Q6_K) { /* a ring of 2 at every length (mmvq_tm_lab: 3 and 4 lost) */
        if (a.tm)
            return mmvq_launch_k<k_mmvq_tm<NP, TL, MINB, MMVQ_TM_D, 32 * MMV_KS_MAX, TYPE>>(
                a, buf, s, ks, pdl, mmvq_tm_smem_bytes(MMVQ_TM_D, NP, TL, ks, Q6K_TM_SB),
                mmvq_tm_smem_bytes(MMVQ_TM_D, NP, TL, MMV_KS_MAX, Q6K_TM_SB));
    }
    if constexpr (TYPE == MEMRA_TYPE_Q4_K) {
        if (a.tm) {
            if constexpr (TL == 1)
                if (mmvq_tm_d((int)(a.in / 256), ks, TL) == 4)
                    return mmvq_launch_k<k_mmvq_tm<NP, TL, MINB, 4>>(a, buf, s, ks, pdl,
                                                                     mmvq_tm_smem_bytes(4, NP, TL, ks),
                                                                     mmvq_tm_smem_bytes(4, NP, TL, MMV_KS_MAX));
            if constexpr (TL == 1 && NP == 1)
                if (ks == 6 && mmvq_tm3()) /* 3 blocks of 6 warps an SM (mmvq_tm3) */
                    return mmvq_launch_k<k_mmvq_tm<1, 1, 3, MMVQ_TM_D, 192>>(
                        a, buf, s, ks, pdl, mmvq_tm_smem_bytes(MMVQ_TM_D, 1, 1, ks),
                        mmvq_tm_smem_bytes(MMVQ_TM_D, 1, 1, 6));
            return mmvq_launch_k<k_mmvq_tm<NP, TL, MINB, MMVQ_TM_D>>(a, buf, s, ks, pdl,
                                                                     mmvq_tm_smem_bytes(MMVQ_TM_D, NP, TL, ks),
                                                                     mmvq_tm_smem_bytes(MMVQ_TM_D, NP, TL, MMV_KS_MAX));
        }
    }
    return mmvq_launch_k<k_mmvq<TYPE, NP, TL, MINB>>(a, buf, s, ks, pdl, mmvq_smem_bytes(NP, TL, ks),
                                                     mmvq_smem_bytes(NP, TL, MMV_KS_MAX));
}

/* k_mmvq_tm2's launch for a K split of ks (blocks of ks / 2 warps) */
template <int TYPE, int D>
static cudaError_t mmvq_launch_tm2(const mmv_args &a, const uint8_t *buf, cudaStream_t s, int ks, bool pdl) {
    constexpr int SBB = (int)tm_sb_stride(TYPE, true);
    auto bytes = [](int k) { return (size_t)(k / 2) * mmvq_tm_warp_bytes(D, 1, SBB) + mmvq_smem_bytes(1, 1, k); };
    return mmvq_launch_k<k_mmvq_tm2<1, D, TYPE>>(a, buf, s, ks / 2, pdl, bytes(ks), bytes(MMV_KS_MAX));
}

/* Tiles per warp: TL = 1, for swiglu pairs too (a tile of 8 gate and the
 * same 8 up rows; tile-major, two 1,152-byte half runs a super-block).
 * Why TL = 1: the read alone in the matvec's load pattern reaches 62-79% of
 * copy with one tile per warp and 37-66% with two
 * (bench/kernels/stream_lab.cu, k_pat: twice the warps in flight).
 * Measured: H200 on the file's layout (bench/results/2026-12-03f-h200.md),
 * decode tok/s, 9b q4_k_m 278-279 (TL = 2 everywhere), 285-287 (TL = 2 for
 * swiglu only), 289-291 (TL = 1 everywhere); 27b q4_k_m 99.7-100.0, 98.9,
 * 97.0-97.1; so swiglu kept TL = 2 until tile-major weights. H100 on
 * tile-major weights (bench/results/2026-12-06h-h100.md, two interleaved
 * rounds): TL = 1 for swiglu too 9b q4_k_m 331.3 / 332.2 -> 344.1 / 344.6
 * (+3.9%), 27b 111.1 / 111.2 -> 114.8 / 114.5 (+3.1%), 35b-a3b (no
 * dense swiglu) unchanged. A tile's arithmetic is the same at either TL
 * (mmvq_tiles), but TL = 2 halves a launch's blocks, so mmvq_ks's widening
 * (a function of the block count) can give a launch another K split: under
 * MEMRA_MMVQ_TL=2 the T = 2 logits of 9b and 35b-a3b q4_k_m differ in the
 * last bits (5e-5 at most), 27b's do not (2026-12-07-h100.md).
 * MEMRA_MMVQ_TL=2 gives every warp two tiles (the layout before
 * 2026-12-03f). Registers: NP = 1 fits 128 (two blocks of 256 per SM)
 * without spills at either TL. */
static inline int mmvq_tl(void) {
    static int mode = -1;
    if (mode < 0) {
        const char *e = getenv("MEMRA_MMVQ_TL");
        mode = e && !strcmp(e, "2") ? 2 : 1;
    }
    return mode;
}

/* Warps a block for a launch of `blocks` blocks of rows of nsb super-blocks:
 * mmv_ks(nsb), except where the grid has fewer blocks than the device has
 * SMs but at least half as many: there 2 super-blocks a warp (up to
 * MMV_KS_MAX warps). Why: 35b-a3b's ssm_out and attn_output {4096, 2048}
 * are 128 blocks of 4 warps, one block on most SMs, and ran at 19% of copy
 * (ncu, bench/results/2026-12-06b-h100.md); 8 warps put twice the bytes in
 * flight. H100, decode@0 tok/s, two rounds (bench/results/2026-12-06d-h100.md,
 * run 1, with every grid under the SM count widened): 35b-a3b 432.3 / 432.1
 * -> 442.1 / 442.1, 9b q4_k_m 316.3 / 316.0 -> 315.9 / 314.4, 27b 104.9 /
 * 104.9 -> 104.6 / 104.8. The small grids (under half the SMs: attention k
 * and v, beta / alpha) hold few bytes and only lengthen their reduction, so
 * they keep mmv_ks. A function of the launch's shape and the SM count, never
 * of T: a row's bits are fixed by its call site (a weight launched alone and
 * the same weight in a wider multi-weight launch may differ in the last
 * bits). MEMRA_MMVQ_WIDE=0: mmv_ks everywhere. sms: the device's SM count
 * (cuda_impl.sm_count). Tried and removed (bench/results/2026-12-07-h100.md):
 * sixteen warps of one super-block each there (MEMRA_MMVQ_WIDE16, -1.3% on
 * 35b-a3b), and widening the grids of up to twice the SM count too
 * (MEMRA_MMVQ_WIDE2: 9b's 256-260-block ones +0.3%, 35b-a3b -1.5%). */
static inline int mmvq_ks(int nsb, int blocks, int sms) {
    static int on = -1;
    const int ks = mmv_ks(nsb);
    if (!env_on("MEMRA_MMVQ_WIDE", &on) || blocks >= sms || 2 * blocks < sms) return ks;
    const int k2 = nsb / 2 > MMV_KS_MAX ? MMV_KS_MAX : nsb / 2;
    return k2 > ks ? k2 : ks;
}

/* The prep and the matvec of a T < 16 launch of `type` rows (Q4_K or Q6_K)
 * (blk0 from mmv_blocks); buf is the backend's mq buffer. pdl: the
 * matvec launches with programmatic stream serialization (sm_90+), so it
 * starts while the prep runs; the prep itself always waits for its
 * predecessor. */
template <int TYPE>
static inline cudaError_t mmvq_launch_t(const mmv_args &a0, uint8_t *buf, cudaStream_t s, bool pdl, int sms) {
    const int nsb = (int)(a0.in / 256);
    if (mmvq_tl() == 1) {
        mmv_args a = a0;
        mmvq_blocks1(&a);
        const int ks = mmvq_ks(nsb, a.blk0[4], sms);
        if (mmvq_tm2_use(TYPE, a, ks, sms)) { /* Q4_K: mmvq_tm_d's ring; Q6_K: 2, as k_mmvq_tm's */
            if constexpr (TYPE == MEMRA_TYPE_Q4_K)
                if (mmvq_tm_d(nsb, ks, 1) == 4) return mmvq_launch_tm2<TYPE, 4>(a, buf, s, ks, pdl);
            return mmvq_launch_tm2<TYPE, MMVQ_TM_D>(a, buf, s, ks, pdl);
        }
        if (a.T <= 2) return mmvq_launch_np<TYPE, 1, 1, 2>(a, buf, s, ks, pdl, sms);
        if (a.T <= 4) return mmvq_launch_np<TYPE, 2, 1, 1>(a, buf, s, ks, pdl, sms);
        if (a.T <= 8) return mmvq_launch_np<TYPE, 4, 1, 1>(a, buf, s, ks, pdl, sms);
        return mmvq_launch_np<TYPE, 8, 1, 1>(a, buf, s, ks, pdl, sms);
    }
    const int ks = mmvq_ks(nsb, a0.blk0[4], sms);
    if (a0.T <= 2) return mmvq_launch_np<TYPE, 1, 2, 2>(a0, buf, s, ks, pdl, sms);
    if (a0.T <= 4) return mmvq_launch_np<TYPE, 2, 2, 1>(a0, buf, s, ks, pdl, sms);
    if (a0.T <= 8) return mmvq_launch_np<TYPE, 4, 2, 1>(a0, buf, s, ks, pdl, sms);
    return mmvq_launch_np<TYPE, 8, 2, 1>(a0, buf, s, ks, pdl, sms);
}

static inline cudaError_t mmvq_launch(uint32_t type, const mmv_args &a, uint8_t *buf, cudaStream_t s, bool pdl,
                                      int sms, bool prep = true) {
    if (prep) { /* prep = false: buf holds this x's planes already (matmul.cu's shared prep) */
        mmvq_prep_launch(a.x, a.nw, a.eps, a.in, a.T, buf, s);
        cudaError_t e = cudaGetLastError();
        if (e != cudaSuccess) return e;
    }
    return type == MEMRA_TYPE_Q6_K ? mmvq_launch_t<MEMRA_TYPE_Q6_K>(a, buf, s, pdl, sms)
                                   : mmvq_launch_t<MEMRA_TYPE_Q4_K>(a, buf, s, pdl, sms);
}

#endif
