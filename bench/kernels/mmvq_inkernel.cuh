/* LAB ONLY (bench/kernels/mmvq_lab.cu): the int8 decode matvec of Q4_K rows
 * as a drop-in for k_mmv (mmv.cuh: same mmv_args, T = 1..15, multi-weight,
 * swiglu and input-norm launches), with the activations converted inside
 * the kernel. It passed `memra gate kernels --model 9b` / `--model 27b` on
 * the H200 and was NOT faster, so production stays on k_mmv
 * (bench/results/2026-12-03e-h200.md):
 *  - first version, each warp converting a super-block's x right after
 *    issuing its weight loads (as k_mmv does): 9b q4_k_m decode 260.5 tok/s
 *    against k_mmv's 268.0;
 *  - this version, each warp converting its whole super-block range first
 *    (mmvq_chunk at a time), then the MMAs: 243 tok/s; back to back in the
 *    lab 29-34% of copy against k_mmv's 31-39% (PF = 1, the next
 *    super-block's weights in registers: 21-24%).
 * The prototype with the conversion in a separate launch (k_mmvq_lab + its
 * prep) runs at 42-50% back to back, the prep not counted. Reading: the
 * integer core is cheaper, but every block converting the whole x again
 * (384 blocks x 16 super-blocks per {4096, 12288} launch) costs about
 * what it saves; a conversion done once per token (in the kernel that
 * writes x, or a prep launch hidden by PDL) is the way to use it.
 *
 * Arithmetic, per (token, super-block):
 *  - X = rint(x 2^e), e chosen from the super-block max so that max|X| is
 *    in [2^20, 2^21): 22-bit fixed point, split into three signed 8-bit
 *    limbs X = 2^16 l0 + 2^8 l1 + l2 (balanced digits). Error: half a unit
 *    of 2^-e per element, ~2.4e-6 of max|y| on the lab's rows with x40
 *    outliers (k_mmv: 5e-7), a quarter of the gate's 1e-5.
 *  - B columns (token, limb): column n = 3 (token % 2) + limb, so one MMA
 *    serves two tokens (columns 6, 7 stay zero). Products and sums are
 *    exact integers (any order gives the same bits); the 6-bit sub-scale
 *    multiplies each sub-block's sums by an integer multiply-add
 *    (|A| < 2^25).
 *  - Per super-block, in fp32: acc_n = fma(d 2^-e, A_n, acc_n) per column;
 *    the Q4_K min term, dmin 2^-e sum_j m_j S_j (S_j = the sub-block sums of
 *    X, exact in int, one rounding to float), goes into the limb-0 column
 *    times 2^-16 (exact), so the row's value is (2^16 acc_0 + 2^8 acc_1) +
 *    acc_2 after the warps' partial columns are added in warp order.
 *  - A NaN or Inf among a super-block's x makes its 2^-e NaN: they propagate.
 * Every order is a function of the row length (the K split, mmv_ks) and the
 * token's own x: never of T, the token's pair, the grid, or which rows share
 * a block. matmul, matmul_multi and matmul_swiglu give a row the same bits.
 *
 * Layout: the block and row mapping of k_mmv (mmv_args, mmv_blocks; KS warps
 * split the row into fixed super-block ranges; a warp owns two 16-row tiles,
 * for swiglu the gate and up tiles of the same 16 rows). Each warp converts
 * the x of its own super-blocks (lane L: elements 8 L .. 8 L + 7) into its
 * shared-memory staging area in the order of the MMA's B fragments; with
 * the input norm (mmv_args.nw) it converts x * nw and the row's value is
 * multiplied by 1 / rms at the end (the sum of squares from the staging).
 *
 * Contract: in % 256 == 0, rows 16-byte aligned (144-byte blocks), x 16-byte
 * aligned, T in 1..15. */
#ifndef MEMRA_BENCH_MMVQ_INKERNEL_CUH
#define MEMRA_BENCH_MMVQ_INKERNEL_CUH

#include "backend/cuda/mmv.cuh"

/* A token's staging area: limb planes [limb][t][sub-block][8 bytes] with a
 * t stride of 80 and a limb stride of 320 bytes, then S_j (8 floats) and
 * 2^-e; 1088 bytes per token. The paddings put the 8 lanes of each phase of
 * the B fragments' lds.128 in distinct banks (tokens 2p and 2p + 1 too). */
#define MQ_T_B 80
#define MQ_LIMB_B 320
#define MQ_S_OFF 960
#define MQ_SINV_OFF 992
#define MQ_TOK_B 1088



__device__ __forceinline__ void mmvq_imma(int *c, uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3, uint32_t b0,
                                          uint32_t b1) {
    asm("mma.sync.aligned.m16n8k32.row.col.s32.u8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
        : "+r"(c[0]), "+r"(c[1]), "+r"(c[2]), "+r"(c[3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

__device__ __forceinline__ uint32_t mmvq_byte(uint32_t w, int i) { return (w >> (8 * i)) & 0xFFu; }

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
};

/* Super-blocks sbA .. sbA + n - 1 of tokens 0..T-1 into the warp's staging
 * area stg ((i T + t) MQ_TOK_B for super-block sbA + i, token t): lane L
 * converts elements 8 L .. 8 L + 7 (sub-block j = L / 4, quarter q = L % 4)
 * of x (times the norm weight nw when given) and writes limb l's 8 bytes
 * at l 320 + q 80 + j 8, the sub-block sums (the 4 lanes of a sub-block in
 * a fixed tree) and 2^-e. The x loads of MQ_CH super-blocks go out
 * together. With nw, ssw[t] (lane 0) accumulates each super-block's sum of
 * x^2 (a lane's 8 in order, then the warp's butterfly) in super-block
 * order: the input norm's sum, applied after the products. */
#define MQ_CH 2
__device__ __forceinline__ void mmvq_stage(const float *__restrict__ x, int64_t in, int T, int sbA, int n, int lane,
                                           uint8_t *stg, const float *__restrict__ nw, float *ssw) {
    const int j = lane >> 2, q = lane & 3;
    __syncwarp(); /* the previous chunk's fragments are read */
    for (int t = 0; t < T; t++) {
        for (int c = 0; c < n; c += MQ_CH) {
            float4 u[MQ_CH][2], wv[MQ_CH][2];
#pragma unroll
            for (int k = 0; k < MQ_CH; k++) {
                if (c + k >= n) break;
                const int64_t off = (int64_t)(sbA + c + k) * 256 + 8 * lane;
                const float4 *p = (const float4 *)(x + (int64_t)t * in + off);
                u[k][0] = __ldg(p), u[k][1] = __ldg(p + 1);
                if (nw) wv[k][0] = __ldg((const float4 *)(nw + off)), wv[k][1] = __ldg((const float4 *)(nw + off) + 1);
            }
#pragma unroll
            for (int k = 0; k < MQ_CH; k++) {
                if (c + k >= n) break;
                const float xr[8] = {u[k][0].x, u[k][0].y, u[k][0].z, u[k][0].w,
                                     u[k][1].x, u[k][1].y, u[k][1].z, u[k][1].w};
                float v[8], m = 0.0f, z = 0.0f;
                if (nw) {
                    const float wr[8] = {wv[k][0].x, wv[k][0].y, wv[k][0].z, wv[k][0].w,
                                         wv[k][1].x, wv[k][1].y, wv[k][1].z, wv[k][1].w};
                    float ss = 0.0f;
#pragma unroll
                    for (int i = 0; i < 8; i++) v[i] = __fmul_rn(xr[i], wr[i]), ss = fmaf(xr[i], xr[i], ss);
                    ss = warp_sum(ss);
                    if (lane == 0) ssw[t] = __fadd_rn(ssw[t], ss);
                } else {
#pragma unroll
                    for (int i = 0; i < 8; i++) v[i] = xr[i];
                }
#pragma unroll
                for (int i = 0; i < 8; i++) m = fmaxf(m, fabsf(v[i])), z = fmaf(v[i], 0.0f, z);
                const float mx = warp_max(m);
                /* NaN and Inf (which the max drops or keeps) make 2^-e NaN */
                const bool bad = __any_sync(0xFFFFFFFFu, !(z == 0.0f));
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
                uint8_t *st = stg + ((c + k) * T + t) * MQ_TOK_B;
#pragma unroll
                for (int l = 0; l < 3; l++)
                    *(uint2 *)(st + l * MQ_LIMB_B + q * MQ_T_B + j * 8) = make_uint2(lw[l][0], lw[l][1]);
                if (q == 0) ((float *)(st + MQ_S_OFF))[j] = (float)sum;
                if (lane == 0)
                    *(float *)(st + MQ_SINV_OFF) =
                        bad ? __int_as_float(0x7FC00000) : __uint_as_float((uint32_t)(127 - es) << 23);
            }
        }
    }
    __syncwarp(); /* the fragments are written */
}

/* The MMAs and the fp32 update of one super-block for the warp's two tiles
 * w[0], w[1] and token pairs 0..NP-1 (see the top). acc[tl][p][2 r + e]:
 * tile tl's row g + 8 r, column 2 t + e of pair p. */
template <int NP>
__device__ __forceinline__ void mmvq_sb(const mmvq_raw *w, float (*acc)[NP][4], const uint8_t *stg, int T, int g,
                                        int t) {
    uint32_t scw[2][2][2];
#pragma unroll
    for (int tl = 0; tl < 2; tl++)
#pragma unroll
        for (int r = 0; r < 2; r++) {
            const uint4 h = w[tl].head[r];
            scw[tl][r][0] = h.y & 0x3F3F3F3Fu;
            scw[tl][r][1] = (h.w & 0x0F0F0F0Fu) | ((h.y >> 2) & 0x30303030u);
        }
    /* this lane's B column: token 2 p + g / 3, limb g % 3 (g < 6) */
    const uint8_t *bp[NP];
#pragma unroll
    for (int p = 0; p < NP; p++) {
        const int tok = 2 * p + (g >= 3);
        bp[p] = g < 6 && tok < T ? stg + tok * MQ_TOK_B + (g % 3) * MQ_LIMB_B + t * MQ_T_B : nullptr;
    }
    int A[2][NP][4];
#pragma unroll
    for (int tl = 0; tl < 2; tl++)
#pragma unroll
        for (int p = 0; p < NP; p++) A[tl][p][0] = A[tl][p][1] = A[tl][p][2] = A[tl][p][3] = 0;
#pragma unroll
    for (int k = 0; k < 4; k++) {
        uint4 bb[NP];
#pragma unroll
        for (int p = 0; p < NP; p++) bb[p] = bp[p] ? *(const uint4 *)(bp[p] + 16 * k) : make_uint4(0u, 0u, 0u, 0u);
#pragma unroll
        for (int tl = 0; tl < 2; tl++) {
            uint32_t lo[2][2], hi[2][2];
#pragma unroll
            for (int r = 0; r < 2; r++) {
                const uint2 q = w[tl].qs[r][k];
                lo[r][0] = q.x & 0x0F0F0F0Fu, lo[r][1] = q.y & 0x0F0F0F0Fu;
                hi[r][0] = (q.x >> 4) & 0x0F0F0F0Fu, hi[r][1] = (q.y >> 4) & 0x0F0F0F0Fu;
            }
            const int j0 = 2 * k, j1 = 2 * k + 1;
#pragma unroll
            for (int p = 0; p < NP; p++) {
                int c0[4] = {0, 0, 0, 0}, c1[4] = {0, 0, 0, 0};
                mmvq_imma(c0, lo[0][0], lo[1][0], lo[0][1], lo[1][1], bb[p].x, bb[p].y); /* sub-block 2 k */
                mmvq_imma(c1, hi[0][0], hi[1][0], hi[0][1], hi[1][1], bb[p].z, bb[p].w); /* sub-block 2 k + 1 */
#pragma unroll
                for (int r = 0; r < 2; r++) {
                    const int s0 = (int)mmvq_byte(scw[tl][r][j0 >> 2], j0 & 3);
                    const int s1 = (int)mmvq_byte(scw[tl][r][j1 >> 2], j1 & 3);
                    A[tl][p][2 * r] += s0 * c0[2 * r] + s1 * c1[2 * r];
                    A[tl][p][2 * r + 1] += s0 * c0[2 * r + 1] + s1 * c1[2 * r + 1];
                }
            }
        }
    }
#pragma unroll
    for (int p = 0; p < NP; p++) {
        /* 2^-e of the columns 2 t, 2 t + 1 (0 for the unused ones) */
        float sx[2];
#pragma unroll
        for (int e = 0; e < 2; e++) {
            const int n = 2 * t + e, tok = 2 * p + n / 3;
            sx[e] = n < 6 && tok < T ? *(const float *)(stg + tok * MQ_TOK_B + MQ_SINV_OFF) : 0.0f;
        }
        /* the limb-0 columns: t = 0, e = 0 (token 2 p) and t = 1, e = 1 (token 2 p + 1) */
        const int tm = 2 * p + t;
        const bool has_m = t < 2 && tm < T;
        float S[8];
#pragma unroll
        for (int jj = 0; jj < 8; jj++) S[jj] = has_m ? ((const float *)(stg + tm * MQ_TOK_B + MQ_S_OFF))[jj] : 0.0f;
#pragma unroll
        for (int tl = 0; tl < 2; tl++)
#pragma unroll
            for (int r = 0; r < 2; r++) {
                const uint4 h = w[tl].head[r];
                const float d = __half2float(__ushort_as_half((unsigned short)(h.x & 0xFFFF)));
#pragma unroll
                for (int e = 0; e < 2; e++)
                    acc[tl][p][2 * r + e] = fmaf(__fmul_rn(d, sx[e]), (float)A[tl][p][2 * r + e], acc[tl][p][2 * r + e]);
                if (has_m) {
                    const float dmin = __half2float(__ushort_as_half((unsigned short)(h.x >> 16)));
                    const uint32_t mw0 = h.z & 0x3F3F3F3Fu;
                    const uint32_t mw1 = ((h.w >> 4) & 0x0F0F0F0Fu) | ((h.z >> 2) & 0x30303030u);
                    float M = 0.0f;
#pragma unroll
                    for (int jj = 0; jj < 8; jj++) M = fmaf((float)mmvq_byte(jj < 4 ? mw0 : mw1, jj & 3), S[jj], M);
                    /* - dmin 2^-e M, times 2^-16 for the limb-0 column e = t (exact) */
#pragma unroll
                    for (int e = 0; e < 2; e++)
                        if (e == t)
                            acc[tl][p][2 * r + e] =
                                fmaf(-__fmul_rn(__fmul_rn(dmin, sx[e]), 1.0f / 65536.0f), M, acc[tl][p][2 * r + e]);
                }
            }
    }
}

/* Super-blocks a warp stages at once at T tokens: at most MQ_STAGE_B bytes
 * of staging per warp, at least one super-block. */
#define MQ_STAGE_B 16384
__host__ __device__ static inline int mmvq_chunk(int T, int nsb, int ks) {
    const int per = (nsb + ks - 1) / ks;
    int c = MQ_STAGE_B / (T * MQ_TOK_B);
    c = c < 1 ? 1 : c;
    return c < per ? c : per;
}

/* Dynamic shared memory of a k_mmvq block of ks warps: the staging areas
 * (a chunk of the warp's super-blocks, at most ceil(nsb / ks)), later
 * reused for the partial columns [ks][2][np][16][8]. */
static inline size_t mmvq_smem_bytes(int np, int ks, int T, int64_t in) {
    size_t stage = (size_t)ks * mmvq_chunk(T, (int)(in / 256), ks) * T * MQ_TOK_B, part = (size_t)ks * 2 * np * 16 * 8 * 4;
    return stage > part ? stage : part;
}

/* Launch contract: grid (blk0[4]), block 32 ks (ks = mmv_ks(in / 256)),
 * dynamic shared memory mmvq_smem_bytes(NP, ks, T, in), T <= 2 NP. Warp w
 * stages its super-blocks [w nsb / ks, (w + 1) nsb / ks) mmvq_chunk at a
 * time, then multiplies them one by one; PF = 1 loads the next super-block's
 * weights while one is multiplied (same bits). With an input norm the
 * products use x * nw and the row's value is multiplied by 1 / rms at the
 * end (the sum of squares from the staging: the warps' parts in warp
 * order). */
template <int NP, int PF>
__global__ void __launch_bounds__(32 * MMV_KS_MAX, NP == 1 ? 2 : 1) k_mmvq(mmv_args a) {
    extern __shared__ __align__(16) uint8_t mq_sh[];
    const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3, wp = threadIdx.x >> 5;
    const int ks = blockDim.x >> 5;
    __shared__ float ssw[MMV_KS_MAX][MMV_MAX_T]; /* the warps' sums of x^2 per token */
    const int wi = cuda_blk_owner(a.blk0, (int)blockIdx.x);
    const int64_t tile0 = (int64_t)((int)blockIdx.x - a.blk0[wi]) * (a.swiglu ? 16 : 32);
    const int nsb = (int)(a.in / 256);
    const int sb0 = wp * nsb / ks, sb1 = (wp + 1) * nsb / ks;
    const uint8_t *rows[2][2];
    int64_t rbase[2], nrow[2];
#pragma unroll
    for (int tl = 0; tl < 2; tl++) {
        const int w = a.swiglu ? tl : wi;
        rbase[tl] = a.swiglu ? tile0 : tile0 + 16 * tl;
        nrow[tl] = a.n_out[w];
#pragma unroll
        for (int r = 0; r < 2; r++) {
            const int64_t row = rbase[tl] + g + 8 * r;
            rows[tl][r] = a.W[w] + (row < nrow[tl] ? row : nrow[tl] - 1) * (int64_t)a.row_bytes;
        }
    }
    /* The weights are constants of the step: the first super-block's loads
     * go out before the wait for the previous kernel (which, under PDL,
     * they overlap); nothing else is read before it. */
    mmvq_raw cur[2], nxt[2];
    if (sb0 < sb1)
#pragma unroll
        for (int tl = 0; tl < 2; tl++) cur[tl].load(rows[tl][0], rows[tl][1], sb0, t);
    pdl_start();
    if (lane < a.T) ssw[wp][lane] = 0.0f;
    const int ch = mmvq_chunk(a.T, nsb, ks);
    uint8_t *stg = mq_sh + (size_t)wp * ch * a.T * MQ_TOK_B;
    float acc[2][NP][4];
#pragma unroll
    for (int tl = 0; tl < 2; tl++)
#pragma unroll
        for (int p = 0; p < NP; p++) acc[tl][p][0] = acc[tl][p][1] = acc[tl][p][2] = acc[tl][p][3] = 0.0f;
#pragma unroll 1
    for (int c0 = sb0; c0 < sb1; c0 += ch) {
        const int n = sb1 - c0 < ch ? sb1 - c0 : ch;
        mmvq_stage(a.x, a.in, a.T, c0, n, lane, stg, a.nw, ssw[wp]);
#pragma unroll 1
        for (int i = 0; i < n; i++) {
            const int sb = c0 + i;
            if (PF) {
                if (sb + 1 < sb1)
#pragma unroll
                    for (int tl = 0; tl < 2; tl++) nxt[tl].load(rows[tl][0], rows[tl][1], sb + 1, t);
            } else if (sb > sb0) {
#pragma unroll
                for (int tl = 0; tl < 2; tl++) cur[tl].load(rows[tl][0], rows[tl][1], sb, t);
            }
            mmvq_sb<NP>(cur, acc, stg + (size_t)i * a.T * MQ_TOK_B, a.T, g, t);
            if (PF) cur[0] = nxt[0], cur[1] = nxt[1];
        }
    }
    __syncthreads(); /* every warp is done with its area: reused for the partial columns */
    float *part = (float *)mq_sh; /* [ks][2][NP][16][8] */
#define MQ_PART(k, tl, p, row, n) part[((((k) * 2 + (tl)) * NP + (p)) * 16 + (row)) * 8 + (n)]
#pragma unroll
    for (int tl = 0; tl < 2; tl++)
#pragma unroll
        for (int p = 0; p < NP; p++)
#pragma unroll
            for (int r = 0; r < 2; r++) {
                MQ_PART(wp, tl, p, g + 8 * r, 2 * t) = acc[tl][p][2 * r];
                MQ_PART(wp, tl, p, g + 8 * r, 2 * t + 1) = acc[tl][p][2 * r + 1];
            }
    __syncthreads();
    /* one (tile, pair, row, token of the pair) per thread: the columns added
     * in warp order, then the limbs, then the norm's 1 / rms */
    auto col = [&](int tl, int p, int row, int n) {
        float v = MQ_PART(0, tl, p, row, n);
        for (int k = 1; k < ks; k++) v = __fadd_rn(v, MQ_PART(k, tl, p, row, n));
        return v;
    };
    auto value = [&](int tl, int p, int row, int tk) {
        const int n = 3 * tk;
        return __fadd_rn(__fadd_rn(__fmul_rn(65536.0f, col(tl, p, row, n)), __fmul_rn(256.0f, col(tl, p, row, n + 1))),
                         col(tl, p, row, n + 2));
    };
    const int n_res = (a.swiglu ? 1 : 2) * NP * 32;
    for (int i = threadIdx.x; i < n_res; i += blockDim.x) {
        const int tk = i & 1, row = (i >> 1) & 15, p = (i >> 5) % NP, tl = (i >> 5) / NP;
        const int tok = 2 * p + tk;
        const int64_t orow = rbase[tl] + row;
        if (tok >= a.T || orow >= nrow[tl]) continue;
        float inv = 1.0f;
        if (a.nw) {
            float ss = ssw[0][tok];
            for (int k = 1; k < ks; k++) ss = __fadd_rn(ss, ssw[k][tok]);
            inv = 1.0f / sqrtf(ss / (float)a.in + a.eps);
        }
        const float v = __fmul_rn(value(tl, p, row, tk), inv);
        if (a.swiglu) {
            a.y[0][(int64_t)tok * nrow[0] + orow] = silu_f(v) * __fmul_rn(value(1, p, row, tk), inv);
        } else {
            float *yp = a.y[wi] + (int64_t)tok * nrow[tl] + orow;
            *yp = a.accumulate ? *yp + v : v;
        }
    }
#undef MQ_PART
}

/* PF of the production launches (k_mmvq) */
#ifndef MQ_PF
#define MQ_PF 0
#endif

template <int NP, int PF>
static cudaError_t mmvq_launch_np(const mmv_args &a, cudaStream_t s, int ks) {
    /* the opt-in above 48 KiB, once, for any row length: a warp stages at
     * most MQ_STAGE_B bytes (T MQ_TOK_B <= MQ_STAGE_B up to MMV_MAX_T) */
    static_assert(MMV_MAX_T * MQ_TOK_B <= MQ_STAGE_B, "mmvq: one super-block of staging fits");
    const size_t stage = (size_t)MMV_KS_MAX * MQ_STAGE_B, part = (size_t)MMV_KS_MAX * 2 * NP * 16 * 8 * 4;
    cudaError_t e = cuda_smem_limit<k_mmvq<NP, PF>>((int)(stage > part ? stage : part));
    if (e != cudaSuccess) return e;
    cuda_launch(k_mmvq<NP, PF>, (unsigned)a.blk0[4], 32u * (unsigned)ks, mmvq_smem_bytes(NP, ks, a.T, a.in), s, a);
    return cudaSuccess;
}

/* The launch for T = 1..15 (blk0 from mmv_blocks(a, n)); ks as mmv_launch. */
template <int PF = MQ_PF>
static inline cudaError_t mmvq_launch(const mmv_args &a, cudaStream_t s, int ks = 0) {
    if (!ks) ks = mmv_ks((int)(a.in / 256));
    if (a.T <= 2) return mmvq_launch_np<1, PF>(a, s, ks);
    if (a.T <= 4) return mmvq_launch_np<2, PF>(a, s, ks);
    if (a.T <= 8) return mmvq_launch_np<4, PF>(a, s, ks);
    return mmvq_launch_np<8, PF>(a, s, ks);
}

#endif
