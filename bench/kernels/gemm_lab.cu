/* Prefill GEMM lab (src/backend/cuda/gemm.cu): k_gemm_wg<Q8_0 | Q4_K | Q6_K>, the
 * production T >= 16 kernel of those types on sm_90a (wgmma), against the CPU
 * reference and, for Q8_0, against k_gemm_q8 (mma.sync + ldmatrix, the path
 * it replaced; MEMRA_GEMM_WG=0 still takes it). This file includes gemm.cu
 * with MEMRA_GEMM_LAB defined, so it runs the backend's own kernels.
 *
 * Measured on the H200 (T = 512), TFLOP/s useful: the warp-specialized
 * k_gemm_wg (2026-12-03h) 169.3 on Q8_0 {4096, 12288}, 182.7 on {12288,
 * 4096}, 129.6 on Q4_K {5120, 17408}, 99.3 on {17408, 5120}; the kernel it
 * replaced 121.8 / 124.3 / 104.7 / 76.9, with the same bits (memcmp, on
 * every shape); k_gemm_q8 104-106. gemm.cu's comment above k_gemm_wg has
 * the variants. (A 64 x 64 warp-tile variant of k_gemm_q8 ran at 63
 * TFLOP/s, spilling, and was dropped.)
 *
 * Checks, before any timing:
 * - k_gemm_wg's token 0 against the CPU reference (memra_dot_row, 3e-4 of
 *   max|ref|, the gate's prefill bar), and its rows of tokens 64-163 equal
 *   (memcmp) to a launch of those 100 tokens alone (T >= 164);
 * - accumulate = 1: y preset to random values in [-1, 1] must end as preset
 *   + product (the accumulate = 0 launch's), within 1e-6 of max|y|;
 * - Q8_0: k_gemm_q8's token 0 against the CPU, and k_gemm_wg within 1e-6 of
 *   max|y| of k_gemm_q8 (the order inside a wgmma k16 step is the
 *   hardware's).
 * - LAB_XT=1: k_gemm_wg's TMA variant (x tiles by TMA, a raw-weight ring of
 *   each producer's own; the same arithmetic, so the same bits: check with
 *   LAB_CMP against a dump of the other variant);
 * - LAB_DUMP=FILE / LAB_CMP=FILE: the T-token result written, or held bit
 *   for bit to a file another build wrote (a change that moves data, not
 *   arithmetic, must keep every bit).
 * Times: median of 15 single launches after an L2 flush; k_gemm_xsplit and
 * k_gemm_xsum are not included. Exit status 1 when a check fails.
 *
 * LAB_KS=S runs k_gemm_wg as S K splits (gridDim.z) and sums them with
 * k_gemm_ksum, both timed (gemm.cu, wg_ksplit; H100, T = 512, 2026-12-06c
 * run 4: {17408, 5120} Q4_K 920 -> 628 us at S = 4, Q6_K 1,693 -> 1,122).
 *
 *   BUILD=build-lab REBUILD=1 bash bench/kernels/lab.sh gemm_lab [T in n_out [q8_0|q4_k|q6_k]]
 * (defaults 512 4096 12288 q8_0: 9B gate / up; also 512 12288 4096, and
 * 512 5120 17408 q4_k: 27B gate / up; 512 17408 5120 q6_k: 27B's Q6_K
 * ffn_down, NOT YET RUN: Q6_K was added without a GPU) */
#define MEMRA_GEMM_LAB
#include "backend/cuda/gemm.cu"
#include "lab.cuh"

/* k_gemm_wg of the lab's type on x rows [first, first + n) of m: k_gemm_xsplit (and, for Q4_K, k_gemm_xsum)
 * into fresh buffers (gemm.cu's gemm_wg_run keeps them in its workspace), and y (n x n_out) poisoned with NaN. */
struct wg_run {
    __half *xp;  /* [2 n][in]: the hi rows, then the lo rows */
    float *xs;   /* [Tp] token scales */
    float *xsum; /* [Tp in / 32] group sums, k_gemm_xsum's layout */
    float *y;    /* [n][n_out] */
    float *part; /* [S][n][n_out]: the K split's partials (LAB_KS = S > 1) */
    int64_t n;
};

static int g_ks = 1; /* LAB_KS: k_gemm_wg's K split S (gridDim.z; 1 = none), then k_gemm_ksum */
static int g_xt = 0; /* LAB_XT=1: k_gemm_wg's TMA variant (XT = 1) */

static wg_run wg_prepare(const lab_mv &m, uint32_t type, int64_t in, int64_t first, int64_t n, int64_t n_out) {
    wg_run r;
    const int64_t Tp = (n + GM - 1) / GM * GM;
    r.n = n;
    CK(cudaMalloc(&r.xp, (size_t)n * in * 2 * sizeof(__half)));
    CK(cudaMalloc(&r.xs, sizeof(float) * Tp));
    CK(cudaMalloc(&r.xsum, sizeof(float) * Tp * (in / 32)));
    CK(cudaMalloc(&r.y, sizeof(float) * n * n_out));
    CK(cudaMemset(r.y, 0xFF, sizeof(float) * n * n_out));
    r.part = NULL;
    if (g_ks > 1) CK(cudaMalloc(&r.part, sizeof(float) * g_ks * n * n_out));
    k_gemm_xsplit<<<(unsigned)n, 256>>>(m.dx + first * in, in, n, r.xs, r.xp);
    if (type == MEMRA_TYPE_Q4_K) k_gemm_xsum<<<(unsigned)Tp, 256>>>(r.xp, in, n, Tp, r.xsum);
    CK(cudaGetLastError());
    return r;
}

static void wg_free(wg_run *r) {
    cudaFree(r->xp), cudaFree(r->xs), cudaFree(r->xsum), cudaFree(r->y);
    if (r->part) cudaFree(r->part);
}

/* one k_gemm_wg launch on r's activations into y */
static void wg_launch(const lab_mv &m, uint32_t type, int64_t in, int64_t n_out, const wg_run &r, float *y,
                      int accumulate) {
    const dim3 g((unsigned)((r.n + GM - 1) / GM), (unsigned)((n_out + GN - 1) / GN), (unsigned)g_ks);
    float *yo = g_ks > 1 ? r.part : y; /* the K split's partials, summed into y by k_gemm_ksum */
    const int acc = g_ks > 1 ? 0 : accumulate;
    CUtensorMap xm;
    memset(&xm, 0, sizeof xm);
    if (g_xt) CK(wg_xmap(r.xp, r.n, in, &xm));
#define WG_ARGS m.dw, m.rb, in, n_out, r.xp, r.xsum, r.xs, yo, r.n, acc, nullptr, 0, nullptr, 0, xm
    if (type == MEMRA_TYPE_Q4_K && g_xt)
        k_gemm_wg<MEMRA_TYPE_Q4_K, false, 1><<<g, WS_THREADS, WS_SMEM_TX(MEMRA_TYPE_Q4_K, 1)>>>(WG_ARGS);
    else if (type == MEMRA_TYPE_Q4_K)
        k_gemm_wg<MEMRA_TYPE_Q4_K><<<g, WS_THREADS, WS_SMEM>>>(WG_ARGS);
    else if (type == MEMRA_TYPE_Q6_K && g_xt)
        k_gemm_wg<MEMRA_TYPE_Q6_K, false, 1><<<g, WS_THREADS, WS_SMEM_TX(MEMRA_TYPE_Q6_K, 1)>>>(WG_ARGS);
    else if (type == MEMRA_TYPE_Q6_K)
        k_gemm_wg<MEMRA_TYPE_Q6_K><<<g, WS_THREADS, WS_SMEM_T(MEMRA_TYPE_Q6_K)>>>(WG_ARGS);
    else if (g_xt)
        k_gemm_wg<MEMRA_TYPE_Q8_0, false, 1><<<g, WS_THREADS, WS_SMEM_TX(MEMRA_TYPE_Q8_0, 1)>>>(WG_ARGS);
    else
        k_gemm_wg<MEMRA_TYPE_Q8_0><<<g, WS_THREADS, WS_SMEM>>>(WG_ARGS);
#undef WG_ARGS
    if (g_ks > 1) k_gemm_ksum<<<4 * 132, 256>>>(r.part, g_ks, r.n * n_out, y, accumulate);
}

/* max over i < n of |a[i] - b[i]| (infinite when either is not finite), and max |b| into *bmax */
static double max_diff(const float *a, const float *b, size_t n, double *bmax) {
    double d = 0.0, m = 0.0;
    for (size_t i = 0; i < n; i++) {
        const double e = fabs((double)a[i] - (double)b[i]);
        d = isfinite(e) ? fmax(d, e) : INFINITY;
        m = fmax(m, fabs((double)b[i]));
    }
    *bmax = m;
    return d;
}

int main(int argc, char **argv) {
    const int T = argc > 1 ? atoi(argv[1]) : 512;
    const int64_t in = argc > 2 ? atoll(argv[2]) : 4096, n_out = argc > 3 ? atoll(argv[3]) : 12288;
    const uint32_t type = argc > 4 && !strcmp(argv[4], "q4_k")   ? MEMRA_TYPE_Q4_K
                          : argc > 4 && !strcmp(argv[4], "q6_k") ? MEMRA_TYPE_Q6_K
                                                                 : MEMRA_TYPE_Q8_0;
    const bool q8 = type == MEMRA_TYPE_Q8_0;
    if (getenv("LAB_KS")) g_ks = atoi(getenv("LAB_KS"));
    g_xt = getenv("LAB_XT") ? atoi(getenv("LAB_XT")) : 0;
    if (g_xt < 0 || g_xt > 1) return fprintf(stderr, "gemm_lab: LAB_XT is 0 or 1\n"), 1;
    if (g_ks < 1 || (in / 64) % ((q8 ? 1 : 4) * g_ks)) return fprintf(stderr, "gemm_lab: bad LAB_KS %d\n", g_ks), 1;
    if (in % (q8 ? 64 : 256) || T < 1) return fprintf(stderr, "gemm_lab: in %% %d != 0\n", q8 ? 64 : 256), 1;
    const double copy = lab_init();
    printf("gemm_lab: T %d, {%lld, %lld} %s, K split %d%s; copy %.0f GB/s\n", T, (long long)in, (long long)n_out,
           memra_type_name(type), g_ks, g_xt ? ", TMA (XT)" : "", copy);
    lab_mv m = lab_mv_make(type, in, n_out, T, 97);
    const double flop = 2.0 * T * (double)in * (double)n_out;
    const size_t ny = (size_t)T * n_out;
    CK(cudaFuncSetAttribute(k_gemm_wg<MEMRA_TYPE_Q8_0>, cudaFuncAttributeMaxDynamicSharedMemorySize, WS_SMEM));
    CK(cudaFuncSetAttribute(k_gemm_wg<MEMRA_TYPE_Q4_K>, cudaFuncAttributeMaxDynamicSharedMemorySize, WS_SMEM));
    CK(cudaFuncSetAttribute(k_gemm_wg<MEMRA_TYPE_Q6_K>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                            WS_SMEM_T(MEMRA_TYPE_Q6_K)));
    CK(cudaFuncSetAttribute(k_gemm_wg<MEMRA_TYPE_Q4_K, false, 1>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                            WS_SMEM_TX(MEMRA_TYPE_Q4_K, 1)));
    CK(cudaFuncSetAttribute(k_gemm_wg<MEMRA_TYPE_Q8_0, false, 1>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                            WS_SMEM_TX(MEMRA_TYPE_Q8_0, 1)));
    CK(cudaFuncSetAttribute(k_gemm_wg<MEMRA_TYPE_Q6_K, false, 1>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                            WS_SMEM_TX(MEMRA_TYPE_Q6_K, 1)));
    int ok = 1;

    /* token 0 against the CPU; tokens 64 .. 163 alone give the same bits */
    wg_run w = wg_prepare(m, type, in, 0, T, n_out);
    wg_launch(m, type, in, n_out, w, w.y, 0);
    CK(cudaDeviceSynchronize());
    float *h2 = (float *)malloc(sizeof(float) * ny);
    lab_get(h2, w.y, ny);
    double md = 0.0;
    for (int64_t o = 0; o < n_out; o++) md = fmax(md, isfinite(h2[o]) ? fabs((double)h2[o] - m.ref[o]) : INFINITY);
    const double wg_cpu = md / m.mref;
    ok &= wg_cpu <= 3e-4;
    int wg_inv = -1;
    if (T >= 164) {
        wg_run w3 = wg_prepare(m, type, in, 64, 100, n_out);
        wg_launch(m, type, in, n_out, w3, w3.y, 0);
        CK(cudaDeviceSynchronize());
        float *h3 = (float *)malloc(sizeof(float) * 100 * n_out);
        lab_get(h3, w3.y, (size_t)100 * n_out);
        wg_inv = !memcmp(h3, h2 + 64 * n_out, sizeof(float) * 100 * n_out);
        ok &= wg_inv;
        free(h3);
        wg_free(&w3);
    }
    printf("k_gemm_wg: token 0 vs CPU %.2e %s; tokens 64-163 alone: %s\n", wg_cpu, wg_cpu <= 3e-4 ? "ok" : "FAIL",
           wg_inv < 0 ? "-" : wg_inv ? "same bits" : "DIFFER");
    /* LAB_DUMP=FILE writes the T-token result; LAB_CMP=FILE holds it to such a file bit for bit (another build of
     * the kernel on the same shape, type, T and K split: the inputs are seeded) */
    if (getenv("LAB_DUMP")) {
        FILE *f = fopen(getenv("LAB_DUMP"), "wb");
        if (!f || fwrite(h2, sizeof(float), ny, f) != ny) return fprintf(stderr, "gemm_lab: cannot write dump\n"), 1;
        fclose(f);
    }
    if (getenv("LAB_CMP")) {
        float *hc = (float *)malloc(sizeof(float) * ny);
        FILE *f = fopen(getenv("LAB_CMP"), "rb");
        const int same = f && fread(hc, sizeof(float), ny, f) == ny && !memcmp(hc, h2, sizeof(float) * ny);
        if (f) fclose(f);
        ok &= same;
        printf("k_gemm_wg against %s: %s\n", getenv("LAB_CMP"), same ? "same bits" : "DIFFER");
        free(hc);
    }

    /* accumulate = 1: preset + product */
    {
        float *h0 = (float *)malloc(sizeof(float) * ny), *ha = (float *)malloc(sizeof(float) * ny), *ya;
        for (size_t i = 0; i < ny; i++) h0[i] = rf(-1, 1);
        CK(cudaMalloc(&ya, sizeof(float) * ny));
        CK(cudaMemcpy(ya, h0, sizeof(float) * ny, cudaMemcpyHostToDevice));
        wg_launch(m, type, in, n_out, w, ya, 1);
        CK(cudaDeviceSynchronize());
        lab_get(ha, ya, ny);
        for (size_t i = 0; i < ny; i++) h0[i] = h0[i] + h2[i]; /* the expected sums, in float */
        double ym;
        const double acc_err = max_diff(ha, h0, ny, &ym) / ym;
        ok &= acc_err <= 1e-6;
        printf("k_gemm_wg accumulate: vs preset + product %.2e %s\n", acc_err, acc_err <= 1e-6 ? "ok" : "FAIL");
        free(h0), free(ha);
        cudaFree(ya);
    }

    if (q8) { /* k_gemm_q8 (the path k_gemm_wg replaced) on the same split activations */
        float *y0;
        CK(cudaMalloc(&y0, sizeof(float) * ny));
        CK(cudaMemset(y0, 0xFF, sizeof(float) * ny));
        const int smem = 2 * GQ_STAGE_BYTES;
        CK(cudaFuncSetAttribute(k_gemm_q8, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
        const dim3 grid((unsigned)((T + GM - 1) / GM), (unsigned)((n_out + GN - 1) / GN));
        auto base = [&]() { k_gemm_q8<<<grid, 256, smem>>>(m.dw, m.rb, in, n_out, w.xp, w.xs, y0, T, 0); };
        base();
        CK(cudaDeviceSynchronize());
        float *h0 = (float *)malloc(sizeof(float) * ny);
        lab_get(h0, y0, ny);
        double bm = 0.0, ym;
        for (int64_t o = 0; o < n_out; o++) bm = fmax(bm, isfinite(h0[o]) ? fabs((double)h0[o] - m.ref[o]) : INFINITY);
        const double wg_base = max_diff(h2, h0, ny, &ym) / ym;
        ok &= bm / m.mref <= 3e-4 && wg_base <= 1e-6;
        printf("k_gemm_q8: token 0 vs CPU %.2e; k_gemm_wg vs k_gemm_q8: %.2e %s\n", bm / m.mref, wg_base,
               wg_base <= 1e-6 ? "ok" : "FAIL");
        const double t0 = lab_time_us(base);
        printf("k_gemm_q8       %8.1f us  %6.1f TFLOP/s useful\n", t0, flop / t0 * 1e-6);
        free(h0);
        cudaFree(y0);
    }
    const double t2 = lab_time_us([&]() { wg_launch(m, type, in, n_out, w, w.y, 0); });
    printf("k_gemm_wg       %8.1f us  %6.1f TFLOP/s useful\n", t2, flop / t2 * 1e-6);
    wg_free(&w);
    lab_mv_free(&m);
    free(h2);
    return ok ? 0 : 1;
}
