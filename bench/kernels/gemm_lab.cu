/* Prefill GEMM lab (src/backend/cuda/gemm.cu). NOT YET RUN: written at the
 * end of the 2026-12-03 night session, after the device time was spent.
 *
 * Why: k_gemm_q8 (Q8_0) and mmvg (Q4_K) run at ~100 TFLOP/s useful.
 * Nsight Compute on k_gemm_q8's {4096, 8192} launch at T = 512
 * (bench/results/2026-12-03d-h200.md) has L1/shared 65% busy, from ldmatrix
 * traffic, and the tensor pipe 32%. Its warps own 64 tokens x 32 rows, so
 * each MMA costs 160 bytes of ldmatrix. Two candidates:
 * - k_gemm_q8_wide (Q8_0): a warp owns 64 x 64 (96 bytes per MMA), blocks
 *   of 4 warps, 2 per SM, so the SM still holds 8 warps. ptxas: 255
 *   registers, ~250 bytes spilled.
 * - k_gemm_wg<Q8_0 | Q4_K>: the same exact-weight arithmetic on wgmma (both
 *   operands read from shared memory by the tensor cores, no ldmatrix);
 *   244 / 255 registers, no spill. Q4_K adds the min term per group from
 *   the x group sums.
 *
 * Checks, before any timing:
 * - k_gemm_wg's token 0 against the CPU reference (memra_dot_row, 3e-4 of
 *   max|ref|, the gate's prefill bar), and its rows of tokens 64-163 equal
 *   (memcmp) to a launch of those 100 tokens alone;
 * - Q8_0: k_gemm_q8's token 0 against the CPU; k_gemm_q8_wide computes every
 *   output element with k_gemm_q8's chain (per 32-column group: MMAs lo k
 *   0-15 from zero, lo k 16-31, hi k 0-15, hi k 16-31, then acc = fma(C, d,
 *   acc)), so the outputs must be equal (memcmp); k_gemm_wg within 1e-6 of
 *   max|y| of k_gemm_q8.
 * Times: median of 15 single launches after an L2 flush; k_gemm_xsplit is
 * not included. Exit status 1 when a check fails.
 *
 *   BUILD=build-lab REBUILD=1 bash bench/kernels/lab.sh gemm_lab [T in n_out [q8_0|q4_k]]
 * (defaults 512 4096 12288 q8_0: 9B gate / up; also 512 12288 4096, and
 * 512 5120 17408 q4_k: 27B gate / up) */
#define MEMRA_GEMM_LAB
#include "backend/cuda/gemm.cu"
#include "lab.cuh"

/* Launch contract: grid (ceil(T / 128), ceil(n_out / 128)), block 128, 2 *
 * GQ_STAGE_BYTES of dynamic shared memory; in % 64 == 0. k_gemm_q8 with warp
 * w owning tokens 64 (w / 2) .. + 64 x rows 64 (w % 2) .. + 64; staging:
 * thread i converts both groups of row i and copies 16 x chunks. */
__global__ void __launch_bounds__(128, 2)
    k_gemm_q8_wide(const uint8_t *__restrict__ W, size_t row_bytes, int64_t in, int64_t n_out,
                   const __half *__restrict__ xp, const float *__restrict__ xscale, float *__restrict__ y, int64_t T,
                   int accumulate) {
    extern __shared__ __align__(16) __half g_sm[];
    const int tid = threadIdx.x, lane = tid & 31, w = tid >> 5;
    const int64_t t0 = (int64_t)blockIdx.x * GM, r0 = (int64_t)blockIdx.y * GN;
    const bool wok = r0 + tid < n_out;
    const uint32_t *wrow = (const uint32_t *)(W + (wok ? r0 + tid : 0) * row_bytes);
    const __half *xcol = xp + 8 * (tid & 7);
    auto xcopy = [&](__half *st, int64_t kt) {
#pragma unroll
        for (int j = 0; j < 16; j++) {
            const int64_t t = t0 + (tid >> 3) + 16 * (j & 7);
            mmv_cp16(st + (j >> 3) * GM * GLD + ((tid >> 3) + 16 * (j & 7)) * GLD + 8 * (tid & 7),
                     xcol + ((j >> 3) * T + (t < T ? t : T - 1)) * in + 64 * kt);
        }
        mmv_cp_commit();
    };
    uint32_t v[17];
    auto wload = [&](int64_t kt) {
        const uint32_t *p = wrow + 17 * kt;
#pragma unroll
        for (int i = 0; i < 17; i++) v[i] = __ldg(p + i);
    };
    /* group 0: d in bytes 0-1, q in bytes 2-33; group 1: d in bytes 34-35, q in words 9-16 */
    auto wstore = [&](__half *st) {
        __half *ws = st + 2 * GM * GLD + tid * GLD;
        float *ds = (float *)(st + GQ_STAGE_HALVES);
#pragma unroll
        for (int g = 0; g < 2; g++) {
            uint32_t hw[16];
#pragma unroll
            for (int i = 0; i < 8; i++)
                g_q8_to_h2(wok ? (g ? v[9 + i] : __funnelshift_r(v[i], v[i + 1], 16)) : 0u, &hw[2 * i], &hw[2 * i + 1]);
#pragma unroll
            for (int i = 0; i < 4; i++)
                ((uint4 *)(ws + 32 * g))[i] = make_uint4(hw[4 * i], hw[4 * i + 1], hw[4 * i + 2], hw[4 * i + 3]);
            const uint16_t d = (uint16_t)(g ? v[8] >> 16 : v[0]);
            ds[2 * tid + g] = wok ? __half2float(__ushort_as_half(d)) : 0.0f;
        }
    };

    float acc[2][4][4][4]; /* [row half][mi][ni][c] */
    g_zero(acc[0]), g_zero(acc[1]);
    const int wm = (w >> 1) * 64, wn = (w & 1) * 64;
    const int a_off = (wm + (lane & 15)) * GLD + (lane >> 4) * 8;
    const int b_off = (wn + (lane & 7) + ((lane >> 4) << 3)) * GLD + ((lane >> 3) & 1) * 8;

    const int64_t nk = in / GK;
    xcopy(g_sm, 0);
    wload(0);
    wstore(g_sm);
    mmv_cp_wait<0>();
    __syncthreads();
    for (int64_t kt = 0; kt < nk; kt++) {
        const __half *cur = g_sm + (kt & 1) * (GQ_STAGE_BYTES / 2);
        __half *nxt = g_sm + ((kt + 1) & 1) * (GQ_STAGE_BYTES / 2);
        const bool more = kt + 1 < nk;
        if (more) xcopy(nxt, kt + 1), wload(kt + 1);
        const float *ds = (const float *)(cur + GQ_STAGE_HALVES);
#pragma unroll
        for (int g = 0; g < 2; g++) {
            uint32_t b[2][8][2]; /* b[k16][ni] */
            float dv[8][2];
            g_q8_b<8>(b, cur, b_off, g);
            g_q8_dv<8>(dv, ds, wn, lane, g);
#pragma unroll
            for (int mi = 0; mi < 4; mi++) {
                uint32_t a[2][2][4]; /* a[part][k16] */
#pragma unroll
                for (int p = 0; p < 2; p++)
#pragma unroll
                    for (int k = 0; k < 2; k++)
                        g_ldsm4(a[p][k], cur + p * GM * GLD + a_off + mi * 16 * GLD + 32 * g + 16 * k);
#pragma unroll
                for (int ni = 0; ni < 8; ni++) g_q8_tile(acc[ni >> 2][mi][ni & 3], a, b[0][ni], b[1][ni], dv[ni]);
            }
        }
        if (more) wstore(nxt);
        mmv_cp_wait<0>();
        __syncthreads();
    }
    g_store(acc[0], t0 + wm, r0 + wn, lane, xscale, y, T, n_out, accumulate);
    g_store(acc[1], t0 + wm, r0 + wn + 32, lane, xscale, y, T, n_out, accumulate);
}

/* ---- k_gemm_wg: the same arithmetic on wgmma (second candidate) ----
 *
 * The first wgmma attempt (commit dad340b, reverted) used the no-swizzle
 * layout and waited for each group's MMAs before the next group's: no
 * faster than k_gemm_q8. This one:
 * - tiles in the 128-byte swizzled K-major layout (row r's 16-byte chunk c at
 *   r * 128 + (c ^ (r % 8)) * 16; descriptors: swizzle 1, stride 1024 bytes
 *   between 8-row groups, k16 step i at + 32 i bytes);
 * - two accumulator sets: a step's two groups (8 wgmma) are issued
 *   together, and group 0's acc = fma(C, d, acc) runs while group 1's MMAs
 *   do (wait_group 1). Overlapping across steps (a group in flight over the
 *   barrier) made ptxas serialize the wgmma (C7514);
 * - x tiles three steps ahead in a 4-slot cp.async ring; weights loaded one
 *   step ahead into registers, converted by the warpgroup that multiplies
 *   them (rows 64 wg .. + 63) while its MMAs run.
 * Its bits need not equal k_gemm_q8's (the hardware's order inside a k16
 * step); the lab holds it to k_gemm_q8 within 1e-6 of max|y| and, bit for
 * bit, to itself on the same tokens in another launch (a 100-token slice). */

#define WG_S 4 /* x ring slots */
#define WG_XT 16384 /* one 128 x 64 fp16 tile */
#define WG_SLOT (2 * WG_XT + 1024)  /* x hi, x lo and (Q4_K) the step's x group sums of 128 tokens */
#define WG_WT (WG_XT + 4 * GN * 4)   /* a weight tile, its group scales and (Q4_K) mins */
#define WG_SMEM (WG_S * WG_SLOT + 2 * WG_WT + 1024) /* + alignment slack */

__device__ __forceinline__ uint32_t wg_sw(int r, int c) { return (uint32_t)(r * 128 + ((c ^ (r & 7)) << 4)); }

__device__ __forceinline__ uint64_t wg_desc(uint32_t a) {
    return (uint64_t)((a & 0x3FFFF) >> 4) | ((uint64_t)1 << 16) | ((uint64_t)(1024 >> 4) << 32) | ((uint64_t)1 << 62);
}

#define WG_C8(i) "+f"(c[i]), "+f"(c[i + 1]), "+f"(c[i + 2]), "+f"(c[i + 3]), "+f"(c[i + 4]), "+f"(c[i + 5]), "+f"(c[i + 6]), "+f"(c[i + 7])
/* c (+)= A B over k16: A 64 x 16 at da, B 128 x 16 at db; from zero when !acc */
__device__ __forceinline__ void wg_mma(float (&c)[64], uint64_t da, uint64_t db, int acc) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 "
                 "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,"
                 "%27,%28,%29,%30,%31,%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,%48,%49,%50,%51,"
                 "%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63}, %64, %65, p, 1, 1, 0, 0;\n}\n"
                 : WG_C8(0), WG_C8(8), WG_C8(16), WG_C8(24), WG_C8(32), WG_C8(40), WG_C8(48), WG_C8(56)
                 : "l"(da), "l"(db), "r"(acc));
}
__device__ __forceinline__ void wg_fence(void) { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wg_commit(void) { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void wg_wait(void) {
    asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}
__device__ __forceinline__ void wg_proxy_fence(void) { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }

/* 4 nibbles (bits 0-3 of each byte of w) -> 2 words of 2 exact fp16 */
__device__ __forceinline__ void g_q4_to_h2(uint32_t w, uint32_t *h01, uint32_t *h23) {
    const __half2 bias = __half2half2(__ushort_as_half(0x6400)); /* 1024 */
    uint32_t a = __byte_perm(w, 0x64646464u, 0x4140), b = __byte_perm(w, 0x64646464u, 0x4342);
    __half2 ha = __hsub2(*(__half2 *)&a, bias), hb = __hsub2(*(__half2 *)&b, bias);
    *h01 = *(uint32_t *)&ha, *h23 = *(uint32_t *)&hb;
}

/* The Q4_K min term's sums: sum over each 32-column group g of token t of hi + lo (xp from k_gemm_xsplit), in
 * column order, at xsum[((g / 2) Tp + t) 2 + g % 2]. Block per token. */
__global__ void k_lab_xsum(const __half *__restrict__ xp, int64_t in, int64_t T, int64_t Tp, float *__restrict__ xsum) {
    const int64_t t = blockIdx.x;
    for (int64_t g = threadIdx.x; g < in / 32; g += blockDim.x) {
        float s = 0.0f;
        for (int k = 0; k < 32; k++)
            s = __fadd_rn(s, __fadd_rn(__half2float(xp[t * in + 32 * g + k]), __half2float(xp[(T + t) * in + 32 * g + k])));
        xsum[((g >> 1) * Tp + t) * 2 + (g & 1)] = s;
    }
}

/* Launch contract: grid (ceil(T / 128), ceil(n_out / 128)), block 256 (two warpgroups), WG_SMEM bytes of dynamic
 * shared memory; in % 64 == 0 (Q4_K: % 256); xp / xscale from k_gemm_xsplit; Q4_K: xsum from k_lab_xsum.
 * Q4_K: a step is a quarter super-block (sub-blocks 2 (kt % 4) + {0, 1}, the nibbles of one 32-byte run);
 * w = d sc q - dmin m, so per group acc = fma(C, d sc, acc) and acc = fma(-dmin m, sum(x), acc). */
template <int TYPE>
__global__ void __launch_bounds__(256, 1)
    k_gemm_wg(const uint8_t *__restrict__ W, size_t row_bytes, int64_t in, int64_t n_out,
              const __half *__restrict__ xp, const float *__restrict__ xsum, const float *__restrict__ xscale,
              float *__restrict__ y, int64_t T) {
    constexpr bool Q4K = TYPE == MEMRA_TYPE_Q4_K;
    extern __shared__ uint8_t wg_raw[];
    uint8_t *sm = (uint8_t *)(((uintptr_t)wg_raw + 1023) & ~(uintptr_t)1023); /* swizzled tiles: 1024-aligned */
    const int tid = threadIdx.x, lane = tid & 31, wg = tid >> 7, wq = (tid >> 5) & 3;
    const int64_t t0 = (int64_t)blockIdx.x * GM, r0 = (int64_t)blockIdx.y * GN, nk = in / GK, Tp = (T + GM - 1) / GM * GM;
    const uint32_t sbase = (uint32_t)__cvta_generic_to_shared(sm);
    uint8_t *wt = sm + WG_S * WG_SLOT; /* 2 x (weight tile, group scales, group mins) */
    /* weights: warpgroup wg converts its own rows; thread pair per row, group tid & 1 */
    const int wr = 64 * wg + ((tid & 127) >> 1), wh = tid & 1;
    const bool wok = r0 + wr < n_out;
    const uint8_t *wrow = W + (wok ? r0 + wr : 0) * row_bytes;
    auto xcopy = [&](int64_t kt) { /* step kt's x tiles into slot kt % WG_S; always one commit group */
        if (kt < nk) {
            uint8_t *sl = sm + (kt % WG_S) * WG_SLOT;
            if (Q4K && tid < 64) mmv_cp16(sl + 2 * WG_XT + 16 * tid, xsum + (kt * Tp + t0) * 2 + 4 * tid);
#pragma unroll
            for (int j = 0; j < 8; j++) {
                const int part = j >> 2, n = (tid >> 3) + 32 * (j & 3), c = tid & 7;
                const int64_t t = t0 + n < T ? t0 + n : T - 1;
                mmv_cp16(sl + part * WG_XT + wg_sw(n, c), xp + (part * T + t) * in + 64 * kt + 8 * c);
            }
        }
        mmv_cp_commit();
    };
    uint32_t v[12]; /* Q8_0: words 8 wh .. 8 wh + 8 of the pair's 68 bytes; Q4_K: the 16-byte header, 32 nibble bytes */
    auto wload = [&](int64_t kt) {
        if (Q4K) {
            const uint8_t *b = wrow + 144 * (kt >> 2);
            const uint4 h = __ldg((const uint4 *)b), q0 = __ldg((const uint4 *)(b + 16 + 32 * (kt & 3))),
                        q1 = __ldg((const uint4 *)(b + 32 + 32 * (kt & 3)));
            v[0] = h.x, v[1] = h.y, v[2] = h.z, v[3] = h.w;
            v[4] = q0.x, v[5] = q0.y, v[6] = q0.z, v[7] = q0.w, v[8] = q1.x, v[9] = q1.y, v[10] = q1.z, v[11] = q1.w;
        } else {
            const uint32_t *p = (const uint32_t *)(wrow + 68 * kt) + 8 * wh;
#pragma unroll
            for (int i = 0; i < 9; i++) v[i] = __ldg(p + i);
        }
    };
    auto wstore = [&](int64_t kt) {
        uint8_t *t = wt + (kt & 1) * WG_WT;
        float *sc = (float *)(t + WG_XT);
        uint32_t hw[16];
        if (Q4K) {
#pragma unroll
            for (int i = 0; i < 8; i++) g_q4_to_h2(wok ? (v[4 + i] >> (4 * wh)) & 0x0F0F0F0Fu : 0u, &hw[2 * i], &hw[2 * i + 1]);
            /* sub-block j's 6-bit scale and min (dq_k4_scale_min) from scales[12] = header bytes 4-15 */
            const int j = 2 * (int)(kt & 3) + wh;
            auto sb = [&](int i) { /* selects, not an indexed v[]: that would put v in local memory */
                const uint32_t w = (i >> 2) == 0 ? v[1] : (i >> 2) == 1 ? v[2] : v[3];
                return (int)((w >> (8 * (i & 3))) & 0xFFu);
            };
            const int s6 = j < 4 ? sb(j) & 63 : (sb(j + 4) & 0xF) | ((sb(j - 4) >> 6) << 4);
            const int m6 = j < 4 ? sb(j + 4) & 63 : (sb(j + 4) >> 4) | ((sb(j) >> 6) << 4);
            const float d = __half2float(__ushort_as_half((uint16_t)v[0])),
                        dm = __half2float(__ushort_as_half((uint16_t)(v[0] >> 16)));
            sc[2 * wr + wh] = wok ? d * (float)s6 : 0.0f; /* exact: 11 x 6 bits */
            sc[2 * GN + 2 * wr + wh] = wok ? dm * (float)m6 : 0.0f;
        } else {
            const uint32_t sh = wh ? 32 : 16;
#pragma unroll
            for (int i = 0; i < 8; i++)
                g_q8_to_h2(wok ? __funnelshift_rc(v[i], v[i + 1], sh) : 0u, &hw[2 * i], &hw[2 * i + 1]);
            const uint16_t d = (uint16_t)(wh ? v[0] >> 16 : v[0]);
            sc[2 * wr + wh] = wok ? __half2float(__ushort_as_half(d)) : 0.0f;
        }
#pragma unroll
        for (int i = 0; i < 4; i++)
            *(uint4 *)(t + wg_sw(wr, 4 * wh + i)) = make_uint4(hw[4 * i], hw[4 * i + 1], hw[4 * i + 2], hw[4 * i + 3]);
    };
    float acc[64], c0[64], c1[64];
#pragma unroll
    for (int i = 0; i < 64; i++) acc[i] = 0.0f, c0[i] = 0.0f, c1[i] = 0.0f;
    const int R1 = 64 * wg + 16 * wq + (lane >> 2); /* this thread's rows R1, R1 + 8 */
    /* Q4_K: acc -= dmin m sum(x) of group g, per token (acc[4 j + e]: token 8 j + 2 (lane % 4) + (e & 1)) */
    auto mins = [&](const float *ds, const float *sxs, int g, const int R) {
        const float m1 = -ds[2 * GN + 2 * R + g], m2 = -ds[2 * GN + 2 * (R + 8) + g];
#pragma unroll
        for (int j = 0; j < 16; j++)
#pragma unroll
            for (int e = 0; e < 2; e++) {
                const float sx = sxs[2 * (8 * j + 2 * (lane & 3) + e) + g];
                acc[4 * j + e] = fmaf(m1, sx, acc[4 * j + e]);
                acc[4 * j + 2 + e] = fmaf(m2, sx, acc[4 * j + 2 + e]);
            }
    };


    xcopy(0), xcopy(1), xcopy(2);
    wload(0);
    wstore(0);
    mmv_cp_wait<2>();
    wg_proxy_fence();
    __syncthreads();
    for (int64_t kt = 0; kt < nk; kt++) {
        xcopy(kt + 3); /* slot (kt + 3) % 4 last held step kt - 1, whose MMAs both warpgroups waited for */
        if (kt + 1 < nk) wload(kt + 1);
        const uint32_t sx = sbase + (uint32_t)(kt % WG_S) * WG_SLOT;
        const uint32_t sw = sbase + WG_S * WG_SLOT + (uint32_t)(kt & 1) * WG_WT + wg * 64 * 128;
        const float *ds = (const float *)(wt + (kt & 1) * WG_WT + WG_XT);
        const float *sxs = (const float *)(sm + (kt % WG_S) * WG_SLOT + 2 * WG_XT);
        /* both groups in flight; group 0 (c0) into acc while group 1 runs, then group 1 (c1) */
        wg_fence();
        wg_mma(c0, wg_desc(sw), wg_desc(sx + WG_XT), 0);
        wg_mma(c0, wg_desc(sw + 32), wg_desc(sx + WG_XT + 32), 1);
        wg_mma(c0, wg_desc(sw), wg_desc(sx), 1);
        wg_mma(c0, wg_desc(sw + 32), wg_desc(sx + 32), 1);
        wg_commit();
        wg_mma(c1, wg_desc(sw + 64), wg_desc(sx + WG_XT + 64), 0);
        wg_mma(c1, wg_desc(sw + 96), wg_desc(sx + WG_XT + 96), 1);
        wg_mma(c1, wg_desc(sw + 64), wg_desc(sx + 64), 1);
        wg_mma(c1, wg_desc(sw + 96), wg_desc(sx + 96), 1);
        wg_commit();
        /* this warpgroup's rows of step kt + 1, while both groups run: tile (kt + 1) & 1 was last read by
         * step kt - 1's MMAs */
        if (kt + 1 < nk) wstore(kt + 1);
        wg_wait<1>();
        {
            const float d1 = ds[2 * R1], d2 = ds[2 * (R1 + 8)];
#pragma unroll
            for (int i = 0; i < 64; i++) acc[i] = fmaf(c0[i], (i & 2) ? d2 : d1, acc[i]);
            if (Q4K) mins(ds, sxs, 0, R1);
        }
        wg_wait<0>();
        {
            const float d1 = ds[2 * R1 + 1], d2 = ds[2 * (R1 + 8) + 1];
#pragma unroll
            for (int i = 0; i < 64; i++) acc[i] = fmaf(c1[i], (i & 2) ? d2 : d1, acc[i]);
            if (Q4K) mins(ds, sxs, 1, R1);
        }
        mmv_cp_wait<2>();
        wg_proxy_fence();
        __syncthreads();
    }
    /* acc[4 j + e]: row R1 + 8 (e >> 1), token 8 j + 2 (lane % 4) + (e & 1) */
#pragma unroll
    for (int j = 0; j < 16; j++)
#pragma unroll
        for (int e = 0; e < 4; e++) {
            const int64_t t = t0 + 8 * j + 2 * (lane & 3) + (e & 1), o = r0 + R1 + 8 * (e >> 1);
            if (t < T && o < n_out) y[t * n_out + o] = acc[4 * j + e] * (1.0f / xscale[t]);
        }
}

/* The wgmma candidate of the lab's type on x rows [first, first + n) of m: k_gemm_xsplit (and, for Q4_K,
 * k_lab_xsum) into fresh buffers, then one launch into y (n x n_out). Returns a launcher for timing. */
struct wg_run {
    __half *xp;
    float *xs, *xsum, *y;
    int64_t n;
};

static wg_run wg_prepare(const lab_mv &m, uint32_t type, int64_t in, int64_t first, int64_t n, int64_t n_out) {
    wg_run r;
    const int64_t Tp = (n + GM - 1) / GM * GM;
    r.n = n;
    CK(cudaMalloc(&r.xp, (size_t)n * in * 2 * sizeof(__half)));
    CK(cudaMalloc(&r.xs, sizeof(float) * Tp));
    CK(cudaMalloc(&r.xsum, sizeof(float) * Tp * (in / 32)));
    CK(cudaMalloc(&r.y, sizeof(float) * n * n_out));
    CK(cudaMemset(r.y, 0xFF, sizeof(float) * n * n_out));
    k_gemm_xsplit<<<(unsigned)n, 256>>>(m.dx + first * in, in, n, r.xs, r.xp);
    if (type == MEMRA_TYPE_Q4_K) k_lab_xsum<<<(unsigned)n, 128>>>(r.xp, in, n, Tp, r.xsum);
    return r;
}

static void wg_launch(const lab_mv &m, uint32_t type, int64_t in, int64_t n_out, const wg_run &r) {
    const dim3 g((unsigned)((r.n + GM - 1) / GM), (unsigned)((n_out + GN - 1) / GN));
    if (type == MEMRA_TYPE_Q4_K)
        k_gemm_wg<MEMRA_TYPE_Q4_K><<<g, 256, WG_SMEM>>>(m.dw, m.rb, in, n_out, r.xp, r.xsum, r.xs, r.y, r.n);
    else
        k_gemm_wg<MEMRA_TYPE_Q8_0><<<g, 256, WG_SMEM>>>(m.dw, m.rb, in, n_out, r.xp, r.xsum, r.xs, r.y, r.n);
}

int main(int argc, char **argv) {
    const int T = argc > 1 ? atoi(argv[1]) : 512;
    const int64_t in = argc > 2 ? atoll(argv[2]) : 4096, n_out = argc > 3 ? atoll(argv[3]) : 12288;
    const uint32_t type = argc > 4 && !strcmp(argv[4], "q4_k") ? MEMRA_TYPE_Q4_K : MEMRA_TYPE_Q8_0;
    const bool q8 = type == MEMRA_TYPE_Q8_0;
    if (in % (q8 ? 64 : 256) || T < 1) return fprintf(stderr, "gemm_lab: in %% %d != 0\n", q8 ? 64 : 256), 1;
    const double copy = lab_init();
    printf("gemm_lab: T %d, {%lld, %lld} %s; copy %.0f GB/s\n", T, (long long)in, (long long)n_out,
           q8 ? "Q8_0" : "Q4_K", copy);
    lab_mv m = lab_mv_make(type, in, n_out, T, 97);
    const double flop = 2.0 * T * (double)in * (double)n_out;
    const size_t ny = (size_t)T * n_out;
    CK(cudaFuncSetAttribute(k_gemm_wg<MEMRA_TYPE_Q8_0>, cudaFuncAttributeMaxDynamicSharedMemorySize, WG_SMEM));
    CK(cudaFuncSetAttribute(k_gemm_wg<MEMRA_TYPE_Q4_K>, cudaFuncAttributeMaxDynamicSharedMemorySize, WG_SMEM));
    int ok = 1;

    /* the wgmma candidate: token 0 against the CPU; tokens 64 .. 163 alone give the same bits */
    const wg_run w = wg_prepare(m, type, in, 0, T, n_out);
    wg_launch(m, type, in, n_out, w);
    CK(cudaDeviceSynchronize());
    float *h2 = (float *)malloc(sizeof(float) * ny);
    lab_get(h2, w.y, ny);
    double md = 0.0;
    for (int64_t o = 0; o < n_out; o++) md = fmax(md, isfinite(h2[o]) ? fabs((double)h2[o] - m.ref[o]) : INFINITY);
    const double wg_cpu = md / m.mref;
    ok &= wg_cpu <= 3e-4;
    int wg_inv = -1;
    if (T >= 164) {
        const wg_run w3 = wg_prepare(m, type, in, 64, 100, n_out);
        wg_launch(m, type, in, n_out, w3);
        CK(cudaDeviceSynchronize());
        float *h3 = (float *)malloc(sizeof(float) * 100 * n_out);
        lab_get(h3, w3.y, (size_t)100 * n_out);
        wg_inv = !memcmp(h3, h2 + 64 * n_out, sizeof(float) * 100 * n_out);
        ok &= wg_inv;
        free(h3);
    }
    printf("k_gemm_wg: token 0 vs CPU %.2e %s; tokens 64-163 alone: %s\n", wg_cpu, wg_cpu <= 3e-4 ? "ok" : "FAIL",
           wg_inv < 0 ? "-" : wg_inv ? "same bits" : "DIFFER");

    if (q8) { /* k_gemm_q8 (production) and k_gemm_q8_wide on the same split activations */
        float *y0, *y1;
        CK(cudaMalloc(&y0, sizeof(float) * ny));
        CK(cudaMalloc(&y1, sizeof(float) * ny));
        CK(cudaMemset(y0, 0xFF, sizeof(float) * ny));
        CK(cudaMemset(y1, 0xFF, sizeof(float) * ny));
        const int smem = 2 * GQ_STAGE_BYTES;
        CK(cudaFuncSetAttribute(k_gemm_q8, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
        CK(cudaFuncSetAttribute(k_gemm_q8_wide, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
        const dim3 grid((unsigned)((T + GM - 1) / GM), (unsigned)((n_out + GN - 1) / GN));
        auto base = [&]() { k_gemm_q8<<<grid, 256, smem>>>(m.dw, m.rb, in, n_out, w.xp, w.xs, y0, T, 0); };
        auto wide = [&]() { k_gemm_q8_wide<<<grid, 128, smem>>>(m.dw, m.rb, in, n_out, w.xp, w.xs, y1, T, 0); };
        base(), wide();
        CK(cudaDeviceSynchronize());
        float *h0 = (float *)malloc(sizeof(float) * ny), *h1 = (float *)malloc(sizeof(float) * ny);
        lab_get(h0, y0, ny), lab_get(h1, y1, ny);
        double bm = 0.0, dm = 0.0, ym = 0.0;
        for (int64_t o = 0; o < n_out; o++) bm = fmax(bm, isfinite(h0[o]) ? fabs((double)h0[o] - m.ref[o]) : INFINITY);
        for (size_t i = 0; i < ny; i++) {
            const double d = fabs((double)h2[i] - (double)h0[i]);
            dm = isfinite(d) ? fmax(dm, d) : INFINITY;
            ym = fmax(ym, fabs((double)h0[i]));
        }
        const int same = !memcmp(h0, h1, sizeof(float) * ny);
        const double wg_base = dm / ym;
        ok &= bm / m.mref <= 3e-4 && same && wg_base <= 1e-6;
        printf("k_gemm_q8: token 0 vs CPU %.2e; k_gemm_q8_wide == k_gemm_q8: %s; k_gemm_wg vs k_gemm_q8: %.2e %s\n",
               bm / m.mref, same ? "yes" : "NO", wg_base, wg_base <= 1e-6 ? "ok" : "FAIL");
        const double t0 = lab_time_us(base), t1 = lab_time_us(wide);
        printf("k_gemm_q8       %8.1f us  %6.1f TFLOP/s useful\n", t0, flop / t0 * 1e-6);
        printf("k_gemm_q8_wide  %8.1f us  %6.1f TFLOP/s useful\n", t1, flop / t1 * 1e-6);
        free(h0), free(h1);
    }
    const double t2 = lab_time_us([&]() { wg_launch(m, type, in, n_out, w); });
    printf("k_gemm_wg       %8.1f us  %6.1f TFLOP/s useful\n", t2, flop / t2 * 1e-6);
    lab_mv_free(&m);
    free(h2);
    return ok ? 0 : 1;
}
