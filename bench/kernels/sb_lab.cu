/* Lab (not wired into the backend): what one super-block of the T = 1 int8
 * decode matvec costs a warp, with its weights already in shared memory.
 *
 * Why (session 36, bench/results/2026-12-07h-h100.md): chain_lab's
 * streamer, whose ring is always ahead, took ~3.3 us for a phase of four
 * super-blocks a warp (~0.7 us a super-block, one warp), and ran at 37-39%
 * of copy with 8-12 warps an SM even without barriers; MEMRA_DIAG_NOMATH
 * (no arithmetic in k_mmvq_tm) lifts a 9b step 17%. So the per-super-block
 * chain, not the stream, sets each warp's pace. Here the same 16-row tile
 * (nsb super-blocks, all in shared memory, no ring) is multiplied over and
 * over by one warp (latency: clock64 a super-block) and by full grids
 * (throughput: super-blocks a second across the GPU, as bytes of weights
 * a second), four ways:
 *  V0 production: mmvq_sb, the planes read from global memory (mmvq_gsrc)
 *  V1 production's arithmetic, the planes from shared memory: bit-equal to V0
 *  V2 lean (mmvq.cuh's mmvq_sb_lean, a different rounding, so compared with
 *     a tolerance), the planes from shared memory: the high nibbles masked
 *     in place (x 16; the low ones' scales x 16, the exact sum shifted back
 *     once); the scales by byte permutes; the min
 *     term M_l = sum_j m_j S_jl per limb column by two more MMAs (the mins
 *     as A, each limb's sub-block sums as s8 hi / lo bytes as B, prepared
 *     once a token as the prep would), added to its column, so no per-lane
 *     float S loads and no lanes idle on it
 *  V3 no arithmetic (the ring-free floor: LDS of one word)
 *   BUILD=build-lab REBUILD=1 bash bench/kernels/lab.sh sb_lab */
#include <math.h>

#include "backend/cuda/mmvq.cuh"
#include "lab.cuh"

#define SB_NSB 8 /* a row of 2,048: 29 KB a block, so six blocks fit an SM */

/* The lean min term's B operand of lane (g, t) for each super-block: [sb][lo, hi][32 lanes] words. Lanes t < 2,
 * g < 3: S_jl (j = 4 t + c, l = g) = the sum of limb l over sub-block j, split S = 256 hi + lo (lo a signed
 * byte), byte c of the word; 0 elsewhere. One warp a super-block. */
__global__ void k_minb(const uint8_t *buf, uint32_t *minb) {
    const int sb = blockIdx.x, lane = threadIdx.x, g = lane >> 2, t = lane & 3;
    const int8_t *pl = (const int8_t *)(buf + (size_t)sb * MQ_SB_B);
    uint32_t lo = 0, hi = 0;
    if (t < 2 && g < 3)
        for (int c = 0; c < 4; c++) {
            const int j = 4 * t + c;
            int S = 0;
            for (int q = 0; q < 4; q++)
                for (int i = 0; i < 8; i++) S += pl[g * 256 + q * 64 + j * 8 + i];
            const int l8 = (int)(int8_t)(S & 0xFF), h8 = (S - l8) >> 8;
            lo |= ((uint32_t)l8 & 0xFFu) << (8 * c), hi |= ((uint32_t)h8 & 0xFFu) << (8 * c);
        }
    minb[(sb * 2 + 0) * 32 + lane] = lo, minb[(sb * 2 + 1) * 32 + lane] = hi;
}

/* planes in shared memory (chain_lab's mmvq_ssrc) */
struct sb_ssrc {
    const uint8_t *planes;
    const float *S, *sinv;
    size_t nsb, sb;
    __device__ __forceinline__ const uint4 *limbs(int tok, int limb, int t) const {
        return (const uint4 *)(planes + (tok * nsb + sb) * MQ_SB_B + limb * 256 + t * 64);
    }
    __device__ __forceinline__ uint4 ld(const uint4 *p) const { return *p; }
    __device__ __forceinline__ float sx(int tok) const { return sinv[tok * nsb + sb]; }
    __device__ __forceinline__ float s(int tok, int j) const { return S[(tok * nsb + sb) * 8 + j]; }
};

/* V2: one super-block of one tile for token 0; acc as mmvq_sb's acc[0][0] */
__device__ __forceinline__ void lean_sb(const mmvq_raw &w, float (&acc)[4], const sb_ssrc &src, const uint32_t *mb,
                                        int g, int t, int lane) {
    const uint4 *bp = g < 3 ? src.limbs(0, g, t) : nullptr;
    const float sxv = src.sx(0);
    const float sx[2] = {2 * t < 3 ? sxv : 0.0f, 2 * t + 1 < 3 ? sxv : 0.0f};
    uint32_t sc[2][2];
#pragma unroll
    for (int r = 0; r < 2; r++) {
        const uint4 h = w.head[r];
        sc[r][0] = h.y & 0x3F3F3F3Fu;
        sc[r][1] = (h.w & 0x0F0F0F0Fu) | ((h.y >> 2) & 0x30303030u);
    }
    int A[4] = {0, 0, 0, 0}; /* 16 x the scaled sums (production's mmvq_sb_lean) */
#pragma unroll
    for (int k = 0; k < 4; k++) {
        const uint4 bb = bp ? bp[k] : make_uint4(0u, 0u, 0u, 0u);
        uint32_t lo[2][2], hi[2][2];
#pragma unroll
        for (int r = 0; r < 2; r++) {
            const uint2 q = w.qs[r][k];
            lo[r][0] = q.x & 0x0F0F0F0Fu, lo[r][1] = q.y & 0x0F0F0F0Fu;
            hi[r][0] = q.x & 0xF0F0F0F0u, hi[r][1] = q.y & 0xF0F0F0F0u; /* 16 x the high nibbles */
        }
        int c0[4] = {0, 0, 0, 0}, c1[4] = {0, 0, 0, 0};
        mmvq_imma(c0, lo[0][0], lo[1][0], lo[0][1], lo[1][1], bb.x, bb.y);
        mmvq_imma(c1, hi[0][0], hi[1][0], hi[0][1], hi[1][1], bb.z, bb.w);
        const int j0 = 2 * k, j1 = 2 * k + 1;
#pragma unroll
        for (int r = 0; r < 2; r++) {
            const int s0 = (int)__byte_perm(sc[r][j0 >> 2], 0u, 0x4440u | (uint32_t)(j0 & 3)) << 4;
            const int s1 = (int)__byte_perm(sc[r][j1 >> 2], 0u, 0x4440u | (uint32_t)(j1 & 3));
            A[2 * r] += s0 * c0[2 * r] + s1 * c1[2 * r], A[2 * r + 1] += s0 * c0[2 * r + 1] + s1 * c1[2 * r + 1];
        }
    }
    /* the mins of rows g, g + 8 for k = 4 t .. 4 t + 3 (sub-blocks 0..3 at t = 0, 4..7 at t = 1) */
    uint32_t am[2];
#pragma unroll
    for (int r = 0; r < 2; r++) {
        const uint4 h = w.head[r];
        const uint32_t m0 = h.z & 0x3F3F3F3Fu, m1 = ((h.w >> 4) & 0x0F0F0F0Fu) | ((h.z >> 2) & 0x30303030u);
        am[r] = t == 0 ? m0 : t == 1 ? m1 : 0u;
    }
    int cl[4] = {0, 0, 0, 0}, ch[4] = {0, 0, 0, 0};
    mmvq_imma(cl, am[0], am[1], 0u, 0u, mb[lane], 0u);
    mmvq_imma(ch, am[0], am[1], 0u, 0u, mb[32 + lane], 0u);
#pragma unroll
    for (int r = 0; r < 2; r++) {
        const uint32_t hx = w.head[r].x;
        const float d = __half2float(__ushort_as_half((unsigned short)(hx & 0xFFFF)));
        const float dm = __half2float(__ushort_as_half((unsigned short)(hx >> 16)));
#pragma unroll
        for (int e = 0; e < 2; e++) {
            const int i = 2 * r + e;
            const int a = A[i] >> 4, m = cl[i] + 256 * ch[i];
            acc[i] = fmaf(__fmul_rn(d, sx[e]), (float)a, acc[i]);
            acc[i] = fmaf(-__fmul_rn(dm, sx[e]), (float)m, acc[i]);
        }
    }
}

/* Launch contract: block 32 w, dynamic shared memory sb_smem(nsb). Every warp multiplies the tile's super-blocks
 * it % nsb for it = 0 .. iters - 1 (V below); out[warp][16]: the rows' values (mmvq_part_sums' combination);
 * cyc: block 0 warp 0's clock64 cycles over the loop. */
static inline size_t sb_smem(int nsb, int warps) {
    return (size_t)nsb * (Q4K_TM_SB + MQ_SB_B + 36 + 256) + (size_t)warps * 512;
}
template <int V>
__global__ void __launch_bounds__(256) k_sb(const uint8_t *tile, const uint8_t *buf, const uint32_t *minb, int nsb,
                                            int iters, float *out, long long *cyc) {
    extern __shared__ __align__(16) uint8_t sh[];
    uint8_t *wt = sh, *pl = sh + (size_t)nsb * Q4K_TM_SB;
    float *S = (float *)(pl + (size_t)nsb * MQ_SB_B), *sinv = S + nsb * 8;
    uint32_t *mb = (uint32_t *)(sinv + nsb);
    float *part = (float *)(mb + nsb * 64);
    const int nw4 = nsb * (Q4K_TM_SB + MQ_SB_B + 36 + 256) / 4;
    for (int i = threadIdx.x; i < nw4; i += blockDim.x) {
        const int off = 4 * i;
        uint32_t v;
        if (off < nsb * Q4K_TM_SB)
            v = *(const uint32_t *)(tile + off);
        else if (off < nsb * (Q4K_TM_SB + MQ_SB_B + 36))
            v = *(const uint32_t *)(buf + (off - nsb * Q4K_TM_SB));
        else
            v = minb[(off - nsb * (Q4K_TM_SB + MQ_SB_B + 36)) / 4];
        *(uint32_t *)(sh + off) = v;
    }
    __syncthreads();
    const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3, wp = threadIdx.x >> 5;
    const float *gS = (const float *)(buf + (size_t)nsb * MQ_SB_B), *gsinv = gS + nsb * 8;
    float acc[1][1][4] = {{{0.0f, 0.0f, 0.0f, 0.0f}}};
    const long long t0 = clock64();
#pragma unroll 1
    for (int it = 0; it < iters; it++) {
        const int sb = it % nsb;
        const uint8_t *slot = wt + (size_t)sb * Q4K_TM_SB;
        if constexpr (V == 3) {
            acc[0][0][0] += __int_as_float(*(const int *)(slot + 4 * lane) & 0x007FFFFF);
            continue;
        }
        mmvq_raw cur[1];
        cur[0].load_sh(slot, g, t);
        if constexpr (V == 0) {
            const mmvq_gsrc src{buf, gS, gsinv, (size_t)nsb, (size_t)sb};
            mmvq_sb<1, mmvq_gsrc, 1>(cur, acc, src, 1, g, t);
        } else if constexpr (V == 1) {
            const sb_ssrc src{pl, S, sinv, (size_t)nsb, (size_t)sb};
            mmvq_sb<1, sb_ssrc, 1>(cur, acc, src, 1, g, t);
        } else {
            const sb_ssrc src{pl, S, sinv, (size_t)nsb, (size_t)sb};
            lean_sb(cur[0], acc[0][0], src, mb + sb * 64, g, t, lane);
        }
    }
    const long long t1 = clock64();
    if (blockIdx.x == 0 && threadIdx.x == 0) *cyc = t1 - t0;
    float *pw = part + wp * 128; /* [16 rows][8 columns] */
#pragma unroll
    for (int r = 0; r < 2; r++) {
        pw[(g + 8 * r) * 8 + 2 * t] = acc[0][0][2 * r];
        pw[(g + 8 * r) * 8 + 2 * t + 1] = acc[0][0][2 * r + 1];
    }
    __syncwarp();
    if (lane < 16)
        out[((size_t)blockIdx.x * (blockDim.x >> 5) + wp) * 16 + lane] = __fadd_rn(
            __fadd_rn(__fmul_rn(65536.0f, pw[lane * 8]), __fmul_rn(256.0f, pw[lane * 8 + 1])), pw[lane * 8 + 2]);
}

int main(void) {
    const double copy = lab_init();
    const int nsb = SB_NSB;
    const int64_t in = 256 * nsb;
    lab_mv pb = lab_mv_make(MEMRA_TYPE_Q4_K, in, 16, 1, 97);
    uint8_t *htm = lab_tm_repack(pb.hw, 16, nsb, 144);
    const uint8_t *dtile = lab_dev(htm, (size_t)nsb * Q4K_TM_SB);
    free(htm);
    uint8_t *buf;
    uint32_t *minb;
    float *out;
    long long *cyc;
    int nsm = 0;
    CK(cudaDeviceGetAttribute(&nsm, cudaDevAttrMultiProcessorCount, 0));
    const int maxw = nsm * 6 * 4;
    CK(cudaMalloc(&buf, MQ_BUF_BYTES));
    CK(cudaMalloc(&minb, (size_t)nsb * 256));
    CK(cudaMalloc(&out, sizeof(float) * 16 * maxw));
    CK(cudaMalloc(&cyc, sizeof(long long)));
    mmvq_prep_launch(pb.dx, nullptr, 0.0f, in, 1, buf, 0);
    k_minb<<<nsb, 32>>>(buf, minb);
    CK(cudaDeviceSynchronize());
    printf("sb_lab: one 16-row Q4_K tile of %d super-blocks in shared memory, T = 1; copy %.0f GB/s; %d SMs\n", nsb,
           copy, nsm);
    using kt = decltype(&k_sb<0>);
    const kt ks[4] = {k_sb<0>, k_sb<1>, k_sb<2>, k_sb<3>};
    const char *name[4] = {"V0 production (planes global)", "V1 production (planes shared)", "V2 lean",
                           "V3 no arithmetic"};
    float ref[16], got[16];
    int fails = 0;
    for (int v = 0; v < 4; v++) {
        const size_t sm = sb_smem(nsb, 8);
        CK(cudaFuncSetAttribute(ks[v], cudaFuncAttributeMaxDynamicSharedMemorySize, (int)sm));
        /* latency: one warp, 256 super-blocks */
        long long c = 0;
        ks[v]<<<1, 32, sm>>>(dtile, buf, minb, nsb, 256, out, cyc);
        CK(cudaDeviceSynchronize());
        ks[v]<<<1, 32, sm>>>(dtile, buf, minb, nsb, 256, out, cyc);
        CK(cudaDeviceSynchronize());
        CK(cudaMemcpy(&c, cyc, sizeof c, cudaMemcpyDeviceToHost));
        lab_get(got, out, 16);
        if (v == 0) memcpy(ref, got, sizeof ref);
        double md = 0, mr = 0;
        for (int i = 0; i < 16; i++) md = fmax(md, fabs((double)got[i] - ref[i])), mr = fmax(mr, fabs(ref[i]));
        const bool same = !memcmp(got, ref, sizeof ref);
        if (v == 1) fails += !same;
        if (v == 2) fails += !(md <= 1e-5 * mr);
        printf("%-32s latency %6.0f cycles a super-block (1 warp)  vs V0: %s (max diff %.2e of %.2e)\n", name[v],
               (double)c / 256, same ? "bit-equal" : "differs", md, mr);
        /* throughput: grids of W warps an SM (blocks of 4 warps), 512 super-blocks a warp */
        for (int W = 8; W <= 24; W += 8) {
            const int blocks = nsm * W / 4, it = 512;
            const size_t s4 = sb_smem(nsb, 4);
            if (s4 * (W / 4) > 227 * 1024) continue;
            auto launch = [&]() { ks[v]<<<blocks, 128, s4>>>(dtile, buf, minb, nsb, it, out, cyc); };
            launch();
            CK(cudaDeviceSynchronize());
            float ms[5];
            cudaEvent_t e1, e2;
            CK(cudaEventCreate(&e1));
            CK(cudaEventCreate(&e2));
            for (int r = 0; r < 5; r++) {
                CK(cudaEventRecord(e1));
                launch();
                CK(cudaEventRecord(e2));
                CK(cudaEventSynchronize(e2));
                CK(cudaEventElapsedTime(&ms[r], e1, e2));
            }
            qsort(ms, 5, sizeof ms[0], lab_cmp_f);
            const double gbs = (double)blocks * 4 * it * Q4K_TM_SB / (ms[2] * 1e-3) / 1e9;
            printf("    %2d warps an SM: %7.0f GB/s of weights (%.2f x copy), %.3f ms\n", W, gbs, gbs / copy, ms[2]);
            cudaEventDestroy(e1), cudaEventDestroy(e2);
        }
    }
    cudaFree((void *)dtile), cudaFree(buf), cudaFree(minb), cudaFree(out), cudaFree(cyc);
    lab_mv_free(&pb);
    printf("sb_lab: %s\n", fails ? "FAILED" : "ok");
    return fails ? 1 : 0;
}
