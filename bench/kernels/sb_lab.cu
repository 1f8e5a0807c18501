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
 *  V0 mmvq_sb (production's until 41bb2c9), the planes read from global
 *     memory (mmvq_gsrc)
 *  V1 mmvq_sb, the planes from shared memory: bit-equal to V0
 *  V2 mmvq_sb_lean (production's since 41bb2c9; a different rounding of the
 *     min term, so compared with a tolerance), the planes and the prep's
 *     per-limb sums from shared memory: the high nibbles masked in place
 *     (x 16; the low ones' scales x 16, the exact sum shifted back once);
 *     the scales by byte permutes; the min term M_n = sum_j m_j S_jn per
 *     limb column from two more MMAs (A: the mins, B: the sums' lo and hi
 *     bytes), so no per-lane float S loads and no lanes idle on it
 *  V3 no arithmetic (the ring-free floor: LDS of one word)
 *  V4 mmvq_sb_lean with the planes from global memory, as k_mmvq_tm reads
 *     them: bit-equal to V2
 *  V5, V6 a Q6_K tile (production's tile-major form, 3,360 bytes a
 *     super-block) through production's mmvq_sb6, the planes from global
 *     or shared memory (bit-equal to each other)
 *  V7, V8 the same through mmvq_sb6_split (mmvq_sb_ref.cuh; one MMA a
 *     sub-block, the halves' sums in separate B columns), planes global or
 *     shared: both bit-equal to V5. Session 37 (2026-12-07i): 1467 -> 1179
 *     cycles, 1.02 -> 1.27 x copy at 16 warps an SM; slower in the 9b step
 * Run 3 of bench/results/2026-12-07h-h100.md ran V0-V3 with V2 as a copy of
 * the same arithmetic inside this file (the sums' words laid out per lane);
 * V4 was added after it (first run in run 4 there).
 *   BUILD=build-lab REBUILD=1 bash bench/kernels/lab.sh sb_lab */
#include <math.h>

#include "backend/cuda/mmvq.cuh"
#include "mmvq_sb_ref.cuh"
#include "mmvq_shsrc.cuh"
#include "lab.cuh"

#define SB_NSB 8 /* a row of 2,048: 29 KB a block, so six blocks fit an SM */

/* Launch contract: block 32 w, dynamic shared memory sb_smem(nsb, w). Every warp multiplies the tile's
 * super-blocks it % nsb for it = 0 .. iters - 1 (V above); buf: the prep's output for one token (planes, S,
 * 2^-e, the per-limb sums: SB_PREP bytes a super-block, copied to shared memory after the tile); out[warp][16]:
 * the rows' values (mmvq_part_sums' combination); cyc: block 0 warp 0's clock64 cycles over the loop. */
#define SB_PREP (MQ_SB_B + 36 + MQ_MB_B)
static inline size_t sb_smem(int nsb, int warps, int tb) { return (size_t)nsb * (tb + SB_PREP) + (size_t)warps * 512; }
template <int V>
__global__ void __launch_bounds__(256) k_sb(const uint8_t *tile, const uint8_t *buf, int nsb, int iters, float *out,
                                            long long *cyc) {
    constexpr int TB = V >= 5 ? Q6K_TM_SB : Q4K_TM_SB; /* a tile's super-block */
    extern __shared__ __align__(16) uint8_t sh[];
    uint8_t *wt = sh, *pl = sh + (size_t)nsb * TB;
    float *S = (float *)(pl + (size_t)nsb * MQ_SB_B), *sinv = S + nsb * 8;
    const uint8_t *mb = (const uint8_t *)(sinv + nsb);
    float *part = (float *)(sh + (size_t)nsb * (TB + SB_PREP));
    for (int i = threadIdx.x; i < nsb * (TB + SB_PREP) / 4; i += blockDim.x) {
        const int off = 4 * i;
        *(uint32_t *)(sh + off) =
            off < nsb * TB ? *(const uint32_t *)(tile + off) : *(const uint32_t *)(buf + (off - nsb * TB));
    }
    __syncthreads();
    const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3, wp = threadIdx.x >> 5;
    const float *gS = (const float *)(buf + (size_t)nsb * MQ_SB_B), *gsinv = gS + nsb * 8;
    float acc[1][1][4] = {{{0.0f, 0.0f, 0.0f, 0.0f}}};
    const long long t0 = clock64();
#pragma unroll 1
    for (int it = 0; it < iters; it++) {
        const int sb = it % nsb;
        const uint8_t *slot = wt + (size_t)sb * TB;
        if constexpr (V == 3) {
            acc[0][0][0] += __int_as_float(*(const int *)(slot + 4 * lane) & 0x007FFFFF);
            continue;
        }
        const mmvq_gsrc gsrc{buf, gS, gsinv, (size_t)nsb, (size_t)sb};
        const mmvq_shsrc ssrc{pl, S, sinv, (size_t)nsb, (size_t)sb, mb};
        if constexpr (V >= 5) {
            mmvq_raw6 cur6[1];
            cur6[0].load_sh(slot, g, t);
            if constexpr (V == 5)
                mmvq_sb6<1, mmvq_gsrc, 1>(cur6, acc, gsrc, 1, g, t);
            else if constexpr (V == 6)
                mmvq_sb6<1, mmvq_shsrc, 1>(cur6, acc, ssrc, 1, g, t);
            else if constexpr (V == 7)
                mmvq_sb6_split<1, mmvq_gsrc, 1>(cur6, acc, gsrc, 1, g, t);
            else
                mmvq_sb6_split<1, mmvq_shsrc, 1>(cur6, acc, ssrc, 1, g, t);
            continue;
        }
        mmvq_raw cur[1];
        cur[0].load_sh(slot, g, t);
        if constexpr (V == 0)
            mmvq_sb<1, mmvq_gsrc, 1>(cur, acc, gsrc, 1, g, t);
        else if constexpr (V == 1)
            mmvq_sb<1, mmvq_shsrc, 1>(cur, acc, ssrc, 1, g, t);
        else if constexpr (V == 2)
            mmvq_sb_lean<1, mmvq_shsrc, 1>(cur, acc, ssrc, 1, g, t);
        else
            mmvq_sb_lean<1, mmvq_gsrc, 1>(cur, acc, gsrc, 1, g, t);
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
    lab_mv pb = lab_mv_make(MEMRA_TYPE_Q4_K, in, 16, 1, 97), pb6 = lab_mv_make(MEMRA_TYPE_Q6_K, in, 16, 1, 97);
    uint8_t *htm = lab_tm_repack(pb.hw, 16, nsb, 144);
    const uint8_t *dtile = lab_dev(htm, (size_t)nsb * Q4K_TM_SB);
    free(htm);
    htm = lab_tm_repack(pb6.hw, 16, nsb, 210); /* production's Q6_K tile-major form, the blocks intact */
    const uint8_t *dtile6 = lab_dev(htm, (size_t)nsb * Q6K_TM_SB);
    free(htm);
    uint8_t *buf;
    float *out;
    long long *cyc;
    int nsm = 0;
    CK(cudaDeviceGetAttribute(&nsm, cudaDevAttrMultiProcessorCount, 0));
    const int maxw = nsm * 6 * 4;
    CK(cudaMalloc(&buf, MQ_BUF_BYTES));
    CK(cudaMalloc(&out, sizeof(float) * 16 * maxw));
    CK(cudaMalloc(&cyc, sizeof(long long)));
    mmvq_prep_launch(pb.dx, nullptr, 0.0f, in, 1, buf, 0);
    CK(cudaDeviceSynchronize());
    printf("sb_lab: one 16-row Q4_K tile of %d super-blocks in shared memory, T = 1; copy %.0f GB/s; %d SMs\n", nsb,
           copy, nsm);
    using kt = decltype(&k_sb<0>);
    const kt ks[9] = {k_sb<0>, k_sb<1>, k_sb<2>, k_sb<3>, k_sb<4>, k_sb<5>, k_sb<6>, k_sb<7>, k_sb<8>};
    const char *name[9] = {"V0 mmvq_sb, planes global",      "V1 mmvq_sb, planes shared",
                           "V2 mmvq_sb_lean, shared",        "V3 no arithmetic",
                           "V4 mmvq_sb_lean, planes global", "V5 Q6_K mmvq_sb6, planes global",
                           "V6 Q6_K mmvq_sb6, planes shared", "V7 Q6_K mmvq_sb6_split, global",
                           "V8 Q6_K mmvq_sb6_split, shared"};
    float ref[16], ref2[16], ref6[16], got[16];
    int fails = 0;
    for (int v = 0; v < 9; v++) {
        const int tb = v >= 5 ? Q6K_TM_SB : Q4K_TM_SB;
        const uint8_t *tile = v >= 5 ? dtile6 : dtile;
        const size_t sm = sb_smem(nsb, 8, tb);
        CK(cudaFuncSetAttribute(ks[v], cudaFuncAttributeMaxDynamicSharedMemorySize, (int)sm));
        /* latency: one warp, 256 super-blocks */
        long long c = 0;
        ks[v]<<<1, 32, sm>>>(tile, buf, nsb, 256, out, cyc);
        CK(cudaDeviceSynchronize());
        ks[v]<<<1, 32, sm>>>(tile, buf, nsb, 256, out, cyc);
        CK(cudaDeviceSynchronize());
        CK(cudaMemcpy(&c, cyc, sizeof c, cudaMemcpyDeviceToHost));
        lab_get(got, out, 16);
        if (v == 0) memcpy(ref, got, sizeof ref);
        if (v == 2) memcpy(ref2, got, sizeof ref2);
        if (v == 5) memcpy(ref6, got, sizeof ref6);
        double md = 0, mr = 0;
        for (int i = 0; i < 16; i++) md = fmax(md, fabs((double)got[i] - ref[i])), mr = fmax(mr, fabs(ref[i]));
        const bool same = !memcmp(got, ref, sizeof ref), same2 = !memcmp(got, ref2, sizeof ref2);
        if (v == 1) fails += !same;
        if (v == 2) fails += !(md <= 1e-5 * mr);
        if (v == 4) fails += !same2;
        if (v >= 6) fails += !!memcmp(got, ref6, sizeof ref6);
        if (v >= 5)
            printf("%-32s latency %6.0f cycles a super-block (1 warp, 3,360 bytes)%s\n", name[v], (double)c / 256,
                   v >= 6 ? (memcmp(got, ref6, sizeof ref6) ? "  NOT bit-equal to V5" : "  bit-equal to V5") : "");
        else
            printf("%-32s latency %6.0f cycles a super-block (1 warp)  vs V0: %s (max diff %.2e of %.2e)%s\n",
                   name[v], (double)c / 256, same ? "bit-equal" : "differs", md, mr,
                   v == 4 ? (same2 ? ", bit-equal to V2" : ", NOT bit-equal to V2") : "");
        /* throughput: grids of W warps an SM (blocks of 4 warps), 512 super-blocks a warp */
        for (int W = 8; W <= 24; W += 8) {
            const int blocks = nsm * W / 4, it = 512;
            const size_t s4 = sb_smem(nsb, 4, tb);
            if (s4 * (W / 4) > 227 * 1024) continue;
            auto launch = [&]() { ks[v]<<<blocks, 128, s4>>>(tile, buf, nsb, it, out, cyc); };
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
            const double gbs = (double)blocks * 4 * it * tb / (ms[2] * 1e-3) / 1e9;
            printf("    %2d warps an SM: %7.0f GB/s of weights (%.2f x copy), %.3f ms\n", W, gbs, gbs / copy, ms[2]);
            cudaEventDestroy(e1), cudaEventDestroy(e2);
        }
    }
    cudaFree((void *)dtile), cudaFree((void *)dtile6), cudaFree(buf), cudaFree(out), cudaFree(cyc);
    lab_mv_free(&pb), lab_mv_free(&pb6);
    printf("sb_lab: %s\n", fails ? "FAILED" : "ok");
    return fails ? 1 : 0;
}
