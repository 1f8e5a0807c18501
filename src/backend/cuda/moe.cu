/* MoE routing (softmax -> top-k -> renormalise) and the expert FFN, which
 * reads only the selected experts' rows.
 *
 * moe_ffn runs four kernels: gate and up projections of each (token, slot j)
 * into scratch (one launch each, so gate and up may differ in type), the
 * SwiGLU activation, then the down projection, where one warp per (token,
 * output row) sums w[t][j] * down_e(act) over j in order 0 .. n_used - 1.
 * Scratch (memra_moe_scratch_bytes): gate [T][n_used][F], up [T][n_used][F],
 * act [T][n_used][F]. All per-token reductions use matvec.cuh's fixed order. */
#include <math.h>

#include "backend/cuda/matvec.cuh"
#include "backend/cuda/ops.cuh"

#define MOE_MAX_EXPERT 1024

/* ---- routing ---- */

/* Launch contract: grid (T), block 256; block t routes token t. Thread i owns
 * experts i, i + 256, ... (probabilities in shared memory). Top-k is n_used
 * rounds of a block argmax (larger p first, equal p: lower id). */
__global__ void __launch_bounds__(256) k_moe_route(const float *__restrict__ logits, int32_t n_expert, int32_t n_used,
                                                   int32_t *__restrict__ ids, float *__restrict__ w) {
    __shared__ float p[MOE_MAX_EXPERT];
    __shared__ float sh[32];
    __shared__ float bv_s[8];
    __shared__ int bi_s[8];
    __shared__ float selp[64];
    const int t = blockIdx.x, tid = threadIdx.x, lane = tid & 31, wp = tid >> 5;
    const float *l = logits + (int64_t)t * n_expert;
    float m = -INFINITY;
    for (int e = tid; e < n_expert; e += blockDim.x) m = fmaxf(m, l[e]);
    m = block_max(m, sh);
    float s = 0.0f;
    for (int e = tid; e < n_expert; e += blockDim.x) {
        float x = expf(l[e] - m);
        p[e] = x;
        s += x;
    }
    s = block_sum(s, sh);
    for (int e = tid; e < n_expert; e += blockDim.x) p[e] = p[e] / s;
    __syncthreads();
    for (int j = 0; j < n_used; j++) {
        float bv = -1.0f;
        int bi = INT32_MAX;
        for (int e = tid; e < n_expert; e += blockDim.x) {
            float v = p[e];
            if (v > bv || (v == bv && e < bi)) bv = v, bi = e;
        }
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) {
            float ov = __shfl_xor_sync(0xffffffffu, bv, o);
            int oi = __shfl_xor_sync(0xffffffffu, bi, o);
            if (ov > bv || (ov == bv && oi < bi)) bv = ov, bi = oi;
        }
        if (lane == 0) bv_s[wp] = bv, bi_s[wp] = bi;
        __syncthreads();
        if (tid == 0) {
            float v = bv_s[0];
            int i = bi_s[0];
            for (int k = 1; k < (int)(blockDim.x >> 5); k++)
                if (bv_s[k] > v || (bv_s[k] == v && bi_s[k] < i)) v = bv_s[k], i = bi_s[k];
            ids[(int64_t)t * n_used + j] = i;
            selp[j] = v;
            p[i] = -2.0f; /* taken */
        }
        __syncthreads();
    }
    if (tid == 0) {
        float sum = 0.0f;
        for (int j = 0; j < n_used; j++) sum += selp[j];
        if (sum < 6.103515625e-5f) sum = 6.103515625e-5f;
        for (int j = 0; j < n_used; j++) w[(int64_t)t * n_used + j] = selp[j] / sum;
    }
}

memra_status cuda_op_moe_route(memra_backend *be, const float *logits, int64_t T, int32_t n_expert, int32_t n_used,
                               int32_t *ids, float *w) {
    if (n_expert <= 0 || n_expert > MOE_MAX_EXPERT || n_used <= 0 || n_used > n_expert || n_used > 64 || T < 0 ||
        T > INT32_MAX)
        return CUDA_INVALID(be, "moe_route: n_expert %d (<= %d), n_used %d (<= 64), T %lld", n_expert, MOE_MAX_EXPERT,
                            n_used, (long long)T);
    if (T == 0) return MEMRA_OK;
    k_moe_route<<<(unsigned)T, 256, 0, cuda_of(be)->stream>>>(logits, n_expert, n_used, ids, w);
    return CUDA_LAUNCHED(be, "moe_route");
}

/* ---- expert FFN ---- */

#define MOE_WARPS 4

/* Launch contract: grid (ceil(F / 4), n_used, T), block 128; warp w owns row
 * 4 * blockIdx.x + w of expert ids[t][j] (j = blockIdx.y, t = blockIdx.z) and
 * writes y[t][j][row] = W_e[row] . x[t]. An expert id out of range writes NaN. */
template <int TYPE>
__global__ void __launch_bounds__(32 * MOE_WARPS)
    k_moe_up(const uint8_t *__restrict__ W, size_t row_bytes, int64_t in, int64_t F, int32_t n_expert,
             const int32_t *__restrict__ ids, int32_t n_used, const float *__restrict__ x, float *__restrict__ y) {
    int64_t row = (int64_t)blockIdx.x * MOE_WARPS + (threadIdx.x >> 5);
    if (row >= F) return;
    int j = blockIdx.y;
    int64_t t = blockIdx.z;
    int32_t e = ids[t * n_used + j];
    float *yp = y + (t * n_used + j) * F + row;
    if (e < 0 || e >= n_expert) {
        if ((threadIdx.x & 31) == 0) *yp = NAN;
        return;
    }
    float r[1];
    warp_row_dot<TYPE, 1>(W + ((int64_t)e * F + row) * row_bytes, in / 32, x + t * in, in, 1, r);
    if ((threadIdx.x & 31) == 0) *yp = r[0];
}

/* Launch contract: 1-D grid-stride, block 256: act[i] = silu(g[i]) * u[i]. */
__global__ void k_moe_act(const float *__restrict__ g, const float *__restrict__ u, float *__restrict__ act,
                          int64_t n) {
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        act[i] = silu_f(g[i]) * u[i];
}

/* Launch contract: grid (ceil(H / 4), T), block 128; warp w owns output row
 * 4 * blockIdx.x + w of token blockIdx.y and folds j = 0 .. n_used - 1 in
 * order: out = sum_j w[t][j] * (down_e[row] . act[t][j]). */
template <int TYPE>
__global__ void __launch_bounds__(32 * MOE_WARPS)
    k_moe_down(const uint8_t *__restrict__ W, size_t row_bytes, int64_t F, int64_t H, int32_t n_expert,
               const int32_t *__restrict__ ids, const float *__restrict__ wts, int32_t n_used,
               const float *__restrict__ act, float *__restrict__ out) {
    int64_t row = (int64_t)blockIdx.x * MOE_WARPS + (threadIdx.x >> 5);
    if (row >= H) return;
    int64_t t = blockIdx.y;
    float acc = 0.0f;
    for (int j = 0; j < n_used; j++) {
        int32_t e = ids[t * n_used + j];
        if (e < 0 || e >= n_expert) {
            acc = NAN;
            break;
        }
        float r[1];
        warp_row_dot<TYPE, 1>(W + ((int64_t)e * H + row) * row_bytes, F / 32, act + (t * n_used + j) * F, F, 1, r);
        acc = fmaf(wts[t * n_used + j], r[0], acc);
    }
    if ((threadIdx.x & 31) == 0) out[t * H + row] = acc;
}

static memra_status moe_check(memra_backend *be, const memra_weight *w, int64_t in, int64_t rows, int32_t n_expert,
                              const char *what) {
    if (!w || !w->data) return CUDA_INVALID(be, "moe_ffn: %s not loaded", what);
    if (!cuda_type_supported(w->type))
        return cuda_fail(be, MEMRA_ERR_UNSUPPORTED, "moe_ffn: %s type %s has no CUDA kernel", what,
                         memra_type_name(w->type));
    if (w->ne[0] != in || w->ne[1] != rows || w->ne[2] != n_expert || in % 32 ||
        cuda_type_row_bytes(w->type, in) != w->row_bytes)
        return CUDA_INVALID(be, "moe_ffn: %s is {%lld, %lld, %lld} (row %llu B), expected {%lld, %lld, %d}", what,
                            (long long)w->ne[0], (long long)w->ne[1], (long long)w->ne[2],
                            (unsigned long long)w->row_bytes, (long long)in, (long long)rows, n_expert);
    return MEMRA_OK;
}

memra_status cuda_op_moe_ffn(memra_backend *be, const memra_moe_params *p, const float *x, const int32_t *ids,
                             const float *w, float *out, int64_t T, void *scratch) {
    if (!p->gate_exps || !p->down_exps) return CUDA_INVALID(be, "moe_ffn: missing expert weights");
    int64_t H = p->gate_exps->ne[0], F = p->gate_exps->ne[1];
    int32_t E = p->n_expert, K = p->n_used;
    if (E <= 0 || K <= 0 || K > E || T < 0 || T > 65535)
        return CUDA_INVALID(be, "moe_ffn: n_expert %d, n_used %d, T %lld", E, K, (long long)T);
    memra_status st;
    if ((st = moe_check(be, p->gate_exps, H, F, E, "gate_exps"))) return st;
    if ((st = moe_check(be, p->up_exps, H, F, E, "up_exps"))) return st;
    if ((st = moe_check(be, p->down_exps, F, H, E, "down_exps"))) return st;
    if (!cuda_aligned16(x) || !cuda_aligned16(scratch))
        return CUDA_INVALID(be, "moe_ffn: x and scratch must be 16-byte aligned");
    if (T == 0) return MEMRA_OK;
    cudaStream_t s = cuda_of(be)->stream;
    int64_t n = T * K * F;
    float *g = (float *)scratch, *u = g + n, *act = u + n;
    dim3 gu((unsigned)((F + MOE_WARPS - 1) / MOE_WARPS), (unsigned)K, (unsigned)T);
    const memra_weight *wu[2] = {p->gate_exps, p->up_exps};
    float *yu[2] = {g, u};
    for (int i = 0; i < 2; i++) {
        const uint8_t *W = (const uint8_t *)wu[i]->data;
        size_t rb = wu[i]->row_bytes;
        switch (wu[i]->type) {
#define UP_CASE(TY) \
    case TY: k_moe_up<TY><<<gu, 32 * MOE_WARPS, 0, s>>>(W, rb, H, F, E, ids, K, x, yu[i]); break;
            CUDA_FOR_EACH_TYPE(UP_CASE)
#undef UP_CASE
        default: break;
        }
        if ((st = CUDA_LAUNCHED(be, "moe_ffn: gate/up kernel"))) return st;
    }
    int64_t nb = (n + 255) / 256;
    k_moe_act<<<(unsigned)(nb > 65535 * 16 ? 65535 * 16 : nb), 256, 0, s>>>(g, u, act, n);
    if ((st = CUDA_LAUNCHED(be, "moe_ffn: act kernel"))) return st;
    dim3 gd((unsigned)((H + MOE_WARPS - 1) / MOE_WARPS), (unsigned)T);
    const uint8_t *Wd = (const uint8_t *)p->down_exps->data;
    size_t rbd = p->down_exps->row_bytes;
    switch (p->down_exps->type) {
#define DN_CASE(TY) \
    case TY: k_moe_down<TY><<<gd, 32 * MOE_WARPS, 0, s>>>(Wd, rbd, F, H, E, ids, w, K, act, out); break;
        CUDA_FOR_EACH_TYPE(DN_CASE)
#undef DN_CASE
    default: break;
    }
    return CUDA_LAUNCHED(be, "moe_ffn: down kernel");
}
