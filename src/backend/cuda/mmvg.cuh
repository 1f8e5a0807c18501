/* The Q4_K and Q6_K tensor-core matvecs of mmv.cuh and mmv6.cuh for many
 * tokens (T >= 16: prefill), with the same bits per row and token.
 *
 * k_mmv stages every token's activations in each warp and walks a row's
 * super-blocks with ks warps of one 32-row tile pair; at T = 15 it is
 * bound by that staging. Here k_mmvg_prep first stages every (token,
 * super-block) once into the workspace (mmv_stage / mmv6_stage of one
 * token: the same fragments and 1 / s; with the input norm, block_inv_rms's
 * factor), super-block major, so that a tile's tokens of one super-block
 * are one contiguous run. Then a block of W warps takes a tile of up to
 * 4 NG consecutive tokens and W tile pairs (32 W rows; swiglu: 16 W gate
 * rows and the same up rows): per super-block it copies the run into
 * shared memory with cp.async (double-buffered: the copy of super-block
 * c + 1 flies while c is multiplied; one barrier per super-block), and
 * every warp multiplies its tiles with mmv_sb_q4k, each token in its own
 * MMA column. (Measured first with the staging done in the block itself,
 * warp w staging tokens w, w + W, ...: 53 TFLOP/s on the 9b ffn gate/up,
 * slower than the GEMM; each staging is a chain behind an L2 load.) The accumulation replays k_mmv's: mmv_ks(row length) chains over
 * the same super-block ranges, added in chain order, then y (+)= the sum;
 * so a row of a
 * token computed here is bit-identical to the same row at T = 1 (gate
 * kernels: matmul-inv across the two kernels).
 *
 * k_mmv6g is the same for Q6_K (mmv6_sb, one call per 16-row tile; no
 * swiglu: k_mmv6 has none).
 *
 * Tile-major Q4_K and Q6_K weights (common.cuh): k_mmvg<.., TM = true> and
 * k_mmv6g<.., TM = true> load the same blocks from their addresses there
 * (the same bits). A tile-major Q6_K row at T < 16 takes the int8 matvec
 * (matmul.cu), whose bits differ from mmv6's and so from these.
 *
 * Grid: x = token tiles (consecutive blocks share weight rows: the rows
 * come from DRAM once and then from L2), y = row blocks (mmv_blocks with MMVG_W warps a block). */
#ifndef MEMRA_CUDA_MMVG_CUH
#define MEMRA_CUDA_MMVG_CUH

#include "backend/cuda/mmv.cuh"
#include "backend/cuda/mmv6.cuh"

#define MMVG_W 4  /* warps per block: tile pairs sharing a token tile */
#define MMVG_NG 4 /* token groups of 4: 16 tokens per block */
#define MMVG_PREP_W 8

/* Words of one (token, super-block) staging: mmv (Q4_K), mmv6 (Q6_K: 2 MMV6_TS halves). */
template <int TD> __host__ __device__ constexpr int mmvg_tok_w() { return TD == MEMRA_TYPE_Q6_K ? MMV6_TS : MMV_TOK_W; }
static inline int mmvg_tok_words(uint32_t td) {
    return td == MEMRA_TYPE_Q6_K ? mmvg_tok_w<MEMRA_TYPE_Q6_K>() : mmvg_tok_w<MEMRA_TYPE_Q4_K>();
}

/* The staged activations of NR rows of `in` elements for type td: [nsb][NR]
 * stagings from xs, then [nsb][NR] 1 / s (mmvg_xsinv); mmvg_ws_bytes in all. */
static inline size_t mmvg_ws_bytes(uint32_t td, int64_t NR, int64_t in) {
    return (size_t)(in / 256) * (size_t)NR * ((size_t)mmvg_tok_words(td) * 4 + 4);
}
static inline float *mmvg_xsinv(uint32_t *xs, uint32_t td, int64_t NR, int64_t in) {
    return (float *)(xs + (size_t)(in / 256) * (size_t)NR * (size_t)mmvg_tok_words(td));
}

/* Warp w of NW stages super-blocks w, w + NW, .. of the row x (`in`
 * elements; with the input norm nw and the row's factor *ninv) as row
 * `row` of the [nsb][NR] layout above: mmv_stage / mmv6_stage of one token. */
template <int TD, int NW>
__device__ __forceinline__ void mmvg_stage_row(const float *__restrict__ x, int64_t in, const float *__restrict__ nw,
                                               const float *ninv, int64_t NR, int64_t row, uint32_t *__restrict__ xs,
                                               float *__restrict__ xsinv) {
    const int lane = threadIdx.x & 31;
    for (int c = threadIdx.x >> 5; c < (int)(in / 256); c += NW) {
        uint32_t *d = xs + ((int64_t)c * NR + row) * mmvg_tok_w<TD>();
        float si[1];
        if constexpr (TD == MEMRA_TYPE_Q6_K)
            mmv6_stage<1>(x, in, 1, c, lane, nw, ninv, (__half *)d, si);
        else
            mmv_stage<1>(x, in, 1, c, lane, d, si, nullptr, nw, ninv);
        if (lane == 0) xsinv[(int64_t)c * NR + row] = si[0];
    }
}

/* Launch contract: grid (T), block 32 MMVG_PREP_W. Token t's super-block c
 * staging to xs + (c T + t) mmvg_tok_w words, its 1 / s to xsinv[c T + t]. */
template <int TD>
__global__ void __launch_bounds__(32 * MMVG_PREP_W) k_mmvg_prep(const float *__restrict__ x, int64_t in, int T,
                                                                const float *__restrict__ nw, float eps,
                                                                uint32_t *__restrict__ xs, float *__restrict__ xsinv) {
    __shared__ float ninv[1];
    pdl_start();
    const int t = blockIdx.x;
    const float *xt = x + (int64_t)t * in;
    if (nw) block_inv_rms(xt, in, 1, eps, ninv);
    mmvg_stage_row<TD, MMVG_PREP_W>(xt, in, nw, nw ? ninv : nullptr, T, t, xs, xsinv);
}

/* The super-block loop of k_mmvg / k_mmv6g (and moe.cu's grouped kernels):
 * ks chains over k_mmv's ranges (k nsb / ks ..), added in chain order into
 * tot. Super-block c + 1's staging copies are issued right after the
 * barrier that ends c's, so they fly while c is multiplied; per super-block:
 * pre(c) (the warp's weight loads into registers), the wait and the
 * barrier, then mul(c, stg, sinv, acc). Entry i's staging of super-block c
 * is row ro[i] (t0 + i without ro) of the prep's [nsb][NR] rows. (Weight
 * bytes through a cp.async ring in shared memory instead of registers:
 * slower on the H200, 9b q4_k_m prefill 512 3,939 against 4,677 tok/s, MoE
 * 827 against 706 us a layer; not kept.) */
template <int TD, int NG, int W, class Pre, class Mul>
__device__ __forceinline__ void mmvg_loop(int nsb, int ks, int64_t NR, int t0, const int32_t *ro, int cnt,
                                          const uint32_t *__restrict__ xs, const float *__restrict__ xsinv,
                                          uint32_t (*stg)[4 * NG * mmvg_tok_w<TD>()], float (&tot)[2][NG][2],
                                          Pre pre, Mul mul) {
    constexpr int TW = mmvg_tok_w<TD>(), TQ = TW / 4; /* 16-byte chunks of a staging */
    const int tig = threadIdx.x & 3;
    auto row = [&](int i) { return (int64_t)(ro ? ro[i] : t0 + i); };
    auto copy = [&](int c) {
        uint4 *dst = (uint4 *)stg[c & 1];
        for (int j = threadIdx.x; j < cnt * TQ; j += 32 * W) {
            const int i = j / TQ;
            mmv_cp16(dst + j, (const uint4 *)(xs + ((int64_t)c * NR + row(i)) * TW) + (j - i * TQ));
        }
        mmv_cp_commit();
    };
    copy(0);
    int c = 0;
#pragma unroll 1
    for (int k = 0; k < ks; k++) {
        float acc[2][NG][2];
#pragma unroll
        for (int tl = 0; tl < 2; tl++)
#pragma unroll
            for (int g = 0; g < NG; g++) acc[tl][g][0] = acc[tl][g][1] = 0.0f;
#pragma unroll 1
        for (; c < (k + 1) * nsb / ks; c++) {
            pre(c);
            float sinv[NG];
#pragma unroll
            for (int g = 0; g < NG; g++)
                sinv[g] = 4 * g + tig < cnt ? __ldg(xsinv + (int64_t)c * NR + row(4 * g + tig)) : 0.0f;
            mmv_cp_wait<0>();
            __syncthreads(); /* every copy of c landed; every warp is done with c - 1's buffers */
            if (c + 1 < nsb) copy(c + 1);
            mul(c, stg[c & 1], sinv, acc);
        }
#pragma unroll
        for (int tl = 0; tl < 2; tl++)
#pragma unroll
            for (int g = 0; g < NG; g++)
#pragma unroll
                for (int r = 0; r < 2; r++) tot[tl][g][r] = k == 0 ? acc[tl][g][r] : __fadd_rn(tot[tl][g][r], acc[tl][g][r]);
    }
}

/* mmvg_loop over a warp's two Q4_K 16-row tiles, weights through
 * registers (rows[tile][r]: the warp's rows gid and gid + 8 of each tile,
 * at their super-block 0; TM: tile-major, super-blocks Q4K_TM_SB apart;
 * live: whether the warp has rows, uniform over the warp). */
template <int NG, int W, bool TM = false>
__device__ __forceinline__ void mmvg_q4k_pair(int nsb, int ks, int64_t NR, int t0, const int32_t *ro, int cnt,
                                              const uint32_t *__restrict__ xs, const float *__restrict__ xsinv,
                                              uint32_t (*stg)[4 * NG * MMV_TOK_W], const uint8_t *const (&rows)[2][2],
                                              bool live, float (&tot)[2][NG][2]) {
    const int gid = (threadIdx.x & 31) >> 2, tig = threadIdx.x & 3;
    mmv_raw cur[2];
    mmvg_loop<MEMRA_TYPE_Q4_K, NG, W>(
        nsb, ks, NR, t0, ro, cnt, xs, xsinv, stg, tot,
        [&](int c) {
            if (live)
#pragma unroll
                for (int tl = 0; tl < 2; tl++) cur[tl].load(rows[tl][0], rows[tl][1], c, tig, q4k_sb_stride(TM));
        },
        [&](int c, const uint32_t *sg, const float *sinv, float (&acc)[2][NG][2]) {
            if (live) mmv_sb_q4k<NG>(cur, acc, sg, sinv, cnt, gid, tig);
        });
}

/* The same for two Q6_K 16-row tiles (mmv6_sb per tile). TM: tile-major,
 * super-blocks Q6K_TM_SB apart, a block's alignment from its address. */
template <int NG, int W, bool TM = false>
__device__ __forceinline__ void mmvg_q6k_pair(int nsb, int ks, int64_t NR, int t0, const int32_t *ro, int cnt,
                                              const uint32_t *__restrict__ xs, const float *__restrict__ xsinv,
                                              uint32_t (*stg)[4 * NG * MMV6_TS], const uint8_t *const (&rows)[2][2],
                                              bool live, float (&tot)[2][NG][2]) {
    const int gid = (threadIdx.x & 31) >> 2, tig = threadIdx.x & 3;
    mmv6_raw cur[2][2];
    mmvg_loop<MEMRA_TYPE_Q6_K, NG, W>(
        nsb, ks, NR, t0, ro, cnt, xs, xsinv, stg, tot,
        [&](int c) {
            if (live)
#pragma unroll
                for (int tl = 0; tl < 2; tl++)
#pragma unroll
                    for (int r = 0; r < 2; r++) {
                        const uint8_t *b = rows[tl][r] + (int64_t)c * tm_sb_stride(MEMRA_TYPE_Q6_K, TM);
                        mmv6_load(cur[tl][r], b, tig, TM ? ((uintptr_t)b & 2) == 0 : (c & 1) == 0);
                    }
        },
        [&](int c, const uint32_t *sg, const float *sinv, float (&acc)[2][NG][2]) {
            if (live)
#pragma unroll
                for (int tl = 0; tl < 2; tl++) mmv6_sb<NG>(cur[tl], acc[tl], (const __half *)sg, sinv, cnt, gid, tig);
        });
}

/* Launch contract: grid (ceil(T / (4 NG)), blk0[4] from mmv_blocks(.., MMVG_W)), block
 * 32 W; xs, xsinv from k_mmvg_prep<Q4_K> of a.x (and a.nw); mmv.cuh's
 * contract otherwise (in % 256 == 0, aligned rows). TM: the weights are
 * tile-major (a.tm). */
template <int NG, int W, bool TM = false>
__global__ void __launch_bounds__(32 * W, 2) k_mmvg(mmv_args a, const uint32_t *__restrict__ xs,
                                                   const float *__restrict__ xsinv) {
    constexpr int G = 4 * NG;
    __shared__ __align__(16) uint32_t stg[2][G * MMV_TOK_W];
    pdl_start();
    const int lane = threadIdx.x & 31, gid = lane >> 2, tig = lane & 3, wp = threadIdx.x >> 5;
    const int t0 = (int)blockIdx.x * G, cnt = a.T - t0 < G ? a.T - t0 : G;
    const int wi = cuda_blk_owner(a.blk0, (int)blockIdx.y);
    const int per = a.swiglu ? 16 : 32;
    const int64_t tile0 = ((int64_t)((int)blockIdx.y - a.blk0[wi]) * W + wp) * per;
    int64_t rbase[2], nrow[2];
#pragma unroll
    for (int tl = 0; tl < 2; tl++) {
        rbase[tl] = a.swiglu ? tile0 : tile0 + 16 * tl;
        nrow[tl] = a.n_out[a.swiglu ? tl : wi];
    }
    const bool live = rbase[0] < nrow[0]; /* uniform over the warp; dead warps still copy */
    const uint8_t *rows[2][2];
#pragma unroll
    for (int tl = 0; tl < 2; tl++)
#pragma unroll
        for (int r = 0; r < 2; r++) {
            const int64_t row = rbase[tl] + gid + 8 * r;
            rows[tl][r] = a.W[a.swiglu ? tl : wi] + q4k_row_off(a.row_bytes, row < nrow[tl] ? row : nrow[tl] - 1, TM);
        }
    float tot[2][NG][2];
    const int nsb = (int)(a.in / 256);
    mmvg_q4k_pair<NG, W, TM>(nsb, mmv_ks(nsb), a.T, t0, nullptr, cnt, xs, xsinv, stg, rows, live, tot);
    if (!live) return;
#pragma unroll
    for (int g = 0; g < NG; g++) {
        const int tok = 4 * g + tig; /* C columns 2 tig, 2 tig + 1 of group g */
        if (tok >= cnt) continue;
#pragma unroll
        for (int r = 0; r < 2; r++) {
            const int64_t row = rbase[0] + gid + 8 * r;
            if (a.swiglu) {
                if (row < nrow[0]) a.y[0][(int64_t)(t0 + tok) * nrow[0] + row] = silu_f(tot[0][g][r]) * tot[1][g][r];
                continue;
            }
#pragma unroll
            for (int tl = 0; tl < 2; tl++) {
                const int64_t orow = rbase[tl] + gid + 8 * r;
                if (orow >= nrow[tl]) continue;
                float *yp = a.y[wi] + (int64_t)(t0 + tok) * nrow[tl] + orow;
                *yp = a.accumulate ? *yp + tot[tl][g][r] : tot[tl][g][r];
            }
        }
    }
}

/* Launch contract: grid (ceil(T / (4 NG)), sum of ceil(n_out[i] / (32 W))),
 * block 32 W; xs, xsinv from k_mmvg_prep<Q6_K>; mmv6.cuh's contract
 * otherwise (in % 512 == 0), swiglu = 0. Warp: two 16-row tiles. TM: the
 * weights are tile-major (a.tm). */
template <int NG, int W, bool TM = false>
__global__ void __launch_bounds__(32 * W, 2) k_mmv6g(mmv_args a, const uint32_t *__restrict__ xs,
                                                    const float *__restrict__ xsinv) {
    constexpr int G = 4 * NG;
    __shared__ __align__(16) uint32_t stg[2][G * MMV6_TS];
    pdl_start();
    const int lane = threadIdx.x & 31, gid = lane >> 2, tig = lane & 3, wp = threadIdx.x >> 5;
    const int t0 = (int)blockIdx.x * G, cnt = a.T - t0 < G ? a.T - t0 : G;
    const int wi = cuda_blk_owner(a.blk0, (int)blockIdx.y);
    const int64_t tile0 = ((int64_t)((int)blockIdx.y - a.blk0[wi]) * W + wp) * 32, nrow = a.n_out[wi];
    const uint8_t *rows[2][2];
#pragma unroll
    for (int tl = 0; tl < 2; tl++)
#pragma unroll
        for (int r = 0; r < 2; r++) {
            const int64_t row = tile0 + 16 * tl + gid + 8 * r;
            rows[tl][r] = a.W[wi] + tm_row_off(MEMRA_TYPE_Q6_K, a.row_bytes, row < nrow ? row : nrow - 1, TM);
        }
    const bool live = tile0 < nrow;
    float tot[2][NG][2];
    const int nsb = (int)(a.in / 256);
    mmvg_q6k_pair<NG, W, TM>(nsb, mmv_ks(nsb), a.T, t0, nullptr, cnt, xs, xsinv, stg, rows, live, tot);
    if (!live) return;
#pragma unroll
    for (int g = 0; g < NG; g++) {
        const int tok = 4 * g + tig;
        if (tok >= cnt) continue;
#pragma unroll
        for (int tl = 0; tl < 2; tl++)
#pragma unroll
            for (int r = 0; r < 2; r++) {
                const int64_t orow = tile0 + 16 * tl + gid + 8 * r;
                if (orow >= nrow) continue;
                float *yp = a.y[wi] + (int64_t)(t0 + tok) * nrow + orow;
                *yp = a.accumulate ? *yp + tot[tl][g][r] : tot[tl][g][r];
            }
    }
}

/* The prep launch, then the multiply: path 1 = Q4_K (k_mmvg), 3 = Q6_K
 * (k_mmv6g). ws: mmvg_ws_bytes of the path's type, T rows. */
static inline void mmvg_launch(mmv_args a, int n, int path, void *ws, cudaStream_t s) {
    constexpr int G = 4 * MMVG_NG;
    const uint32_t td = path == 3 ? MEMRA_TYPE_Q6_K : MEMRA_TYPE_Q4_K;
    uint32_t *xs = (uint32_t *)ws;
    float *xsinv = mmvg_xsinv(xs, td, a.T, a.in);
    mmv_blocks(&a, n, MMVG_W);
    const dim3 grid((unsigned)((a.T + G - 1) / G), (unsigned)a.blk0[4]);
    using kfn = void (*)(mmv_args, const uint32_t *, const float *);
    kfn k;
    if (path == 1) {
        cuda_launch(k_mmvg_prep<MEMRA_TYPE_Q4_K>, (unsigned)a.T, 32u * MMVG_PREP_W, 0, s, a.x, a.in, a.T, a.nw, a.eps,
                    xs, xsinv);
        k = a.tm ? k_mmvg<MMVG_NG, MMVG_W, true> : k_mmvg<MMVG_NG, MMVG_W>;
    } else {
        cuda_launch(k_mmvg_prep<MEMRA_TYPE_Q6_K>, (unsigned)a.T, 32u * MMVG_PREP_W, 0, s, a.x, a.in, a.T, a.nw, a.eps,
                    xs, xsinv);
        k = a.tm ? k_mmv6g<MMVG_NG, MMVG_W, true> : k_mmv6g<MMVG_NG, MMVG_W>;
    }
    cuda_launch(k, grid, 32u * MMVG_W, 0, s, a, (const uint32_t *)xs, (const float *)xsinv);
}

#endif
