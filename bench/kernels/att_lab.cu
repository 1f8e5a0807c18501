/* Prefill attention lab (src/backend/cuda/attention.cu). NOT YET RUN: written
 * at the end of the 2026-12-03 evening session, after the device time was
 * spent; the first device call of the next session should run it.
 *
 * Why: at T = 512 the attention op takes 840-1,150 us per layer on the H200
 * (bench/results/2026-12-03c-h200.md), 10% of a 35B-A3B prefill and more at
 * 8192, against ~1 GFLOP of work. Phase 1 (k_att_split) runs once per
 * (split, kv head, token), so each token re-reads its K and V rows from L2
 * and walks V one position at a time.
 *
 * k_att_tile<TT> is the candidate: block (split, kv head, tile of TT
 * consecutive tokens of one sequence) loads the split's 64 K and V rows into
 * shared memory once and computes every tile token's partial (m, l, o) of
 * that split with k_att_split's operations in k_att_split's order (scores:
 * lane-strided fmaf chain over the head dims then warp_sum, times scale;
 * softmax stats: lane-strided max / sum then warp_max / warp_sum; o: fmaf
 * over positions in order). So its partials, and the combined output,
 * should be bit-identical to the production kernels: the lab checks that
 * with memcmp before it times anything.
 *
 * One sequence at slot 0, positions 0 .. T-1 (a prefill chunk from an empty
 * context), q random in [-1, 1], K and V random in [-1, 1].
 *
 *   BUILD=build-lab REBUILD=1 bash bench/kernels/lab.sh att_lab [T n_head n_kv hd]
 * (defaults 512 16 2 256: 35B-A3B; 9B is 512 16 4 256) */
#define MEMRA_ATT_LAB
#include "backend/cuda/attention.cu"
#include "lab.cuh"

/* Launch contract: grid (ceil(T / TT) * max_splits, n_kv), block 256,
 * dynamic shared memory att_tile_smem(TT, G, hd). Tokens t0 .. t0 + TT - 1
 * (t0 = TT (blockIdx.x / max_splits)) must share one sequence (the lab's
 * case); token t takes split sp = blockIdx.x % max_splits when 64 sp <=
 * pos[t]. Writes part as k_att_split does. */
static size_t att_tile_smem(int TT, int G, int hd) {
    return (size_t)(2 * ATT_SPLIT * hd + TT * G * hd + TT * G * ATT_SPLIT + 2 * TT * G) * sizeof(float);
}

template <int TT>
__global__ void __launch_bounds__(256) k_att_tile(att_args a, int T) {
    extern __shared__ float sm[];
    const int G = a.G, hd = a.hd, nd = hd / 32;
    const int sp = blockIdx.x % a.max_splits, t0 = (blockIdx.x / a.max_splits) * TT, kvh = blockIdx.y;
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    float *ks = sm, *vs = ks + ATT_SPLIT * hd, *qs = vs + ATT_SPLIT * hd, *sc = qs + TT * G * hd;
    float *st_m = sc + TT * G * ATT_SPLIT, *st_l = st_m + TT * G;
    const int s0 = sp * ATT_SPLIT;
    int ns[TT], pmax = -1;
#pragma unroll
    for (int tt = 0; tt < TT; tt++) {
        int p = t0 + tt < T ? a.pos[t0 + tt] : -1;
        if (p >= a.n_ctx) p = a.n_ctx - 1;
        ns[tt] = p >= s0 ? min(ATT_SPLIT, p + 1 - s0) : 0;
        pmax = max(pmax, p);
    }
    if (pmax < s0) return;
    const int nsm = min(ATT_SPLIT, pmax + 1 - s0);
    const int64_t kv_dim = (int64_t)a.n_kv * hd;
    const int64_t base = ((int64_t)a.slot[a.tok_seq[t0]] * a.n_ctx + s0) * kv_dim + (int64_t)kvh * hd;
    for (int i = threadIdx.x; i < nsm * hd; i += blockDim.x) {
        const int s = i / hd, d = i % hd;
        ks[i] = a.kc[base + (int64_t)s * kv_dim + d];
        vs[i] = a.vc[base + (int64_t)s * kv_dim + d];
    }
    for (int i = threadIdx.x; i < TT * G * hd; i += blockDim.x) {
        const int tt = i / (G * hd), gq = (i / hd) % G, d = i % hd;
        qs[i] = t0 + tt < T ? a.q[(int64_t)(t0 + tt) * a.q_tok_stride + (int64_t)(kvh * G + gq) * a.q_head_stride + d]
                            : 0.0f;
    }
    __syncthreads();
    /* scores: items (tt, s), warp w takes w, w + 8, ... */
    for (int it = w; it < TT * ATT_SPLIT; it += 8) {
        const int tt = it / ATT_SPLIT, s = it % ATT_SPLIT;
        int n_tt = 0;
#pragma unroll
        for (int k = 0; k < TT; k++)
            if (k == tt) n_tt = ns[k];
        if (s >= n_tt) continue;
        float kreg[ATT_MAX_HD / 32];
#pragma unroll
        for (int i = 0; i < ATT_MAX_HD / 32; i++) kreg[i] = i < nd ? ks[s * hd + lane + 32 * i] : 0.0f;
        for (int gq = 0; gq < G; gq++) {
            const float *qh = qs + (tt * G + gq) * hd;
            float acc = 0.0f;
#pragma unroll
            for (int i = 0; i < ATT_MAX_HD / 32; i++)
                if (i < nd) acc = fmaf(kreg[i], qh[lane + 32 * i], acc);
            acc = warp_sum(acc);
            if (lane == 0) sc[(tt * G + gq) * ATT_SPLIT + s] = acc * a.scale;
        }
    }
    __syncthreads();
    for (int it = w; it < TT * G; it += 8) {
        const int tt = it / G;
        int n_tt = 0;
#pragma unroll
        for (int k = 0; k < TT; k++)
            if (k == tt) n_tt = ns[k];
        if (!n_tt) continue;
        float *r = sc + it * ATT_SPLIT;
        float m = -INFINITY;
        for (int s = lane; s < n_tt; s += 32) m = fmaxf(m, r[s]);
        m = warp_max(m);
        float l = 0.0f;
        for (int s = lane; s < n_tt; s += 32) {
            float e = expf(r[s] - m);
            r[s] = e;
            l += e;
        }
        l = warp_sum(l);
        if (lane == 0) st_m[it] = m, st_l[it] = l;
    }
    __syncthreads();
    for (int d = threadIdx.x; d < hd; d += blockDim.x) {
#pragma unroll
        for (int tt = 0; tt < TT; tt++) {
            if (!ns[tt]) continue;
            float acc[ATT_MAX_G];
#pragma unroll
            for (int gq = 0; gq < ATT_MAX_G; gq++) acc[gq] = 0.0f;
            for (int s = 0; s < ns[tt]; s++) {
                const float v = vs[s * hd + d];
#pragma unroll
                for (int gq = 0; gq < ATT_MAX_G; gq++)
                    if (gq < G) acc[gq] = fmaf(sc[(tt * G + gq) * ATT_SPLIT + s], v, acc[gq]);
            }
#pragma unroll
            for (int gq = 0; gq < ATT_MAX_G; gq++) {
                if (gq < G) {
                    const int t = t0 + tt;
                    float *pp = a.part + (((int64_t)t * a.n_head + kvh * G + gq) * a.max_splits + sp) * (hd + 2);
                    pp[2 + d] = acc[gq];
                    if (d == 0) pp[0] = st_m[tt * G + gq], pp[1] = st_l[tt * G + gq];
                }
            }
        }
    }
}

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
    float *h1 = (float *)malloc(pn * 4), *h2 = (float *)malloc(pn * 4), *o1 = (float *)malloc(on * 4),
          *o2 = (float *)malloc(on * 4);
    lab_get(h1, pref, pn), lab_get(o1, oref, on);
    const double t_split = lab_time_us(ref_split), t_comb = lab_time_us([&]() { ref_comb(pref, oref); });
    printf("production  k_att_split %9.1f us  k_att_combine %7.1f us\n", t_split, t_comb);
    auto run_tile = [&](auto tt_tag) {
        constexpr int TT = decltype(tt_tag)::value;
        const size_t ts = att_tile_smem(TT, G, hd);
        CK(cudaFuncSetAttribute(k_att_tile<TT>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)ts));
        auto launch = [&]() {
            att_args b = a;
            b.part = ptile, b.out = otile;
            k_att_tile<TT><<<dim3((unsigned)((T + TT - 1) / TT * max_splits), n_kv), 256, ts>>>(b, T);
        };
        CK(cudaMemset(ptile, 0xFF, pn * 4));
        launch(), ref_comb(ptile, otile);
        CK(cudaDeviceSynchronize());
        lab_get(h2, ptile, pn), lab_get(o2, otile, on);
        /* the partials of the splits each token uses, and the outputs, bit for bit */
        int same = !memcmp(o1, o2, on * 4);
        for (int t = 0; t < T && same; t++)
            for (int h = 0; h < n_head && same; h++)
                for (int sp = 0; sp <= hpos[t] / ATT_SPLIT && same; sp++) {
                    const size_t off = (((size_t)t * n_head + h) * max_splits + sp) * (hd + 2);
                    same = !memcmp(h1 + off, h2 + off, (hd + 2) * 4);
                }
        const double us = lab_time_us(launch);
        printf("k_att_tile<%d> %9.1f us  (%zu B shared)  bits %s\n", TT, us, ts, same ? "== production" : "DIFFER");
    };
    run_tile(std::integral_constant<int, 2>());
    run_tile(std::integral_constant<int, 4>());
    if (att_tile_smem(8, G, hd) <= 227 * 1024) run_tile(std::integral_constant<int, 8>());
    return 0;
}
