/* The decode matvec (T < 16) on the tensor cores for Q6_K.
 *
 * Q6_K is the output head and many ffn_down / attn_qkv tensors of the
 * Q4_K_M files (25-36% of the bytes a token reads). k_matvec_multi
 * (matvec.cuh) spends ~6 instructions per weight on it (byte loads of the
 * 2-byte-aligned blocks, dequantization to fp32, the FMA), so it is
 * issue-bound at ~45% of the copy bandwidth even on the 0.8 GB output head.
 *
 * Here a warp multiplies a 16-row tile with mma.sync m16n8k16 (fp16 x fp16
 * -> fp32), one MMA per 16-element sub-block, so that the sub-block's int8
 * scale can be applied to the MMA's fresh result in fp32:
 *  - A = q - 32 as exact small integers in fp16, built from the ql / qh bytes
 *    with one byte permute into 0x64 | q (= 1024 + q) and one f16x2 subtract
 *    of 1056. (sc * q reaches 4096 in magnitude, not exact in fp16, so the
 *    scale cannot be folded into A as mmv.cuh does for Q4_K.)
 *  - B = the activations as x * s = hi + lo in fp16 (s a power of two per
 *    (token, super-block) with max|x s| in [2^14, 2^15)), column 2t = token
 *    t's hi, 2t + 1 its lo: one MMA serves 4 tokens; hi + lo carry ~22 bits.
 *    The warp converts them itself per super-block into shared memory.
 *  - per sub-block r: acc_sb += (d sc_r) (C_hi + C_lo) in fp32, then per
 *    super-block acc += acc_sb / s (exact scaling, one rounding). The
 *    products in the MMA are exact (6 x 11 bits) and 16 of them sum exactly
 *    in fp32.
 *  - The k order inside a sub-block is permuted so that each lane's A
 *    fragment comes from 4 consecutive bytes of its rows: lane (gid, tig)
 *    holds k slots 2 tig, 2 tig + 1 = elements 4 tig, 4 tig + 1 and slots
 *    2 tig + 8, 2 tig + 9 = elements 4 tig + 2, 4 tig + 3 of the sub-block;
 *    its B fragment reads the same four elements (a dot product does not
 *    care about the order of its terms).
 *  - The raw bytes of super-block sb + 1 are loaded before the MMAs of sb
 *    (a register double buffer), so a warp always has a super-block in
 *    flight. Blocks are 210 bytes: a super-block starts 4-byte aligned when
 *    sb is even and 2 bytes off when it is odd (the row itself is 16-byte
 *    aligned: row bytes = 210 x an even count); odd ones load their words as
 *    two halves.
 *
 * Q6_K layout (256 elements, 210 bytes): ql[128] low nibbles, qh[64] high 2
 * bits, scales[16] int8, d fp16. Element e = 128 n + 32 j + l (n < 2, j < 4,
 * l < 32): low nibble (j >> 1) of ql[64 n + 32 (j & 1) + l], bits 2j of
 * qh[32 n + l], scale scales[e / 16]. Sub-block r (16 elements) = (n, j,
 * l in [16 (r & 1), +16)) with r = 8 n + 2 j + (l >> 4).
 *
 * Block layout: ks = mmv_ks(row length) warps split the row into fixed
 * super-block ranges; each warp owns one 16-row tile and loops NG groups of
 * 4 tokens over the same A fragments; the ks partials are added in warp
 * order. A row's arithmetic and order depend only on the row length and the
 * token's own x: never on T, the grid or the other rows (batch invariance).
 *
 * Contract: in % 256 == 0 with in / 256 even (rows 4-byte aligned), rows
 * 16-byte aligned, x 16-byte aligned, T in 1..15. */
#ifndef MEMRA_CUDA_MMV6_CUH
#define MEMRA_CUDA_MMV6_CUH

#include <cuda_fp16.h>

#include "backend/cuda/common.cuh"
#include "backend/cuda/mmv.cuh" /* mmv_ks, MMV_KS_MAX, MMV_MAX_T: the same K split rule and limits */

#define MMV6_TS 272 /* halves per (token, part) row of the staging area: 256 + 16, so 8 rows x 32 B of one MMA's B
                       reads take two bank sweeps */

static inline bool mmv6_type_ok(uint32_t type, int64_t in) {
    return type == MEMRA_TYPE_Q6_K && in > 0 && in % 512 == 0;
}

/* staging (4 NG tokens x 2 parts x MMV6_TS halves per warp), reused for the partials */
static inline size_t mmv6_smem_bytes(int ng, int ks) {
    size_t stage = (size_t)ks * 4 * ng * 2 * MMV6_TS * 2, part = (size_t)ks * ng * 16 * 4 * 4;
    return stage > part ? stage : part;
}

/* One row's raw words of one super-block for this lane: ql words at 64 n +
 * 16 i + 4 tig (i < 4), qh words at 128 + 32 n + 16 i + 4 tig (i < 2), the
 * 16 scale bytes, d. */
struct mmv6_raw {
    uint32_t ql[2][4], qh[2][2], sc[4];
    uint32_t d;
};

/* A 4-byte word of a block at p (4-byte aligned when al, else 2), by
 * __ldg from global memory or, SH, by a plain load from shared memory
 * (k_mmv6b's slots). */
template <bool SH>
__device__ __forceinline__ uint32_t mmv6_ld32(const uint8_t *p, bool al) {
    if (SH) {
        if (al) return *(const uint32_t *)p;
        return (uint32_t)*(const unsigned short *)p | ((uint32_t)*(const unsigned short *)(p + 2) << 16);
    }
    if (al) return __ldg((const uint32_t *)p);
    const uint32_t lo = __ldg((const unsigned short *)p), hi = __ldg((const unsigned short *)(p + 2));
    return lo | (hi << 16);
}

template <bool SH = false>
__device__ __forceinline__ void mmv6_load(mmv6_raw &w, const uint8_t *b, int tig, bool al) {
#pragma unroll
    for (int n = 0; n < 2; n++) {
#pragma unroll
        for (int i = 0; i < 4; i++) w.ql[n][i] = mmv6_ld32<SH>(b + 64 * n + 16 * i + 4 * tig, al);
#pragma unroll
        for (int i = 0; i < 2; i++) w.qh[n][i] = mmv6_ld32<SH>(b + 128 + 32 * n + 16 * i + 4 * tig, al);
    }
#pragma unroll
    for (int i = 0; i < 4; i++) w.sc[i] = mmv6_ld32<SH>(b + 192 + 4 * i, al);
    w.d = SH ? *(const unsigned short *)(b + 208) : __ldg((const unsigned short *)(b + 208));
}

/* B rows of super-block sb for tokens 0..T-1 into the warp's staging area:
 * lane L converts elements 8 L .. 8 L + 7 of each token; sinv[g] receives
 * 1 / s of token 4 g + (lane & 3) (0 past T). xo: as mmv_stage's. */
template <int NG>
__device__ __forceinline__ void mmv6_stage(const float *__restrict__ x, int64_t in, int T, int sb, int lane,
                                           const float *__restrict__ nw, const float *ninv, __half *stg,
                                           float *sinv, const int64_t *xo = nullptr) {
    __syncwarp(); /* the previous super-block's B reads are done */
#pragma unroll
    for (int g = 0; g < NG; g++) sinv[g] = 0.0f;
#pragma unroll
    for (int t = 0; t < 4 * NG; t++) {
        if (t >= T) break;
        const float4 *p = (const float4 *)(x + (xo ? xo[t] : (int64_t)t * in) + (int64_t)sb * 256 + 8 * lane);
        const float4 u0 = __ldg(p), u1 = __ldg(p + 1);
        float v[8], mx;
        mv_stage_x8(u0, u1, nw ? nw + (int64_t)sb * 256 : nullptr, nw ? ninv[t] : 1.0f, lane, v, &mx);
        const int es = mv_split_exp(mx);
        const float sc = __uint_as_float((uint32_t)(es + 127) << 23);
        uint32_t hi[4], lo[4];
#pragma unroll
        for (int i = 0; i < 4; i++) {
            const float a = __fmul_rn(v[2 * i], sc), b = __fmul_rn(v[2 * i + 1], sc);
            const __half2 h = __floats2half2_rn(a, b);
            const float2 f = __half22float2(h);
            const __half2 l = __floats2half2_rn(__fsub_rn(a, f.x), __fsub_rn(b, f.y));
            hi[i] = *(const uint32_t *)&h, lo[i] = *(const uint32_t *)&l;
        }
        *(uint4 *)(stg + (2 * t) * MMV6_TS + 8 * lane) = make_uint4(hi[0], hi[1], hi[2], hi[3]);
        *(uint4 *)(stg + (2 * t + 1) * MMV6_TS + 8 * lane) = make_uint4(lo[0], lo[1], lo[2], lo[3]);
        if ((lane & 3) == (t & 3)) sinv[t >> 2] = __uint_as_float((uint32_t)(127 - es) << 23);
    }
    __syncwarp(); /* the B rows are written */
}

__device__ __forceinline__ void mmv6_mma(float *c, const uint32_t *a, uint32_t b0, uint32_t b1) {
    asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%10,%10,%10,%10};"
        : "=f"(c[0]), "=f"(c[1]), "=f"(c[2]), "=f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1), "f"(0.0f));
}

/* int8 byte k of w as a float, exactly: (b ^ 0x80) + 2^23 - (2^23 + 128) */
__device__ __forceinline__ float mmv6_i8f(uint32_t w, int k) {
    return __uint_as_float(0x4B000000u | (((w >> (8 * k)) & 255u) ^ 0x80u)) - 8388736.0f;
}

/* acc[g][r]: token 4 g + tig of row gid + 8 r, this super-block added. */
template <int NG>
__device__ __forceinline__ void mmv6_sb(const mmv6_raw (&w)[2], float (*acc)[2], const __half *stg,
                                        const float *sinv, int T, int gid, int tig) {
    float d[2];
#pragma unroll
    for (int r = 0; r < 2; r++) d[r] = __half2float(__ushort_as_half((unsigned short)w[r].d));
    const __half *bp[NG];
#pragma unroll
    for (int g = 0; g < NG; g++) {
        const int tok = 4 * g + (gid >> 1);
        bp[g] = tok < T ? stg + (2 * tok + (gid & 1)) * MMV6_TS + 4 * tig : nullptr;
    }
    float part[NG][2];
#pragma unroll
    for (int g = 0; g < NG; g++) part[g][0] = part[g][1] = 0.0f;
#pragma unroll
    for (int r = 0; r < 16; r++) {
        const int n = r >> 3, j = (r >> 1) & 3, hb = r & 1; /* element base 128 n + 32 j + 16 hb */
        uint32_t a[4];
#pragma unroll
        for (int rr = 0; rr < 2; rr++) {
            /* 4 six-bit values (bytes) of row gid + 8 rr: elements 4 tig .. + 3 of the sub-block */
            const uint32_t lq = (w[rr].ql[n][2 * (j & 1) + hb] >> (4 * (j >> 1))) & 0x0F0F0F0Fu;
            const uint32_t hq = ((w[rr].qh[n][hb] >> (2 * j)) & 0x03030303u) << 4;
            const uint32_t q = lq | hq;
            /* (1024 + q) as fp16 pairs, minus 1056: exact q - 32 */
            const uint32_t p01 = __byte_perm(q, 0x64646464u, 0x5140), p23 = __byte_perm(q, 0x64646464u, 0x7362);
            const __half2 m = __halves2half2(__ushort_as_half(0x6420), __ushort_as_half(0x6420)); /* 1056 */
            const __half2 h01 = __hsub2(*(const __half2 *)&p01, m), h23 = __hsub2(*(const __half2 *)&p23, m);
            a[rr] = *(const uint32_t *)&h01;     /* k 2 tig, 2 tig + 1 */
            a[rr + 2] = *(const uint32_t *)&h23; /* k 2 tig + 8, 2 tig + 9 */
        }
        float dsc[2];
#pragma unroll
        for (int rr = 0; rr < 2; rr++) dsc[rr] = __fmul_rn(d[rr], mmv6_i8f(w[rr].sc[r >> 2], r & 3));
        const int e0 = 128 * n + 32 * j + 16 * hb;
#pragma unroll
        for (int g = 0; g < NG; g++) {
            uint2 b = make_uint2(0u, 0u);
            if (bp[g]) b = *(const uint2 *)(bp[g] + e0);
            float c[4];
            mmv6_mma(c, a, b.x, b.y);
#pragma unroll
            for (int rr = 0; rr < 2; rr++)
                part[g][rr] = fmaf(dsc[rr], __fadd_rn(c[2 * rr], c[2 * rr + 1]), part[g][rr]);
        }
    }
#pragma unroll
    for (int g = 0; g < NG; g++)
#pragma unroll
        for (int rr = 0; rr < 2; rr++) acc[g][rr] = fmaf(part[g][rr], sinv[g], acc[g][rr]);
}

/* Arguments: mmv.cuh's mmv_args (up to 4 weights of one row length; block b
 * is a 16-row tile of weight i for blk0[i] <= b < blk0[i + 1]); swiglu must
 * be 0 (Q6_K gate/up pairs take k_matvec_multi). */
/* Launch contract: grid (blk0[4]), block 32 * ks (ks = mmv_ks(in / 256)),
 * dynamic shared memory mmv6_smem_bytes(NG, ks). With a norm, the block
 * first computes each token's factor (warp_inv_rms; warp w takes tokens w,
 * w + ks, ...). */
template <int NG>
__global__ void __launch_bounds__(32 * MMV_KS_MAX) k_mmv6(mmv_args a) {
    extern __shared__ __align__(16) __half mmv6_sh[];
    __shared__ float ninv[MMV_MAX_T];
    const int lane = threadIdx.x & 31, gid = lane >> 2, tig = lane & 3, wp = threadIdx.x >> 5;
    const int ks = blockDim.x >> 5;
    const int wi = cuda_blk_owner(a.blk0, (int)blockIdx.x);
    const int64_t tile0 = (int64_t)((int)blockIdx.x - a.blk0[wi]) * 16, nrow = a.n_out[wi];
    const int nsb = (int)(a.in / 256);
    const int sb0 = wp * nsb / ks, sb1 = (wp + 1) * nsb / ks;
    const uint8_t *rows[2];
#pragma unroll
    for (int r = 0; r < 2; r++) {
        const int64_t row = tile0 + gid + 8 * r;
        rows[r] = a.W[wi] + (row < nrow ? row : nrow - 1) * (int64_t)a.row_bytes;
    }
    __half *stg = mmv6_sh + wp * 4 * NG * 2 * MMV6_TS;
    float acc[NG][2];
#pragma unroll
    for (int g = 0; g < NG; g++) acc[g][0] = acc[g][1] = 0.0f;
    mmv6_raw cur[2], nxt[2];
    /* the first super-block's weights are requested before the wait: constants of the step, so they load while
     * the kernel before this one (or its norm's input) finishes */
    if (sb0 < sb1) {
#pragma unroll
        for (int r = 0; r < 2; r++) mmv6_load(cur[r], rows[r] + (int64_t)sb0 * 210, tig, (sb0 & 1) == 0);
    }
    pdl_start();
    if (a.nw) block_inv_rms(a.x, a.in, a.T, a.eps, ninv);
#pragma unroll 1
    for (int sb = sb0; sb < sb1; sb++) {
        if (sb + 1 < sb1) {
#pragma unroll
            for (int r = 0; r < 2; r++) mmv6_load(nxt[r], rows[r] + (int64_t)(sb + 1) * 210, tig, ((sb + 1) & 1) == 0);
        }
        float sinv[NG];
        mmv6_stage<NG>(a.x, a.in, a.T, sb, lane, a.nw, ninv, stg, sinv);
        mmv6_sb<NG>(cur, acc, stg, sinv, a.T, gid, tig);
#pragma unroll
        for (int r = 0; r < 2; r++) cur[r] = nxt[r];
    }
    __syncthreads(); /* the staging areas are free: reused for the partials */
    float *part = (float *)mmv6_sh; /* [ks][NG][16 rows][4 tokens] */
#define MMV6_PART(k, g, row, tk) part[(((k) * NG + (g)) * 16 + (row)) * 4 + (tk)]
#pragma unroll
    for (int g = 0; g < NG; g++)
#pragma unroll
        for (int r = 0; r < 2; r++) MMV6_PART(wp, g, gid + 8 * r, tig) = acc[g][r];
    __syncthreads();
    for (int i = threadIdx.x; i < NG * 64; i += blockDim.x) {
        const int tk = i & 3, row = (i >> 2) & 15, g = i >> 6;
        const int tok = 4 * g + tk;
        const int64_t orow = tile0 + row;
        if (tok >= a.T || orow >= nrow) continue;
        float v = MMV6_PART(0, g, row, tk);
        for (int k = 1; k < ks; k++) v = __fadd_rn(v, MMV6_PART(k, g, row, tk));
        float *yp = a.y[wi] + (int64_t)tok * nrow + orow;
        *yp = a.accumulate ? *yp + v : v;
    }
#undef MMV6_PART
}

/* ---- k_mmv6p: k_mmv6 for long outputs (the output head) ----
 *
 * For the head {4096, 248320} k_mmv6 runs 15,520 blocks, and each warp
 * converts its super-blocks of x again for every 16 rows (mmv6_stage:
 * loads, a max, the hi / lo split), about as many instructions as the
 * rows' own decoding; the head ran at 45-49% of the copy bandwidth
 * (bench/results/2026-12-03g-h200.md). k_mmv6p's blocks stay: warp w
 * stages its super-block range [sb0, sb1) for all T tokens once, then the
 * block loops over tiles b, b + gridDim.x, ..., the warp's next raw
 * super-block (the next tile's first one at a tile's end) loading while
 * it multiplies the current one. Per tile the arithmetic is k_mmv6's:
 * the same staging values, mmv6_sb in sb order, the ks partials added in
 * warp order, so every row has k_mmv6's bits (the grid only decides which
 * block runs a tile). T <= 4, nsb <= 32 (at most MMV6P_SBW super-blocks a
 * warp).
 * Measured on the H200 (bench/results/2026-12-04b-h200.md, run 1): the 9B
 * head 406 -> 391 us (still ~51% of copy: the staging was not the main
 * cost), decode +0.7% (9b q4_k_m) and +0.9% (35b-a3b), MEMRA_MMV6P=0 A/B.
 * The gate's output{H, 248320} rows hold it to k_mmv6's bits (memcmp). */
#define MMV6P_SBW 8

__host__ __device__ static inline size_t mmv6p_smem_bytes(int T, int nsb, int ks) {
    const int sbw = (nsb + ks - 1) / ks;
    return (size_t)ks * sbw * 2 * T * MMV6_TS * 2;
}

/* the most any fitting launch takes: ks sbw <= nsb + ks <= 40 super-blocks of 4 tokens */
#define MMV6P_SMEM_MAX (40 * 2 * 4 * MMV6_TS * 2)

static inline bool mmv6p_ok(int T, int64_t in) { return T <= 4 && in / 256 <= 4 * MMV6P_SBW; }

/* Launch contract: grid <= ntiles = blk0[4], block 32 * ks (ks = mmv_ks(in /
 * 256)), dynamic shared memory mmv6p_smem_bytes(T, in / 256, ks); k_mmv6's
 * otherwise, with T <= 4 and in / 256 <= 32. */
static __global__ void __launch_bounds__(32 * MMV_KS_MAX) k_mmv6p(mmv_args a) {
    extern __shared__ __align__(16) __half mmv6_sh[];
    __shared__ float ninv[MMV_MAX_T];
    __shared__ float sx[MMV_KS_MAX][MMV6P_SBW][4]; /* 1 / s of (warp, its super-block k, token) */
    __shared__ float part[MMV_KS_MAX][16][4];      /* [warp][row][token] */
    pdl_start();
    const int lane = threadIdx.x & 31, gid = lane >> 2, tig = lane & 3, wp = threadIdx.x >> 5;
    const int ks = blockDim.x >> 5, T = a.T;
    const int nsb = (int)(a.in / 256), sbw = (nsb + ks - 1) / ks;
    const int sb0 = wp * nsb / ks, sb1 = (wp + 1) * nsb / ks;
    const int ntiles = a.blk0[4];
    if (a.nw) block_inv_rms(a.x, a.in, T, a.eps, ninv);
    __half *stg = mmv6_sh + (size_t)wp * sbw * 2 * T * MMV6_TS; /* super-block k at 2 T MMV6_TS k halves */
    auto rows_of = [&](int tile, const uint8_t *(&rows)[2]) {
        const int wi = cuda_blk_owner(a.blk0, tile);
        const int64_t tile0 = (int64_t)(tile - a.blk0[wi]) * 16, nrow = a.n_out[wi];
#pragma unroll
        for (int r = 0; r < 2; r++) {
            const int64_t row = tile0 + gid + 8 * r;
            rows[r] = a.W[wi] + (row < nrow ? row : nrow - 1) * (int64_t)a.row_bytes;
        }
    };
    const uint8_t *rows[2];
    int tile = blockIdx.x;
    rows_of(tile, rows);
    mmv6_raw cur[2], nxt[2];
#pragma unroll
    for (int r = 0; r < 2; r++) mmv6_load(cur[r], rows[r] + (int64_t)sb0 * 210, tig, (sb0 & 1) == 0);
    for (int sb = sb0; sb < sb1; sb++) {
        float sinv[1];
        mmv6_stage<1>(a.x, a.in, T, sb, lane, a.nw, ninv, stg + (size_t)(sb - sb0) * 2 * T * MMV6_TS, sinv);
        if (lane < 4) sx[wp][sb - sb0][lane] = sinv[0];
    }
    __syncwarp();
    for (; tile < ntiles; tile += gridDim.x) {
        const int next = tile + gridDim.x;
        const uint8_t *nrows[2] = {rows[0], rows[1]};
        if (next < ntiles) rows_of(next, nrows);
        float acc[1][2] = {{0.0f, 0.0f}};
#pragma unroll 1
        for (int sb = sb0; sb < sb1; sb++) {
            const bool more = sb + 1 < sb1;
            if (more || next < ntiles) {
                const int ns = more ? sb + 1 : sb0;
#pragma unroll
                for (int r = 0; r < 2; r++)
                    mmv6_load(nxt[r], (more ? rows[r] : nrows[r]) + (int64_t)ns * 210, tig, (ns & 1) == 0);
            }
            const float sinv[1] = {sx[wp][sb - sb0][tig]};
            mmv6_sb<1>(cur, acc, stg + (size_t)(sb - sb0) * 2 * T * MMV6_TS, sinv, T, gid, tig);
#pragma unroll
            for (int r = 0; r < 2; r++) cur[r] = nxt[r];
        }
#pragma unroll
        for (int r = 0; r < 2; r++) part[wp][gid + 8 * r][tig] = acc[0][r];
        __syncthreads();
        const int wi = cuda_blk_owner(a.blk0, tile);
        const int64_t tile0 = (int64_t)(tile - a.blk0[wi]) * 16, nrow = a.n_out[wi];
        for (int i = threadIdx.x; i < 64; i += blockDim.x) {
            const int tk = i & 3, row = i >> 2;
            const int64_t orow = tile0 + row;
            if (tk >= T || orow >= nrow) continue;
            float v = part[0][row][tk];
            for (int k = 1; k < ks; k++) v = __fadd_rn(v, part[k][row][tk]);
            float *yp = a.y[wi] + (int64_t)tk * nrow + orow;
            *yp = a.accumulate ? *yp + v : v;
        }
        __syncthreads(); /* part is rewritten by the next tile */
        rows[0] = nrows[0], rows[1] = nrows[1];
    }
}

/* k_mmv6p's grid: the blocks that fit on the device at once (occupancy at
 * this block size and shared memory), at most the tile count. */
static inline unsigned mmv6p_grid(int ks, size_t smem, int ntiles) {
    static int sms = 0;
    if (!sms && cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0) != cudaSuccess) sms = 1;
    int per = 0;
    if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per, k_mmv6p, 32 * ks, smem) != cudaSuccess || per < 1)
        per = 1;
    const long g = (long)sms * per;
    return (unsigned)(g < ntiles ? g : ntiles);
}

/* Whether k_mmv6p takes a launch: T <= 4, short rows, and at least
 * MMV6P_MIN_TILES tiles (the heads; MEMRA_MMV6P=0: never, =2: every launch
 * that fits, for A/B runs of the other shapes). */
#define MMV6P_MIN_TILES 4096
static inline bool mmv6p_use(const mmv_args &a) {
    static int mode = -1;
    if (mode < 0) {
        const char *e = getenv("MEMRA_MMV6P");
        mode = e && *e ? atoi(e) : 1;
    }
    return mode && mmv6p_ok(a.T, a.in) && (mode == 2 || a.blk0[4] >= MMV6P_MIN_TILES);
}

/* ---- k_mmv6b: k_mmv6p's tiles through bulk copies ----
 *
 * What: k_mmv6p (T <= 4, long outputs: the heads) with the weight bytes
 * brought in by the copy engine. A 16-row tile of a Q6_K weight is one
 * contiguous run of 16 row_bytes (53,760 bytes at H = 4096; a multiple of
 * 16, 16-byte aligned: row_bytes = 210 nsb with nsb even). The block is G
 * groups of ks warps; group g owns DG shared-memory slots of one tile each
 * and takes the block's tiles g, g + G, ... (tile blockIdx.x + j gridDim.x
 * for the block's j-th), each filled by MMV6B_CP bulk copies
 * (cp.async.bulk, completion on the slot's mbarrier). A group's warp w
 * multiplies its super-block range [sb0, sb1) of the 16 rows from the
 * slot; when the group's warps are done with it, the slot is refilled with
 * the group's tile DG further on while the partials are added. The first
 * DG tiles of each group are requested before the wait for the previous
 * kernel (the weights are constants of the step). x is staged once per
 * block, as k_mmv6p does, by all groups (warp w's range is the same in
 * every group).
 * Bits: per tile the arithmetic is k_mmv6p's and k_mmv6's: the same raw
 * words (read from shared memory instead of global), the same staging,
 * mmv6_sb in sb order, the ks partials added in warp order. G, DG and the
 * grid only decide which warps run a tile. The gate's output{H, 248320}
 * rows hold it to k_mmv6's bits (memcmp of T = 1 against T = 7 rows).
 * Why: k_mmv6p's loads (16 bytes of 8 rows 3,360 bytes apart per warp
 * instruction) keep the 9B head at ~51% of copy; the same pattern without
 * arithmetic reaches 67%, contiguous runs 107% (stream lab,
 * bench/results/2026-12-03g-h200.md), and a bulk-copy ring of contiguous
 * Q4_K runs took the head shape to 81-85% (ibid., k_tm<2>). Here the SM
 * issues one instruction per 13 KB chunk instead of ~34 loads per super-
 * block and row pair.
 * Why groups with private slots: a slot shared by two groups could be
 * waited on for its use u while use u - 1 is still in flight (the
 * mbarrier's parity cannot tell them apart); a group's own slots are used
 * in its own order. Shared memory holds only 3 tiles at H = 4096 / 5120
 * (T = 1), so there G = 3 groups of one slot each (mmv6b_config): while one
 * group waits for its copy the others compute.
 * NOT YET MEASURED (written without a GPU). MEMRA_MMV6B=0 turns it off
 * (k_mmv6p then), MEMRA_MMV6B_G / MEMRA_MMV6B_DG force a configuration
 * that fits, for A/B runs. */
#define MMV6B_WARPS 16 /* G ks at most (512 threads: 128 registers a thread) */
#define MMV6B_GMAX 4
#define MMV6B_CP 4 /* bulk copies a tile (each 840 nsb bytes: a multiple of 16 for even nsb) */

/* A slot's bytes: a tile, rounded up to 128. */
__host__ __device__ static inline size_t mmv6b_slot_bytes(size_t row_bytes) {
    return (16 * row_bytes + 127) & ~(size_t)127;
}

/* Dynamic shared memory of a k_mmv6b<G, DG> block: the slots, the staging
 * area (k_mmv6p's), the partials [G][ks][16][4]. */
static inline size_t mmv6b_smem_bytes(int g, int dg, int T, int nsb, int ks, size_t row_bytes) {
    return (size_t)g * dg * mmv6b_slot_bytes(row_bytes) + mmv6p_smem_bytes(T, nsb, ks) + (size_t)g * ks * 64 * 4;
}

/* Launch contract: block 32 G ks (ks = mmv_ks(in / 256), G ks <=
 * MMV6B_WARPS), dynamic shared memory mmv6b_smem_bytes(G, DG, ...), any
 * grid >= 1; k_mmv6p's otherwise (T <= 4, in / 256 <= 32 and even), and
 * every weight's n_out % 16 == 0 (whole tiles only), 16-byte aligned. */
template <int G, int DG>
static __global__ void __launch_bounds__(32 * MMV6B_WARPS) k_mmv6b(mmv_args a) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
    __trap(); /* bulk copies and mbarrier transactions: sm_90 (the launcher checks cuda_sm90) */
#else
    extern __shared__ __align__(128) uint8_t mb_sh[]; /* [G][DG] slots, staging, partials */
    __shared__ float ninv[MMV_MAX_T];
    __shared__ float sx[MMV_KS_MAX][MMV6P_SBW][4]; /* 1 / s of (warp, its super-block k, token) */
    __shared__ __align__(8) uint64_t bar[G][DG];   /* slot full: one arrival (expect_tx) + the copies' bytes */
    const int lane = threadIdx.x & 31, gid = lane >> 2, tig = lane & 3;
    const int ks = (int)(blockDim.x >> 5) / G, w = (int)(threadIdx.x >> 5), g = w / ks, wp = w - g * ks;
    const int T = a.T, nsb = (int)(a.in / 256), sbw = (nsb + ks - 1) / ks;
    const int sb0 = wp * nsb / ks, sb1 = (wp + 1) * nsb / ks;
    const int64_t rb = (int64_t)a.row_bytes, tile_b = 16 * rb, chunk = tile_b / MMV6B_CP;
    const size_t slot_b = mmv6b_slot_bytes(a.row_bytes);
    const int ntiles = a.blk0[4], bx = (int)blockIdx.x, nb = (int)gridDim.x;
    const int nj = bx < ntiles ? (ntiles - 1 - bx) / nb + 1 : 0; /* this block's tiles */
    __half *stg = (__half *)(mb_sh + (size_t)G * DG * slot_b) + (size_t)wp * sbw * 2 * T * MMV6_TS;
    float *part = (float *)(mb_sh + (size_t)G * DG * slot_b + mmv6p_smem_bytes(T, nsb, ks)) + (size_t)g * ks * 64;
    const uint32_t bar0 = (uint32_t)__cvta_generic_to_shared(&bar[g][0]);
    const uint32_t slot0 = (uint32_t)__cvta_generic_to_shared(mb_sh + (size_t)g * DG * slot_b);
    /* the group's i-th tile (block tile g + i G) into its slot i % DG; warp 0 of the group */
    auto issue = [&](int i) {
        const int j = g + i * G;
        if (j >= nj) return;
        const int tile = bx + j * nb, wi = cuda_blk_owner(a.blk0, tile);
        const uint8_t *src = a.W[wi] + (int64_t)(tile - a.blk0[wi]) * tile_b;
        const uint32_t b = bar0 + 8 * (uint32_t)(i % DG), dst = slot0 + (uint32_t)((i % DG) * slot_b);
        if (lane == 0)
            mbar_expect_tx(b, (uint32_t)tile_b);
        __syncwarp();
        if (lane < MMV6B_CP)
            bulk_g2s(dst + (uint32_t)(lane * chunk), src + lane * chunk, (uint32_t)chunk, b);
    };
    /* the group's barrier (ids 1 .. G; 0 is __syncthreads') */
    auto group_sync = [&]() { asm volatile("bar.sync %0, %1;" ::"r"(1 + g), "r"(32 * ks) : "memory"); };
    if (wp == 0) {
        if (lane == 0) {
#pragma unroll
            for (int d = 0; d < DG; d++) mbar_init<1>(bar0 + 8 * d);
            mbar_init_fence();
        }
        __syncwarp();
#pragma unroll
        for (int d = 0; d < DG; d++) issue(d); /* before the wait: the weights do not depend on it */
    }
    pdl_start();
    if (a.nw) block_inv_rms(a.x, a.in, T, a.eps, ninv);
    /* the staging of warp wp's range, its super-blocks dealt over the groups */
    for (int k = g; k < sb1 - sb0; k += G) {
        float sinv[1];
        mmv6_stage<1>(a.x, a.in, T, sb0 + k, lane, a.nw, ninv, stg + (size_t)k * 2 * T * MMV6_TS, sinv);
        if (lane < 4) sx[wp][k][lane] = sinv[0];
    }
    __syncthreads(); /* the staging and the mbarriers' init */
#pragma unroll 1
    for (int i = 0; g + i * G < nj; i++) {
        const int tile = bx + (g + i * G) * nb;
        mbar_wait(bar0 + 8 * (uint32_t)(i % DG), (uint32_t)(i / DG) & 1u);
        const uint8_t *slot = mb_sh + (size_t)(g * DG + i % DG) * slot_b;
        const uint8_t *rows[2] = {slot + gid * rb, slot + (gid + 8) * rb};
        float acc[1][2] = {{0.0f, 0.0f}};
        mmv6_raw cur[2], nxt[2];
#pragma unroll
        for (int r = 0; r < 2; r++) mmv6_load<true>(cur[r], rows[r] + (int64_t)sb0 * 210, tig, (sb0 & 1) == 0);
#pragma unroll 1
        for (int sb = sb0; sb < sb1; sb++) {
            if (sb + 1 < sb1)
#pragma unroll
                for (int r = 0; r < 2; r++)
                    mmv6_load<true>(nxt[r], rows[r] + (int64_t)(sb + 1) * 210, tig, ((sb + 1) & 1) == 0);
            const float sinv[1] = {sx[wp][sb - sb0][tig]};
            mmv6_sb<1>(cur, acc, stg + (size_t)(sb - sb0) * 2 * T * MMV6_TS, sinv, T, gid, tig);
#pragma unroll
            for (int r = 0; r < 2; r++) cur[r] = nxt[r];
        }
#define MMV6B_PART(k, row, tk) part[((k) * 16 + (row)) * 4 + (tk)]
#pragma unroll
        for (int r = 0; r < 2; r++) MMV6B_PART(wp, gid + 8 * r, tig) = acc[0][r];
        group_sync(); /* the slot is read, the partials written */
        if (wp == 0) {
            asm volatile("fence.proxy.async.shared::cta;" ::: "memory"); /* generic reads before the async writes */
            issue(i + DG);
        }
        const int wi = cuda_blk_owner(a.blk0, tile);
        const int64_t tile0 = (int64_t)(tile - a.blk0[wi]) * 16, nrow = a.n_out[wi];
        for (int q = (int)threadIdx.x - 32 * ks * g; q < 64; q += 32 * ks) {
            const int tk = q & 3, row = q >> 2;
            if (tk >= T) continue;
            float v = MMV6B_PART(0, row, tk);
            for (int k = 1; k < ks; k++) v = __fadd_rn(v, MMV6B_PART(k, row, tk));
            float *yp = a.y[wi] + (int64_t)tk * nrow + tile0 + row;
            *yp = a.accumulate ? *yp + v : v;
        }
#undef MMV6B_PART
        group_sync(); /* the partials are rewritten by the next tile */
    }
    if (wp == 0 && lane == 0)
#pragma unroll
        for (int d = 0; d < DG; d++) mbar_inval(bar0 + 8 * d);
#endif
}

/* The instantiation for G groups of DG slots (1 <= G <= MMV6B_GMAX, DG 1 or 2). */
typedef void (*mmv6b_kernel)(mmv_args);
static inline mmv6b_kernel mmv6b_kernel_of(int g, int dg) {
    static const mmv6b_kernel k[MMV6B_GMAX][2] = {{k_mmv6b<1, 1>, k_mmv6b<1, 2>},
                                                  {k_mmv6b<2, 1>, k_mmv6b<2, 2>},
                                                  {k_mmv6b<3, 1>, k_mmv6b<3, 2>},
                                                  {k_mmv6b<4, 1>, k_mmv6b<4, 2>}};
    return k[g - 1][dg - 1];
}

/* The blocks of kernel K (G ks warps, smem bytes of dynamic shared memory)
 * that fit on an SM at once; 0 if none (its shared-memory limit raised to
 * the device's opt-in maximum first). */
static inline int mmv6b_per_sm(mmv6b_kernel K, int warps, size_t smem) {
    static int optin = 0;
    if (!optin && cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, 0) != cudaSuccess) return 0;
    cudaFuncAttributes fa;
    if (cudaFuncGetAttributes(&fa, K) != cudaSuccess || smem + fa.sharedSizeBytes > (size_t)optin ||
        cudaFuncSetAttribute(K, cudaFuncAttributeMaxDynamicSharedMemorySize, optin - (int)fa.sharedSizeBytes) !=
            cudaSuccess)
        return 0;
    int per = 0;
    if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per, K, 32 * warps, smem) != cudaSuccess) return 0;
    return per;
}

/* k_mmv6b's configuration for launch a (ks warps a group): of the G, DG
 * that fit (G ks <= MMV6B_WARPS), the most warps an SM, then the most
 * slots an SM (more warps compute, more slots keep copies in flight), then
 * the larger G (x staged once for more warps). At T = 1: H = 4096 and 5120
 * fit three tiles an SM, one block of G = 3, DG = 1 (12 and 15 warps);
 * H = 2048 (2 warps a group): two blocks of G = 3, DG = 1 (12 warps, 6
 * slots an SM).
 * MEMRA_MMV6B_G / MEMRA_MMV6B_DG restrict the choice (A/B runs). *pper: the
 * blocks an SM. 0 if none fits. */
static inline int mmv6b_config(const mmv_args &a, int ks, int *pg, int *pdg, size_t *psmem, int *pper) {
    static int eg = -1, edg = -1;
    if (eg < 0) {
        const char *e = getenv("MEMRA_MMV6B_G"), *f = getenv("MEMRA_MMV6B_DG");
        eg = e && *e ? atoi(e) : 0, edg = f && *f ? atoi(f) : 0;
    }
    const int nsb = (int)(a.in / 256);
    int best_w = 0, best_s = 0;
    for (int g = 1; g <= MMV6B_GMAX; g++) {
        if (g * ks > MMV6B_WARPS || (eg > 0 && g != eg)) continue;
        for (int dg = 1; dg <= 2; dg++) {
            if (edg > 0 && dg != edg) continue;
            const size_t sm = mmv6b_smem_bytes(g, dg, a.T, nsb, ks, a.row_bytes);
            const int per = mmv6b_per_sm(mmv6b_kernel_of(g, dg), g * ks, sm);
            const int w = per * g * ks, sl = per * g * dg;
            if (per < 1 || w < best_w || (w == best_w && sl < best_s)) continue; /* ties: the larger G */
            best_w = w, best_s = sl;
            *pg = g, *pdg = dg, *psmem = sm, *pper = per;
        }
    }
    return best_w > 0;
}

/* Launches k_mmv6b for a (blk0 filled, ks = mmv_ks) when it takes it:
 * MEMRA_MMV6B unset or 1: k_mmv6p's launches (mmv6p_use) whose weights are
 * whole tiles, 0: never. false: not taken (nothing launched). The grid: the
 * blocks that fit on the device at once, at most the tile count.
 * Not for smaller grids: k_mmv6b on every T <= 4 launch whose tiles fit
 * (ssm_in qkv, attn_qkv) kept the bits and lost (H100, decode@0, two rounds,
 * bench/results/2026-12-06f-h100.md): 9b q4_k_m 317.3 / 316.4 -> 312.5 /
 * 313.1 tok/s, 27b and 35b-a3b unchanged. */
static inline bool mmv6b_launch(const mmv_args &a, cudaStream_t s, int ks) {
    static int mode = -1, sms = 0;
    if (mode < 0) {
        const char *e = getenv("MEMRA_MMV6B");
        mode = e && *e ? atoi(e) : 1;
    }
    if (!mode || !mmv6p_ok(a.T, a.in) || (a.in / 256) % 2 || a.blk0[4] < MMV6P_MIN_TILES ||
        !cuda_sm90)
        return false;
    for (int i = 0; i < 4; i++)
        if (a.blk0[i + 1] > a.blk0[i] && (a.n_out[i] % 16 || !cuda_aligned16(a.W[i]))) return false;
    if (!sms && cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0) != cudaSuccess) return false;
    int g = 0, dg = 0, per = 0;
    size_t sm = 0;
    if (!mmv6b_config(a, ks, &g, &dg, &sm, &per)) return false;
    const long grid = (long)sms * per < a.blk0[4] ? (long)sms * per : a.blk0[4];
    cuda_launch(mmv6b_kernel_of(g, dg), (unsigned)grid, 32u * (unsigned)(g * ks), sm, s, a);
    return true;
}

template <int NG>
static void mmv6_launch_ng(const mmv_args &a, cudaStream_t s, int ks) {
    static bool attr_set; /* the opt-in above 48 KiB, once per instantiation */
    if (!attr_set) {
        cudaFuncSetAttribute(k_mmv6<NG>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             (int)mmv6_smem_bytes(NG, MMV_KS_MAX));
        attr_set = true;
    }
    cuda_launch(k_mmv6<NG>, (unsigned)a.blk0[4], 32u * (unsigned)ks, mmv6_smem_bytes(NG, ks), s, a);
}

/* Fills blk0 from n_out[0 .. n - 1] and launches (ks = mmv_ks unless a lab
 * overrides it; another split changes the rows' bits). */
static inline void mmv6_launch(mmv_args a, int n, cudaStream_t s, int ks = 0) {
    a.blk0[0] = 0;
    for (int i = 0; i < 4; i++) a.blk0[i + 1] = a.blk0[i] + (i < n ? (int)((a.n_out[i] + 15) / 16) : 0);
    if (!ks) ks = mmv_ks((int)(a.in / 256));
    if (ks == mmv_ks((int)(a.in / 256)) && mmv6b_launch(a, s, ks)) return;
    if (ks == mmv_ks((int)(a.in / 256)) && mmv6p_use(a)) {
        const size_t sm = mmv6p_smem_bytes(a.T, (int)(a.in / 256), ks);
        cuda_smem_limit<k_mmv6p>(MMV6P_SMEM_MAX);
        cuda_launch(k_mmv6p, mmv6p_grid(ks, sm, a.blk0[4]), 32u * (unsigned)ks, sm, s, a);
        return;
    }
    if (a.T <= 4)
        mmv6_launch_ng<1>(a, s, ks);
    else if (a.T <= 8)
        mmv6_launch_ng<2>(a, s, ks);
    else
        mmv6_launch_ng<4>(a, s, ks);
}

#endif
