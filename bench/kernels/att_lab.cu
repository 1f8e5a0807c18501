/* Prefill attention lab (src/backend/cuda/attention.cu): phase 1 of a
 * prefill chunk by k_att_split (one block per token and split; the decode
 * kernel) and by k_att_pf (64 query rows a block, K / V in shared memory),
 * each followed by k_att_combine. The two differ in the order of the score
 * sums, so the lab reports max|pf - split| / max|split| of the outputs
 * (bar 1e-5) and times both phase-1 kernels with the L2 flushed.
 *
 * History: the first candidate here, k_att_tile (k_att_split's per-score warp
 * sums for 2-8 tokens a block, bit-identical to it), was slower than
 * k_att_split (972 against 834 us at T = 512, 16 / 2 heads; 2026-12-03,
 * bench/results/2026-12-03d-h200.md) and was removed.
 *
 * One sequence at slot 0, positions 0 .. T-1 (a prefill chunk from an empty
 * context), q, K and V random in [-1, 1].
 *
 *   BUILD=build-lab REBUILD=1 bash bench/kernels/lab.sh att_lab [T n_head n_kv hd]
 * (defaults 512 16 2 256: 35B-A3B; 9B is 512 16 4 256, 27B 512 24 4 256) */
#define MEMRA_ATT_LAB
#include "backend/cuda/attention.cu"
#include "lab.cuh"

int main(int argc, char **argv) {
    const int T = argc > 1 ? atoi(argv[1]) : 512, n_head = argc > 2 ? atoi(argv[2]) : 16;
    const int n_kv = argc > 3 ? atoi(argv[3]) : 2, hd = argc > 4 ? atoi(argv[4]) : 256;
    const int G = n_head / n_kv, n_ctx = T, max_splits = (n_ctx + ATT_SPLIT - 1) / ATT_SPLIT;
    const double copy = lab_init();
    printf("att_lab: T %d, heads %d / kv %d, hd %d; copy %.0f GB/s\n", T, n_head, n_kv, hd, copy);
    const int64_t kv_dim = (int64_t)n_kv * hd, qn = (int64_t)T * n_head * hd;
    float *hk = (float *)malloc(sizeof(float) * n_ctx * kv_dim), *hv = (float *)malloc(sizeof(float) * n_ctx * kv_dim);
    float *hq = (float *)malloc(sizeof(float) * qn);
    for (int64_t i = 0; i < n_ctx * kv_dim; i++) hk[i] = rf(-1, 1), hv[i] = rf(-1, 1);
    for (int64_t i = 0; i < qn; i++) hq[i] = rf(-1, 1);
    int32_t *hpos = (int32_t *)malloc(sizeof(int32_t) * T), *hts = (int32_t *)calloc(T, sizeof(int32_t)), hslot = 0;
    for (int t = 0; t < T; t++) hpos[t] = t;
    att_args a;
    a.kc = lab_dev(hk, sizeof(float) * n_ctx * kv_dim), a.vc = lab_dev(hv, sizeof(float) * n_ctx * kv_dim);
    a.q = lab_dev(hq, sizeof(float) * qn), a.gate = nullptr;
    a.pos = lab_dev(hpos, sizeof(int32_t) * T), a.tok_seq = lab_dev(hts, sizeof(int32_t) * T);
    a.slot = lab_dev(&hslot, sizeof(int32_t));
    a.q_tok_stride = (int64_t)n_head * hd, a.q_head_stride = hd;
    a.n_ctx = n_ctx, a.n_head = n_head, a.n_kv = n_kv, a.hd = hd, a.G = G, a.max_splits = max_splits;
    a.scale = 1.0f / sqrtf((float)hd);
    const size_t pn = (size_t)T * n_head * max_splits * (hd + 2), on = (size_t)T * n_head * hd;
    float *pref, *ptile, *oref, *otile;
    CK(cudaMalloc(&pref, pn * 4));
    CK(cudaMalloc(&ptile, pn * 4));
    CK(cudaMalloc(&oref, on * 4));
    CK(cudaMalloc(&otile, on * 4));
    CK(cudaMemset(pref, 0xFF, pn * 4));
    CK(cudaMemset(ptile, 0xFF, pn * 4));
    const size_t shm = (size_t)G * (hd + ATT_SPLIT) * sizeof(float);
    const int gmax = ATT_BLOCKS / n_kv > 1 ? ATT_BLOCKS / n_kv : 1;
    const unsigned gx = (unsigned)(max_splits < gmax ? max_splits : gmax);
    auto ref_split = [&]() {
        att_args b = a;
        b.part = pref, b.out = oref;
        k_att_split<<<dim3(gx, n_kv, T), 256, shm>>>(b);
    };
    auto ref_comb = [&](float *part, float *out) {
        att_args b = a;
        b.part = part, b.out = out;
        k_att_combine<<<dim3(n_head, T), 256>>>(b);
    };
    ref_split(), ref_comb(pref, oref);
    CK(cudaDeviceSynchronize());
    float *o1 = (float *)malloc(on * 4), *o2 = (float *)malloc(on * 4);
    lab_get(o1, oref, on);
    const double t_split = lab_time_us(ref_split), t_comb = lab_time_us([&]() { ref_comb(pref, oref); });
    printf("production  k_att_split %9.1f us  k_att_combine %7.1f us\n", t_split, t_comb);
    const size_t ps = att_pf_smem(hd);
    auto pf = [&]() { /* the production launch (cuda_launch without PDL in the lab) */
        att_args b = a;
        b.part = ptile, b.out = otile;
        CK(hd == 64 ? att_pf_launch<64>(b, T, 0) : hd == 128 ? att_pf_launch<128>(b, T, 0) : att_pf_launch<256>(b, T, 0));
    };
    pf(), ref_comb(ptile, otile);
    CK(cudaDeviceSynchronize());
    lab_get(o2, otile, on);
    double md = 0.0, mr = 0.0;
    for (size_t i = 0; i < on; i++) {
        const double d = fabs((double)o1[i] - (double)o2[i]);
        md = isfinite(d) ? (d > md ? d : md) : INFINITY;
        mr = fabs((double)o1[i]) > mr ? fabs((double)o1[i]) : mr;
    }
    const double err = md / mr, t_pf = lab_time_us(pf);
    const double flop = 4.0 * hd * n_head * ((double)T * (T + 1) / 2);
    printf("k_att_pf    %9.1f us  (%zu B shared, %.1f TFLOP/s useful)  err %.2e %s\n", t_pf, ps, flop / t_pf * 1e-6,
           err, err <= 1e-5 ? "ok" : "FAIL");
    return 0;
}
