/* MoE routing (softmax -> top-k -> renormalise), the expert FFN, which
 * reads only the selected experts' rows, and the fused decode layer.
 *
 * moe_ffn runs four kernels: gate and up projections of each (token, slot j)
 * into scratch (one launch each, so gate and up may differ in type), the
 * SwiGLU activation, then the down projection, where one warp per (token,
 * output row) sums w[t][j] * down_e(act) over j in order 0 .. n_used - 1.
 * Scratch (memra_moe_scratch_bytes): gate [T][n_used][F], up [T][n_used][F],
 * act [T][n_used][F].
 *
 * moe_block runs two: k_moe_block_gu routes the token in every block that
 * needs it (256 logits: cheaper than a launch) and writes silu(gate) * up of
 * the shared expert's rows and the selected experts' rows into scratch
 * ([T][Fs + n_used * F], the shared expert first); k_moe_block_down computes
 * the down rows of every slot and folds them per output row in a fixed order
 * into the residual. All per-token reductions use matvec.cuh's fixed order,
 * so a row's bits do not depend on T, on the grid or on the other tokens. */
#include <math.h>

#include "backend/cuda/matvec.cuh"
#include "backend/cuda/ops.cuh"

#define MOE_MAX_EXPERT 1024
#define MOE_MAX_USED 64

/* ---- routing ---- */

/* Routes one token with one warp: p = softmax(l) over E experts (lane l
 * walks experts l, l + 32, ... for the max and the sum, then warp_max and
 * warp_sum: a fixed order), then K rounds of a warp argmax over the experts
 * not yet taken (larger p first, equal p: lower id). Each lane keeps its
 * best untaken expert and rescans only when that one is taken. Writes
 * ids[j] and the renormalised w[j] (shared memory) and syncs the warp. p: E
 * floats of shared memory. A row without a finite p selects id E (out of
 * range: the FFN kernels then write NaN). */
__device__ void warp_route(const float *__restrict__ l, int E, int K, float *p, int32_t *ids, float *w) {
    const int lane = threadIdx.x & 31;
    float m = -INFINITY;
    for (int e = lane; e < E; e += 32) m = fmaxf(m, l[e]);
    m = warp_max(m);
    float s = 0.0f;
    for (int e = lane; e < E; e += 32) {
        float v = expf(l[e] - m);
        p[e] = v;
        s += v;
    }
    s = warp_sum(s);
    float bv = -1.0f;
    int bi = E;
    for (int e = lane; e < E; e += 32) {
        float v = p[e] / s;
        p[e] = v;
        if (v > bv) bv = v, bi = e;
    }
    float wsum = 0.0f;
    for (int j = 0; j < K; j++) {
        float v = bv;
        int i = bi;
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) {
            float ov = __shfl_xor_sync(0xffffffffu, v, o);
            int oi = __shfl_xor_sync(0xffffffffu, i, o);
            if (ov > v || (ov == v && oi < i)) v = ov, i = oi;
        }
        if (lane == 0) ids[j] = i, w[j] = v;
        wsum += v;
        if (i < E && (i & 31) == lane) {
            p[i] = -2.0f; /* taken */
            bv = -1.0f, bi = E;
            for (int e = lane; e < E; e += 32)
                if (p[e] > bv) bv = p[e], bi = e;
        }
    }
    if (wsum < 6.103515625e-5f) wsum = 6.103515625e-5f;
    __syncwarp();
    for (int j = lane; j < K; j += 32) w[j] = w[j] / wsum;
    __syncwarp();
}

/* Launch contract: grid (T), block 32; block t routes token t. */
__global__ void __launch_bounds__(32) k_moe_route(const float *__restrict__ logits, int32_t n_expert, int32_t n_used,
                                                  int32_t *__restrict__ ids, float *__restrict__ w) {
    pdl_start();
    __shared__ float p[MOE_MAX_EXPERT];
    __shared__ int32_t sid[MOE_MAX_USED];
    __shared__ float sw[MOE_MAX_USED];
    const int64_t t = blockIdx.x;
    warp_route(logits + t * n_expert, n_expert, n_used, p, sid, sw);
    for (int j = threadIdx.x; j < n_used; j += 32) ids[t * n_used + j] = sid[j], w[t * n_used + j] = sw[j];
}

memra_status cuda_op_moe_route(memra_backend *be, const float *logits, int64_t T, int32_t n_expert, int32_t n_used,
                               int32_t *ids, float *w) {
    if (n_expert <= 0 || n_expert > MOE_MAX_EXPERT || n_used <= 0 || n_used > n_expert || n_used > MOE_MAX_USED ||
        T < 0 || T > INT32_MAX)
        return CUDA_INVALID(be, "moe_route: n_expert %d (<= %d), n_used %d (<= %d), T %lld", n_expert, MOE_MAX_EXPERT,
                            n_used, MOE_MAX_USED, (long long)T);
    if (T == 0) return MEMRA_OK;
    cuda_launch(k_moe_route, (unsigned)T, 32, 0, cuda_of(be)->stream, logits, n_expert, n_used, ids, w);
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
    pdl_start();
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
    pdl_start();
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
    pdl_start();
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

static memra_status moe_check(memra_backend *be, const char *op, const memra_weight *w, int64_t in, int64_t rows,
                              int32_t n_expert, const char *what) {
    if (!w || !w->data) return CUDA_INVALID(be, "%s: %s not loaded", op, what);
    if (!cuda_type_supported(w->type))
        return cuda_fail(be, MEMRA_ERR_UNSUPPORTED, "%s: %s type %s has no CUDA kernel", op, what,
                         memra_type_name(w->type));
    if (w->ne[0] != in || w->ne[1] != rows || w->ne[2] != n_expert || in % 32 ||
        cuda_type_row_bytes(w->type, in) != w->row_bytes || ((uintptr_t)w->data & 15))
        return CUDA_INVALID(be, "%s: %s is {%lld, %lld, %lld} (row %llu B), expected {%lld, %lld, %d}, 16-byte aligned",
                            op, what, (long long)w->ne[0], (long long)w->ne[1], (long long)w->ne[2],
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
    if ((st = moe_check(be, "moe_ffn", p->gate_exps, H, F, E, "gate_exps"))) return st;
    if ((st = moe_check(be, "moe_ffn", p->up_exps, H, F, E, "up_exps"))) return st;
    if ((st = moe_check(be, "moe_ffn", p->down_exps, F, H, E, "down_exps"))) return st;
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
    case TY: cuda_launch(k_moe_up<TY>, gu, 32 * MOE_WARPS, 0, s, W, rb, H, F, E, ids, K, x, yu[i]); break;
            CUDA_FOR_EACH_TYPE(UP_CASE)
#undef UP_CASE
        default: break;
        }
        if ((st = CUDA_LAUNCHED(be, "moe_ffn: gate/up kernel"))) return st;
    }
    int64_t nb = (n + 255) / 256;
    cuda_launch(k_moe_act, (unsigned)(nb > 65535 * 16 ? 65535 * 16 : nb), 256, 0, s, g, u, act, n);
    if ((st = CUDA_LAUNCHED(be, "moe_ffn: act kernel"))) return st;
    dim3 gd((unsigned)((H + MOE_WARPS - 1) / MOE_WARPS), (unsigned)T);
    const uint8_t *Wd = (const uint8_t *)p->down_exps->data;
    size_t rbd = p->down_exps->row_bytes;
    switch (p->down_exps->type) {
#define DN_CASE(TY) \
    case TY: cuda_launch(k_moe_down<TY>, gd, 32 * MOE_WARPS, 0, s, Wd, rbd, F, H, E, ids, w, K, act, out); break;
        CUDA_FOR_EACH_TYPE(DN_CASE)
#undef DN_CASE
    default: break;
    }
    return CUDA_LAUNCHED(be, "moe_ffn: down kernel");
}

/* ---- fused layer (moe_block) ---- */

/* Work per warp, from the 35B-A3B q4_k_m decode profile (H200, moe_block
 * per layer): this setting 33.3 us; 2 gate + 2 up rows per warp 37.4; 4 steps
 * fetched ahead 39.6; 2 + 2 rows, no fetch-ahead, 8 down rows of 1 step 45.6;
 * 4 + 4 rows, no fetch-ahead, 2 down rows 44.3. More bytes in flight per warp
 * do not help: the warp-per-row core is the limit (bench/results/matvec.md). */
#define MOE_GU_WARPS 8
#define MOE_GU_F 1     /* rows of gate and of up per warp */
#define MOE_GU_U 2     /* weight steps fetched ahead in the gate/up kernel */
#define MOE_DN_ROWS 4  /* output rows per block of the down kernel */
#define MOE_DN_U 2
#define MOE_DN_MAX_WARPS 16

/* Launch contract: grid (ceil((Fs + K * F) / (MOE_GU_F * MOE_GU_WARPS)), T),
 * block 32 * MOE_GU_WARPS; Fs and F multiples of 32 (so of MOE_GU_F). Token
 * t's rows are the shared expert's [0, Fs), then slot j's [Fs + j * F, Fs +
 * (j + 1) * F); warp w of block bx owns the MOE_GU_F rows from
 * (bx * MOE_GU_WARPS + w) * MOE_GU_F and writes act[t][row] = silu(gate row .
 * xn[t]) * (up row . xn[t]) (gate and up rows walked together, each in
 * matvec.cuh's order). Blocks holding a routed row route the token first
 * (warp 0); block 0 also writes ids[t] and w[t]. Gate and up rows (routed and
 * shared) are row_bytes apart. An expert id out of range writes NaN. */
template <int TYPE>
__global__ void __launch_bounds__(32 * MOE_GU_WARPS)
    k_moe_block_gu(const uint8_t *__restrict__ Wg, const uint8_t *__restrict__ Wu, const uint8_t *__restrict__ Sg,
                   const uint8_t *__restrict__ Su, size_t row_bytes, int64_t H, int64_t F, int64_t Fs, int32_t E,
                   int32_t K, const float *__restrict__ logits, const float *__restrict__ xn, float *__restrict__ act,
                   int32_t *__restrict__ ids, float *__restrict__ wts) {
    pdl_start();
    __shared__ float p[MOE_MAX_EXPERT];
    __shared__ int32_t sid[MOE_MAX_USED];
    __shared__ float sw[MOE_MAX_USED];
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int64_t t = blockIdx.y, n_rows = Fs + (int64_t)K * F;
    const int64_t row0 = ((int64_t)blockIdx.x * MOE_GU_WARPS + warp) * MOE_GU_F;
    if (blockIdx.x == 0 || ((int64_t)blockIdx.x + 1) * MOE_GU_WARPS * MOE_GU_F > Fs) { /* uniform over the block */
        if (warp == 0) warp_route(logits + t * E, E, K, p, sid, sw);
        __syncthreads();
        const int j = threadIdx.x;
        if (blockIdx.x == 0 && j < K) ids[t * K + j] = sid[j], wts[t * K + j] = sw[j];
    }
    if (row0 >= n_rows) return;
    const uint8_t *rows[2 * MOE_GU_F];
    if (row0 < Fs) {
#pragma unroll
        for (int i = 0; i < MOE_GU_F; i++) {
            rows[i] = Sg + (row0 + i) * row_bytes;
            rows[MOE_GU_F + i] = Su + (row0 + i) * row_bytes;
        }
    } else {
        int64_t j = (row0 - Fs) / F, f = row0 - Fs - j * F;
        int32_t e = sid[j];
        if (e < 0 || e >= E) {
            if (lane < MOE_GU_F) act[t * n_rows + row0 + lane] = NAN;
            return;
        }
        const int64_t r = (int64_t)e * F + f;
#pragma unroll
        for (int i = 0; i < MOE_GU_F; i++) {
            rows[i] = Wg + (r + i) * row_bytes;
            rows[MOE_GU_F + i] = Wu + (r + i) * row_bytes;
        }
    }
    float res[1][2 * MOE_GU_F];
    warp_rows_dot<TYPE, 1, 2 * MOE_GU_F, MOE_GU_U>(rows, H / 32, xn + t * H, H, 1, res);
    if (lane == 0) {
#pragma unroll
        for (int i = 0; i < MOE_GU_F; i++) act[t * n_rows + row0 + i] = silu_f(res[0][i]) * res[0][MOE_GU_F + i];
    }
}

/* Launch contract: grid (ceil(H / MOE_DN_ROWS), T), block 32 * min(S, 16)
 * with S = K + (Fs > 0) slots (slot K: the shared expert). Warp w computes,
 * for slots s = w, w + warps, ..., the dots of output rows r0 .. r0 +
 * MOE_DN_ROWS - 1 (r0 = bx * MOE_DN_ROWS) of slot s's down matrix with
 * act[t][slot s] (matvec.cuh's order) into shared memory; then thread i
 * folds row r0 + i: acc = fmaf(w[t][j], d_j, acc) for j = 0 .. K - 1 from 0,
 * x = x + acc, then x = fmaf(sigmoid(sg[t * sg_stride]), d_shared, x). */
template <int TYPE>
__global__ void __launch_bounds__(32 * MOE_DN_MAX_WARPS)
    k_moe_block_down(const uint8_t *__restrict__ Wd, size_t rb, const uint8_t *__restrict__ Sd, size_t rbs,
                     int64_t F, int64_t Fs, int64_t H, int32_t E, int32_t K, const int32_t *__restrict__ ids,
                     const float *__restrict__ wts, const float *__restrict__ act, const float *__restrict__ sg,
                     int64_t sg_stride, float *__restrict__ x) {
    pdl_start();
    __shared__ float part[MOE_MAX_USED + 1][MOE_DN_ROWS];
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, nw = blockDim.x >> 5;
    const int64_t t = blockIdx.y, r0 = (int64_t)blockIdx.x * MOE_DN_ROWS, n_rows = Fs + (int64_t)K * F;
    const int S = K + (Fs > 0);
    const float *a = act + t * n_rows;
    for (int s = warp; s < S; s += nw) {
        const uint8_t *base = Sd;
        const float *xa = a;
        int64_t n = Fs;
        size_t b = rbs;
        if (s < K) {
            int32_t e = ids[t * K + s];
            if (e < 0 || e >= E) {
                if (lane < MOE_DN_ROWS) part[s][lane] = NAN;
                continue;
            }
            base = Wd + (int64_t)e * H * rb, xa = a + Fs + (int64_t)s * F, n = F, b = rb;
        }
        const uint8_t *rows[MOE_DN_ROWS];
#pragma unroll
        for (int r = 0; r < MOE_DN_ROWS; r++) rows[r] = base + min(r0 + r, H - 1) * b;
        float res[1][MOE_DN_ROWS];
        warp_rows_dot<TYPE, 1, MOE_DN_ROWS, MOE_DN_U>(rows, n / 32, xa, n, 1, res);
        if (lane == 0) {
#pragma unroll
            for (int r = 0; r < MOE_DN_ROWS; r++) part[s][r] = res[0][r];
        }
    }
    __syncthreads();
    const int i = threadIdx.x;
    if (i < MOE_DN_ROWS && r0 + i < H) {
        float acc = 0.0f;
        for (int j = 0; j < K; j++) acc = fmaf(wts[t * K + j], part[j][i], acc);
        float *xp = x + t * H + r0 + i;
        float y = *xp + acc;
        if (Fs) y = fmaf(sigmoid_f(sg[t * sg_stride]), part[K][i], y);
        *xp = y;
    }
}

memra_status cuda_op_moe_block(memra_backend *be, const memra_moe_params *p, const float *logits, const float *xn,
                               const float *sg, int64_t sg_stride, float *x, int64_t T, int32_t *ids, float *w,
                               void *scratch) {
    if (!p->gate_exps || !p->up_exps || !p->down_exps) return CUDA_INVALID(be, "moe_block: missing expert weights");
    int64_t H = p->gate_exps->ne[0], F = p->gate_exps->ne[1];
    int32_t E = p->n_expert, K = p->n_used;
    if (E <= 0 || E > MOE_MAX_EXPERT || K <= 0 || K > E || K > MOE_MAX_USED || T < 0 || T > 65535)
        return CUDA_INVALID(be, "moe_block: n_expert %d (<= %d), n_used %d (<= %d), T %lld", E, MOE_MAX_EXPERT, K,
                            MOE_MAX_USED, (long long)T);
    memra_status st;
    if ((st = moe_check(be, "moe_block", p->gate_exps, H, F, E, "gate_exps"))) return st;
    if ((st = moe_check(be, "moe_block", p->up_exps, H, F, E, "up_exps"))) return st;
    if ((st = moe_check(be, "moe_block", p->down_exps, F, H, E, "down_exps"))) return st;
    const int shared = p->gate_shexp != NULL;
    int64_t Fs = shared ? p->gate_shexp->ne[1] : 0;
    if (shared) {
        if ((st = moe_check(be, "moe_block", p->gate_shexp, H, Fs, 1, "gate_shexp"))) return st;
        if ((st = moe_check(be, "moe_block", p->up_shexp, H, Fs, 1, "up_shexp"))) return st;
        if ((st = moe_check(be, "moe_block", p->down_shexp, Fs, H, 1, "down_shexp"))) return st;
        if (!sg) return CUDA_INVALID(be, "moe_block: no shared expert gate logits");
    }
    uint32_t tgu = p->gate_exps->type, td = p->down_exps->type;
    if (p->up_exps->type != tgu || (shared && (p->gate_shexp->type != tgu || p->up_shexp->type != tgu ||
                                               p->down_shexp->type != td)))
        return cuda_fail(be, MEMRA_ERR_UNSUPPORTED, "moe_block: gate/up weights of several types, or down weights "
                         "of two types");
    if (!cuda_aligned16(xn) || !cuda_aligned16(scratch))
        return CUDA_INVALID(be, "moe_block: xn and scratch must be 16-byte aligned");
    if (T == 0) return MEMRA_OK;
    cudaStream_t s = cuda_of(be)->stream;
    float *act = (float *)scratch;
    const uint8_t *Sg = shared ? (const uint8_t *)p->gate_shexp->data : NULL;
    const uint8_t *Su = shared ? (const uint8_t *)p->up_shexp->data : NULL;
    const uint8_t *Sd = shared ? (const uint8_t *)p->down_shexp->data : NULL;
    size_t rbs = shared ? p->down_shexp->row_bytes : 0;
    const int64_t per_block = MOE_GU_WARPS * MOE_GU_F;
    dim3 gu((unsigned)((Fs + (int64_t)K * F + per_block - 1) / per_block), (unsigned)T);
    const uint8_t *Wg = (const uint8_t *)p->gate_exps->data, *Wu = (const uint8_t *)p->up_exps->data;
    size_t rb = p->gate_exps->row_bytes;
    switch (tgu) {
#define GU_CASE(TY)                                                                                              \
    case TY:                                                                                                     \
        cuda_launch(k_moe_block_gu<TY>, gu, 32 * MOE_GU_WARPS, 0, s, Wg, Wu, Sg, Su, rb, H, F, Fs, E, K, logits, xn, act, \
                                                            ids, w);                                             \
        break;
        CUDA_FOR_EACH_TYPE(GU_CASE)
#undef GU_CASE
    default: break;
    }
    if ((st = CUDA_LAUNCHED(be, "moe_block: gate/up kernel"))) return st;
    int S = K + shared;
    dim3 gd((unsigned)((H + MOE_DN_ROWS - 1) / MOE_DN_ROWS), (unsigned)T);
    unsigned bd = 32u * (unsigned)(S < MOE_DN_MAX_WARPS ? S : MOE_DN_MAX_WARPS);
    const uint8_t *Wd = (const uint8_t *)p->down_exps->data;
    size_t rbd = p->down_exps->row_bytes;
    switch (td) {
#define DN_CASE(TY)                                                                                                  \
    case TY:                                                                                                         \
        cuda_launch(k_moe_block_down<TY>, gd, bd, 0, s, Wd, rbd, Sd, rbs, F, Fs, H, E, K, ids, w, act, sg, sg_stride, x); \
        break;
        CUDA_FOR_EACH_TYPE(DN_CASE)
#undef DN_CASE
    default: break;
    }
    return CUDA_LAUNCHED(be, "moe_block: down kernel");
}
