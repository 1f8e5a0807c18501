/* Q8_0 prefill GEMM lab (src/backend/cuda/gemm.cu). NOT YET RUN: written at
 * the end of the 2026-12-03 night session, after the device time was spent.
 *
 * Why: k_gemm_q8 runs at ~100 TFLOP/s useful. Nsight Compute on the
 * {4096, 8192} launch at T = 512 (bench/results/2026-12-03d-h200.md) has
 * L1/shared 65% busy, from ldmatrix traffic, and the tensor pipe 32%. Its
 * warps own 64 tokens x 32 rows, so each MMA costs 160 bytes of ldmatrix.
 * k_gemm_q8_wide gives a warp 64 x 64 (96 bytes per MMA) in blocks of 4
 * warps, 2 per SM, so the SM still holds 8 warps. ptxas reports 255
 * registers and ~176 bytes spilled: whether it pays is what this lab
 * measures.
 *
 * Checks: both kernels compute every output element with the same chain
 * (per 32-column group: MMAs lo k 0-15 from zero, lo k 16-31, hi k 0-15,
 * hi k 16-31, then acc = fma(C, d, acc)), so their outputs must be equal
 * bit for bit (memcmp). Token 0 is also checked against the CPU reference
 * (memra_dot_row, 3e-4 of max|ref|, the gate's prefill bar). Then both are
 * timed (median of 15 after an L2 flush, one launch each, k_gemm_xsplit
 * not included).
 *
 *   BUILD=build-lab REBUILD=1 bash bench/kernels/lab.sh gemm_lab [T in n_out]
 * (defaults 512 4096 12288: 9B gate / up; also run 512 12288 4096 and
 * 512 4096 8192) */
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

int main(int argc, char **argv) {
    const int T = argc > 1 ? atoi(argv[1]) : 512;
    const int64_t in = argc > 2 ? atoll(argv[2]) : 4096, n_out = argc > 3 ? atoll(argv[3]) : 12288;
    if (in % 64) return fprintf(stderr, "gemm_lab: in %% 64 != 0\n"), 1;
    const double copy = lab_init();
    printf("gemm_lab: T %d, {%lld, %lld} Q8_0; copy %.0f GB/s\n", T, (long long)in, (long long)n_out, copy);
    lab_mv m = lab_mv_make(MEMRA_TYPE_Q8_0, in, n_out, T, 97);
    const int64_t Tp = (T + GM - 1) / GM * GM;
    __half *xp;
    float *xs, *y0, *y1;
    CK(cudaMalloc(&xp, (size_t)T * in * 2 * sizeof(__half)));
    CK(cudaMalloc(&xs, sizeof(float) * Tp));
    CK(cudaMalloc(&y0, sizeof(float) * T * n_out));
    CK(cudaMalloc(&y1, sizeof(float) * T * n_out));
    CK(cudaMemset(y0, 0xFF, sizeof(float) * T * n_out));
    CK(cudaMemset(y1, 0xFF, sizeof(float) * T * n_out));
    k_gemm_xsplit<<<T, 256>>>(m.dx, in, T, xs, xp);
    const int smem = 2 * GQ_STAGE_BYTES;
    CK(cudaFuncSetAttribute(k_gemm_q8, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    CK(cudaFuncSetAttribute(k_gemm_q8_wide, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    const dim3 grid((unsigned)((T + GM - 1) / GM), (unsigned)((n_out + GN - 1) / GN));
    auto base = [&]() { k_gemm_q8<<<grid, 256, smem>>>(m.dw, m.rb, in, n_out, xp, xs, y0, T, 0); };
    auto wide = [&]() { k_gemm_q8_wide<<<grid, 128, smem>>>(m.dw, m.rb, in, n_out, xp, xs, y1, T, 0); };
    base(), wide();
    CK(cudaDeviceSynchronize());
    float *h0 = (float *)malloc(sizeof(float) * T * n_out), *h1 = (float *)malloc(sizeof(float) * T * n_out);
    lab_get(h0, y0, (size_t)T * n_out), lab_get(h1, y1, (size_t)T * n_out);
    double md = 0.0;
    for (int64_t o = 0; o < n_out; o++) md = fmax(md, isfinite(h0[o]) ? fabs((double)h0[o] - m.ref[o]) : INFINITY);
    const double err = md / m.mref;
    const int same = !memcmp(h0, h1, sizeof(float) * T * n_out);
    const double flop = 2.0 * T * (double)in * (double)n_out;
    const double t0 = lab_time_us(base), t1 = lab_time_us(wide);
    printf("token 0 vs CPU: %.2e %s; wide == base: %s\n", err, err <= 3e-4 ? "ok" : "FAIL", same ? "yes" : "NO");
    printf("k_gemm_q8       %8.1f us  %6.1f TFLOP/s useful\n", t0, flop / t0 * 1e-6);
    printf("k_gemm_q8_wide  %8.1f us  %6.1f TFLOP/s useful\n", t1, flop / t1 * 1e-6);
    lab_mv_free(&m);
    return err <= 3e-4 && same ? 0 : 1;
}
