/* Lab (not wired into the backend): would a tile-major weight layout bring
 * the Q4_K int8 decode matvec to the read ceiling?
 *
 * Why: stream_lab's k_pat (bench/results/2026-12-03f-h200.md, section 1)
 * reads k_mmvq's exact bytes without arithmetic at 62-79% of copy in the
 * file's layout (one tile per warp) but at 81-95% when each 16-row tile's
 * super-block is one 2,304-byte run. This lab asks whether the real
 * kernel keeps that gain. The layout is a reordering of whole 144-byte
 * blocks done once at upload: the block of row 16 tau + i, super-block sb
 * moves to ((tau nsb + sb) 16 + i) 144. Types, bytes and results are
 * unchanged.
 *
 * Variants, all on production's arithmetic (mmvq.cuh: k_mmvq_prep's
 * planes, mmvq_sb at TL = 1, mmvq_finish), so every output must be
 * memcmp-equal to production's pair (mmvq_launch, one tile per warp):
 *  - prod: mmvq_launch on the file's layout (what the backend runs);
 *  - tm:   k_tm<0>, production's register loads at tile-major addresses;
 *  - ring: k_tm<D>, D = 2, 3, 4, a per-warp ring of D super-blocks in
 *          shared memory, each filled by ONE 2,304-byte cp.async.bulk issued
 *          D - 1 super-blocks ahead (mbarrier per slot); the fragments come
 *          from shared memory. The bulk copies hold no registers.
 * Each as a PDL pipeline behind the prep (the input norm fused), 64 per
 * CUDA graph over rotating weight copies (> L2), % of copy. Checked: every
 * variant against the CPU (rmsnorm, then the rows: <= 1e-5 of max) and
 * memcmp against prod.
 *
 * Status: written after this session's device time ran out; compiled
 * (ptxas: k_tm<0> 105 registers, the rings 84, no spills), NOT YET RUN.
 *
 *   BUILD=build-lab REBUILD=1 bash bench/kernels/lab.sh mmvq_tm_lab [in n_out] */
#include <math.h>

#include "backend/cuda/mmvq.cuh"
#include "lab.cuh"

#define TM_TILE_B (16 * 144) /* one tile's super-block */

/* The tile-major copy of a Q4_K matrix of n_out rows (a multiple of 16). */
static uint8_t *tm_repack(const uint8_t *w, int64_t n_out, int nsb) {
    const size_t rb = (size_t)nsb * 144;
    uint8_t *o = (uint8_t *)malloc(rb * (size_t)n_out);
    for (int64_t r = 0; r < n_out; r++)
        for (int sb = 0; sb < nsb; sb++)
            memcpy(o + (((size_t)(r / 16) * nsb + sb) * 16 + (size_t)(r % 16)) * 144,
                   w + (size_t)r * rb + (size_t)sb * 144, 144);
    return o;
}

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

/* Launch contract: grid n_out / 16, block 32 ks (ks = mmv_ks(nsb)), dynamic
 * shared memory tm_smem(D, ks); a.T = 1, a.y[0], a.n_out[0] as production.
 * Warp w takes super-blocks [w nsb / ks, (w + 1) nsb / ks) of tile
 * blockIdx.x, as k_mmvq at TL = 1. */
static size_t tm_smem(int d, int ks) { return (size_t)ks * d * (TM_TILE_B + 16) + mmvq_smem_bytes(1, 1, ks); }

template <int D>
__global__ void __launch_bounds__(32 * MMV_KS_MAX, 2) k_tm(mmv_args a, const uint8_t *__restrict__ tmw,
                                                          const uint8_t *__restrict__ buf) {
    extern __shared__ __align__(128) uint8_t tm_sh[];
    const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3, wp = threadIdx.x >> 5, ks = blockDim.x >> 5;
    const int nsb = (int)(a.in / 256), sb0 = wp * nsb / ks, sb1 = (wp + 1) * nsb / ks;
    const uint8_t *tile = tmw + (size_t)blockIdx.x * nsb * TM_TILE_B;
    /* per warp: D slots, then D mbarriers 16 bytes apart (slots stay 16-byte aligned for the bulk copies) */
    float *part = (float *)(tm_sh + (size_t)ks * D * (TM_TILE_B + 16));
    uint8_t *ring = tm_sh + (size_t)wp * D * (TM_TILE_B + 16);
    const uint32_t bar0 = (uint32_t)__cvta_generic_to_shared(ring + D * TM_TILE_B);
    constexpr int DD = D > 0 ? D : 1;
    auto issue = [&](int sb) { /* lane 0: super-block sb into slot (sb - sb0) % D */
        const int s = (sb - sb0) % DD;
        const uint32_t b = bar0 + 16 * s, dst = (uint32_t)__cvta_generic_to_shared(ring + s * TM_TILE_B);
        asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(b), "r"(TM_TILE_B) : "memory");
        asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
                     ::"r"(dst), "l"(tile + (size_t)sb * TM_TILE_B), "r"(TM_TILE_B), "r"(b)
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
        tm_load_sh(cur[0], tile + (size_t)sb0 * TM_TILE_B, g, t);
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
            tm_load_sh(cur[0], ring + s * TM_TILE_B, g, t);
        } else if (sb > sb0) {
            tm_load_sh(cur[0], tile + (size_t)sb * TM_TILE_B, g, t);
        }
        const mmvq_gsrc src{buf, S, sinv, (size_t)nsb, (size_t)sb};
        mmvq_sb<1, mmvq_gsrc, 1>(cur, acc, src, 1, g, t);
    }
    const int64_t rbase[1] = {(int64_t)blockIdx.x * 16}, nrow[1] = {a.n_out[0]};
    mmvq_finish<1, 1>(acc, part, a, 0, rbase, nrow, nullptr);
}

int main(int argc, char **argv) {
    const int64_t in = argc > 2 ? atoll(argv[1]) : 4096, n_out = argc > 2 ? atoll(argv[2]) : 12288;
    const double copy = lab_init();
    printf("mmvq_tm_lab: {%lld, %lld} Q4_K T=1 with the input norm; device-to-device copy %.0f GB/s\n", (long long)in,
           (long long)n_out, copy);
    if (in % 256 || n_out % 16) {
        printf("mmvq_tm_lab: in must be a multiple of 256, n_out of 16\n");
        return 1;
    }
    const uint32_t TY = MEMRA_TYPE_Q4_K;
    const int nsb = (int)(in / 256), ks = mmv_ks(nsb);
    lab_mv pb = lab_mv_make(TY, in, n_out, 1, 97);
    const size_t rb = pb.rb, wb = pb.wb;
    /* the CPU reference of rmsnorm then the rows */
    const float eps = 1e-6f;
    float *hnw = (float *)malloc(sizeof(float) * in), *refn = (float *)malloc(sizeof(float) * n_out);
    for (int64_t i = 0; i < in; i++) hnw[i] = rf(0.5f, 1.5f);
    const double mrefn = lab_norm_ref(&pb, TY, in, n_out, hnw, eps, refn);
    float *dnw = lab_dev(hnw, sizeof(float) * in);
    uint8_t *htm = tm_repack(pb.hw, n_out, nsb);
    const uint8_t *dtm = lab_dev(htm, wb);
    free(htm);
    const uint8_t *cw[64], *ct[64];
    const int ncw = lab_copies(pb.dw, wb, cw, 64), nct = lab_copies(dtm, wb, ct, 64);
    uint8_t *pbuf;
    float *dy;
    CK(cudaMalloc(&pbuf, MQ_BUF_BYTES));
    CK(cudaMalloc(&dy, sizeof(float) * n_out));
    mmv_args a;
    memset(&a, 0, sizeof a);
    a.W[0] = pb.dw, a.n_out[0] = n_out, a.y[0] = dy, a.row_bytes = rb, a.in = in, a.T = 1, a.x = pb.dx;
    a.nw = dnw, a.eps = eps;
    mmv_blocks(&a, 1);
    auto prod = [&](int i, cudaStream_t st) {
        mmv_args b = a;
        b.W[0] = cw[i];
        CK(mmvq_launch(MEMRA_TYPE_Q4_K, b, pbuf, st, true));
    };
    CK(cudaFuncSetAttribute(k_tm<0>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)tm_smem(0, MMV_KS_MAX)));
    CK(cudaFuncSetAttribute(k_tm<2>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)tm_smem(2, MMV_KS_MAX)));
    CK(cudaFuncSetAttribute(k_tm<3>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)tm_smem(3, MMV_KS_MAX)));
    CK(cudaFuncSetAttribute(k_tm<4>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)tm_smem(4, MMV_KS_MAX)));
    auto tm = [&](int d, int i, cudaStream_t st) {
        mmvq_prep_launch(pb.dx, dnw, eps, in, 1, pbuf, st);
        auto k = d == 2 ? k_tm<2> : d == 3 ? k_tm<3> : d == 4 ? k_tm<4> : k_tm<0>;
        lab_launch(k, (unsigned)(n_out / 16), 32u * (unsigned)ks, tm_smem(d, ks), st, true, a, ct[i],
                   (const uint8_t *)pbuf);
    };
    float *hp = (float *)malloc(sizeof(float) * n_out), *hv = (float *)malloc(sizeof(float) * n_out);
    auto check = [&](float *h) {
        CK(cudaDeviceSynchronize());
        CK(cudaGetLastError());
        lab_get(h, dy, n_out);
        return lab_err(h, refn, n_out, mrefn);
    };
    auto pct = [&](double us) { return 100.0 * wb / (us * 1e-6) / 1e9 / copy; };
    int fails = 0;
    CK(cudaMemset(dy, 0xFF, sizeof(float) * n_out));
    prod(0, 0);
    const double ep = check(hp);
    fails += !(ep <= 1e-5);
    const double gp = lab_graph_us([&](int i, cudaStream_t st) { prod(i, st); }, 64, ncw);
    printf("prod (file layout, mmvq_launch)  %6.2f us %4.0f%%  err %.2e %s\n", gp, pct(gp), ep,
           ep <= 1e-5 ? "ok" : "FAIL");
    static const int ds[] = {0, 2, 3, 4};
    for (int d : ds) {
        CK(cudaMemset(dy, 0xFF, sizeof(float) * n_out));
        tm(d, 0, 0);
        const double e = check(hv);
        const int same = !memcmp(hv, hp, sizeof(float) * n_out);
        fails += !(e <= 1e-5) + !same;
        const double gu = lab_graph_us([&](int i, cudaStream_t st) { tm(d, i, st); }, 64, nct);
        char name[40];
        snprintf(name, sizeof name, d ? "ring D=%d (tile-major, bulk)" : "tm (tile-major, registers)", d);
        printf("%-32s %6.2f us %4.0f%%  err %.2e %s  == prod %s\n", name, gu, pct(gu), e, e <= 1e-5 ? "ok" : "FAIL",
               same ? "yes" : "NO");
    }
    for (int i = 1; i < ncw; i++) cudaFree((void *)cw[i]);
    for (int i = 1; i < nct; i++) cudaFree((void *)ct[i]);
    cudaFree((void *)dtm), cudaFree(dnw), cudaFree(pbuf), cudaFree(dy);
    lab_mv_free(&pb), free(hnw), free(refn), free(hp), free(hv);
    return fails ? 1 : 0;
}
