/* Tensor-core decode matvec lab (src/backend/cuda/mmv.cuh) on one
 * {in, n_out} Q4_K weight: k_mmv with the production weight path (ST =
 * MMV_ST) and each of ST = 0 (registers, one super-block at a time), 1
 * (register double buffer), 2 and 3 (cp.async shared-memory ring), 12 and
 * 13 (the same ring filled by bulk copies), against the production
 * k_matvec_multi.
 *
 * Validation on random blocks: T = 1 against the CPU reference
 * (memra_dot_row, all rows; max|gpu - cpu| / max|cpu| <= 1e-5, the gate's
 * tolerance), every token row of T = 2, 4, 8, 15 bit for bit against T = 1 on
 * that token (batch invariance), every ST bit for bit against the
 * production one (every token, T = 1), the multi-weight launch (a second
 * weight = the first one 7 rows on) and the swiglu launch (gate = W, up = W
 * 3 rows on) against the single results at T = 2 and 8. Then timed with CUDA events after an L2 flush (median of
 * 15, one launch, launch latency included). GB/s counts weight bytes; % is
 * of the device-to-device copy (read + write) measured in the same run.
 *
 *   bash bench/kernels/mmv_lab.sh [in n_out]        (needs a GPU) */
#include <math.h>

#include "backend/cuda/matvec.cuh"
#include "backend/cuda/mmv.cuh"
#include "lab.cuh"

static double g_copy;
static int g_fail;

struct job {
    int kind; /* 0 = k_matvec_multi production, 1 = mmv production (ST = MMV_ST), 2..7 = ST 0, 1, 2, 3, 12, 13 */
    uint32_t type;
    const uint8_t *W;
    size_t rb;
    int64_t in, n_out, T;
    const float *x;
    float *y;
    int ks; /* K split override (timing only), 0 = production */
};

static void mmv_by_kind(int kind, const mmv_args &a, int ks) {
    switch (kind) {
    case 1: mmv_launch<MMV_ST>(a, 0, ks); break;
    case 2: mmv_launch<0>(a, 0, ks); break;
    case 3: mmv_launch<1>(a, 0, ks); break;
    case 4: mmv_launch<2>(a, 0, ks); break;
    case 5: mmv_launch<3>(a, 0, ks); break;
    case 6: mmv_launch<12>(a, 0, ks); break;
    default: mmv_launch<13>(a, 0, ks); break;
    }
}

template <int TY>
static void run_job(const job &j) {
    if (j.kind == 0) {
        mv_multi_args m = {};
        m.W[0] = j.W, m.n_out[0] = j.n_out, m.y[0] = j.y, m.row_bytes = j.rb, m.in = j.in, m.T = j.T;
        launch_multi_type<TY>(m, 1, false, j.x, 0);
        return;
    }
    mmv_args a;
    memset(&a, 0, sizeof a);
    a.W[0] = j.W;
    a.n_out[0] = j.n_out;
    a.y[0] = j.y;
    a.row_bytes = j.rb;
    a.in = j.in;
    a.T = (int)j.T;
    a.x = j.x;
    mmv_blocks(&a, 1);
    mmv_by_kind(j.kind, a, j.ks);
}

template <int TY>
static void run_type(int64_t in, int64_t n_out) {
    const char *name = memra_type_name(TY);
    const int TB = MMV_MAX_T;
    lab_mv pb = lab_mv_make(TY, in, n_out, TB, 0);
    const size_t rb = pb.rb, wb = pb.wb;
    const float *ref = pb.ref;
    const double mref = pb.mref;
    const uint8_t *dw = pb.dw;
    const float *dx = pb.dx;
    float *dy, *dy2;
    CK(cudaMalloc(&dy, sizeof(float) * TB * n_out));
    CK(cudaMalloc(&dy2, sizeof(float) * TB * n_out));
    float *y1[MMV_MAX_T], *yt = (float *)malloc(sizeof(float) * TB * n_out);
    float *y2 = (float *)malloc(sizeof(float) * TB * n_out);
    for (int t = 0; t < TB; t++) y1[t] = (float *)malloc(sizeof(float) * n_out);
    float *yp1 = (float *)malloc(sizeof(float) * TB * n_out); /* production's T = 1 rows of every token */
    for (int kind = 1; kind <= 7; kind++) {
        static const int kst[8] = {-1, MMV_ST, 0, 1, 2, 3, 12, 13};
        const int st = kst[kind];
        job j = {kind, TY, dw, rb, in, n_out, 1, dx, dy, 0};
        /* T = 1 per token */
        for (int t = 0; t < TB; t++) {
            j.x = dx + t * in;
            CK(cudaMemset(dy, 0xFF, sizeof(float) * n_out));
            run_job<TY>(j);
            CK(cudaDeviceSynchronize());
            lab_get(y1[t], dy, n_out);
        }
        j.x = dx;
        double md = 0;
        for (int64_t o = 0; o < n_out; o++) {
            double d = fabs((double)y1[0][o] - ref[o]);
            if (!(d <= md)) md = d;
        }
        double err = md / mref;
        int inv = 1;
        const int Ts[4] = {2, 4, 8, 15};
        for (int k = 0; k < 4; k++) {
            j.T = Ts[k];
            CK(cudaMemset(dy, 0xFF, sizeof(float) * TB * n_out));
            run_job<TY>(j);
            CK(cudaDeviceSynchronize());
            lab_get(yt, dy, (size_t)Ts[k] * n_out);
            for (int t = 0; t < Ts[k]; t++) inv &= !memcmp(yt + t * n_out, y1[t], sizeof(float) * n_out);
        }
        j.T = 1;
        int samest = 1;
        if (kind == 1)
            for (int t = 0; t < TB; t++) memcpy(yp1 + t * n_out, y1[t], sizeof(float) * n_out);
        else
            for (int t = 0; t < TB; t++) samest &= !memcmp(yp1 + t * n_out, y1[t], sizeof(float) * n_out);
        /* multi (weight 2 = W from row 7) and swiglu (gate = W, up = W from row 3), T = 2 and 8 */
        int multi_ok = 1, swi_ok = 1;
        for (int T = 2; T <= 8; T += 6) {
            mmv_args a;
            memset(&a, 0, sizeof a);
            a.W[0] = dw, a.n_out[0] = n_out, a.y[0] = dy;
            a.W[1] = dw + 7 * rb, a.n_out[1] = n_out - 7, a.y[1] = dy2;
            a.row_bytes = rb, a.in = in, a.T = T, a.x = dx;
            mmv_blocks(&a, 2);
            mmv_by_kind(kind, a, 0);
            CK(cudaDeviceSynchronize());
            lab_get(yt, dy, (size_t)T * n_out);
            lab_get(y2, dy2, (size_t)T * (n_out - 7));
            for (int t = 0; t < T; t++) {
                multi_ok &= !memcmp(yt + t * n_out, y1[t], sizeof(float) * n_out);
                multi_ok &= !memcmp(y2 + t * (n_out - 7), y1[t] + 7, sizeof(float) * (n_out - 7));
            }
            memset(&a, 0, sizeof a);
            a.W[0] = dw, a.W[1] = dw + 3 * rb, a.n_out[0] = a.n_out[1] = n_out - 3, a.y[0] = dy;
            a.row_bytes = rb, a.in = in, a.T = T, a.x = dx, a.swiglu = 1;
            mmv_blocks(&a, 1);
            mmv_by_kind(kind, a, 0);
            CK(cudaDeviceSynchronize());
            lab_get(yt, dy, (size_t)T * (n_out - 3));
            for (int t = 0; t < T; t++)
                for (int64_t o = 0; o < n_out - 3; o++) {
                    float g = y1[t][o], u = y1[t][o + 3];
                    float want = g / (1.0f + expf(-g)) * u;
                    if (!(fabsf(yt[t * (n_out - 3) + o] - want) <= 1e-6f * (fabsf(want) + 1e-3f))) swi_ok = 0;
                }
        }
        int ok = err <= 1e-5 && inv && samest && multi_ok && swi_ok;
        if (!ok) g_fail++;
        double us[3];
        const int tt[3] = {1, 4, 8};
        for (int k = 0; k < 3; k++) {
            j.T = tt[k];
            us[k] = lab_time_us([&] { run_job<TY>(j); });
        }
        printf("MMV %-7s %s%d  T=1 %6.1f us %4.0f%%  T=4 %6.1f us %4.0f%%  T=8 %6.1f us %4.0f%%  err %.2e inv %s =prod %s "
               "multi %s swiglu %s %s\n",
               name, kind == 1 ? "prod ST" : "ST", st, us[0], 100 * wb / (us[0] * 1e-6) / 1e9 / g_copy, us[1],
               100 * wb / (us[1] * 1e-6) / 1e9 / g_copy, us[2], 100 * wb / (us[2] * 1e-6) / 1e9 / g_copy, err,
               inv ? "yes" : "NO", samest ? "yes" : "NO", multi_ok ? "yes" : "NO", swi_ok ? "yes" : "NO",
               ok ? "ok" : "FAIL");
        fflush(stdout);
        if (kind == 1) continue;
        printf("MMV %-7s ST%d  K split (timing only, T=1):", name, st);
        for (int ks = 1; ks <= MMV_KS_MAX; ks *= 2) {
            j.T = 1, j.ks = ks;
            double u = lab_time_us([&] { run_job<TY>(j); });
            printf("  ks%d %5.1f us %3.0f%%", ks, u, 100 * wb / (u * 1e-6) / 1e9 / g_copy);
        }
        j.ks = 0;
        printf("\n");
    }
    {
        job j = {0, TY, dw, rb, in, n_out, 1, dx, dy, 0};
        double u1 = lab_time_us([&] { run_job<TY>(j); });
        j.T = 8;
        double u8 = lab_time_us([&] { run_job<TY>(j); });
        printf("MMV %-7s OLD  T=1 %6.1f us %4.0f%%  T=8 %6.1f us %4.0f%%\n", name, u1,
               100 * wb / (u1 * 1e-6) / 1e9 / g_copy, u8, 100 * wb / (u8 * 1e-6) / 1e9 / g_copy);
    }
    cudaFree(dy), cudaFree(dy2);
    lab_mv_free(&pb), free(yt), free(y2), free(yp1);
    for (int t = 0; t < TB; t++) free(y1[t]);
}

int main(int argc, char **argv) {
    int64_t in = argc > 2 ? atoll(argv[1]) : 4096, n_out = argc > 2 ? atoll(argv[2]) : 12288;
    g_copy = lab_init();
    printf("mmv_lab: {%lld, %lld}; device-to-device copy %.0f GB/s (read + write)\n", (long long)in, (long long)n_out,
           g_copy);
    run_type<MEMRA_TYPE_Q4_K>(in, n_out);
    printf("mmv_lab: %d failed\n", g_fail);
    return g_fail ? 1 : 0;
}
