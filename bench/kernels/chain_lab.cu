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
 *   CHAIN_NSUB=n the barrier's sub-groups (16; 1: every block on one counter, run 1's barrier; 0: one counter,
 *   each block's release add and acquire polls, no last-arriver flag); the streamer:
 *   CHAIN_NC consumer warps, CHAIN_NP producer warps (1..4), CHAIN_CU super-blocks a unit, CHAIN_R slots,
 *   CHAIN_PK=1 producers by cp.async */
#include <math.h>

#include "backend/cuda/mmvq.cuh"
#include "mmvq_shsrc.cuh"
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
#define CHAIN_NPMAX 4 /* the streamer's producer warps at most */
#define CHAIN_CTR (32 * (CHAIN_SUBMAX + 2))
__device__ __forceinline__ void chain_bar(int nthr) {
    if (nthr)
        asm volatile("bar.sync 1, %0;" ::"r"(nthr) : "memory");
    else
        __syncthreads();
}
__device__ __forceinline__ void chain_sync(unsigned *ctr, unsigned &epoch, int nsub, int nthr = 0) {
    chain_bar(nthr);
    epoch++;
    if (nsub == 0) { /* CHAIN_NSUB=0 (session 38): one counter, a release add and acquire polls of it */
        if (threadIdx.x == 0) {
            unsigned *c = ctr + 32, v;
            const unsigned goal = epoch * gridDim.x;
            asm volatile("red.release.gpu.global.add.u32 [%0], 1;" ::"l"(c) : "memory");
            unsigned long long t0, t;
            asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
            for (;;) {
                asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(c) : "memory");
                if ((int)(v - goal) >= 0) break;
                asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
                if (t - t0 > 2000000000ull) __trap();
            }
        }
        chain_bar(nthr);
        return;
    }
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
    chain_bar(nthr);
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
                mmvq_sb_raw<1, mmvq_gsrc, 1>(cur, acc, src, 1, g, t);
            }
            const int64_t rbase[1] = {(int64_t)(b + ti * G) * 16}, nrow[1] = {a.n_out[0]};
            mmvq_finish<1, 1>(acc, part, a, 0, rbase, nrow, nullptr);
            __syncthreads(); /* part is read before the next tile writes it */
        }
        chain_sync(ctr, epoch, nsub);
    }
}

/* ---- stream: the weight stream decoupled from the phases (session 36) ----
 * What: chain-np's phases with the same tiles, K split, arithmetic and sums
 * (so memcmp-equal to base), one block an SM of NC consumer warps and one
 * producer warp. The weights reach shared memory through one block-wide
 * ring of R tile super-blocks (2,304 bytes each), which the producer's lane
 * 0 fills by bulk copies in the order the consumers use them, across
 * phases: it takes no part in the grid barrier and waits only for a free
 * slot (an mbarrier per slot, full and empty). So HBM keeps streaming
 * through a phase boundary as long as the ring has room: what a persistent
 * decode kernel would do. Consumer c takes the block's items (tile ti,
 * K range r: item ti ks + r) c, c + NC, .. of each phase, in order; an
 * item's partials go to shared memory, then the consumers add the ranges
 * in order (mmvq_part_sums) and write y, then the grid barrier among the
 * consumers (NOBAR: none, so the phases overlap: the streamer's ceiling,
 * not a valid chain).
 * Super-block q = phase p, the block's tile ti, super-block sb: q = (p nt
 * + ti) nsb + sb; unit q / cu (slot (q / cu) % R, round (q / cu) / R) holds
 * cu of them, one bulk copy (CHAIN_CU, dividing nsb; a unit's slot is
 * free after cu consumptions, so it may span items); npw producer warps
 * (CHAIN_NP) take units j, j + npw, ...; CHAIN_KSP: the K split (items of
 * nsb / KSP super-blocks; production's mmv_ks by default).
 * (Session 38: session 36 found stream-nobar at 36-38% of copy whatever
 * NC and R; CHAIN_NP and CHAIN_CU ask whether one lane issuing one
 * 2,304-byte copy at a time is what caps it. CHAIN_PK=1: the producer
 * warps' lanes fill a unit by 16-byte cp.async instead, each lane arriving
 * on the full barrier once its copies have landed.)
 *
 * PREP = 1 (NC = 8, 12 or 16, n_out >= in, no NOBAR): a real chain. Phase p's input is
 * x (p = 0) or the first `in` outputs of phase p - 1 (ybuf + (p - 1) n_out),
 * with the norm a.nw; every block converts the whole input into its own
 * planes in shared memory after the barrier (k_mmvq_prep's sum of squares
 * over 8 warps and its conversion, so the same planes and per-limb sums;
 * mmvq_sb_lean on them, production's arithmetic), and phase p writes
 * ybuf + p n_out. No grid-wide prep phase, no second barrier. */
template <int NC, int NOBAR, int PREP = 0>
__global__ void __launch_bounds__(32 * (NC + CHAIN_NPMAX), 1)
    k_chain_st(mmv_args a, const uint8_t *const *__restrict__ Wp, int P, const uint8_t *__restrict__ buf,
               unsigned *ctr, int nsub, int R, float *ybuf, int npw, int cu, int pk, int ks) {
    extern __shared__ __align__(128) uint8_t st_sh[];
    const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3, wp = threadIdx.x >> 5;
    const int nsb = (int)(a.in / 256); /* ks: the K split, production's mmv_ks or CHAIN_KSP */
    const int ntile = (int)(a.n_out[0] / 16), G = (int)gridDim.x, b = (int)blockIdx.x;
    const int nt = b < ntile ? (ntile - 1 - b) / G + 1 : 0, nit = nt * ks;
    uint8_t *ring = st_sh;
    const int ub = cu * Q4K_TM_SB; /* a slot: cu super-blocks of one tile */
    float *part = (float *)(st_sh + (size_t)R * ub); /* [item][16][8] */
    const int ntmax = (ntile - 1) / G + 1;
    uint64_t *bars = (uint64_t *)(part + (size_t)ntmax * ks * 128); /* full[R], empty[R] */
    uint8_t *pl_sh = (uint8_t *)(bars + 2 * R); /* PREP: [nsb][768] planes, [nsb][8] S, [nsb] 2^-e */
    float *S_sh = (float *)(pl_sh + (size_t)nsb * MQ_SB_B), *sinv_sh = S_sh + (size_t)nsb * 8;
    uint8_t *mb_sh = (uint8_t *)(sinv_sh + nsb);
    __shared__ float red[8];
    const uint32_t ring_sa = (uint32_t)__cvta_generic_to_shared(ring);
    const uint32_t full_sa = (uint32_t)__cvta_generic_to_shared(bars), empty_sa = full_sa + 8 * R;
    if (threadIdx.x == 0) {
        for (int i = 0; i < 2 * R; i++) {
            if (pk && i < R) /* a full barrier completes on its 32 lanes' cp.async arrivals */
                asm volatile("mbarrier.init.shared::cta.b64 [%0], 32;" ::"r"(full_sa + 8 * i) : "memory");
            else if (i >= R) /* an empty one on its cu super-blocks' consumptions (a unit may span items) */
                asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(full_sa + 8 * i), "r"(cu) : "memory");
            else
                mbar_init<1>(full_sa + 8 * i);
        }
        mbar_init_fence();
    }
    __syncthreads();
    if (wp >= NC) { /* the producers: warp NC + j's lane 0 fills units u = j, j + npw, .. */
        const int pw = wp - NC, upt = nsb / cu;
        /* unit u = (p nt + ti) upt + k; this warp's u = pw, pw + npw, ..; slot u % R and round parity counted */
        const int nu = P * nt * upt;
        int slot = pw % R;
        uint32_t par = (uint32_t)(pw / R) & 1u;
        for (int u = pw; u < nu; u += npw) {
            const int pt = u / upt, k = u - pt * upt, p = pt / nt, ti = pt - p * nt;
            const uint8_t *src = Wp[p] + ((size_t)(b + ti * G) * nsb + (size_t)k * cu) * Q4K_TM_SB;
            if (pk) { /* CHAIN_PK=1: every lane's 16-byte cp.async, then its arrival when they have landed */
                mbar_wait(empty_sa + 8 * slot, par ^ 1u);
                for (int c = lane; c < ub / 16; c += 32) mmv_cp16(ring + (size_t)slot * ub + 16 * c, src + 16 * c);
                asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];" ::"r"(full_sa + 8 * slot)
                             : "memory");
            } else if (lane == 0) {
                mbar_wait(empty_sa + 8 * slot, par ^ 1u);
                mbar_expect_tx(full_sa + 8 * slot, (uint32_t)ub);
                bulk_g2s(ring_sa + slot * ub, src, (uint32_t)ub, full_sa + 8 * slot);
            }
            for (slot += npw; slot >= R; slot -= R) par ^= 1u;
        }
        return;
    }
    const float *S = (const float *)(buf + (size_t)nsb * MQ_SB_B), *sinv = S + (size_t)nsb * 8;
    unsigned epoch = 0;
    for (int p = 0; p < P; p++) {
        if constexpr (PREP) {
            const float *xp = p ? ybuf + (size_t)(p - 1) * a.n_out[0] : a.x;
            const float ss = mmvq_prep_part(xp, a.in, threadIdx.x);
            if (lane == 0) red[wp] = ss;
            chain_bar(32 * NC);
            const float inv = mmvq_prep_inv(red, a.in, a.eps);
            for (int sb = wp; sb < nsb; sb += NC) {
                const float4 *xq = (const float4 *)(xp + (int64_t)sb * 256 + 8 * lane);
                const float4 *wq = (const float4 *)(a.nw + (int64_t)sb * 256 + 8 * lane);
                mmvq_prep_sb(__ldg(xq), __ldg(xq + 1), __ldg(wq), __ldg(wq + 1), true, inv, lane,
                             pl_sh + (size_t)sb * MQ_SB_B, S_sh + sb * 8, sinv_sh + sb, mb_sh + sb * MQ_MB_B);
            }
            chain_bar(32 * NC);
        }
        for (int i = wp; i < nit; i += NC) {
            const int ti = i / ks, r = i % ks, sb0 = r * nsb / ks, sb1 = (r + 1) * nsb / ks;
            float acc[1][1][4] = {{{0.0f, 0.0f, 0.0f, 0.0f}}};
            mmvq_raw cur[1];
            /* the item's first super-block's unit, slot and round parity (32-bit, once an item: session 36's
             * form divided 64-bit integers by R twice a super-block), then counted forward */
            const int q0 = (p * nt + ti) * nsb + sb0, uq0 = q0 / cu;
            int ofs = q0 - uq0 * cu, slot = uq0 % R;
            uint32_t par = (uint32_t)(uq0 / R) & 1u;
#pragma unroll 1
            for (int sb = sb0; sb < sb1; sb++) {
                mbar_wait(full_sa + 8 * slot, par);
                cur[0].load_sh(ring + (size_t)slot * ub + (size_t)ofs * Q4K_TM_SB, g, t);
                __syncwarp();
                if (lane == 0) /* one of the unit's cu consumptions */
                    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(empty_sa + 8 * slot) : "memory");
                if (++ofs == cu) {
                    ofs = 0;
                    if (++slot == R) slot = 0, par ^= 1u;
                }
                if constexpr (PREP) {
                    const mmvq_shsrc src{pl_sh, S_sh, sinv_sh, (size_t)nsb, (size_t)sb, mb_sh};
                    mmvq_sb_lean<1, mmvq_shsrc, 1>(cur, acc, src, 1, g, t); /* production's arithmetic */
                } else {
                    const mmvq_gsrc src{buf, S, sinv, (size_t)nsb, (size_t)sb};
                    mmvq_sb_raw<1, mmvq_gsrc, 1>(cur, acc, src, 1, g, t);
                }
            }
            mmvq_part_store<1, 1>(acc, part, i);
        }
        chain_bar(32 * NC);
        if (PREP) a.y[0] = ybuf + (size_t)p * a.n_out[0];
        for (int ti = 0; ti < nt; ti++) {
            const int64_t rbase[1] = {(int64_t)(b + ti * G) * 16}, nrow[1] = {a.n_out[0]};
            mmvq_part_sums<1, 1>(part + (size_t)ti * ks * 128, a, 0, rbase, nrow, nullptr, ks);
        }
        if (NOBAR)
            chain_bar(32 * NC); /* part is rewritten by the next phase */
        else
            chain_sync(ctr, epoch, nsub, 32 * NC);
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
    nsub = nsub < 0 ? 1 : nsub > CHAIN_SUBMAX ? CHAIN_SUBMAX : nsub > G ? G : nsub; /* 0: the flat release form */
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
        const double us = lab_time_us<7, false>([&]() { chain(prep, 0); }) / P;
        printf("%-10s %8.2f us a pair %4.0f%%  == base %s\n", prep ? "chain" : "chain-np", us, pct(us),
               same ? "yes" : "NO");
    }
    /* the streamer: NC consumer warps (CHAIN_NC 4, 8, 12 or 16; default 8), npw producer warps (CHAIN_NP, 1), a ring
     * of CHAIN_R slots (64 / cu) of cu super-blocks (CHAIN_CU, 1), one block an SM; stream-nobar: the same without the barrier (phases overlap: not a valid chain, the ceiling) */
    const int NC = getenv("CHAIN_NC") ? atoi(getenv("CHAIN_NC")) : 8;
    const int npw = getenv("CHAIN_NP") ? atoi(getenv("CHAIN_NP")) : 1;
    const int cu = getenv("CHAIN_CU") ? atoi(getenv("CHAIN_CU")) : 1;
    const int pk = getenv("CHAIN_PK") ? atoi(getenv("CHAIN_PK")) : 0; /* 1: the producers by lanes' cp.async */
    const int R = getenv("CHAIN_R") ? atoi(getenv("CHAIN_R")) : 64 / (cu > 0 ? cu : 1);
    /* CHAIN_KSP: the streamer's K split (default production's ks; another one adds the partials in another
     * order, so its outputs are checked against the CPU reference, not by memcmp) */
    const int ksp = getenv("CHAIN_KSP") ? atoi(getenv("CHAIN_KSP")) : ks;
    bool R_ok = true;
    if (npw < 1 || npw > CHAIN_NPMAX || cu < 1 || ksp < 1 || ksp > nsb || nsb % cu) {
        printf("chain_lab: CHAIN_NP 1..%d, CHAIN_KSP 1..nsb = %d, CHAIN_CU dividing nsb\n", CHAIN_NPMAX, nsb);
        return 1;
    }
    using skern_t = decltype(&k_chain_st<8, 0>);
    auto skern = [&](int nobar) -> skern_t {
        if (NC == 4) return nobar ? k_chain_st<4, 1> : k_chain_st<4, 0>;
        if (NC == 12) return nobar ? k_chain_st<12, 1> : k_chain_st<12, 0>;
        if (NC == 16) return nobar ? k_chain_st<16, 1> : k_chain_st<16, 0>;
        return nobar ? k_chain_st<8, 1> : k_chain_st<8, 0>;
    };
    /* A consumer must never wait on a slot two rounds ahead of its last completed round: mbarrier parity waits
     * cannot tell round r from round r - 2, so it would read the older unit's bytes and arrive on its empty
     * barrier twice (what hung runs 2-3 on {12288, 4096}). With the NC consumers on consecutive items, the
     * furthest is NC items past the lowest unread super-block; refuse rings shorter than that. */
    {
        const int il = nsb / ksp, span = (NC * il - 1 + (il % cu ? cu - 1 : 0)) / cu;
        if (span > R - 1) {
            printf("stream: ring of %d units too short for %d consumers on items of %d super-blocks (needs > %d)\n",
                   R, NC, il, span);
            R_ok = false;
        }
    }
    const int ntile = (int)(n_out / 16), ntmax = (ntile - 1) / nsm + 1;
    const size_t ssm = (size_t)R * cu * Q4K_TM_SB + (size_t)ntmax * ksp * 512 + 16 * (size_t)R;
    printf("stream: grid %d x (%d + %d) warps, ring %d x %d bytes, K split %d, %zu bytes of shared memory\n", nsm, NC,
           npw, R, cu * Q4K_TM_SB, ksp, ssm);
    for (int nobar = 0; nobar < 2 && ssm <= 232448 && R >= 1 && R_ok; nobar++) {
        CK(cudaFuncSetAttribute(skern(nobar), cudaFuncAttributeMaxDynamicSharedMemorySize, (int)ssm));
        auto run = [&]() {
            CK(cudaMemsetAsync(ctr, 0, sizeof(unsigned) * CHAIN_CTR, 0));
            skern(nobar)<<<nsm, 32 * (NC + npw), ssm, 0>>>(a, dwp, P, pbuf, ctr, nsub, R, nullptr, npw, cu, pk, ksp);
        };
        CK(cudaMemset(dy, 0xFF, sizeof(float) * n_out));
        run();
        CK(cudaDeviceSynchronize());
        CK(cudaGetLastError());
        lab_get(hv, dy, n_out);
        const bool same = !memcmp(hv, hp, sizeof(float) * n_out);
        const double es = lab_err(hv, refn, n_out, mrefn);
        fails += ksp == ks ? !same : !(es <= 1e-5);
        const double us = lab_time_us<7, false>([&]() { run(); }) / P;
        if (ksp != ks)
            printf("%-12s %8.2f us a pair %4.0f%%  err %.2e %s (K split %d: other bits than base)\n",
                   nobar ? "stream-nobar" : "stream", us, pct(us), es, es <= 1e-5 ? "ok" : "FAIL", ksp);
        else
            printf("%-12s %8.2f us a pair %4.0f%%  == base %s\n", nobar ? "stream-nobar" : "stream", us, pct(us),
                   same ? "yes" : "NO");
    }
    /* the real chain (n_out >= in): base pairs whose input is the previous pair's output, against the streamer
     * with its in-block prep (stream-prep); the last phase's outputs compared */
    if (n_out >= in && R_ok && ssm + (size_t)nsb * (MQ_SB_B + 36 + MQ_MB_B) <= 232448) {
        float *yb;
        CK(cudaMalloc(&yb, sizeof(float) * n_out * P));
        int k = 0;
        auto bchain = [&](int, cudaStream_t st) {
            mmv_args b2 = a;
            b2.W[0] = ct[k % nct];
            b2.x = k ? yb + (size_t)(k - 1) * n_out : pb.dx;
            b2.y[0] = yb + (size_t)k * n_out;
            CK(mmvq_launch(MEMRA_TYPE_Q4_K, b2, pbuf, st, true, nsm));
            k = (k + 1) % P;
        };
        CK(cudaMemset(yb, 0xFF, sizeof(float) * n_out * P));
        const double bcu = lab_graph_us(bchain, P, nct);
        lab_get(hp, yb + (size_t)(P - 1) * n_out, n_out);
        printf("%-12s %8.2f us a pair %4.0f%%  (pair p's input: pair p - 1's output)\n", "base-chain", bcu, pct(bcu));
        const size_t psm = ssm + (size_t)nsb * (MQ_SB_B + 36 + MQ_MB_B);
        const int pnc = NC == 12 || NC == 16 ? NC : 8; /* stream-prep: NC 8 (default), 12 or 16 */
        auto pkern = pnc == 16 ? k_chain_st<16, 0, 1> : pnc == 12 ? k_chain_st<12, 0, 1> : k_chain_st<8, 0, 1>;
        CK(cudaFuncSetAttribute(pkern, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)psm));
        auto run = [&]() {
            CK(cudaMemsetAsync(ctr, 0, sizeof(unsigned) * CHAIN_CTR, 0));
            pkern<<<nsm, 32 * (pnc + npw), psm, 0>>>(a, dwp, P, pbuf, ctr, nsub, R, yb, npw, cu, pk, ksp);
        };
        CK(cudaMemset(yb, 0xFF, sizeof(float) * n_out * P));
        run();
        CK(cudaDeviceSynchronize());
        CK(cudaGetLastError());
        lab_get(hv, yb + (size_t)(P - 1) * n_out, n_out);
        const bool same = !memcmp(hv, hp, sizeof(float) * n_out);
        double dm = 0.0, am = 0.0; /* the last phase against base-chain's: largest difference / largest value */
        for (int64_t i = 0; i < n_out; i++) {
            const double d = fabs((double)hv[i] - hp[i]);
            dm = d > dm || d != d ? d : dm, am = fabs(hp[i]) > am ? fabs(hp[i]) : am;
        }
        fails += ksp == ks ? !same : !(dm <= 1e-4 * am);
        const double us = lab_time_us<7, false>([&]() { run(); }) / P;
        if (ksp != ks)
            printf("%-12s %8.2f us a pair %4.0f%%  vs base-chain %.2e of max %s (K split %d: other bits)\n",
                   "stream-prep", us, pct(us), am > 0 ? dm / am : dm, dm <= 1e-4 * am ? "ok" : "FAIL", ksp);
        else
            printf("%-12s %8.2f us a pair %4.0f%%  == base-chain %s\n", "stream-prep", us, pct(us),
                   same ? "yes" : "NO");
        cudaFree(yb);
    }
    for (int i = 1; i < nct; i++) cudaFree((void *)ct[i]);
    cudaFree((void *)dtm), cudaFree(dnw), cudaFree(pbuf), cudaFree(dy), cudaFree(ctr), cudaFree(dwp);
    lab_mv_free(&pb), free(hnw), free(refn), free(hp), free(hv);
    return fails ? 1 : 0;
}
