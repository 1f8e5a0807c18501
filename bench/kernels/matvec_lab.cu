/* Decode matvec lab: configurations of k_matvec_multi (src/backend/cuda/matvec.cuh)
 * on one {in, n_out} weight, T = 1 and T = 8.
 *
 * Variant 0 is the production configuration (mv_config); the others change
 * rows per warp (R) and warps per block. Every variant is validated on fresh
 * random blocks against the CPU reference (memra_dot_row, all rows, T = 1;
 * max|gpu - cpu| / max|cpu| against the gate's 1e-5), checked bit for bit
 * against variant 0 (a row's reduction order must not depend on R) and its
 * T = 8 token 0 against its T = 1 result (batch invariance), then timed with
 * CUDA events after an L2 flush. GB/s counts weight bytes; % is of the
 * device-to-device copy rate (read + write) measured in the same run.
 *
 *   bash bench/kernels/matvec_lab.sh [in n_out]        (needs a GPU) */
#include <math.h>

#include "backend/cuda/matvec.cuh"
#include "lab.cuh"

typedef void (*launch_fn)(const uint8_t *, size_t, int64_t, int64_t, const float *, float *, int64_t, cudaStream_t);

template <int TYPE, int NT, int R, int WARPS, int U>
static void lab_launch(const uint8_t *W, size_t rb, int64_t in, int64_t n_out, const float *x, float *y, int64_t T,
                       cudaStream_t s) {
    mv_multi_args a = {};
    a.W[0] = W, a.n_out[0] = n_out, a.y[0] = y, a.row_bytes = rb, a.in = in, a.T = T;
    const int nb = (int)((n_out + WARPS * R - 1) / (WARPS * R));
    a.blk0[1] = a.blk0[2] = a.blk0[3] = a.blk0[4] = nb;
    k_matvec_multi<TYPE, NT, R, WARPS, U, false><<<dim3((unsigned)nb, (unsigned)((T + NT - 1) / NT)), 32 * WARPS, 0, s>>>(
        a, x);
}

typedef struct variant {
    const char *name;
    launch_fn t1, t8; /* NT = 1 and NT = 8 instantiations */
    int r1, w1, u1, r8, w8, u8;
} variant;

#define VAR(TY, NAME, R1, W1, U1, R8, W8, U8) \
    {NAME, lab_launch<TY, 1, R1, W1, U1>, lab_launch<TY, 8, R8, W8, U8>, R1, W1, U1, R8, W8, U8}

template <int TY>
static int variants(variant *v) {
    typedef mv_config<TY, 1> P1;
    typedef mv_config<TY, 8> P8;
    /* name: the T = 1 configuration; the T = 8 one is printed beside it */
    variant list[] = {
        VAR(TY, "v0-prod", P1::R, P1::WARPS, P1::U, P8::R, P8::WARPS, P8::U),
        VAR(TY, "v1", 1, 4, 1, 1, 4, 1), /* the layout before this lab: a warp per row */
        VAR(TY, "v2", 1, 4, 4, 1, 4, 2),
        VAR(TY, "v3", 2, 4, 1, 2, 4, 1),
        VAR(TY, "v4", 2, 4, 4, 2, 8, 2),
        VAR(TY, "v5", 4, 4, 1, 4, 4, 1),
        VAR(TY, "v6", 4, 4, 2, 4, 2, 2),
        VAR(TY, "v7", 4, 2, 4, 2, 2, 1),
        VAR(TY, "v8", 2, 8, 2, 2, 4, 4),
    };
    int n = (int)(sizeof list / sizeof list[0]);
    memcpy(v, list, sizeof list);
    return n;
}

static double g_copy;
static int g_fail;

template <int TY>
static void run_type(int64_t in, int64_t n_out) {
    const char *name = memra_type_name(TY);
    size_t rb = memra_type_row_bytes(TY, in), wb = rb * (size_t)n_out;
    uint8_t *hw = (uint8_t *)malloc(wb);
    fill_blocks(TY, hw, wb);
    const int TB = 8;
    float *hx = (float *)malloc(sizeof(float) * TB * in);
    for (int64_t i = 0; i < TB * in; i++) hx[i] = rf(-1, 1);
    float *ref = (float *)malloc(sizeof(float) * n_out);
    for (int64_t o = 0; o < n_out; o++) ref[o] = memra_dot_row(TY, hw + o * rb, hx, in);
    double mref = 0;
    for (int64_t o = 0; o < n_out; o++) mref = fmax(mref, fabs(ref[o]));
    uint8_t *dw;
    float *dx, *dy;
    CK(cudaMalloc(&dw, wb + 64));
    CK(cudaMemset(dw + wb, 0, 64));
    CK(cudaMemcpy(dw, hw, wb, cudaMemcpyHostToDevice));
    CK(cudaMalloc(&dx, sizeof(float) * TB * in));
    CK(cudaMemcpy(dx, hx, sizeof(float) * TB * in, cudaMemcpyHostToDevice));
    CK(cudaMalloc(&dy, sizeof(float) * TB * n_out));
    float *y1 = (float *)malloc(sizeof(float) * n_out), *y8 = (float *)malloc(sizeof(float) * TB * n_out);
    float *y0 = (float *)malloc(sizeof(float) * n_out);
    variant v[16];
    int nv = variants<TY>(v);
    for (int k = 0; k < nv; k++) {
        CK(cudaMemset(dy, 0xFF, sizeof(float) * TB * n_out)); /* NaN poison */
        v[k].t1(dw, rb, in, n_out, dx, dy, 1, 0);
        CK(cudaDeviceSynchronize());
        CK(cudaMemcpy(y1, dy, sizeof(float) * n_out, cudaMemcpyDeviceToHost));
        CK(cudaMemset(dy, 0xFF, sizeof(float) * TB * n_out));
        v[k].t8(dw, rb, in, n_out, dx, dy, TB, 0);
        CK(cudaDeviceSynchronize());
        CK(cudaMemcpy(y8, dy, sizeof(float) * TB * n_out, cudaMemcpyDeviceToHost));
        double md = 0;
        for (int64_t o = 0; o < n_out; o++) {
            double d = fabs((double)y1[o] - ref[o]);
            if (!(d <= md)) md = d; /* NaN sticks */
        }
        double err = md / mref;
        int inv = !memcmp(y1, y8, sizeof(float) * n_out); /* token 0 of T = 8 == T = 1 */
        if (k == 0) memcpy(y0, y1, sizeof(float) * n_out);
        int same0 = !memcmp(y0, y1, sizeof(float) * n_out);
        int ok = err <= 1e-5 && inv && same0;
        if (!ok) g_fail++;
        double us1 = lab_time_us([&] { v[k].t1(dw, rb, in, n_out, dx, dy, 1, 0); });
        double us8 = lab_time_us([&] { v[k].t8(dw, rb, in, n_out, dx, dy, TB, 0); });
        double gb1 = wb / (us1 * 1e-6) / 1e9, gb8 = wb / (us8 * 1e-6) / 1e9;
        printf("LAB %-7s %-7s R%dW%dU%d R%dW%dU%d  T=1 %7.1f us %5.0f GB/s %4.0f%%  T=8 %7.1f us %5.0f GB/s %4.0f%%  "
               "err %.2e inv %s same-v0 %s %s\n",
               name, v[k].name, v[k].r1, v[k].w1, v[k].u1, v[k].r8, v[k].w8, v[k].u8, us1, gb1, 100 * gb1 / g_copy, us8, gb8,
               100 * gb8 / g_copy, err, inv ? "yes" : "NO", same0 ? "yes" : "NO", ok ? "ok" : "FAIL");
        fflush(stdout);
    }
    cudaFree(dw), cudaFree(dx), cudaFree(dy);
    free(hw), free(hx), free(ref), free(y1), free(y8), free(y0);
}

int main(int argc, char **argv) {
    int64_t in = argc > 2 ? atoll(argv[1]) : 5120, n_out = argc > 2 ? atoll(argv[2]) : 17408;
    g_copy = lab_init();
    printf("matvec_lab: {%lld, %lld}; device-to-device copy %.0f GB/s (read + write)\n", (long long)in,
           (long long)n_out, g_copy);
#define RUN(TY) run_type<TY>(in, n_out);
    RUN(MEMRA_TYPE_Q4_K) RUN(MEMRA_TYPE_Q6_K) RUN(MEMRA_TYPE_Q8_0) RUN(MEMRA_TYPE_IQ4_XS) RUN(MEMRA_TYPE_NVFP4)
    RUN(MEMRA_TYPE_BF16) RUN(MEMRA_TYPE_F16) RUN(MEMRA_TYPE_MXFP4) RUN(MEMRA_TYPE_Q4_0) RUN(MEMRA_TYPE_Q5_K)
    printf("matvec_lab: %d failed\n", g_fail);
    return g_fail ? 1 : 0;
}
