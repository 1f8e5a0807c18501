/* Q6_K tensor-core decode matvec lab (src/backend/cuda/mmv6.cuh) on one
 * {in, n_out} weight: validated on fresh random blocks against the CPU
 * reference (memra_dot_row, every row, T = 1; max|gpu - cpu| / max|cpu|
 * against the gate's 1e-5), T = 4, 8, 15 token rows bit for bit against T = 1
 * (batch invariance), a two-weight launch against the single results; then
 * timed against the production k_matvec_multi (launch latency included, L2
 * flushed; % of the device-to-device copy measured in the same run).
 *
 *   bash bench/kernels/lab.sh mmv6_lab [in n_out]      (needs a GPU) */
#include <math.h>

#include "backend/cuda/matvec.cuh"
#include "backend/cuda/mmv6.cuh"
#include "lab.cuh"

static double g_copy;
static int g_fail;

static void run(int64_t in, int64_t n_out) {
    const uint32_t TY = MEMRA_TYPE_Q6_K;
    const int TB = 15;
    lab_mv pb = lab_mv_make(TY, in, n_out, TB, 0);
    const size_t rb = pb.rb, wb = pb.wb;
    const uint8_t *hw = pb.hw;
    const float *hx = pb.hx, *ref = pb.ref;
    const double mref = pb.mref;
    const uint8_t *dw = pb.dw;
    const float *dx = pb.dx;
    float *dy, *dy2;
    CK(cudaMalloc(&dy, sizeof(float) * TB * n_out));
    CK(cudaMalloc(&dy2, sizeof(float) * TB * n_out));
    float *y1 = (float *)malloc(sizeof(float) * TB * n_out), *yt = (float *)malloc(sizeof(float) * TB * n_out);
    float *y2 = (float *)malloc(sizeof(float) * TB * n_out);
    auto launch6 = [&](const float *x, int T, float *y) {
        mmv_args a = {};
        a.W[0] = dw, a.n_out[0] = n_out, a.y[0] = y, a.row_bytes = rb, a.in = in, a.x = x, a.T = T;
        mmv6_launch(a, 1, 0);
    };
    for (int t = 0; t < TB; t++) { /* T = 1 per token */
        CK(cudaMemset(dy, 0xFF, sizeof(float) * n_out));
        launch6(dx + t * in, 1, dy);
        CK(cudaDeviceSynchronize());
        lab_get(y1 + t * n_out, dy, n_out);
    }
    double md = 0;
    for (int64_t o = 0; o < n_out; o++) {
        double d = fabs((double)y1[o] - ref[o]);
        if (!(d <= md)) md = d;
    }
    double err = md / mref;
    int inv = 1;
    const int Ts[3] = {4, 8, 15};
    for (int k = 0; k < 3; k++) {
        CK(cudaMemset(dy, 0xFF, sizeof(float) * TB * n_out));
        launch6(dx, Ts[k], dy);
        CK(cudaDeviceSynchronize());
        lab_get(yt, dy, (size_t)Ts[k] * n_out);
        inv &= !memcmp(yt, y1, sizeof(float) * Ts[k] * n_out);
    }
    int multi_ok = 1;
    { /* weight 2 = W from row 7 in the same launch, T = 8 */
        const int T = 8;
        mmv_args a = {};
        a.W[0] = dw, a.n_out[0] = n_out, a.y[0] = dy;
        a.W[1] = dw + 7 * rb, a.n_out[1] = n_out - 7, a.y[1] = dy2;
        a.row_bytes = rb, a.in = in, a.T = T, a.x = dx;
        mmv6_launch(a, 2, 0);
        CK(cudaDeviceSynchronize());
        lab_get(yt, dy, (size_t)T * n_out);
        lab_get(y2, dy2, (size_t)T * (n_out - 7));
        for (int t = 0; t < T; t++) {
            multi_ok &= !memcmp(yt + t * n_out, y1 + t * n_out, sizeof(float) * n_out);
            multi_ok &= !memcmp(y2 + t * (n_out - 7), y1 + t * n_out + 7, sizeof(float) * (n_out - 7));
        }
    }
    double nerr = 0; /* with an input norm (memra_norm), T = 4, against memra_dot_row of rmsnorm(x) in double */
    {
        const int T = 4;
        float *hn = (float *)malloc(sizeof(float) * in), *xn = (float *)malloc(sizeof(float) * T * in), *dn;
        for (int64_t i = 0; i < in; i++) hn[i] = rf(0.5f, 1.5f);
        for (int t = 0; t < T; t++) {
            double ss = 0;
            for (int64_t i = 0; i < in; i++) ss += (double)hx[t * in + i] * hx[t * in + i];
            float inv = (float)(1.0 / sqrt(ss / (double)in + 1e-6));
            for (int64_t i = 0; i < in; i++) xn[t * in + i] = hx[t * in + i] * inv * hn[i];
        }
        CK(cudaMalloc(&dn, sizeof(float) * in));
        CK(cudaMemcpy(dn, hn, sizeof(float) * in, cudaMemcpyHostToDevice));
        mmv_args a = {};
        a.W[0] = dw, a.n_out[0] = n_out, a.y[0] = dy, a.row_bytes = rb, a.in = in, a.x = dx, a.T = T;
        a.nw = dn, a.eps = 1e-6f;
        CK(cudaMemset(dy, 0xFF, sizeof(float) * T * n_out));
        mmv6_launch(a, 1, 0);
        CK(cudaDeviceSynchronize());
        lab_get(yt, dy, (size_t)T * n_out);
        for (int t = 0; t < T; t++) {
            double m = 0, d = 0;
            for (int64_t o = 0; o < n_out; o++) {
                double r = memra_dot_row(TY, hw + o * rb, xn + t * in, in);
                m = fmax(m, fabs(r));
                double e = fabs(yt[t * n_out + o] - r);
                if (!(e <= d)) d = e;
            }
            nerr = fmax(nerr, d / m);
            if (isnan(d)) nerr = NAN;
        }
        cudaFree(dn);
        free(hn), free(xn);
    }
    int ok = err <= 1e-5 && inv && multi_ok && nerr <= 1e-5;
    if (!ok) g_fail++;
    const int tt[3] = {1, 4, 8};
    double us6[3], usm[3];
    for (int k = 0; k < 3; k++) {
        us6[k] = lab_time_us([&] { launch6(dx, tt[k], dy); });
        mv_multi_args m = {};
        m.W[0] = dw, m.n_out[0] = n_out, m.y[0] = dy, m.row_bytes = rb, m.in = in, m.T = tt[k];
        usm[k] = lab_time_us([&] { launch_multi_type<MEMRA_TYPE_Q6_K>(m, 1, false, dx, 0); });
    }
    auto pct = [&](double us) { return 100 * wb / (us * 1e-6) / 1e9 / g_copy; };
    printf("MMV6 {%lld,%lld} err %.2e inv %s multi %s norm err %.2e %s\n", (long long)in, (long long)n_out, err,
           inv ? "yes" : "NO", multi_ok ? "yes" : "NO", nerr, ok ? "ok" : "FAIL");
    for (int k = 0; k < 3; k++)
        printf("MMV6 {%lld,%lld} T=%d  mmv6 %7.1f us %4.0f%%   k_matvec_multi %7.1f us %4.0f%%\n", (long long)in,
               (long long)n_out, tt[k], us6[k], pct(us6[k]), usm[k], pct(usm[k]));
    fflush(stdout);
    cudaFree(dy), cudaFree(dy2);
    lab_mv_free(&pb), free(y1), free(yt), free(y2);
}

int main(int argc, char **argv) {
    g_copy = lab_init();
    printf("mmv6_lab: device-to-device copy %.0f GB/s (read + write)\n", g_copy);
    if (argc > 2) {
        run(atoll(argv[1]), atoll(argv[2]));
    } else {
        const int64_t shapes[4][2] = {{4096, 8192}, {12288, 4096}, {4096, 65536}, {5120, 17408}};
        for (int i = 0; i < 4; i++) run(shapes[i][0], shapes[i][1]);
    }
    printf("mmv6_lab: %d failed\n", g_fail);
    return g_fail ? 1 : 0;
}
