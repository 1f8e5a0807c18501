/* Lab (not wired into the backend): does a persistent kernel take the fixed
 * cost off a chain of decode matvecs?
 *
 * bench/results/2026-12-03g-h200.md (section 3) measured a prep + matvec
 * pair at ~6 us fixed plus its bytes at 85% of copy; a 9b decode step has
 * ~130 pairs, so ~0.8 ms of its ~3.2 ms is that fixed cost. It is the
 * launch, the wait for the predecessor's completion, the prep in series and
 * the first loads' latency. PDL overlaps only the first D - 1 super-blocks
 * of each warp with it.
 *
 * Here P pairs of the same shape (each on its own weight copy, the copies
 * together larger than L2) run two ways, with the same arithmetic so the
 * outputs must be memcmp-equal:
 *  base  P production tile-major pairs (k_mmvq_prep + k_mmvq_tm through
 *        mmvq_launch with a.tm = 1) in one CUDA graph with PDL;
 *  chain one launch of k_chain: a grid that is resident at once (G = SMs x
 *        the blocks that fit), phases separated by grid barriers. Phase p:
 *        its prep (warp gw of the grid converts super-block gw, the sum of
 *        squares in k_mmvq_prep's order, mmvq_prep_sb), a barrier, then
 *        the matvec: block b takes tiles b, b + G, .. with k_mmvq_tm's
 *        warps (the same K split, ring and arithmetic, mmvq_finish), then
 *        a barrier (phase p + 1's prep would read this y). Each warp's ring
 *        runs over its whole sequence of (phase, tile, super-block), so
 *        phase p + 1's first D - 1 super-blocks are in flight across both
 *        barriers and its prep.
 *  chain-np the same without the prep and its barrier (the matvec phases
 *        alone): what the barriers and the prep cost.
 * Printed: us per pair and % of copy for each, and whether the outputs
 * equal base's. Lab shortcut: every phase has the same x, so its planes
 * are the same bytes each phase and the matvec may keep reading them with
 * __ldg (mmvq_gsrc). A production chain whose prep writes new planes in the
 * same launch must read them with coherent loads (ld.global / .cg).
 *
 *   BUILD=build-lab REBUILD=1 bash bench/kernels/lab.sh chain_lab [in n_out]
 *   env: CHAIN_D=2|4 ring slots (default 4), CHAIN_PER_SM=n blocks an SM (default what fits), P=n pairs (64),
 *   CHAIN_NSUB=n the barrier's sub-groups (16; 1: every block on one counter, run 1's barrier) */
#include <math.h>

#include "backend/cuda/mmvq.cuh"
#include "lab.cuh"

/* A grid-wide barrier for a grid that is resident at once. ctr (zeroed
 * before the launch, CHAIN_CTR words): word 0 the release flag, words 32 (1
 * + i) the arrival counter of sub-group i = block % NSUB (128 bytes apart),
 * word 32 (NSUB + 1) the count of finished sub-groups. All counts only grow
 * over the launch: at barrier e a sub-group's last arrival is the one that
 * brings its counter to e x its size; it counts the sub-group in, and the
 * last sub-group's releases flag e. Thread 0 of each block arrives after the
 * block's writes (fence) and spins with acquire loads on the flag; NSUB = 1
 * is the flat barrier (every block on one counter). A barrier not met
 * within 2 s traps (a grid that does not fit must not hang the lab). */
#define CHAIN_SUBMAX 32
#define CHAIN_CTR (32 * (CHAIN_SUBMAX + 2))
__device__ __forceinline__ void chain_sync(unsigned *ctr, unsigned &epoch, int nsub) {
    __syncthreads();
    epoch++;
    if (threadIdx.x == 0) {
        const unsigned b = blockIdx.x, G = gridDim.x, sub = b % (unsigned)nsub;
        const unsigned size = G / (unsigned)nsub + (sub < G % (unsigned)nsub);
        __threadfence();
        if (atomicAdd(ctr + 32 * (1 + sub), 1u) + 1 == epoch * size) {
            __threadfence();
            if (atomicAdd(ctr + 32 * (CHAIN_SUBMAX + 1), 1u) + 1 == epoch * (unsigned)nsub) {
                __threadfence();
                asm volatile("st.release.gpu.global.u32 [%0], %1;" ::"l"(ctr), "r"(epoch) : "memory");
            }
        }
        unsigned long long t0, t;
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
        for (;;) {
            unsigned v;
            asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(ctr) : "memory");
            if ((int)(v - epoch) >= 0) break;
            asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
            if (t - t0 > 2000000000ull) __trap();
        }
    }
    __syncthreads();
}

/* Launch contract: grid G (resident at once), block 32 ks (ks = mmv_ks(nsb)),
 * dynamic shared memory mmvq_tm_smem_bytes(D, 1, 1, ks); a: one tile-major
 * Q4_K weight (row_bytes, in, n_out[0], y[0], x, nw, eps), T = 1; Wp[p]: the
 * weight of phase p; buf: the planes; ctr zeroed. PREP = 0: no prep phase
 * (buf already holds x's planes). */
template <int D, int PREP>
__global__ void __launch_bounds__(32 * MMV_KS_MAX, 1)
    k_chain(mmv_args a, const uint8_t *const *__restrict__ Wp, int P, uint8_t *__restrict__ buf, unsigned *ctr,
            int nsub) {
    extern __shared__ __align__(16) uint8_t ch_sh[];
    __shared__ float ch_red[8]; /* the prep's 8 warp sums */
    const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3, wp = threadIdx.x >> 5, ks = blockDim.x >> 5;
    const int nsb = (int)(a.in / 256), sb0 = wp * nsb / ks, sb1 = (wp + 1) * nsb / ks, n = sb1 - sb0;
    const int ntile = (int)(a.n_out[0] / 16), G = (int)gridDim.x, b = (int)blockIdx.x;
    const int nt = b < ntile ? (ntile - 1 - b) / G + 1 : 0; /* this block's tiles a phase */
    const int64_t U = (int64_t)nt * n, total = U * P;        /* this warp's units a phase, in all */
    uint8_t *ring = ch_sh + (size_t)wp * mmvq_tm_warp_bytes(D, 1);
    float *part = (float *)(ch_sh + (size_t)ks * mmvq_tm_warp_bytes(D, 1));
    /* the next unit to request: number q (slot q % D), phase ip, unit ir of the phase (the block's tile ir / n,
     * super-block sb0 + ir % n) */
    int64_t q = 0;
    int ip = 0, ir = 0;
    auto issue_next = [&]() {
        if (q < total) {
            const int tile = b + (ir / n) * G, sb = sb0 + ir % n;
            const uint8_t *src = Wp[ip] + ((size_t)tile * nsb + sb) * Q4K_TM_SB;
            uint8_t *slot = ring + (q % D) * Q4K_TM_SB;
            for (int c = lane; c < Q4K_TM_SB / 16; c += 32) mmv_cp16(slot + 16 * c, src + 16 * c);
            if (++ir == U) ir = 0, ip++;
            q++;
        }
        mmv_cp_commit();
    };
#pragma unroll
    for (int k = 0; k < D - 1; k++) issue_next();
    const float *S = (const float *)(buf + (size_t)nsb * MQ_SB_B), *sinv = S + (size_t)nsb * 8;
    unsigned epoch = 0;
    int64_t k = 0;
    for (int p = 0; p < P; p++) {
        if (PREP) {
            /* blocks whose warps convert super-blocks (gw = b ks + w < nsb): k_mmvq_prep's sum of squares, its 8
             * warp sums (virtual warp vw: float4s 32 vw + lane, + 256, ..) spread over this block's warps */
            if (b * ks < nsb) {
                for (int vw = wp; vw < 8; vw += ks) {
                    const float ss = mmvq_prep_part(a.x, a.in, 32 * vw + lane);
                    if (lane == 0) ch_red[vw] = ss;
                }
                __syncthreads();
                const int gw = b * ks + wp;
                if (gw < nsb) {
                    const float4 *xp = (const float4 *)(a.x + (int64_t)gw * 256 + 8 * lane);
                    const float4 *wq = (const float4 *)(a.nw + (int64_t)gw * 256 + 8 * lane);
                    const float4 u0 = __ldg(xp), u1 = __ldg(xp + 1), w0 = __ldg(wq), w1 = __ldg(wq + 1);
                    const float inv = mmvq_prep_inv(ch_red, a.in, a.eps);
                    mmvq_prep_sb(u0, u1, w0, w1, true, inv, lane, buf + (size_t)gw * MQ_SB_B, (float *)S + gw * 8,
                                 (float *)sinv + gw);
                }
            }
            chain_sync(ctr, epoch, nsub);
        }
        for (int ti = 0; ti < nt; ti++) {
            float acc[1][1][4] = {{{0.0f, 0.0f, 0.0f, 0.0f}}};
            mmvq_raw cur[1];
#pragma unroll 1
            for (int sb = sb0; sb < sb1; sb++, k++) {
                __syncwarp(); /* the slot refilled now was read at k - 1 by every lane */
                issue_next(); /* unit k + D - 1 */
                mmv_cp_wait<D - 1>();
                __syncwarp();
                cur[0].load_sh(ring + (k % D) * Q4K_TM_SB, g, t);
                const mmvq_gsrc src{buf, S, sinv, (size_t)nsb, (size_t)sb};
                mmvq_sb<1, mmvq_gsrc, 1>(cur, acc, src, 1, g, t);
            }
            const int64_t rbase[1] = {(int64_t)(b + ti * G) * 16}, nrow[1] = {a.n_out[0]};
            mmvq_finish<1, 1>(acc, part, a, 0, rbase, nrow, nullptr);
            __syncthreads(); /* part is read before the next tile writes it */
        }
        chain_sync(ctr, epoch, nsub);
    }
}

int main(int argc, char **argv) {
    const int64_t in = argc > 2 ? atoll(argv[1]) : 4096, n_out = argc > 2 ? atoll(argv[2]) : 12288;
    const int D = getenv("CHAIN_D") ? atoi(getenv("CHAIN_D")) : 4, P = getenv("P") ? atoi(getenv("P")) : 64;
    const double copy = lab_init();
    cuda_pdl = 1;
    if (in % 256 || n_out % 16 || (D != 2 && D != 4) || P < 1) {
        printf("chain_lab: in a multiple of 256, n_out of 16, CHAIN_D 2 or 4, P >= 1\n");
        return 1;
    }
    const int nsb = (int)(in / 256), ks = mmv_ks(nsb);
    lab_mv pb = lab_mv_make(MEMRA_TYPE_Q4_K, in, n_out, 1, 97);
    const size_t wb = pb.wb;
    const float eps = 1e-6f;
    float *hnw = (float *)malloc(sizeof(float) * in), *refn = (float *)malloc(sizeof(float) * n_out);
    for (int64_t i = 0; i < in; i++) hnw[i] = rf(0.5f, 1.5f);
    const double mrefn = lab_norm_ref(&pb, MEMRA_TYPE_Q4_K, in, n_out, hnw, eps, refn);
    float *dnw = lab_dev(hnw, sizeof(float) * in);
    uint8_t *htm = lab_tm_repack(pb.hw, n_out, nsb, 144);
    const uint8_t *dtm = lab_dev(htm, wb);
    free(htm);
    const uint8_t *ct[64];
    const int nct = lab_copies(dtm, wb, ct, 64);
    const uint8_t *hwp[4096];
    if (P > 4096) return 1;
    for (int p = 0; p < P; p++) hwp[p] = ct[p % nct];
    const uint8_t **dwp;
    CK(cudaMalloc(&dwp, sizeof(void *) * P));
    CK(cudaMemcpy(dwp, hwp, sizeof(void *) * P, cudaMemcpyHostToDevice));
    uint8_t *pbuf;
    float *dy;
    unsigned *ctr;
    CK(cudaMalloc(&pbuf, MQ_BUF_BYTES));
    CK(cudaMalloc(&dy, sizeof(float) * n_out));
    CK(cudaMalloc(&ctr, sizeof(unsigned) * CHAIN_CTR));
    mmv_args a;
    memset(&a, 0, sizeof a);
    a.W[0] = dtm, a.n_out[0] = n_out, a.y[0] = dy, a.row_bytes = pb.rb, a.in = in, a.T = 1, a.x = pb.dx;
    a.nw = dnw, a.eps = eps, a.tm = 1;
    mmv_blocks(&a, 1);
    int nsm = 0;
    CK(cudaDeviceGetAttribute(&nsm, cudaDevAttrMultiProcessorCount, 0));
    const size_t smem = mmvq_tm_smem_bytes(D, 1, 1, ks);
    auto kern = [&](int prep) {
        return D == 2 ? (prep ? k_chain<2, 1> : k_chain<2, 0>) : (prep ? k_chain<4, 1> : k_chain<4, 0>);
    };
    int per_sm = 1 << 30;
    for (int prep = 0; prep < 2; prep++) {
        int f = 0;
        CK(cudaFuncSetAttribute(kern(prep), cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
        CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&f, kern(prep), 32 * ks, smem));
        per_sm = f < per_sm ? f : per_sm;
    }
    if (getenv("CHAIN_PER_SM") && atoi(getenv("CHAIN_PER_SM")) < per_sm) per_sm = atoi(getenv("CHAIN_PER_SM"));
    const int G = nsm * per_sm;
    int nsub = getenv("CHAIN_NSUB") ? atoi(getenv("CHAIN_NSUB")) : 16;
    nsub = nsub < 1 ? 1 : nsub > CHAIN_SUBMAX ? CHAIN_SUBMAX : nsub > G ? G : nsub;
    printf("chain_lab: {%lld, %lld} Q4_K tile-major, T=1 with the input norm, %d pairs, ks %d, D %d; "
           "chain grid %d x %d warps (%d an SM), barrier sub-groups %d; copy %.0f GB/s\n",
           (long long)in, (long long)n_out, P, ks, D, G, ks, per_sm, nsub, copy);
    if (G < 1 || G * ks < nsb) {
        printf("chain_lab: the grid does not fit\n");
        return 1;
    }
    auto base = [&](int i, cudaStream_t st) {
        mmv_args b2 = a;
        b2.W[0] = ct[i];
        CK(mmvq_launch(MEMRA_TYPE_Q4_K, b2, pbuf, st, true, nsm));
    };
    auto chain = [&](int prep, cudaStream_t st) {
        CK(cudaMemsetAsync(ctr, 0, sizeof(unsigned) * CHAIN_CTR, st));
        kern(prep)<<<G, 32 * ks, smem, st>>>(a, dwp, P, pbuf, ctr, nsub);
    };
    float *hp = (float *)malloc(sizeof(float) * n_out), *hv = (float *)malloc(sizeof(float) * n_out);
    auto pct = [&](double us) { return 100.0 * wb / (us * 1e-6) / 1e9 / copy; };
    int fails = 0;
    CK(cudaMemset(dy, 0xFF, sizeof(float) * n_out));
    base(0, 0);
    CK(cudaDeviceSynchronize());
    lab_get(hp, dy, n_out);
    const double e0 = lab_err(hp, refn, n_out, mrefn);
    fails += !(e0 <= 1e-5);
    const double bu = lab_graph_us(base, P, nct);
    printf("%-10s %8.2f us a pair %4.0f%%  err %.2e %s\n", "base", bu, pct(bu), e0, e0 <= 1e-5 ? "ok" : "FAIL");
    for (int prep = 1; prep >= 0; prep--) { /* chain-np reads the planes the runs before left (the same x) */
        CK(cudaMemset(dy, 0xFF, sizeof(float) * n_out));
        chain(prep, 0);
        CK(cudaDeviceSynchronize());
        CK(cudaGetLastError());
        lab_get(hv, dy, n_out);
        const bool same = !memcmp(hv, hp, sizeof(float) * n_out);
        fails += !same;
        float ms[7];
        cudaEvent_t e1, e2;
        CK(cudaEventCreate(&e1));
        CK(cudaEventCreate(&e2));
        for (int r = 0; r < 7; r++) {
            CK(cudaEventRecord(e1, 0));
            chain(prep, 0);
            CK(cudaEventRecord(e2, 0));
            CK(cudaEventSynchronize(e2));
            CK(cudaEventElapsedTime(&ms[r], e1, e2));
        }
        CK(cudaGetLastError());
        qsort(ms, 7, sizeof ms[0], lab_cmp_f);
        const double us = ms[3] * 1e3 / P;
        printf("%-10s %8.2f us a pair %4.0f%%  == base %s\n", prep ? "chain" : "chain-np", us, pct(us),
               same ? "yes" : "NO");
        cudaEventDestroy(e1), cudaEventDestroy(e2);
    }
    for (int i = 1; i < nct; i++) cudaFree((void *)ct[i]);
    cudaFree((void *)dtm), cudaFree(dnw), cudaFree(pbuf), cudaFree(dy), cudaFree(ctr), cudaFree(dwp);
    lab_mv_free(&pb), free(hnw), free(refn), free(hp), free(hv);
    return fails ? 1 : 0;
}
