/* The decode matvec (T < 16) on the tensor cores, Q4_K
 * (bench/results/matvec.md).
 *
 * k_matvec_multi (matvec.cuh) dequantizes every weight to fp32 and is issue-bound
 * at ~4 instructions per weight. Here a warp multiplies 16-row tiles with
 * mma.sync m16n8k16 (fp16 x fp16 -> fp32):
 *  - A = the weights as EXACT small integers in fp16, built from the GGUF
 *    bytes by lop3 into 0x6400 | n (= 1024 + n) and one f16x2 FMA with the
 *    6-bit sub-scale folded in (sc * q <= 945). No integer-to-float
 *    conversions.
 *  - B = the activations split as x * s = hi + lo, both fp16, s a power of
 *    two per (token, super-block) so that max|x * s| over the super-block's
 *    256 elements is in [2^14, 2^15). Column 2t holds token t's hi, column
 *    2t + 1 its lo, so one MMA serves 4 tokens and the thread holding
 *    C[row][2t], C[row][2t + 1] adds hi + lo: ~fp32 accuracy. A products are
 *    exact in fp32 (<= 21 significant bits).
 *  - No separate conversion launch: per super-block, the warp's 32 lanes
 *    read 8 fp32 activations each per token (L1/L2 resident), take the
 *    super-block max with shuffles, and write hi / lo in MMA fragment order
 *    to the warp's slice of shared memory (mmv_stage), plus the per-32 sums
 *    of x * s for the min term (one more MMA: A = the 6-bit mins m_s).
 *    The fragment order permutes k inside an MMA (free for a dot product) so
 *    that a thread's A fragment comes from whole words of its own row:
 *    element 64 tig + 4 (m >> 1) + (m & 1) + 2 (j & 1) + 32 (j >> 1) of the
 *    super-block sits in B slot j (k = 2 tig, 2 tig + 1, 2 tig + 8,
 *    2 tig + 9) of MMA m for lane group tig.
 *  - C is fresh per super-block, so d / s and dmin / s apply in fp32 once per
 *    super-block (acc += (d C - dmin M) / s, the division exact).
 *  - With an input norm (mmv_args.nw, memra_norm) the block first computes
 *    each token's 1 / rms (warp_inv_rms, warp w takes tokens w, w + ks, ..)
 *    and the staging multiplies x by it and by the norm weight: the layer's
 *    rmsnorm costs no launch of its own.
 *  - How the weight bytes reach the MMAs is the template parameter ST
 *    (none changes a bit; see k_mmv). ST = 0: each warp loads a
 *    super-block into registers, stages x, does the MMAs and only then
 *    loads the next, so nothing is in flight while it computes and the
 *    warps of an SM move in step, HBM idle between bursts (~30% of copy in
 *    the lab). ST = 2, 3 stream the bytes through a per-warp shared-memory
 *    ring of 2, 3 slots (one super-block of the warp's 32 rows each, plus
 *    the super-block's x at T <= 2) filled by 16-byte cp.async; ST = 12, 13
 *    fill the same ring with one 144-byte bulk copy per row (completion on
 *    an mbarrier per slot: one instruction per lane and super-block, 116-120
 *    registers against 128 with 28-32 bytes spilled for cp.async). Slots
 *    sb + 1 .. are in flight while sb is computed; the A fragments are read
 *    back with conflict-free lds.128 (mmv_raw::load_sh). ST = 1 keeps the
 *    next super-block in registers (174 registers at NG = 1: one 8-warp
 *    block per SM instead of two). L2 prefetch (prefetch.global.L2 two or
 *    four super-blocks ahead) was tried and did not help. Measured on the
 *    H200 (bench/results/2026-12-03-h200.md; every ST bit-identical to
 *    ST = 0 in bench/kernels/mmv_lab.cu): {4096, 12288} at T = 1, ST 0 / 1 /
 *    2 / 3 = 32 / 23 / 28 / 25% of copy, and 9b q4_k_m decode 271 (ST 0),
 *    231 (3), 229 (13) tok/s. The rings lose: their extra shared-memory
 *    pass and waits cost more than the latency they hide at 1-4 super-blocks
 *    per warp. Production stays at ST = 0; the others stay for the lab.
 *
 * Block layout: KS warps (KS = mmv_ks(row length) only) split the row into
 * fixed super-block ranges; each warp owns two 16-row tiles (rows 32 b ..
 * 32 b + 31 of one weight, or, for swiglu, rows 16 b .. of gate and of up;
 * the tiles share the B fragments, even and odd MMAs accumulate in two
 * chains) and loops token groups of 4 (NG groups) over the same A fragments.
 * The KS partial sums are added in warp order in shared memory. A row's
 * reduction order and its scales therefore depend only on the row length and
 * the token's own x: never on T, the token group, the grid, or which rows
 * share a block (batch invariance), and matmul, matmul_multi and
 * matmul_swiglu give a row the same bits.
 *
 * Tile-major weights (common.cuh; TM = 1): the same kernel at the blocks'
 * addresses (q4k_row_off, q4k_sb_stride), so the same bits.
 *
 * Contract: in % 256 == 0, rows 16-byte aligned (144-byte blocks), x 16-byte
 * aligned, T in 1..15. */
#ifndef MEMRA_CUDA_MMV_CUH
#define MEMRA_CUDA_MMV_CUH

#include <cuda_fp16.h>

#include "backend/cuda/common.cuh"

#define MMV_KS_MAX 8 /* warps per block (K split) */
#define MMV_MAX_T 15
#define MMV_ST 0 /* production weight path (k_mmv; the ring paths are not yet measured) */

/* The types matmul.cu sends here. */
static inline bool mmv_type_ok(uint32_t type, int64_t in) { return type == MEMRA_TYPE_Q4_K && in % 256 == 0 && in > 0; }

/* Warps splitting a row of nsb super-blocks: a function of the row length only. */
__host__ __device__ static inline int mmv_ks(int nsb) {
    int ks = nsb / 4;
    return ks < 1 ? 1 : ks > MMV_KS_MAX ? MMV_KS_MAX : ks;
}

/* A warp's staging area per token (32-bit words): planes h = 0 (hi), 1 (lo)
 * of [tig][MMV_TIG_W] with MMA m's 4 halves at words 2 m, 2 m + 1, then the
 * per-32 sums (16 halves: hi of sub-blocks 0..7, then lo). The strides put
 * the 8 B columns (token, h) of a half-warp's 64-bit reads, and the staging
 * writes, in distinct banks. */
#define MMV_TIG_W 34
#define MMV_SUM_W (8 * MMV_TIG_W)
#define MMV_TOK_W 304

/* The weight ring (ST >= 2): a slot holds one super-block of the warp's 32
 * rows as in memory (row i at 144 i), then, when the activations travel in
 * the ring too (mmv_xt tokens: NG = 1, T <= MMV_XRING_T), 1 KiB per token
 * as in memory. ST = 2, 3: cp.async (16 bytes a lane); ST = 12, 13: the
 * same ring of 2, 3 slots filled by bulk copies (one row a lane, 144
 * bytes, completion on one mbarrier per slot, after the staging area). */
#define MMV_SLOT_B (32 * 144)
#define MMV_XRING_T 2

__host__ __device__ static constexpr int mmv_ring(int st) { return st >= 10 ? st - 10 : st >= 2 ? st : 0; }
__host__ __device__ static inline int mmv_xt(int ng, int st, int T) { return ng == 1 && st >= 2 && T <= MMV_XRING_T ? T : 0; }

/* Bytes of one warp's area: the ring, the staging area of T tokens, the
 * bulk ring's mbarriers. */
__host__ __device__ static inline int mmv_warp_bytes(int ng, int st, int T) {
    return mmv_ring(st) * (MMV_SLOT_B + 1024 * mmv_xt(ng, st, T)) + T * MMV_TOK_W * 4 + (st >= 10 ? 32 : 0);
}

/* Dynamic shared memory of a k_mmv<NG, ST> block of ks warps: the warps'
 * areas, later reused for the KS partial sums. */
static inline size_t mmv_smem_bytes(int ng, int st, int ks, int T) {
    size_t stage = (size_t)ks * mmv_warp_bytes(ng, st, T), part = (size_t)ks * 2 * ng * 16 * 4 * 4;
    return stage > part ? stage : part;
}

__device__ __forceinline__ uint32_t mmv_pack_h2(__half a, __half b) {
    return (uint32_t)__half_as_ushort(a) | ((uint32_t)__half_as_ushort(b) << 16);
}

__device__ __forceinline__ void mmv_mma(float *c, uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3, uint32_t b0,
                                        uint32_t b1) {
    asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

__device__ __forceinline__ uint32_t mmv_hfma2(uint32_t a, uint32_t b, uint32_t c) {
    uint32_t d;
    asm("fma.rn.f16x2 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(c));
    return d;
}

__device__ __forceinline__ uint32_t mmv_u4(const uint4 &v, int i) {
    return i == 0 ? v.x : i == 1 ? v.y : i == 2 ? v.z : v.w;
}

/* One 16-row tile's raw bytes for one super-block: rows gid and gid + 8
 * (r0, r1: their super-block 0; sbs: q4k_sb_stride, 144 in the file's
 * layout). */
struct mmv_raw {
    uint4 head[2], qs[2][2];
    __device__ __forceinline__ void load(const uint8_t *r0, const uint8_t *r1, int sb, int tig, int64_t sbs = 144) {
        const uint8_t *b[2] = {r0 + (int64_t)sb * sbs, r1 + (int64_t)sb * sbs};
#pragma unroll
        for (int r = 0; r < 2; r++) {
            head[r] = __ldg((const uint4 *)b[r]);
            qs[r][0] = __ldg((const uint4 *)(b[r] + 16 + 32 * tig));
            qs[r][1] = __ldg((const uint4 *)(b[r] + 32 + 32 * tig));
        }
    }
    /* the same from a ring slot holding the warp's 32 rows (row 16 tl + i at
     * 144 (16 tl + i)): lds.128 at 144 row + 16 + 32 tig is conflict-free
     * per 8-lane phase (banks 4 gid + 4 + 8 tig mod 32), heads broadcast */
    __device__ __forceinline__ void load_sh(const uint8_t *slot, int tl, int gid, int tig) {
#pragma unroll
        for (int r = 0; r < 2; r++) {
            const uint8_t *b = slot + (16 * tl + gid + 8 * r) * 144;
            head[r] = *(const uint4 *)b;
            qs[r][0] = *(const uint4 *)(b + 16 + 32 * tig);
            qs[r][1] = *(const uint4 *)(b + 32 + 32 * tig);
        }
    }
};

/* B fragments of super-block sb for tokens 0..T-1 into the warp's staging
 * area stg: lane L converts elements 8 L .. 8 L + 7 of each token (tig =
 * L / 8, j >> 1 = (L / 4) & 1, MMAs 4 (L & 3) .. 4 (L & 3) + 3). The scale s
 * comes from the warp max (order-free) and the per-32 sum adds the 4 lanes
 * of a sub-block in a fixed tree; fadd commutes, so every lane of the
 * sub-block holds the same bits. sinv[g] receives 1 / s of token
 * 4 g + (lane & 3), whose C columns the lane holds in the MMAs (0 where the
 * token is >= T). Token t's x row starts at x + t in, or at x + xo[t] when
 * xo is given (moe.cu's token groups gather their rows). */
template <int NG>
__device__ __forceinline__ void mmv_stage(const float *__restrict__ x, int64_t in, int T, int sb, int lane,
                                          uint32_t *stg, float *sinv, const float *xsh, const float *__restrict__ nw,
                                          const float *ninv, const int64_t *xo = nullptr) {
    const int tig = lane >> 3, jhi = (lane >> 2) & 1, mq = lane & 3;
    __syncwarp(); /* the previous super-block's fragments are read */
#pragma unroll
    for (int g = 0; g < NG; g++) sinv[g] = 0.0f;
#pragma unroll
    for (int t = 0; t < 4 * NG; t++) {
        if (t >= T) break;
        float4 u0, u1;
        if (xsh) { /* the ring's copy of the super-block's x */
            u0 = *(const float4 *)(xsh + 256 * t + 8 * lane);
            u1 = *(const float4 *)(xsh + 256 * t + 8 * lane + 4);
        } else {
            const float4 *p = (const float4 *)(x + (xo ? xo[t] : (int64_t)t * in) + (int64_t)sb * 256 + 8 * lane);
            u0 = __ldg(p), u1 = __ldg(p + 1);
        }
        float v[8], mx;
        mv_stage_x8(u0, u1, nw ? nw + (int64_t)sb * 256 : nullptr, nw ? ninv[t] : 1.0f, lane, v, &mx);
        const int es = mv_split_exp(mx);
        const float sc = __uint_as_float((uint32_t)(es + 127) << 23);
        float vs[8];
        __half hi[8], lo[8];
#pragma unroll
        for (int i = 0; i < 8; i++) {
            vs[i] = __fmul_rn(v[i], sc);
            hi[i] = __float2half_rn(vs[i]);
            lo[i] = __float2half_rn(__fsub_rn(vs[i], __half2float(hi[i])));
        }
        uint32_t *pt = stg + t * MMV_TOK_W + tig * MMV_TIG_W + jhi;
#pragma unroll
        for (int a = 0; a < 2; a++) {
#pragma unroll
            for (int c = 0; c < 2; c++) {
                const int m = 4 * mq + 2 * a + c;
                pt[2 * m] = mmv_pack_h2(hi[4 * a + c], hi[4 * a + 2 + c]);
                pt[4 * MMV_TIG_W + 2 * m] = mmv_pack_h2(lo[4 * a + c], lo[4 * a + 2 + c]);
            }
        }
        float ps = __fadd_rn(__fadd_rn(__fadd_rn(vs[0], vs[1]), __fadd_rn(vs[2], vs[3])),
                             __fadd_rn(__fadd_rn(vs[4], vs[5]), __fadd_rn(vs[6], vs[7])));
        ps = __fadd_rn(ps, __shfl_xor_sync(0xFFFFFFFFu, ps, 1));
        ps = __fadd_rn(ps, __shfl_xor_sync(0xFFFFFFFFu, ps, 2));
        ps = __fmul_rn(ps, 1.0f / 64.0f); /* |ps| < 2^14 */
        if ((lane & 3) == 0) {
            __half *hs = (__half *)(stg + t * MMV_TOK_W + MMV_SUM_W);
            const __half h = __float2half_rn(ps);
            hs[lane >> 2] = h;
            hs[8 + (lane >> 2)] = __float2half_rn(__fsub_rn(ps, __half2float(h)));
        }
        /* the MMA lane (gid, tig) holds C columns 2 tig, 2 tig + 1: token 4 g + tig */
        if ((lane & 3) == (t & 3)) sinv[t >> 2] = __uint_as_float((uint32_t)(127 - es) << 23);
    }
    __syncwarp(); /* the fragments are written */
}

/* acc[tl][g][r]: token 4 g + tig of tile tl's row gid + 8 r. The TL tiles
 * of the warp (two in k_mmv, one for moe.cu's down rows) at once (they
 * share the B fragments): A = sc * q (exact), C fresh
 * per super-block in two chains (even and odd MMAs, so that MMA latency is
 * not one chain of 16); acc += (d * C - dmin * M) / s with M = sum_s m_s *
 * sum(x_s s) from one more MMA (A = (m_2tig, m_2tig+1) in slots 2 tig,
 * 2 tig + 1; B = the staged sums at 1/64 scale). */
template <int NG, int TL = 2>
__device__ __forceinline__ void mmv_sb_q4k(const mmv_raw *w, float (*acc)[NG][2], const uint32_t *stg,
                                           const float *sinv, int T, int gid, int tig) {
    uint32_t k0[TL][2], k1[TL][2], k2[TL][2], k3[TL][2], mm[TL][2];
    float d[TL][2], dm[TL][2];
    const int lowj = tig < 2;
    const int sh0 = 8 * ((2 * tig) & 3), sh1 = sh0 + 8;
#pragma unroll
    for (int tl = 0; tl < TL; tl++) {
#pragma unroll
        for (int r = 0; r < 2; r++) {
            const uint4 h = w[tl].head[r];
            /* scales bytes 0..3 = h.y, 4..7 = h.z, 8..11 = h.w; j = 2 tig, 2 tig + 1 */
            uint32_t sc0 = lowj ? (h.y >> sh0) & 63 : ((h.w >> sh0) & 15) | (((h.y >> sh0) >> 6 & 3) << 4);
            uint32_t sc1 = lowj ? (h.y >> sh1) & 63 : ((h.w >> sh1) & 15) | (((h.y >> sh1) >> 6 & 3) << 4);
            uint32_t m0 = lowj ? (h.z >> sh0) & 63 : ((h.w >> sh0) >> 4 & 15) | (((h.z >> sh0) >> 6 & 3) << 4);
            uint32_t m1 = lowj ? (h.z >> sh1) & 63 : ((h.w >> sh1) >> 4 & 15) | (((h.z >> sh1) >> 6 & 3) << 4);
            /* 6-bit integers to fp16 without conversions: (1024 + n) - 1024,
             * then exact products with powers of two */
            const uint32_t h0 = mmv_hfma2((0x6400u | sc0) * 0x10001u, 0x3C003C00u, 0xE400E400u);
            const uint32_t h1 = mmv_hfma2((0x6400u | sc1) * 0x10001u, 0x3C003C00u, 0xE400E400u);
            k0[tl][r] = h0;
            k1[tl][r] = mmv_hfma2(h0, 0xE400E400u, 0u); /* -1024 sc0 */
            k2[tl][r] = mmv_hfma2(h1, 0x2C002C00u, 0u); /* sc1 / 16 */
            k3[tl][r] = mmv_hfma2(h1, 0xD400D400u, 0u); /* -64 sc1 */
            mm[tl][r] = mmv_hfma2((0x6400u | m0) | ((0x6400u | m1) << 16), 0x3C003C00u, 0xE400E400u);
            d[tl][r] = __half2float(__ushort_as_half((unsigned short)(h.x & 0xFFFF)));
            dm[tl][r] = __fmul_rn(__half2float(__ushort_as_half((unsigned short)(h.x >> 16))), 64.0f);
        }
    }
    const uint32_t *bp[NG];
#pragma unroll
    for (int g = 0; g < NG; g++) {
        const int tok = 4 * g + (gid >> 1);
        bp[g] = tok < T ? stg + tok * MMV_TOK_W + (gid & 1) * 4 * MMV_TIG_W + tig * MMV_TIG_W : nullptr;
    }
    float c[TL][NG][2][4];
#pragma unroll
    for (int tl = 0; tl < TL; tl++)
#pragma unroll
        for (int g = 0; g < NG; g++)
#pragma unroll
            for (int i = 0; i < 8; i++) c[tl][g][i >> 2][i & 3] = 0.0f;
#pragma unroll
    for (int m = 0; m < 16; m++) {
        uint2 b[NG];
#pragma unroll
        for (int g = 0; g < NG; g++) b[g] = bp[g] ? *(const uint2 *)(bp[g] + 2 * m) : make_uint2(0u, 0u);
#pragma unroll
        for (int tl = 0; tl < TL; tl++) {
            uint32_t a[4];
#pragma unroll
            for (int r = 0; r < 2; r++) {
                uint32_t v = mmv_u4(w[tl].qs[r][m >> 3], (m >> 1) & 3);
                if (m & 1) v >>= 8;
                a[r] = mmv_hfma2((v & 0x000F000Fu) | 0x64006400u, k0[tl][r], k1[tl][r]);
                a[r + 2] = mmv_hfma2((v & 0x00F000F0u) | 0x64006400u, k2[tl][r], k3[tl][r]);
            }
#pragma unroll
            for (int g = 0; g < NG; g++) mmv_mma(c[tl][g][m & 1], a[0], a[1], a[2], a[3], b[g].x, b[g].y);
        }
    }
#pragma unroll
    for (int g = 0; g < NG; g++) {
        const int tok = 4 * g + (gid >> 1);
        const uint32_t b = tok < T ? stg[tok * MMV_TOK_W + MMV_SUM_W + (gid & 1) * 4 + tig] : 0u;
#pragma unroll
        for (int tl = 0; tl < TL; tl++) {
            float cm[4] = {0.0f, 0.0f, 0.0f, 0.0f};
            mmv_mma(cm, mm[tl][0], mm[tl][1], 0u, 0u, b, 0u);
#pragma unroll
            for (int r = 0; r < 2; r++) {
                const float *c0 = c[tl][g][0] + 2 * r, *c1 = c[tl][g][1] + 2 * r;
                float cv = __fadd_rn(__fadd_rn(c0[0], c1[0]), __fadd_rn(c0[1], c1[1]));
                float mv = __fadd_rn(cm[2 * r], cm[2 * r + 1]);
                /* times 1 / s (a power of two): exact, then one rounding */
                acc[tl][g][r] = fmaf(fmaf(d[tl][r], cv, -__fmul_rn(dm[tl][r], mv)), sinv[g], acc[tl][g][r]);
            }
        }
    }
}

/* args of one launch: up to 4 weights of one row length; block b belongs to
 * weight i with blk0[i] <= b < blk0[i + 1]. swiglu: one weight pair (W[0] =
 * gate, W[1] = up), y[0] = out. x: T rows of `in` fp32. */
struct mmv_args {
    const uint8_t *W[4];
    int64_t n_out[4];
    float *y[4];
    int blk0[5];
    size_t row_bytes;
    int64_t in;
    const float *x;
    int T;
    int accumulate;
    int swiglu;
    const float *nw; /* the input norm's weight {in} (memra_norm), NULL: x as is */
    float eps;
    int tm; /* 1: every W is tile-major Q4_K (common.cuh) */
};

/* Launch contract: grid (blk0[4]), block 32 * ks (ks = mmv_ks(in / 256) in
 * production), dynamic shared memory mmv_smem_bytes(NG, ST, ks, T). ST
 * picks how the weight bytes reach the MMAs (none changes the arithmetic):
 * 0 = registers, one super-block at a time; 1 = registers, the next
 * super-block loaded while this one is computed; >= 2 = a shared-memory
 * ring of ST super-blocks filled by cp.async, ST - 1 in flight. NG = 1
 * (T <= 4, decode) is held to 128 registers except at ST = 1: two blocks of
 * 8 warps per SM. TM: the weights are tile-major (a.tm; every ST). */
template <int NG, int ST, bool TM = false>
__global__ void __launch_bounds__(32 * MMV_KS_MAX, NG == 1 && ST != 1 ? 2 : 1) k_mmv(mmv_args a) {
    extern __shared__ __align__(16) uint32_t mmv_sh[];
    const int lane = threadIdx.x & 31, gid = lane >> 2, tig = lane & 3, wp = threadIdx.x >> 5;
    const int ks = blockDim.x >> 5;
    __shared__ float ninv[MMV_MAX_T]; /* the input norm's factor per token */
    pdl_start();
    if (a.nw) block_inv_rms(a.x, a.in, a.T, a.eps, ninv);
    const int wi = cuda_blk_owner(a.blk0, (int)blockIdx.x);
    const int64_t tile0 = (int64_t)((int)blockIdx.x - a.blk0[wi]) * (a.swiglu ? 16 : 32);
    const int nsb = (int)(a.in / 256);
    const int sb0 = wp * nsb / ks, sb1 = (wp + 1) * nsb / ks;
    const uint8_t *rows[2][2], *tbase[2];
    int64_t rbase[2];
    int64_t nrow[2];
    constexpr int64_t SBS = q4k_sb_stride(TM); /* a row's super-blocks apart */
    /* row r's super-block 0 from its tile's row rb (rb % 16 == 0; negative when r was clamped into an earlier tile) */
    auto roff = [&](int64_t r, int64_t base) {
        return q4k_row_off(a.row_bytes, r, TM) - q4k_row_off(a.row_bytes, base, TM);
    };
#pragma unroll
    for (int tl = 0; tl < 2; tl++) {
        const int w = a.swiglu ? tl : wi;
        rbase[tl] = a.swiglu ? tile0 : tile0 + 16 * tl;
        nrow[tl] = a.n_out[w];
        tbase[tl] = a.W[w] + q4k_row_off(a.row_bytes, rbase[tl], TM);
#pragma unroll
        for (int r = 0; r < 2; r++) {
            int64_t row = rbase[tl] + gid + 8 * r;
            rows[tl][r] = a.W[w] + q4k_row_off(a.row_bytes, row < nrow[tl] ? row : nrow[tl] - 1, TM);
        }
    }
    constexpr int RS = mmv_ring(ST); /* ring slots */
    const int xt = mmv_xt(NG, ST, a.T), slot_b = MMV_SLOT_B + 1024 * xt;
    uint8_t *ring = (uint8_t *)mmv_sh + wp * mmv_warp_bytes(NG, ST, a.T);
    uint32_t *stg = (uint32_t *)(ring + RS * slot_b);
    float acc[2][NG][2];
#pragma unroll
    for (int tl = 0; tl < 2; tl++)
#pragma unroll
        for (int g = 0; g < NG; g++) acc[tl][g][0] = acc[tl][g][1] = 0.0f;
    /* the ring paths' work on a landed slot: super-block sb */
    auto ring_sb = [&](const uint8_t *slot, int sb) {
        mmv_raw cur[2];
        cur[0].load_sh(slot, 0, gid, tig);
        cur[1].load_sh(slot, 1, gid, tig);
        float sinv[NG];
        mmv_stage<NG>(a.x, a.in, a.T, sb, lane, stg, sinv, xt ? (const float *)(slot + MMV_SLOT_B) : nullptr, a.nw,
                      ninv);
        mmv_sb_q4k<NG>(cur, acc, stg, sinv, a.T, gid, tig);
    };
    if constexpr (ST >= 10) {
        /* lane L copies row L of the warp (tile L / 16) and, if L < xt, token L's x */
        const uint32_t bar = (uint32_t)__cvta_generic_to_shared(stg + a.T * MMV_TOK_W);
        const uint8_t *myrow;
        {
            const bool t1 = lane >= 16;
            const int64_t rb = t1 ? rbase[1] : rbase[0], nr = t1 ? nrow[1] : nrow[0];
            int64_t r = rb + (lane & 15);
            r = r < nr ? r : nr - 1;
            myrow = (t1 ? tbase[1] : tbase[0]) + roff(r, rb);
        }
        if (lane == 0) {
#pragma unroll
            for (int i = 0; i < RS; i++) mbar_init<1>(bar + 8 * i);
            mbar_init_fence();
        }
        __syncwarp();
        auto issue = [&](int sb, int slot) {
            const uint32_t b = bar + 8 * slot;
            if (lane == 0)
                mbar_expect_tx(b, slot_b);
            __syncwarp();
            const uint32_t dst = (uint32_t)__cvta_generic_to_shared(ring + slot * slot_b);
            bulk_g2s_n<144>(dst + 144 * lane, myrow + (int64_t)sb * SBS, b);
            if (lane < xt)
                bulk_g2s_n<1024>(dst + MMV_SLOT_B + 1024 * lane, a.x + (int64_t)lane * a.in + (int64_t)sb * 256, b);
        };
        const int nit = sb1 - sb0;
#pragma unroll
        for (int p = 0; p < RS - 1; p++)
            if (p < nit) issue(sb0 + p, p);
#pragma unroll 1
        for (int it = 0; it < nit; it++) {
            const uint32_t b = bar + 8 * (it % RS), par = (uint32_t)(it / RS) & 1u;
            mbar_wait(b, par);
            asm volatile("fence.proxy.async.shared::cta;" ::: "memory"); /* slot (it - 1) % RS: generic reads before async writes */
            __syncwarp();
            if (it + RS - 1 < nit) issue(sb0 + it + RS - 1, (it + RS - 1) % RS);
            ring_sb(ring + (it % RS) * slot_b, sb0 + it);
        }
        __syncwarp();
        if (lane == 0)
#pragma unroll
            for (int i = 0; i < RS; i++) mbar_inval(bar + 8 * i);
    } else if constexpr (ST >= 2) {
        /* this lane copies chunks c = lane + 32 i (i < 9) of a slot: row c / 9
         * (tile row / 16, clamped to the weight), bytes 16 (c % 9) ..;
         * off = the chunk's byte offset from its tile's row 0 (a multiple of
         * 16, negative when the tile lies past the weight's end) | tile */
        int32_t off[9];
#pragma unroll
        for (int i = 0; i < 9; i++) {
            const int c = lane + 32 * i, row = c / 9, tl = row >> 4;
            int64_t r = rbase[tl] + (row & 15);
            r = r < nrow[tl] ? r : nrow[tl] - 1;
            off[i] = (int32_t)(roff(r, rbase[tl]) + 16 * (c - 9 * row)) | tl;
        }
        auto issue = [&](int sb, int slot) {
            uint8_t *dst = ring + slot * slot_b;
#pragma unroll
            for (int i = 0; i < 9; i++)
                mmv_cp16(dst + 16 * (lane + 32 * i),
                         ((off[i] & 1) ? tbase[1] : tbase[0]) + (off[i] & ~15) + (int64_t)sb * SBS);
            for (int t = 0; t < xt; t++) { /* the lane's own x elements: read back by the same lane */
                const float *xs = a.x + (int64_t)t * a.in + (int64_t)sb * 256 + 8 * lane;
                mmv_cp16(dst + MMV_SLOT_B + 1024 * t + 32 * lane, xs);
                mmv_cp16(dst + MMV_SLOT_B + 1024 * t + 32 * lane + 16, xs + 4);
            }
        };
        const int nit = sb1 - sb0;
#pragma unroll
        for (int p = 0; p < RS - 1; p++) {
            if (p < nit) issue(sb0 + p, p);
            mmv_cp_commit();
        }
#pragma unroll 1
        for (int it = 0; it < nit; it++) {
            mmv_cp_wait<RS - 2>(); /* this lane's copies of super-block it landed */
            __syncwarp(); /* ... and every lane's; slot (it - 1) % RS is read by all */
            if (it + RS - 1 < nit) issue(sb0 + it + RS - 1, (it + RS - 1) % RS);
            mmv_cp_commit();
            ring_sb(ring + (it % RS) * slot_b, sb0 + it);
        }
        mmv_cp_wait<0>();
    } else if constexpr (ST == 1) {
        mmv_raw cur[2], nxt[2];
        if (sb0 < sb1)
#pragma unroll
            for (int tl = 0; tl < 2; tl++) cur[tl].load(rows[tl][0], rows[tl][1], sb0, tig, SBS);
#pragma unroll 1
        for (int sb = sb0; sb < sb1; sb++) {
            if (sb + 1 < sb1)
#pragma unroll
                for (int tl = 0; tl < 2; tl++) nxt[tl].load(rows[tl][0], rows[tl][1], sb + 1, tig, SBS);
            float sinv[NG];
            mmv_stage<NG>(a.x, a.in, a.T, sb, lane, stg, sinv, nullptr, a.nw, ninv);
            mmv_sb_q4k<NG>(cur, acc, stg, sinv, a.T, gid, tig);
            cur[0] = nxt[0], cur[1] = nxt[1];
        }
    } else {
#pragma unroll 1
        for (int sb = sb0; sb < sb1; sb++) {
            mmv_raw cur[2];
#pragma unroll
            for (int tl = 0; tl < 2; tl++) cur[tl].load(rows[tl][0], rows[tl][1], sb, tig, SBS);
            float sinv[NG];
            mmv_stage<NG>(a.x, a.in, a.T, sb, lane, stg, sinv, nullptr, a.nw, ninv);
            mmv_sb_q4k<NG>(cur, acc, stg, sinv, a.T, gid, tig);
        }
    }
    __syncthreads(); /* every warp is done with its area: reused for the partials */
    float *part = (float *)mmv_sh; /* [ks][2][NG][16][4] */
#define MMV_PART(k, tl, g, row, tk) part[((((k) * 2 + (tl)) * NG + (g)) * 16 + (row)) * 4 + (tk)]
#pragma unroll
    for (int tl = 0; tl < 2; tl++)
#pragma unroll
        for (int g = 0; g < NG; g++)
#pragma unroll
            for (int r = 0; r < 2; r++) MMV_PART(wp, tl, g, gid + 8 * r, tig) = acc[tl][g][r];
    __syncthreads();
    const int n_res = (a.swiglu ? 1 : 2) * NG * 64;
    for (int i = threadIdx.x; i < n_res; i += blockDim.x) {
        const int tk = i & 3, row = (i >> 2) & 15, g = (i >> 6) % NG, tl = (i >> 6) / NG;
        const int tok = 4 * g + tk;
        const int64_t orow = rbase[tl] + row;
        if (tok >= a.T || orow >= nrow[tl]) continue;
        float v = MMV_PART(0, tl, g, row, tk);
        for (int k = 1; k < ks; k++) v = __fadd_rn(v, MMV_PART(k, tl, g, row, tk));
        if (a.swiglu) {
            float u = MMV_PART(0, 1, g, row, tk);
            for (int k = 1; k < ks; k++) u = __fadd_rn(u, MMV_PART(k, 1, g, row, tk));
            a.y[0][(int64_t)tok * nrow[0] + orow] = silu_f(v) * u;
        } else {
            float *yp = a.y[wi] + (int64_t)tok * nrow[tl] + orow;
            *yp = a.accumulate ? *yp + v : v;
        }
    }
#undef MMV_PART
}

template <int NG, int ST, bool TM>
static void mmv_launch_k(const mmv_args &a, cudaStream_t s, int ks) {
    static bool attr_set; /* the opt-in above 48 KiB, once per instantiation: the largest T and ks */
    if (!attr_set) {
        size_t mx = 0;
        for (int T = 4 * NG - 3; T <= 4 * NG && T <= MMV_MAX_T; T++) {
            const size_t b = mmv_smem_bytes(NG, ST, MMV_KS_MAX, T);
            mx = b > mx ? b : mx;
        }
        cudaFuncSetAttribute(k_mmv<NG, ST, TM>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)mx);
        attr_set = true;
    }
    cuda_launch(k_mmv<NG, ST, TM>, (unsigned)a.blk0[4], 32u * (unsigned)ks, mmv_smem_bytes(NG, ST, ks, a.T), s, a);
}

template <int NG, int ST>
static void mmv_launch_ng(const mmv_args &a, cudaStream_t s, int ks) {
    if (a.tm) mmv_launch_k<NG, ST, true>(a, s, ks);
    else mmv_launch_k<NG, ST, false>(a, s, ks);
}

/* ks: the K split, mmv_ks(in / 256) unless a lab overrides it for timing
 * (another split changes the rows' bits). ST: see k_mmv; T = 9..15 has no
 * room for ST = 1 (registers) or 3 (shared memory) and runs 0 or 2. */
template <int ST = MMV_ST>
static void mmv_launch(const mmv_args &a, cudaStream_t s, int ks = 0) {
    if (!ks) ks = mmv_ks((int)(a.in / 256));
    if (a.T <= 4)
        mmv_launch_ng<1, ST>(a, s, ks);
    else if (a.T <= 8)
        mmv_launch_ng<2, ST>(a, s, ks);
    else
        mmv_launch_ng<4, ST == 1 ? 0 : ST == 3 ? 2 : ST == 13 ? 12 : ST>(a, s, ks);
}

/* Fills blk0 for weights 0..n-1 (n_out set); unused entries repeat the end.
 * A block takes `warps` tile pairs (32 rows each, swiglu 16): 1 for k_mmv,
 * MMVG_W for mmvg.cuh's kernels. */
static inline void mmv_blocks(mmv_args *a, int n, int warps = 1) {
    const int per = (a->swiglu ? 16 : 32) * warps;
    a->blk0[0] = 0;
    for (int i = 0; i < 4; i++) a->blk0[i + 1] = a->blk0[i] + (i < n ? (int)((a->n_out[i] + per - 1) / per) : 0);
}

#endif
