/* Lab (not wired into the backend): what holds the Q4_K int8 decode
 * matvec (mmvq.cuh) below the read ceiling, and would a tile-major weight
 * layout or a shared-memory ring lift it?
 *
 * Tile-major: a reordering of whole blocks done once at upload; the block
 * of row 16 tau + i, super-block sb moves to ((tau nsb + sb) 16 + i) bb (bb
 * = 144 for Q4_K), so each 16-row tile's super-block is one 2,304-byte run.
 * Types, bytes and results are unchanged. stream_lab's k_pat reads
 * k_mmvq's bytes without arithmetic at 62-79% of copy in the file's layout
 * and 81-95% tile-major (bench/results/2026-12-03f-h200.md).
 *
 * Variants (argument 3 "q6_k": production's Q6_K paths and 15-17), each run on
 * production's arithmetic (k_mmvq_prep's planes, mmvq_sb at TL = 1,
 * mmvq_finish), so every output must be memcmp-equal to the first one's:
 *  0  the production pair (mmvq_launch) on the file's layout;
 *  1  k_tm<0>: its register loads at tile-major addresses;
 *  2  k_tm<2>: a per-warp ring of 2 super-blocks in shared memory, each
 *     filled by one 2,304-byte cp.async.bulk (mbarrier per slot);
 *  3  mmv6 (Q6_K's default decode kernel; its own bits);
 *  4-9 k_cr<D, TMW>: a per-warp ring of D = 2, 3, 4 super-blocks filled by
 *     the lanes' 16-byte cp.async, from the file's layout (4-6) or the
 *     tile-major copy (7-9);
 *  10 the production matvec alone, 11 the prep alone (SWEEP=1);
 *  12, 13 k_sk<D>: the tile-major cp.async ring D = 2, 3 as one balanced
 *     stream per warp over a grid that fits at once (stream-K). Run on
 *     2026-12-03h: memcmp-equal, but slower everywhere: {4096, 12288} 20.5
 *     us (33% of copy) against the ring's 13.8 (49%) and production's 16.4;
 *     the 9B head 269 us (50%) against 166 (82%); fewer blocks a SM
 *     (SK_PER_SM = 1, 2, 4) slower still. One stream per warp is not what
 *     hides the fixed cost.
 *  14 production's tile-major pair: mmvq_launch with a.tm = 1 on the
 *     tile-major copy (k_mmvq_tm, mmvq.cuh: k_cr<D, 1> ported for every T
 *     and TL, D = mmvq_tm_d); its bits must be the first variant's.
 *  15-17 (q6_k) k_cr6<D, 0>: Q6_K tile-major in a field-major form (tm6_repack)
 *     through a per-warp cp.async ring of D = 2, 3, 4 slots, with the int8
 *     Q6_K arithmetic of variant 0 (k_mmvq<Q6_K>): memcmp-equal to it.
 *  18-20 (q6_k) k_cr6<D, 1>: the same ring on Q6_K tile-major with its
 *     210-byte blocks intact (lab_tm_repack, as common.cuh stores Q4_K).
 *     Run 2026-12-06g (H100): both forms 25-36% under k_mmv6 at D = 2, the
 *     field-major one 3-9% under the intact one; production took the
 *     intact form (k_mmvq_tm<.., Q6_K>, bench/results/2026-12-06g-h100-h200.md).
 * Each pair is prep + matvec (the input norm fused), PDL, 64 per CUDA graph
 * over rotating weight copies (> L2), % of copy. Checked: every variant
 * against the CPU (rmsnorm, then the rows: <= 1e-5 of max) and memcmp.
 * KS=n runs production's kernel and the rings at another K split (warps per
 * tile; other bits than mmv_ks, the same in every variant).
 *
 * Results (H200, bench/results/2026-12-03g-h200.md): the tile-major cp.async
 * ring D = 2 is the best variant, 12-17% under the production pair on three
 * of the four 9B / 27B decode shapes (47-55% of copy); every pair has a
 * fixed ~6 us, after which the ring streams at 85% of copy.
 *
 *   BUILD=build-lab REBUILD=1 bash bench/kernels/lab.sh mmvq_tm_lab [in n_out [q6_k]] */
#include <math.h>

#include <vector>

#include "backend/cuda/mmv6.cuh"
#include "backend/cuda/mmvq.cuh"
#include "lab.cuh"

/* mmvq_raw's fields from a super-block at p (global or shared: generic loads) */
__device__ __forceinline__ void tm_load_sh(mmvq_raw &w, const uint8_t *p, int g, int t) {
#pragma unroll
    for (int r = 0; r < 2; r++) {
        const uint8_t *b = p + (g + 8 * r) * 144;
        w.head[r] = *(const uint4 *)b;
#pragma unroll
        for (int k = 0; k < 4; k++) w.qs[r][k] = *(const uint2 *)(b + 16 + 32 * k + 8 * t);
    }
}

/* Launch contract: grid n_out / 16, block 32 ks (ks <= 16; mmv_ks(nsb) in
 * production), dynamic shared memory tm_smem(D, ks); a.T = 1, a.y[0],
 * a.n_out[0] as production. Warp w takes super-blocks [w nsb / ks,
 * (w + 1) nsb / ks) of tile blockIdx.x, as k_mmvq at TL = 1. */
static size_t tm_smem(int d, int ks) { return (size_t)ks * d * (Q4K_TM_SB + 16) + mmvq_smem_bytes(1, 1, ks); }

template <int D>
__global__ void __launch_bounds__(512, 1)
    k_tm(mmv_args a, const uint8_t *__restrict__ tmw, const uint8_t *__restrict__ buf) {
    extern __shared__ __align__(128) uint8_t tm_sh[];
    const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3, wp = threadIdx.x >> 5, ks = blockDim.x >> 5;
    const int nsb = (int)(a.in / 256), sb0 = wp * nsb / ks, sb1 = (wp + 1) * nsb / ks;
    const uint8_t *tile = tmw + (size_t)blockIdx.x * nsb * Q4K_TM_SB;
    /* per warp: D slots, then D mbarriers 16 bytes apart (slots stay 16-byte aligned for the bulk copies) */
    float *part = (float *)(tm_sh + (size_t)ks * D * (Q4K_TM_SB + 16));
    uint8_t *ring = tm_sh + (size_t)wp * D * (Q4K_TM_SB + 16);
    const uint32_t bar0 = (uint32_t)__cvta_generic_to_shared(ring + D * Q4K_TM_SB);
    constexpr int DD = D > 0 ? D : 1;
    /* lane 0: super-block sb into slot (sb - sb0) % D */
    auto issue = [&](int sb) {
        const int s = (sb - sb0) % DD;
        const uint32_t b = bar0 + 16 * s, dst = (uint32_t)__cvta_generic_to_shared(ring + s * Q4K_TM_SB);
        asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(b), "r"(Q4K_TM_SB) : "memory");
        asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
                     ::"r"(dst), "l"(tile + (size_t)sb * Q4K_TM_SB), "r"(Q4K_TM_SB), "r"(b)
                     : "memory");
    };
    mmvq_raw cur[1];
    if constexpr (D > 0) {
        if (lane == 0) {
            for (int s = 0; s < D; s++)
                asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(bar0 + 16 * s) : "memory");
            asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
            for (int sb = sb0; sb < sb1 && sb < sb0 + D - 1; sb++) issue(sb);
        }
        __syncwarp();
    } else if (sb0 < sb1) {
        tm_load_sh(cur[0], tile + (size_t)sb0 * Q4K_TM_SB, g, t);
    }
    pdl_start();
    const float *S = (const float *)(buf + (size_t)nsb * MQ_SB_B), *sinv = S + (size_t)nsb * 8;
    float acc[1][1][4] = {{{0.0f, 0.0f, 0.0f, 0.0f}}};
#pragma unroll 1
    for (int sb = sb0; sb < sb1; sb++) {
        if constexpr (D > 0) {
            const int it = sb - sb0, s = it % DD;
            /* sb + D - 1 goes to the slot read at it - 1: those generic reads before the async write */
            asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
            __syncwarp();
            if (lane == 0 && sb + D - 1 < sb1) issue(sb + D - 1);
            const uint32_t b = bar0 + 16 * s, par = (uint32_t)((it / DD) & 1);
            mbar_wait(b, par);
            tm_load_sh(cur[0], ring + s * Q4K_TM_SB, g, t);
        } else if (sb > sb0) {
            tm_load_sh(cur[0], tile + (size_t)sb * Q4K_TM_SB, g, t);
        }
        const mmvq_gsrc src{buf, S, sinv, (size_t)nsb, (size_t)sb};
        mmvq_sb_raw<1, mmvq_gsrc, 1>(cur, acc, src, 1, g, t);
    }
    pdl_trigger();
    const int64_t rbase[1] = {(int64_t)blockIdx.x * 16}, nrow[1] = {a.n_out[0]};
    mmvq_finish<1, 1>(acc, part, a, 0, rbase, nrow, nullptr);
}

/* The per-warp cp.async ring of k_cr, k_cr6 and k_sk over n items is
 * mmvq.cuh's (mmvq_ring_start before the wait for the prep, then
 * mmvq_ring_next); cr_next also loads item i's fragments. */
template <int D, class F, class I>
__device__ __forceinline__ void cr_next(F issue, I i, I n, const uint8_t *ring, mmvq_raw &cur, int g, int t) {
    mmvq_ring_next<D>(issue, i, n);
    tm_load_sh(cur, ring + (i % D) * Q4K_TM_SB, g, t);
}

/* k_cr<D, TMW>: a per-warp ring of D super-blocks in shared memory filled
 * by the lanes' own 16-byte cp.async (no TMA, no registers held): each
 * slot is one tile's super-block, rows 144 bytes apart, copied from the
 * file's layout (TMW = 0: the 16 rows' 144-byte blocks, 9 chunks each) or
 * from the tile-major copy (TMW = 1: one 2,304-byte run). D - 1
 * super-blocks are in flight while one is multiplied. Launch contract as
 * k_tm; W is the file's matrix or the tile-major copy. */
static size_t cr_smem(int d, int ks) { return (size_t)ks * d * Q4K_TM_SB + mmvq_smem_bytes(1, 1, ks); }

template <int D, int TMW>
__global__ void __launch_bounds__(512, 1)
    k_cr(mmv_args a, const uint8_t *__restrict__ W, const uint8_t *__restrict__ buf) {
    extern __shared__ __align__(128) uint8_t cr_sh[];
    const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3, wp = threadIdx.x >> 5, ks = blockDim.x >> 5;
    const int nsb = (int)(a.in / 256), sb0 = wp * nsb / ks, sb1 = (wp + 1) * nsb / ks;
    float *part = (float *)(cr_sh + (size_t)ks * D * Q4K_TM_SB);
    uint8_t *ring = cr_sh + (size_t)wp * D * Q4K_TM_SB;
    const uint8_t *tile = W + (size_t)blockIdx.x * nsb * Q4K_TM_SB;  /* TMW */
    const uint8_t *rows = W + (size_t)blockIdx.x * 16 * a.row_bytes; /* file */
    /* every lane: its chunks of super-block sb0 + i into slot i % D */
    auto issue = [&](int i) {
        const int sb = sb0 + i;
        uint8_t *slot = ring + (i % D) * Q4K_TM_SB;
        for (int c = lane; c < Q4K_TM_SB / 16; c += 32) {
            const uint8_t *src = TMW ? tile + (size_t)sb * Q4K_TM_SB + 16 * c
                                     : rows + (size_t)(c / 9) * a.row_bytes + (size_t)sb * 144 + 16 * (c % 9);
            const uint32_t dst = (uint32_t)__cvta_generic_to_shared(slot + 16 * c);
            asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(dst), "l"(src) : "memory");
        }
    };
    mmvq_ring_start<D>(issue, sb1 - sb0);
    pdl_start();
    const float *S = (const float *)(buf + (size_t)nsb * MQ_SB_B), *sinv = S + (size_t)nsb * 8;
    float acc[1][1][4] = {{{0.0f, 0.0f, 0.0f, 0.0f}}};
    mmvq_raw cur[1];
#pragma unroll 1
    for (int sb = sb0; sb < sb1; sb++) {
        cr_next<D>(issue, sb - sb0, sb1 - sb0, ring, cur[0], g, t);
        const mmvq_gsrc src{buf, S, sinv, (size_t)nsb, (size_t)sb};
        mmvq_sb_raw<1, mmvq_gsrc, 1>(cur, acc, src, 1, g, t);
    }
    pdl_trigger();
    const int64_t rbase[1] = {(int64_t)blockIdx.x * 16}, nrow[1] = {a.n_out[0]};
    mmvq_finish<1, 1>(acc, part, a, 0, rbase, nrow, nullptr);
}

/* Q6_K tile-major, field-major (variants 15-17): tile tau's super-block sb
 * as one 3,360-byte run at (tau nsb + sb) 3,360 holding the 16 rows' ql
 * (128 bytes a row), then their qh (64), scales (16) and d (2), so that a
 * lane's 8-byte pieces are 8-byte aligned in shared memory (in the file a
 * 210-byte block starts 2-byte aligned). */
static uint8_t *tm6_repack(const uint8_t *w, int64_t n_out, int nsb) {
    const size_t rb = (size_t)nsb * 210;
    uint8_t *o = (uint8_t *)malloc(rb * (size_t)n_out);
    for (int64_t r = 0; r < n_out; r++)
        for (int sb = 0; sb < nsb; sb++) {
            const uint8_t *b = w + (size_t)r * rb + (size_t)sb * 210;
            uint8_t *t = o + ((size_t)(r / 16) * nsb + sb) * Q6K_TM_SB;
            const int i = (int)(r % 16);
            memcpy(t + 128 * i, b, 128);
            memcpy(t + 2048 + 64 * i, b + 128, 64);
            memcpy(t + 3072 + 16 * i, b + 192, 16);
            memcpy(t + 3328 + 2 * i, b + 208, 2);
        }
    return o;
}

/* mmvq_raw6's fields (mmvq.cuh: lane (g, t), rows g and g + 8) from a field-major slot */
__device__ __forceinline__ void tm6_load_sh(mmvq_raw6 &w, const uint8_t *p, int g, int t) {
#pragma unroll
    for (int r = 0; r < 2; r++) {
        const int row = g + 8 * r;
#pragma unroll
        for (int h = 0; h < 2; h++) {
#pragma unroll
            for (int c = 0; c < 2; c++) w.ql[r][h][c] = *(const uint2 *)(p + 128 * row + 64 * h + 32 * c + 8 * t);
            w.qh[r][h] = *(const uint2 *)(p + 2048 + 64 * row + 32 * h + 8 * t);
        }
        w.sc[r] = *(const uint32_t *)(p + 3072 + 16 * row + 4 * t);
        w.d[r] = *(const unsigned short *)(p + 3328 + 2 * row);
    }
}

/* Variants 18-20: Q6_K tile-major with its blocks intact (lab_tm_repack at
 * 210 bytes a block: what common.cuh does for Q4_K, so every other reader
 * would only change its addresses). A tile's super-block is one 3,360-byte
 * run, 16-byte aligned; row i's block starts at 210 i in the slot, 2-byte
 * aligned when i is odd: production's mmvq_raw6::load_sh reads it (this
 * lab's first version of it, run 2026-12-06g, is now that function). */

/* k_cr6<D, INTACT>: k_cr<D, 1> for Q6_K on a tile-major copy, field-major
 * (INTACT = 0, variants 15-17) or with its blocks intact (1, 18-20): the
 * int8 Q6_K arithmetic of production's k_mmvq<Q6_K> at TL = 1 (mmvq_sb6),
 * so every output must be memcmp-equal to variant 0's. Launch contract as
 * k_cr. */
static size_t cr6_smem(int d, int ks) { return (size_t)ks * d * Q6K_TM_SB + mmvq_smem_bytes(1, 1, ks); }

template <int D, int INTACT>
__global__ void __launch_bounds__(512, 1)
    k_cr6(mmv_args a, const uint8_t *__restrict__ W, const uint8_t *__restrict__ buf) {
    extern __shared__ __align__(128) uint8_t cr6_sh[];
    const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3, wp = threadIdx.x >> 5, ks = blockDim.x >> 5;
    const int nsb = (int)(a.in / 256), sb0 = wp * nsb / ks, sb1 = (wp + 1) * nsb / ks, n = sb1 - sb0;
    float *part = (float *)(cr6_sh + (size_t)ks * D * Q6K_TM_SB);
    uint8_t *ring = cr6_sh + (size_t)wp * D * Q6K_TM_SB;
    const uint8_t *tile = W + (size_t)blockIdx.x * nsb * Q6K_TM_SB;
    auto issue = [&](int i) {
        uint8_t *slot = ring + (i % D) * Q6K_TM_SB;
        const uint8_t *src = tile + (size_t)(sb0 + i) * Q6K_TM_SB;
        for (int c = lane; c < Q6K_TM_SB / 16; c += 32) {
            const uint32_t dst = (uint32_t)__cvta_generic_to_shared(slot + 16 * c);
            asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(dst), "l"(src + 16 * c) : "memory");
        }
    };
    mmvq_ring_start<D>(issue, n);
    pdl_start();
    const float *S = (const float *)(buf + (size_t)nsb * MQ_SB_B), *sinv = S + (size_t)nsb * 8;
    float acc[1][1][4] = {{{0.0f, 0.0f, 0.0f, 0.0f}}};
    mmvq_raw6 cur[1];
#pragma unroll 1
    for (int i = 0; i < n; i++) {
        mmvq_ring_next<D>(issue, i, n);
        if constexpr (INTACT) cur[0].load_sh(ring + (i % D) * Q6K_TM_SB, g, t);
        else tm6_load_sh(cur[0], ring + (i % D) * Q6K_TM_SB, g, t);
        const mmvq_gsrc src{buf, S, sinv, (size_t)nsb, (size_t)(sb0 + i)};
        mmvq_sb6<1, mmvq_gsrc, 1>(cur, acc, src, 1, g, t);
    }
    pdl_trigger();
    const int64_t rbase[1] = {(int64_t)blockIdx.x * 16}, nrow[1] = {a.n_out[0]};
    mmvq_finish<1, 1>(acc, part, a, 0, rbase, nrow, nullptr);
}

/* k_sk<D>: the tile-major matvec as one balanced stream per warp (a
 * "stream-K" split), to take the wave tail out of a pair's fixed cost
 * (bench/results/2026-12-03g-h200.md, section 3).
 *
 * The work is production's: tile tau's K range is cut into ks = mmv_ks(nsb)
 * segments [k nsb / ks, (k + 1) nsb / ks), each an fp32 chain over its
 * super-blocks in order (mmvq_sb), and a row's segments are added in order
 * k = 0 .. ks - 1 (mmvq_finish's sums), so every output must be
 * memcmp-equal to the production pair. Only who computes a segment moves:
 * the grid is what fits on the device at once (no second wave), and warp w
 * of W takes segments [w S / W, (w + 1) S / W) of the S = tiles x ks in
 * (tile, segment) order. On the tile-major copy those are one contiguous
 * run of 2,304-byte units, which the warp streams through a cp.async ring
 * of D units across segment and tile boundaries. A finished segment's 16 x
 * 8 partial columns go to part (global, [tile][ks][16][8]); the warp that
 * finishes a tile's last segment (a per-tile counter, reset by it for the
 * next launch) adds the tile's columns in segment order and writes y. The
 * split depends on the device's size, the bits do not.
 *
 * Launch contract: block 32 SK_WARPS, any grid; dynamic shared memory
 * sk_smem(D); W the tile-major copy; T = 1; part >= tiles ks 128 floats;
 * cnt >= tiles ints, zero before the first launch. */
#define SK_WARPS 4
static size_t sk_smem(int d) { return (size_t)SK_WARPS * d * Q4K_TM_SB; }

template <int D>
__global__ void __launch_bounds__(32 * SK_WARPS) k_sk(mmv_args a, const uint8_t *__restrict__ W,
                                                     const uint8_t *__restrict__ buf, float *part, int *cnt) {
    extern __shared__ __align__(128) uint8_t sk_sh[];
    const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3, wp = threadIdx.x >> 5;
    const int nsb = (int)(a.in / 256), ks = mmv_ks(nsb), tiles = (int)(a.n_out[0] / 16);
    const int64_t nw = (int64_t)gridDim.x * SK_WARPS, w = (int64_t)blockIdx.x * SK_WARPS + wp;
    const int64_t S = (int64_t)tiles * ks, s0 = w * S / nw, s1 = (w + 1) * S / nw;
    /* the first unit of segment s: tile s / ks, super-block (s % ks) nsb / ks */
    auto unit = [&](int64_t s) { return (s / ks) * nsb + (int)(s % ks) * nsb / ks; };
    const int64_t u0 = unit(s0), u1 = unit(s1);
    uint8_t *ring = sk_sh + (size_t)wp * D * Q4K_TM_SB;
    /* every lane: its chunks of unit u0 + i into slot i % D */
    auto issue = [&](int64_t i) {
        uint8_t *slot = ring + (i % D) * Q4K_TM_SB;
        for (int c = lane; c < Q4K_TM_SB / 16; c += 32) {
            const uint32_t dst = (uint32_t)__cvta_generic_to_shared(slot + 16 * c);
            asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(dst), "l"(W + (u0 + i) * Q4K_TM_SB + 16 * c)
                         : "memory");
        }
    };
    mmvq_ring_start<D>(issue, u1 - u0);
    pdl_start();
    const float *Sx = (const float *)(buf + (size_t)nsb * MQ_SB_B), *sinv = Sx + (size_t)nsb * 8;
    float acc[1][1][4] = {{{0.0f, 0.0f, 0.0f, 0.0f}}};
    mmvq_raw cur[1];
    int64_t seg = s0; /* the segment being accumulated */
    /* segment seg's partial out; the tile's last one adds them up and writes y */
    auto flush = [&]() {
        const int64_t tau = seg / ks;
        float *pt = part + (size_t)tau * ks * 128;
        float *pk = pt + (size_t)(seg % ks) * 128;
#pragma unroll
        for (int r = 0; r < 2; r++) {
            pk[(g + 8 * r) * 8 + 2 * t] = acc[0][0][2 * r];
            pk[(g + 8 * r) * 8 + 2 * t + 1] = acc[0][0][2 * r + 1];
        }
        __threadfence();
        __syncwarp();
        int last = 0;
        if (lane == 0) last = atomicAdd(cnt + tau, 1) == ks - 1;
        last = __shfl_sync(0xFFFFFFFFu, last, 0);
        if (last) {
            __threadfence();
            if (lane < 16) {
                float c[3];
                for (int n = 0; n < 3; n++) {
                    float v = __ldcg(pt + lane * 8 + n);
                    for (int k = 1; k < ks; k++) v = __fadd_rn(v, __ldcg(pt + (size_t)k * 128 + lane * 8 + n));
                    c[n] = v;
                }
                const int64_t row = tau * 16 + lane;
                if (row < a.n_out[0])
                    a.y[0][row] = __fadd_rn(__fadd_rn(__fmul_rn(65536.0f, c[0]), __fmul_rn(256.0f, c[1])), c[2]);
            }
            if (lane == 0) cnt[tau] = 0; /* for the next launch */
        }
        acc[0][0][0] = acc[0][0][1] = acc[0][0][2] = acc[0][0][3] = 0.0f;
    };
#pragma unroll 1
    for (int64_t u = u0; u < u1; u++) {
        const int sb = (int)(u % nsb);
        if (u > u0 && unit(seg + 1) == u) { /* u starts the next segment */
            flush();
            seg++;
        }
        cr_next<D>(issue, u - u0, u1 - u0, ring, cur[0], g, t);
        const mmvq_gsrc src{buf, Sx, sinv, (size_t)nsb, (size_t)sb};
        mmvq_sb_raw<1, mmvq_gsrc, 1>(cur, acc, src, 1, g, t);
    }
    pdl_trigger();
    if (u1 > u0) flush();
}

int main(int argc, char **argv) {
    const int64_t in = argc > 2 ? atoll(argv[1]) : 4096, n_out = argc > 2 ? atoll(argv[2]) : 12288;
    const bool q6 = argc > 3 && !strcmp(argv[3], "q6_k");
    const uint32_t TY = q6 ? MEMRA_TYPE_Q6_K : MEMRA_TYPE_Q4_K;
    const double copy = lab_init();
    printf("mmvq_tm_lab: {%lld, %lld} %s T=1 with the input norm; "
           "device-to-device copy %.0f GB/s\n",
           (long long)in, (long long)n_out, q6 ? "Q6_K" : "Q4_K", copy);
    if (in % 256 || n_out % 16) {
        printf("mmvq_tm_lab: in must be a multiple of 256, n_out of 16\n");
        return 1;
    }
    const int nsb = (int)(in / 256), ks = getenv("KS") ? atoi(getenv("KS")) : mmv_ks(nsb);
    if (ks < 1 || ks > 16 || ks > nsb) {
        printf("mmvq_tm_lab: KS must be 1..16 and at most in / 256\n");
        return 1;
    }
    lab_mv pb = lab_mv_make(TY, in, n_out, 1, 97);
    const size_t rb = pb.rb, wb = pb.wb;
    /* the CPU reference of rmsnorm then the rows */
    const float eps = 1e-6f;
    float *hnw = (float *)malloc(sizeof(float) * in), *refn = (float *)malloc(sizeof(float) * n_out);
    for (int64_t i = 0; i < in; i++) hnw[i] = rf(0.5f, 1.5f);
    const double mrefn = lab_norm_ref(&pb, TY, in, n_out, hnw, eps, refn);
    float *dnw = lab_dev(hnw, sizeof(float) * in);
    uint8_t *htm = lab_tm_repack(pb.hw, n_out, nsb, rb / nsb);
    const uint8_t *dtm = lab_dev(htm, wb);
    free(htm);
    const uint8_t *cw[64], *ct[64], *ct6[64];
    const int ncw = lab_copies(pb.dw, wb, cw, 64), nct = lab_copies(dtm, wb, ct, 64);
    int nct6 = 0;
    const uint8_t *dtm6 = NULL;
    if (q6) { /* variants 15-17: the field-major Q6_K copy */
        uint8_t *h6 = tm6_repack(pb.hw, n_out, nsb);
        dtm6 = lab_dev(h6, wb);
        free(h6);
        nct6 = lab_copies(dtm6, wb, ct6, 64);
    }
    uint8_t *pbuf;
    float *dy;
    CK(cudaMalloc(&pbuf, MQ_BUF_BYTES));
    CK(cudaMalloc(&dy, sizeof(float) * n_out));
    mmv_args a;
    memset(&a, 0, sizeof a);
    a.W[0] = pb.dw, a.n_out[0] = n_out, a.y[0] = dy, a.row_bytes = rb, a.in = in, a.T = 1, a.x = pb.dx;
    a.nw = dnw, a.eps = eps;
    mmv_blocks(&a, 1);
    static const char *names[] = {"int8 pair, file layout",        "registers, tile-major",
                                  "bulk ring D=2, tile-major",     "mmv6, file layout",
                                  "cp.async ring D=2, file",       "cp.async ring D=3, file",
                                  "cp.async ring D=4, file",       "cp.async ring D=2, tile-major",
                                  "cp.async ring D=3, tile-major", "cp.async ring D=4, tile-major",
                                  "int8 matvec alone (no prep)",   "prep alone",
                                  "stream-K ring D=2, tile-major", "stream-K ring D=3, tile-major",
                                  "production tile-major pair",    "Q6_K field-major ring D=2",
                                  "Q6_K field-major ring D=3",     "Q6_K field-major ring D=4",
                                  "Q6_K intact tile-major D=2",    "Q6_K intact tile-major D=3",
                                  "Q6_K intact tile-major D=4"};
    auto tile_major = [](int v) { return v == 1 || v == 2 || (v >= 7 && v <= 9) || (v >= 12 && v <= 14); };
    /* k_sk: the grid that fits at once, the partials and the per-tile counters */
    int nsm = 0, sk_per_sm[2] = {0, 0};
    CK(cudaDeviceGetAttribute(&nsm, cudaDevAttrMultiProcessorCount, 0));
    CK(cudaFuncSetAttribute(k_sk<2>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)sk_smem(2)));
    CK(cudaFuncSetAttribute(k_sk<3>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)sk_smem(3)));
    CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&sk_per_sm[0], k_sk<2>, 32 * SK_WARPS, sk_smem(2)));
    CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&sk_per_sm[1], k_sk<3>, 32 * SK_WARPS, sk_smem(3)));
    if (getenv("SK_PER_SM")) /* fewer blocks per SM: longer streams per warp */
        sk_per_sm[0] = sk_per_sm[1] = atoi(getenv("SK_PER_SM"));
    printf("k_sk: %d SMs x %d / %d blocks of %d warps\n", nsm, sk_per_sm[0], sk_per_sm[1], SK_WARPS);
    float *sk_part;
    int *sk_cnt;
    CK(cudaMalloc(&sk_part, sizeof(float) * (size_t)(n_out / 16) * mmv_ks(nsb) * 128));
    CK(cudaMalloc(&sk_cnt, sizeof(int) * (size_t)(n_out / 16)));
    CK(cudaMemset(sk_cnt, 0, sizeof(int) * (size_t)(n_out / 16)));
    auto prep = [&](cudaStream_t st) { mmvq_prep_launch(pb.dx, dnw, eps, in, 1, pbuf, st); };
    /* variant v on weight copy i */
    auto run = [&](int v, int i, cudaStream_t st) {
        mmv_args b = a;
        b.W[0] = v >= 18 ? ct[i] : v >= 15 ? ct6[i] : tile_major(v) ? ct[i] : cw[i];
        const unsigned grid = (unsigned)(n_out / 16), block = 32u * (unsigned)ks;
        if (v >= 15) { /* 15-17 field-major, 18-20 blocks intact */
            const int d = 2 + (v - 15) % 3;
            auto k = v >= 18 ? (d == 2 ? k_cr6<2, 1> : d == 3 ? k_cr6<3, 1> : k_cr6<4, 1>)
                             : (d == 2 ? k_cr6<2, 0> : d == 3 ? k_cr6<3, 0> : k_cr6<4, 0>);
            prep(st);
            lab_launch(k, grid, block, cr6_smem(d, ks), st, true, b, b.W[0], (const uint8_t *)pbuf);
        } else if (v == 1 || v == 2) {
            prep(st);
            lab_launch(v == 2 ? k_tm<2> : k_tm<0>, grid, block, tm_smem(v == 2 ? 2 : 0, ks), st, true, b, b.W[0],
                       (const uint8_t *)pbuf);
        } else if (v >= 4 && v <= 9) {
            const int d = 2 + (v - 4) % 3;
            auto k = v >= 7 ? (d == 2 ? k_cr<2, 1> : d == 3 ? k_cr<3, 1> : k_cr<4, 1>)
                            : (d == 2 ? k_cr<2, 0> : d == 3 ? k_cr<3, 0> : k_cr<4, 0>);
            prep(st);
            lab_launch(k, grid, block, cr_smem(d, ks), st, true, b, b.W[0], (const uint8_t *)pbuf);
        } else if (v == 12 || v == 13) { /* production's K split only */
            const int d = v == 12 ? 2 : 3;
            prep(st);
            lab_launch(d == 2 ? k_sk<2> : k_sk<3>, (unsigned)(nsm * sk_per_sm[d - 2]), 32u * SK_WARPS, sk_smem(d), st,
                       true, b, b.W[0], (const uint8_t *)pbuf, sk_part, sk_cnt);
        } else if (v == 14) {
            b.tm = 1;
            CK(mmvq_launch(TY, b, pbuf, st, true, nsm));
        } else if (v == 3) {
            mmv6_launch(b, 1, st);
        } else if (v == 10) { /* on the planes left by variant 0 (the same x: the same bits) */
            CK(q6 ? mmvq_launch_t<MEMRA_TYPE_Q6_K>(b, pbuf, st, true, nsm)
                  : mmvq_launch_t<MEMRA_TYPE_Q4_K>(b, pbuf, st, true, nsm));
        } else if (v == 11) {
            prep(st);
        } else if (ks != mmv_ks(nsb)) { /* production's kernel at this K split (TL = 1) */
            prep(st);
            mmvq_blocks1(&b);
            auto k = q6 ? k_mmvq<MEMRA_TYPE_Q6_K, 1, 1, 1> : k_mmvq<MEMRA_TYPE_Q4_K, 1, 1, 1>;
            lab_launch(k, (unsigned)b.blk0[4], block, mmvq_smem_bytes(1, 1, ks), st, true, b, (const uint8_t *)pbuf);
        } else {
            CK(mmvq_launch(TY, b, pbuf, st, true, nsm));
        }
    };
    CK(cudaFuncSetAttribute(k_tm<0>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)tm_smem(0, 16)));
    CK(cudaFuncSetAttribute(k_tm<2>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)tm_smem(2, 16)));
    /* the ring kernels' shared memory limits: the deepest ring at the widest K split */
    const int crmax = (int)cr_smem(4, 16), cr6max = (int)cr6_smem(4, 16);
    for (const void *k : {(const void *)k_cr<2, 0>, (const void *)k_cr<3, 0>, (const void *)k_cr<4, 0>,
                          (const void *)k_cr<2, 1>, (const void *)k_cr<3, 1>, (const void *)k_cr<4, 1>})
        CK(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, crmax));
    for (const void *k : {(const void *)k_cr6<2, 0>, (const void *)k_cr6<3, 0>, (const void *)k_cr6<4, 0>,
                          (const void *)k_cr6<2, 1>, (const void *)k_cr6<3, 1>, (const void *)k_cr6<4, 1>})
        CK(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, cr6max));
    float *hp = (float *)malloc(sizeof(float) * n_out), *hv = (float *)malloc(sizeof(float) * n_out);
    auto pct = [&](double us) { return 100.0 * wb / (us * 1e-6) / 1e9 / copy; };
    std::vector<int> vs;
    if (q6)
        vs = {0, 3, 15, 16, 17, 18, 19, 20};
    else if (getenv("SWEEP"))
        vs = {0, 7, 14, 12, 10, 11};
    else if (getenv("KS"))
        vs = {0, 1, 4, 6, 7, 9};
    else
        vs = {0, 1, 2, 4, 5, 6, 7, 8, 9, 12, 13, 14};
    int fails = 0;
    bool first = true; /* the first variant's bits are those the others must equal (mmv6 and the prep aside) */
    for (int v : vs) {
        if (ks > MMV_KS_MAX && (v == 0 || v == 10)) continue; /* k_mmvq's launch bound */
        if (ks != mmv_ks(nsb) && v >= 12) continue;            /* k_sk and variant 14 have production's K split */
        CK(cudaMemset(dy, 0xFF, sizeof(float) * n_out));
        run(v, 0, 0);
        CK(cudaDeviceSynchronize());
        CK(cudaGetLastError());
        float *h = first ? hp : hv;
        lab_get(h, dy, n_out);
        const bool own = first || v == 3 || v == 11;
        const double e = v == 11 ? 0.0 : lab_err(h, refn, n_out, mrefn);
        const bool same = own || !memcmp(hv, hp, sizeof(float) * n_out);
        fails += !(e <= 1e-5) + !same;
        const int nc = v >= 15 ? nct6 : tile_major(v) ? nct : ncw;
        const double gu = lab_graph_us([&](int i, cudaStream_t st) { run(v, i, st); }, 64, nc);
        printf("%-30s %7.2f us %4.0f%%  err %.2e %s%s\n", names[v], gu, pct(gu), e, e <= 1e-5 ? "ok" : "FAIL",
               own ? "" : same ? "  == first yes" : "  == first NO");
        first = false;
    }
    for (int i = 1; i < ncw; i++) cudaFree((void *)cw[i]);
    for (int i = 1; i < nct; i++) cudaFree((void *)ct[i]);
    for (int i = 1; i < nct6; i++) cudaFree((void *)ct6[i]);
    cudaFree((void *)dtm6);
    cudaFree((void *)dtm), cudaFree(dnw), cudaFree(pbuf), cudaFree(dy), cudaFree(sk_part), cudaFree(sk_cnt);
    lab_mv_free(&pb), free(hnw), free(refn), free(hp), free(hv);
    return fails ? 1 : 0;
}
