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
 * so a row's bits do not depend on T, on the grid or on the other tokens.
 * Q4_K gate/up and Q4_K / Q6_K down weights (the Q4_K_M mix) take
 * k_moe_tc_gu / k_moe_tc_down instead: the same two phases on the tensor-core
 * decode cores of mmv.cuh and mmv6.cuh (section "fused layer on the tensor
 * cores"); at T >= 16 those types take the grouped path (section "grouped
 * path": tokens sorted by expert, each expert's rows read once per tile of
 * tokens, the same bits as T = 1). The decode gate/up phase runs on the int8
 * core instead (k_moe_q8_gu, section "fused layer on the int8 tensor
 * cores"; MEMRA_MOE_Q8 picks the phases), so the grouped path no longer
 * shares its bits: MoE has the dense matvecs' regime split at 16 tokens. */
#include <math.h>

#include "backend/cuda/matvec.cuh"
#include "backend/cuda/mmv.cuh"
#include "backend/cuda/mmv6.cuh"
#include "backend/cuda/mmvq.cuh"
#include "backend/cuda/mmvg.cuh"
#include "backend/cuda/ops.cuh"

#define MOE_MAX_EXPERT 1024
#define MOE_MAX_USED 64

/* ---- routing ---- */

/* warp_route's K rounds from each lane's best untaken expert (bv, bi):
 * ids[j], w[j] renormalised; rescan(i, bv, bi) marks expert i taken in the
 * winner lane and finds that lane's next best. */
template <class RESCAN>
__device__ __forceinline__ void route_rounds(int E, int K, float bv, int bi, RESCAN rescan, int32_t *ids, float *w) {
    const int lane = threadIdx.x & 31;
    float wsum = 0.0f;
    for (int j = 0; j < K; j++) {
        const unsigned key = bv >= 0.0f ? __float_as_uint(bv) + 1u : 0u;
        const unsigned mk = __reduce_max_sync(0xffffffffu, key);
        const int i = (int)__reduce_min_sync(0xffffffffu, key == mk ? (unsigned)bi : 0xffffffffu);
        const float v = mk ? __uint_as_float(mk - 1u) : -1.0f;
        if (lane == 0) ids[j] = i, w[j] = v;
        wsum += v;
        if (i < E && (i & 31) == lane) rescan(i, bv, bi);
    }
    if (wsum < 6.103515625e-5f) wsum = 6.103515625e-5f;
    __syncwarp();
    for (int j = lane; j < K; j += 32) w[j] = w[j] / wsum;
    __syncwarp();
}

/* warp_route for E <= 32 NPL: a lane's experts lane + 32 k in registers (k
 * ascending), so a round's rescan is register selects instead of shared
 * loads. The same operations in the same order as warp_route's shared-memory
 * loops: the same ids and weights (gate kernels: moe_route "ids equal",
 * moe_block-inv). */
template <int NPL>
__device__ __forceinline__ void warp_route_reg(const float *__restrict__ l, int E, int K, int32_t *ids, float *w) {
    const int lane = threadIdx.x & 31;
    float v[NPL];
#pragma unroll
    for (int k = 0; k < NPL; k++) {
        const int e = lane + 32 * k;
        v[k] = e < E ? __ldg(l + e) : 0.0f;
    }
    float m = -INFINITY;
#pragma unroll
    for (int k = 0; k < NPL; k++)
        if (lane + 32 * k < E) m = fmaxf(m, v[k]);
    m = warp_max(m);
    float s = 0.0f;
#pragma unroll
    for (int k = 0; k < NPL; k++)
        if (lane + 32 * k < E) {
            v[k] = expf(v[k] - m);
            s += v[k];
        }
    s = warp_sum(s);
    float bv = -1.0f;
    int bi = E;
#pragma unroll
    for (int k = 0; k < NPL; k++) {
        const int e = lane + 32 * k;
        if (e < E) {
            v[k] = v[k] / s;
            if (v[k] > bv) bv = v[k], bi = e;
        } else {
            v[k] = -2.0f; /* never a candidate */
        }
    }
    route_rounds(
        E, K, bv, bi,
        [&](int i, float &b, int &bix) {
            b = -1.0f, bix = E;
#pragma unroll
            for (int k = 0; k < NPL; k++) {
                if (lane + 32 * k == i) v[k] = -2.0f; /* taken */
                if (v[k] > b) b = v[k], bix = lane + 32 * k;
            }
        },
        ids, w);
}

/* Routes one token with one warp: p = softmax(l) over E experts (lane l
 * walks experts l, l + 32, ... for the max and the sum, then warp_max and
 * warp_sum: a fixed order), then K rounds of a warp argmax over the experts
 * not yet taken (larger p first, equal p: lower id). Each lane keeps its
 * best untaken expert and rescans only when that one is taken. Writes
 * ids[j] and the renormalised w[j] (shared memory) and syncs the warp. p: E
 * floats of shared memory, used above 512 experts (up to 512 they stay in
 * registers: warp_route_reg). A row without a finite p selects id E (out of
 * range: the FFN kernels then write NaN).
 * The logits are first copied into p with all of a lane's loads in flight
 * (one L2 round trip instead of one per loop step), and a round's argmax is
 * two warp reductions (redux.sync: the largest key, then the lowest id
 * holding it; key = bits of p + 1 (p >= 0 orders as its bits), 0 = no
 * candidate) instead of a 5-step shuffle butterfly: the same selection and
 * the same arithmetic as the plain loops. */
__device__ void warp_route(const float *__restrict__ l, int E, int K, float *p, int32_t *ids, float *w) {
    if (E <= 256) return warp_route_reg<8>(l, E, K, ids, w);
    if (E <= 512) return warp_route_reg<16>(l, E, K, ids, w);
    const int lane = threadIdx.x & 31;
    for (int e0 = 0; e0 < E; e0 += 256) {
        float v[8];
#pragma unroll
        for (int k = 0; k < 8; k++) {
            const int e = e0 + lane + 32 * k;
            v[k] = e < E ? __ldg(l + e) : 0.0f;
        }
#pragma unroll
        for (int k = 0; k < 8; k++) {
            const int e = e0 + lane + 32 * k;
            if (e < E) p[e] = v[k];
        }
    }
    float m = -INFINITY;
    for (int e = lane; e < E; e += 32) m = fmaxf(m, p[e]);
    m = warp_max(m);
    float s = 0.0f;
    for (int e = lane; e < E; e += 32) {
        float v = expf(p[e] - m);
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
    route_rounds(
        E, K, bv, bi,
        [&](int i, float &b, int &bix) {
            p[i] = -2.0f; /* taken */
            b = -1.0f, bix = E;
            for (int e = lane; e < E; e += 32)
                if (p[e] > b) b = p[e], bix = e;
        },
        ids, w);
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

/* ---- fused layer on the tensor cores (Q4_K gate/up; Q4_K or Q6_K down) ----
 *
 * The same two phases on mmv.cuh's / mmv6.cuh's decode cores (mmv_stage,
 * mmv_sb_q4k, mmv6_stage, mmv6_sb, called as they are) instead of the fp32
 * warp-per-row core, for the Q4_K_M mix; every other type keeps the kernels
 * above. The rows of a layer are short (35B-A3B: H = 2048 = 8 super-blocks,
 * F = Fs = 512 = 2), so the work is cut for warps in flight: a warp owns a
 * few super-blocks of one tile, issues all their loads at once, and the
 * partials meet in shared memory in a fixed order.
 *  - k_moe_tc_gu: block (16-row tile of [slot 0 | ... | slot K - 1 |
 *    shared], token t); KS warps split the H / 256 super-blocks into mmv's
 *    fixed ranges; each warp multiplies the gate tile and the up tile of the
 *    rows (mmv_sb_q4k's two tiles share the activation fragments).
 *  - k_moe_tc_down: block (16 output rows, token t); work item = (slot,
 *    super-block) of the down rows of a slot (the K routed slots in order,
 *    then the shared expert), one warp per item (mmv_sb_q4k for one tile,
 *    or mmv6_sb); a slot's dot = its super-block partials
 *    added in sb order, then the fold of k_moe_block_down.
 * Every order depends on H, F and Fs only: not on T, the grid or the
 * selected experts, so a token's bits are those of T = 1.
 *
 * Measured on the H200 (35B-A3B q4_k_m, decode@0 via memra bench; Nsight
 * Compute kernel times with --cache-control none): the fp32 kernels 299.9
 * tok/s, gu 18.0 us + down 11.2 (Q4_K) / 18.4 (Q6_K) us per layer; these
 * 331.8 tok/s, gu 14.9 us + down 7.9 / 9.95 us. gu variants KS x NB (MINB
 * blocks per SM): 4 x 2 (3; 167 registers, no spill) 331.8; 8 x 1 (2; 124
 * registers, 2 waves of 264 + 24 blocks) 330.1; 8 x 1 (3; 80 registers,
 * 168 bytes spilled) 328.0: one noise band. An L2 bulk prefetch
 * of the down rows from the gu blocks made the down kernel 0.6-1 us faster
 * and gu slower (-2%..+0.2% decode): not kept. Routing is ~4.5 us of gu
 * (a run with the routing replaced by fixed ids: -4.4 us per layer), paid
 * in series before the routed rows can be loaded; the rest of gu's ~15 us
 * for 10.7 MB is not yet explained (no stall profile taken). Routing in a
 * launch of its own (k_moe_route, then gu blocks that read the ids) lost
 * on the H100: 446 -> 434 tok/s (bench/results/2026-12-06g-h100-h200.md); the
 * launch boundary costs more than the routing it takes out of gu. */

#define MOE_TC_GU_KS 4 /* warps per gate/up tile (K split) */
#define MOE_TC_GU_NB 2 /* super-blocks a warp has in flight */
#define MOE_TC_ITEMS 64 /* down work items (K F / 256 + Fs / 256) at most */
#define MOE_TC_DN_WARPS 24 /* warps of a down block at most (80 registers) */
/* a warp's activation staging for one token: mmv (MMV_TOK_W words) or mmv6 (2 x MMV6_TS halves) */
#define MOE_TC_STG_B 1216

static_assert(MOE_TC_STG_B >= MMV_TOK_W * 4 && MOE_TC_STG_B >= 2 * MMV6_TS * 2 && MOE_TC_STG_B % 16 == 0,
              "staging area of one token");

/* The routed blocks' step in k_moe_tc_gu and k_moe_tc_gu2: warp 0 routes token t (warp_route; the other
 * warps stage their activations meanwhile), block 0 writes ids[t] and w[t]. Returns the first row of the
 * tile's rows in the expert weights, or -1 for an expert id out of range (uniform over the block), after
 * writing NaN to the tile's 16 act rows at act_t. */
__device__ __forceinline__ int64_t moe_gu_route(const float *__restrict__ logits, int64_t t, int32_t E, int32_t K,
                                                int64_t F, int64_t tile, float *p, int32_t *sid, float *sw,
                                                int32_t *__restrict__ ids, float *__restrict__ wts, float *act_t) {
    if (threadIdx.x < 32) warp_route(logits + t * E, E, K, p, sid, sw);
    __syncthreads();
    if (blockIdx.x == 0)
        for (int j = threadIdx.x; j < K; j += blockDim.x) ids[t * K + j] = sid[j], wts[t * K + j] = sw[j];
    const int64_t j = tile / F;
    const int32_t e = sid[j];
    if (e < 0 || e >= E) {
        if (threadIdx.x < 16) act_t[threadIdx.x] = NAN;
        return -1;
    }
    return (int64_t)e * F + tile - j * F;
}

/* The end of both: after the block's barrier, thread i < 16 adds the KS partials of gate row i and of up row
 * i in range order and writes act_t[i] = silu(gate) * up. */
template <int KS>
__device__ __forceinline__ void moe_gu_finish(const float (*part)[2][16], float *act_t) {
    __syncthreads();
    const int i = threadIdx.x;
    if (i < 16) {
        float g = part[0][0][i], u = part[0][1][i];
        for (int k = 1; k < KS; k++) g = __fadd_rn(g, part[k][0][i]), u = __fadd_rn(u, part[k][1][i]);
        act_t[i] = silu_f(g) * u;
    }
}

/* Launch contract: grid ((K * F + Fs) / 16, T), block 32 * KS; H % 256 ==
 * 0, F % 16 == 0, Fs % 16 == 0 (a tile never straddles two experts); Q4_K
 * rows 16-byte aligned, xn rows 16-byte aligned. Block b < K F / 16 takes
 * token t's routed rows Fs + 16 b .. Fs + 16 b + 15 (slot j = 16 b / F),
 * the others the shared expert's rows 16 (b - K F / 16) ..; warp w takes
 * super-blocks [w nsb / KS, (w + 1) nsb / KS) of the tile's gate and up
 * rows, NB at a time with all their loads in flight (acc in sb order), and
 * the block adds the KS partials in warp order and writes act[t][row] =
 * silu(gate . xn[t]) * (up . xn[t]). Blocks of routed rows route the token
 * first (warp 0, warp_route; the other warps stage their activations
 * meanwhile), block 0 also writes ids[t] and w[t]; an expert id out of range
 * writes NaN. MINB: blocks per SM the registers are held to. */
template <int KS, int NB, int MINB>
__global__ void __launch_bounds__(32 * KS, MINB)
    k_moe_tc_gu(const uint8_t *__restrict__ Wg, const uint8_t *__restrict__ Wu, const uint8_t *__restrict__ Sg,
                const uint8_t *__restrict__ Su, size_t row_bytes, int64_t H, int64_t F, int64_t Fs, int32_t E,
                int32_t K, const float *__restrict__ logits, const float *__restrict__ xn, float *__restrict__ act,
                int32_t *__restrict__ ids, float *__restrict__ wts) {
    pdl_start();
    __shared__ float p[MOE_MAX_EXPERT];
    __shared__ int32_t sid[MOE_MAX_USED];
    __shared__ float sw[MOE_MAX_USED];
    __shared__ __align__(16) uint32_t stg_all[KS][NB][MOE_TC_STG_B / 4];
    __shared__ float part[KS][2][16];
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, gid = lane >> 2, tig = lane & 3;
    const int nsb = (int)(H / 256);
    const int sb0 = warp * nsb / KS, sb1 = (warp + 1) * nsb / KS;
    const int64_t t = blockIdx.y, n_rows = Fs + (int64_t)K * F, tile = (int64_t)blockIdx.x * 16;
    const bool routed = tile < (int64_t)K * F; /* uniform over the block */
    const int64_t row0 = routed ? Fs + tile : tile - (int64_t)K * F; /* the tile's first row in act[t] */
    const float *x = xn + t * H;
    float sinv[NB];
    auto stage = [&](int c) { /* super-blocks c .. c + NB - 1 of the warp's range */
#pragma unroll
        for (int n = 0; n < NB; n++)
            if (c + n < sb1) mmv_stage<1>(x, H, 1, c + n, lane, stg_all[warp][n], sinv + n, nullptr, nullptr, nullptr);
    };
    const bool pre = !(routed && warp == 0);
    if (pre) stage(sb0);
    const uint8_t *G = Sg, *U = Su;
    int64_t r0 = row0;
    if (routed) {
        r0 = moe_gu_route(logits, t, E, K, F, tile, p, sid, sw, ids, wts, act + t * n_rows + row0);
        if (r0 < 0) return; /* uniform over the block */
        G = Wg, U = Wu;
    }
    const uint8_t *rows[2][2];
#pragma unroll
    for (int r = 0; r < 2; r++) {
        rows[0][r] = G + (r0 + gid + 8 * r) * (int64_t)row_bytes;
        rows[1][r] = U + (r0 + gid + 8 * r) * (int64_t)row_bytes;
    }
    float acc[2][1][2] = {{{0.0f, 0.0f}}, {{0.0f, 0.0f}}};
#pragma unroll 1
    for (int c = sb0; c < sb1; c += NB) {
        mmv_raw cur[NB][2];
#pragma unroll
        for (int n = 0; n < NB; n++)
            if (c + n < sb1)
#pragma unroll
                for (int tl = 0; tl < 2; tl++) cur[n][tl].load(rows[tl][0], rows[tl][1], c + n, tig);
        if (c > sb0 || !pre) stage(c);
#pragma unroll
        for (int n = 0; n < NB; n++)
            if (c + n < sb1) mmv_sb_q4k<1>(cur[n], acc, stg_all[warp][n], sinv + n, 1, gid, tig);
    }
    if (tig == 0) { /* C column 0: token t */
#pragma unroll
        for (int tl = 0; tl < 2; tl++) part[warp][tl][gid] = acc[tl][0][0], part[warp][tl][gid + 8] = acc[tl][0][1];
    }
    moe_gu_finish<KS>(part, act + t * n_rows + row0);
}

/* The loads of k_moe_tc_gu2 and k_moe_q8_gu: warp (tile tl, super-blocks sb0 .. sb0 + n - 1) requests its
 * tile's 16 rows of each super-block into wsh by 16-byte cp.async (144 bytes a row, row i at 144 i), at once for
 * the shared expert's tiles and after warp 0 has routed the token for a routed tile, and stages its x with
 * stage() meanwhile (warp 0 of a routed block after routing). Returns the tile's first row in act[t], with
 * the copies landed and the staging written (warp-synchronised), or -1 (uniform over the block) where the
 * expert id is out of range, after moe_gu_route wrote NaN to the tile's act rows. */
template <class STAGE>
__device__ __forceinline__ int64_t moe_gu_load(STAGE stage, uint8_t *wsh, int tl, int sb0, int n, const uint8_t *Wg,
                                               const uint8_t *Wu, const uint8_t *Sg, const uint8_t *Su,
                                               size_t row_bytes, const float *__restrict__ logits, int64_t t,
                                               int32_t E, int32_t K, int64_t F, int64_t Fs, float *p, int32_t *sid,
                                               float *sw, int32_t *__restrict__ ids, float *__restrict__ wts,
                                               float *act) {
    const int lane = threadIdx.x & 31;
    const int64_t n_rows = Fs + (int64_t)K * F, tile = (int64_t)blockIdx.x * 16;
    const bool routed = tile < (int64_t)K * F; /* uniform over the block */
    const int64_t row0 = routed ? Fs + tile : tile - (int64_t)K * F;
    auto issue = [&](const uint8_t *W, int64_t r0) { /* the tile's 16 rows of each super-block, 9 chunks a row */
        for (int i = 0; i < n; i++)
            for (int c = lane; c < 16 * 9; c += 32) {
                const int r = c / 9, o = 16 * (c - 9 * r);
                mmv_cp16(wsh + i * (16 * 144) + r * 144 + o, W + (r0 + r) * (int64_t)row_bytes + (sb0 + i) * 144 + o);
            }
        mmv_cp_commit();
    };
    const bool pre = !(routed && threadIdx.x < 32);
    if (!routed) issue(tl ? Su : Sg, row0);
    if (pre) stage();
    if (routed) {
        const int64_t r0 = moe_gu_route(logits, t, E, K, F, tile, p, sid, sw, ids, wts, act + t * n_rows + row0);
        if (r0 < 0) return -1; /* uniform over the block */
        issue(tl ? Wu : Wg, r0);
        if (!pre) stage();
    }
    mmv_cp_wait<0>();
    __syncwarp();
    return row0;
}

/* k_moe_tc_gu2 (where H / 256 / KS <= 2 and the gate/up phase is on the fp16 core, MEMRA_MOE_Q8=0 or down;
 * MEMRA_MOE_GU2=0: k_moe_tc_gu): k_moe_tc_gu's work and
 * bits, with the gate tile and the up tile of a K range on two warps instead of one, and the weight rows
 * through shared memory (16-byte cp.async) instead of registers, so a warp holds one tile's fragments at a
 * time and twice the warps fit (8 a block, MINB blocks an SM). Why: k_moe_tc_gu issues one instruction every
 * ~4 cycles a scheduler with 2.2 warps resident (168 registers; bench/results/2026-12-06b-h100.md): each
 * warp's chain of dequantisation and MMAs over 4 tile-super-blocks, not DRAM, sets its time. Its 8-warp
 * form with the weights in registers (KS 8, NB 1) spilled at 3 blocks an SM and measured the same.
 * Bits: warp (tl, k) runs mmv_sb_q4k<1, 1> over range k's super-blocks in order for tile tl, which is
 * what k_moe_tc_gu's warp k runs for that tile (the two tiles of mmv_sb_q4k<1, 2> share only the B
 * fragments, which both warps stage from the same x); the block adds the KS partials in k order.
 * Measured (H100, 35b-a3b q4_k_m decode@0 tok/s, interleaved rounds, bench/results/2026-12-07-h100.md):
 * k_moe_tc_gu 448.7 / 445.2 / 443.2 / 440.4, k_moe_tc_gu2 458.8 / 457.7 / 452.2 / 456.1 (+2.5%); gate
 * kernels 35b-a3b 1154 / 0 and logits of 66 tokens cmp-equal to k_moe_tc_gu's.
 * NMAX = 2 only (35B-A3B's H = 2048): on the fp16 core the larger models' H (3072, 4096) take k_moe_tc_gu
 * (an NMAX 4 form's shared memory would allow 2 blocks an SM, not 3; k_moe_q8_gu has that form).
 *
 * Launch contract: k_moe_tc_gu's grid, shapes and alignment (rows of 16-byte aligned Q4_K, row_bytes a
 * multiple of 16), block 64 KS, dynamic shared memory moe_gu2_smem(KS, NMAX) with NMAX >= ceil(H / 256 /
 * KS): per warp NMAX super-blocks of 16 rows (144 bytes a row, row i at 144 i: mmv_raw::load_sh's slot) and
 * NMAX staging areas. Warp w: tile w & 1 (0 gate, 1 up), K range w >> 1. */
#define MOE_GU2_KS 4
#define MOE_GU2_MINB 3

static inline size_t moe_gu2_smem(int ks, int nmax) { return (size_t)2 * ks * nmax * (16 * 144 + MOE_TC_STG_B); }

template <int KS, int MINB, int NMAX>
__global__ void __launch_bounds__(64 * KS, MINB)
    k_moe_tc_gu2(const uint8_t *__restrict__ Wg, const uint8_t *__restrict__ Wu, const uint8_t *__restrict__ Sg,
                 const uint8_t *__restrict__ Su, size_t row_bytes, int64_t H, int64_t F, int64_t Fs, int32_t E,
                 int32_t K, const float *__restrict__ logits, const float *__restrict__ xn, float *__restrict__ act,
                 int32_t *__restrict__ ids, float *__restrict__ wts) {
    pdl_start();
    extern __shared__ __align__(16) uint8_t gu2_sh[];
    __shared__ float p[MOE_MAX_EXPERT];
    __shared__ int32_t sid[MOE_MAX_USED];
    __shared__ float sw[MOE_MAX_USED];
    __shared__ float part[KS][2][16];
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, gid = lane >> 2, tig = lane & 3;
    const int tl = warp & 1, kr = warp >> 1;
    const int nsb = (int)(H / 256);
    const int sb0 = kr * nsb / KS, sb1 = (kr + 1) * nsb / KS, n = sb1 - sb0; /* n <= NMAX */
    uint8_t *wsh = gu2_sh + (size_t)warp * NMAX * (16 * 144 + MOE_TC_STG_B);
    uint32_t *stg = (uint32_t *)(wsh + NMAX * 16 * 144);
    const int64_t t = blockIdx.y, n_rows = Fs + (int64_t)K * F;
    const float *x = xn + t * H;
    float sinv[NMAX];
    auto stage = [&]() {
#pragma unroll
        for (int i = 0; i < NMAX; i++)
            if (i < n)
                mmv_stage<1>(x, H, 1, sb0 + i, lane, stg + i * (MOE_TC_STG_B / 4), sinv + i, nullptr, nullptr,
                             nullptr);
    };
    const int64_t row0 = moe_gu_load(stage, wsh, tl, sb0, n, Wg, Wu, Sg, Su, row_bytes, logits, t, E, K, F, Fs, p,
                                     sid, sw, ids, wts, act);
    if (row0 < 0) return; /* uniform over the block */
    float acc[1][1][2] = {{{0.0f, 0.0f}}};
#pragma unroll
    for (int i = 0; i < NMAX; i++)
        if (i < n) {
            mmv_raw cur;
            cur.load_sh(wsh + i * (16 * 144), 0, gid, tig);
            mmv_sb_q4k<1, 1>(&cur, acc, stg + i * (MOE_TC_STG_B / 4), sinv + i, 1, gid, tig);
        }
    if (tig == 0) part[kr][tl][gid] = acc[0][0][0], part[kr][tl][gid + 8] = acc[0][0][1];
    moe_gu_finish<KS>(part, act + t * n_rows + row0);
}

/* Work item it of k_moe_tc_down and k_moe_q8_down for token t (a = act[t]): item it < K nsb is super-block
 * it % nsb of slot it / nsb's expert rows, the rest the shared expert's (nsb = F / 256). Sets the rows' first
 * byte (row 0 of the weight), their row bytes, the item's activations (row length in) and super-block; false
 * for an expert id out of range. */
struct moe_dn_item {
    const uint8_t *base;
    size_t b;
    const float *xa;
    int64_t in;
    int sb;
};
__device__ __forceinline__ bool moe_dn_pick(int it, int64_t t, const uint8_t *Wd, size_t rb, const uint8_t *Sd,
                                            size_t rbs, int64_t F, int64_t Fs, int64_t H, int32_t E, int32_t K,
                                            const int32_t *__restrict__ ids, const float *a, moe_dn_item &m) {
    const int nsb = (int)(F / 256);
    m = moe_dn_item{Sd, rbs, a, Fs, it - K * nsb};
    if (it >= K * nsb) return true;
    const int s = it / nsb;
    const int32_t e = ids[t * K + s];
    if (e < 0 || e >= E) return false;
    m = moe_dn_item{Wd + (int64_t)e * H * rb, rb, a + Fs + (int64_t)s * F, F, it - s * nsb};
    return true;
}

/* Launch contract: grid (H / 16, T), block 32 * min(n_items, MOE_TC_DN_WARPS) with
 * n_items = K F / 256 + Fs / 256 <= MOE_TC_ITEMS, dynamic shared memory
 * (block warps) * MOE_TC_STG_B; TD = Q4_K (F, Fs multiples of 256) or Q6_K
 * (multiples of 512: rows 4-byte aligned), rows 16-byte aligned. Item i <
 * K F / 256 is super-block i % (F / 256) of slot i / (F / 256)'s down rows
 * r0 .. r0 + 15 (r0 = 16 blockIdx.x) with act[t][slot], the rest the shared
 * expert's super-blocks; warp w takes items w, w + warps, ... Then thread i
 * folds row r0 + i as k_moe_block_down does, each slot's dot being its
 * super-block partials added in order. The Q6_K rows' 2- and 4-byte loads
 * (ncu: lg throttle and mio stalls, 10-12% each) as 16-byte cp.async into
 * shared memory instead were 0.3 us slower a launch and within the noise
 * on decode (MEMRA_MOE_DN_CP, bench/results/2026-12-07-h100.md): removed. */
template <int TD>
__global__ void __launch_bounds__(32 * MOE_TC_DN_WARPS)
    k_moe_tc_down(const uint8_t *__restrict__ Wd, size_t rb, const uint8_t *__restrict__ Sd, size_t rbs, int64_t F,
                  int64_t Fs, int64_t H, int32_t E, int32_t K, const int32_t *__restrict__ ids,
                  const float *__restrict__ wts, const float *__restrict__ act, const float *__restrict__ sg,
                  int64_t sg_stride, float *__restrict__ x) {
    pdl_start();
    extern __shared__ __align__(16) uint32_t moe_tc_sh[];
    __shared__ float part[MOE_TC_ITEMS][16];
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, gid = lane >> 2, tig = lane & 3, nw = blockDim.x >> 5;
    const int64_t t = blockIdx.y, r0 = (int64_t)blockIdx.x * 16, n_rows = Fs + (int64_t)K * F;
    const int nsb = (int)(F / 256), nsbs = (int)(Fs / 256), n_items = K * nsb + nsbs;
    const float *a = act + t * n_rows;
    uint32_t *stg = moe_tc_sh + warp * (MOE_TC_STG_B / 4);
    /* the fold's inputs, loaded now rather than after the dots */
    __shared__ float sw[MOE_MAX_USED];
    for (int j = threadIdx.x; j < K; j += blockDim.x) sw[j] = wts[t * K + j];
    const int i = threadIdx.x;
    float xv = 0.0f, gate = 0.0f;
    if (i < 16) xv = x[t * H + r0 + i], gate = Fs ? sg[t * sg_stride] : 0.0f;
    for (int it = warp; it < n_items; it += nw) {
        moe_dn_item m;
        if (!moe_dn_pick(it, t, Wd, rb, Sd, rbs, F, Fs, H, E, K, ids, a, m)) {
            if (lane < 16) part[it][lane] = NAN;
            continue;
        }
        const int sb = m.sb;
        const int64_t in = m.in;
        const float *xa = m.xa;
        const uint8_t *row0 = m.base + (r0 + gid) * (int64_t)m.b, *row1 = row0 + 8 * (int64_t)m.b;
        float sinv[1], acc[1][2] = {{0.0f, 0.0f}};
        if constexpr (TD == MEMRA_TYPE_Q4_K) {
            mmv_raw cur;
            cur.load(row0, row1, sb, tig);
            mmv_stage<1>(xa, in, 1, sb, lane, stg, sinv, nullptr, nullptr, nullptr);
            mmv_sb_q4k<1, 1>(&cur, &acc, stg, sinv, 1, gid, tig); /* acc: the one tile */
        } else {
            mmv6_raw w[2];
            const bool al = (sb & 1) == 0;
            mmv6_load(w[0], row0 + (int64_t)sb * 210, tig, al);
            mmv6_load(w[1], row1 + (int64_t)sb * 210, tig, al);
            mmv6_stage<1>(xa, in, 1, sb, lane, nullptr, nullptr, (__half *)stg, sinv);
            mmv6_sb<1>(w, acc, (const __half *)stg, sinv, 1, gid, tig);
        }
        if (tig == 0) part[it][gid] = acc[0][0], part[it][gid + 8] = acc[0][1]; /* C column 0: token t */
    }
    __syncthreads();
    if (i < 16) {
        float acc = 0.0f;
        for (int j = 0; j < K; j++) {
            float d = part[j * nsb][i];
            for (int k = 1; k < nsb; k++) d = __fadd_rn(d, part[j * nsb + k][i]);
            acc = fmaf(sw[j], d, acc);
        }
        float y = xv + acc;
        if (Fs) {
            float d = part[K * nsb][i];
            for (int k = 1; k < nsbs; k++) d = __fadd_rn(d, part[K * nsb + k][i]);
            y = fmaf(sigmoid_f(gate), d, y);
        }
        x[t * H + r0 + i] = y;
    }
}

/* ---- fused layer on the int8 tensor cores (MEMRA_MOE_Q8; Q4_K gate/up, Q4_K or Q6_K down) ----
 *
 * k_moe_tc_gu2's and k_moe_tc_down's layouts and orders with mmvq.cuh's int8 arithmetic instead of mmv.cuh's
 * fp16 one: each warp converts its super-blocks of the input (xn for gate/up, a slot's act for down) into its
 * own staging area with mmvq_prep_sb (22-bit fixed point in three signed 8-bit limbs, the prep's arithmetic),
 * and mmvq_sb_lean / mmvq_sb6 multiply the raw Q4_K nibbles or Q6_K codes by the limbs (mma.sync m16n8k32,
 * exact), as the dense decode matvec does. Why: the fp16 core builds exact fp16 weights and hi + lo
 * activations, ~1,000 instructions a warp and super-block; the stall profiles of k_moe_tc_gu and
 * k_moe_tc_down (bench/results/logs/2026-12-07-run1-stalls.txt) show warps that wait on their own chains,
 * not on DRAM. The integer core is a few times shorter, and the staging costs what mmv_stage costs.
 *
 * Bits: a row's value is, per K range (gate/up) or per (slot, super-block) item (down), the three limb
 * columns of their fp32 accumulators; the columns are added over the ranges (items of a slot) in order,
 * then combined as (2^16 c0 + 2^8 c1) + c2 (mmvq_part_sums' order), and the fold is k_moe_tc_down's. Every
 * order depends on H, F and Fs only, never on T, the grid or the selected experts: a token's bits are those
 * of T = 1. They are NOT those of the grouped path (T >= MOE_GRP_MIN_T, the fp16 arithmetic): MoE then has
 * the dense matvecs' regime split at 16 tokens (the gate checks invariance within each regime). Error: the
 * int8 matvec's ~2.5e-6 of max|y| per matvec (fp16 core: 5e-7), within moe_block's 1e-5.
 * Measured (H100, bench/results/2026-12-07c-h100.md): gate kernels 35b-a3b and 122b-a10b pass under both
 * phases; 35b-a3b q4_k_m logits of 66 tokens differ from the fp16 core's by 5.0e-5 at most (max|logit| 5.5);
 * decode@0 +2% with gate/up on int8, and no gain from down (its Q6_K form is ~1 us slower a launch than
 * k_moe_tc_down under ncu). So the halved instruction count bought little: these kernels wait on the
 * routing and on DRAM round trips more than on their arithmetic. The default is gate/up only
 * (moe_q8_mode). */

/* A warp's staging of one (token, super-block): limb planes [limb][q][sub-block][8 bytes] with the lab's
 * padded strides (bench/kernels/mmvq_inkernel.cuh: lanes g < 3, the only ones that load B at T = 1, hit
 * distinct banks), S_j (8 floats) at MQW_S, 2^-e at MQW_SINV, the per-limb sub-block sums (MQ_MB_B bytes,
 * mmvq_sb_lean's min term) at MQW_MB. */
#define MQW_LIMB 320
#define MQW_Q 80
#define MQW_S 960
#define MQW_SINV 992
#define MQW_MB 1008
#define MQW_B (MQW_MB + MQ_MB_B) /* 1056, a multiple of 16 */

/* mmvq_sb_lean's and mmvq_sb6's activations from one staging area (token 0 only: a block has one token) */
struct moe_q8_src {
    const uint8_t *stg;
    __device__ __forceinline__ const uint4 *limbs(int, int limb, int q) const {
        return (const uint4 *)(stg + limb * MQW_LIMB + q * MQW_Q);
    }
    __device__ __forceinline__ uint4 ld(const uint4 *p) const { return *p; }
    __device__ __forceinline__ float sx(int) const { return *(const float *)(stg + MQW_SINV); }
    /* mmvq_gsrc::mw's word, from the staging area */
    __device__ __forceinline__ uint32_t mw(int, int, int hl, int limb, int t) const {
        return *(const uint32_t *)(stg + MQW_MB + hl * 24 + limb * 8 + 4 * t);
    }
};

/* Super-block sb of the row x (lane L: elements 8 L .. 8 L + 7) into the staging area stg. */
__device__ __forceinline__ void moe_q8_stage(const float *__restrict__ x, int sb, int lane, uint8_t *stg) {
    const float4 *xp = (const float4 *)(x + (int64_t)sb * 256 + 8 * lane);
    const float4 u0 = __ldg(xp), u1 = __ldg(xp + 1), z = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    mmvq_prep_sb<MQW_LIMB, MQW_Q>(u0, u1, z, z, false, 1.0f, lane, stg, (float *)(stg + MQW_S),
                                  (float *)(stg + MQW_SINV), stg + MQW_MB);
}

/* Lane (g, q)'s limb columns 0..2 of its C fragment (rows g, g + 8) into part[row][3] */
__device__ __forceinline__ void moe_q8_part(const float (&acc)[4], float (*part)[3], int g, int q) {
#pragma unroll
    for (int r = 0; r < 2; r++)
#pragma unroll
        for (int e = 0; e < 2; e++)
            if (2 * q + e < 3) part[g + 8 * r][2 * q + e] = acc[2 * r + e];
}

/* The columns of n partials part[0..n) of a row, added in order, then combined */
__device__ __forceinline__ float moe_q8_value(const float (*part)[16][3], int n, int row) {
    float c[3];
#pragma unroll
    for (int l = 0; l < 3; l++) {
        c[l] = part[0][row][l];
        for (int k = 1; k < n; k++) c[l] = __fadd_rn(c[l], part[k][row][l]);
    }
    return __fadd_rn(__fadd_rn(__fmul_rn(65536.0f, c[0]), __fmul_rn(256.0f, c[1])), c[2]);
}

/* Launch contract: k_moe_tc_gu2's (grid, block 64 KS, rows of 16-byte aligned Q4_K, row_bytes a multiple of
 * 16, NMAX >= ceil(H / 256 / KS)), dynamic shared memory moe_q8_gu_smem(KS, NMAX). Warp w: tile w & 1 (0 gate,
 * 1 up), K range w >> 1, its super-blocks' 16 rows by cp.async into its slots while it stages x. */
static inline size_t moe_q8_gu_smem(int ks, int nmax) { return (size_t)2 * ks * nmax * (16 * 144 + MQW_B); }

template <int KS, int MINB, int NMAX>
__global__ void __launch_bounds__(64 * KS, MINB)
    k_moe_q8_gu(const uint8_t *__restrict__ Wg, const uint8_t *__restrict__ Wu, const uint8_t *__restrict__ Sg,
                const uint8_t *__restrict__ Su, size_t row_bytes, int64_t H, int64_t F, int64_t Fs, int32_t E,
                int32_t K, const float *__restrict__ logits, const float *__restrict__ xn, float *__restrict__ act,
                int32_t *__restrict__ ids, float *__restrict__ wts) {
    pdl_start();
    extern __shared__ __align__(16) uint8_t q8g_sh[];
    __shared__ float p[MOE_MAX_EXPERT];
    __shared__ int32_t sid[MOE_MAX_USED];
    __shared__ float sw[MOE_MAX_USED];
    __shared__ float part[2][KS][16][3];
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, gid = lane >> 2, tig = lane & 3;
    const int tl = warp & 1, kr = warp >> 1;
    const int nsb = (int)(H / 256);
    const int sb0 = kr * nsb / KS, sb1 = (kr + 1) * nsb / KS, n = sb1 - sb0; /* n <= NMAX */
    uint8_t *wsh = q8g_sh + (size_t)warp * NMAX * (16 * 144 + MQW_B);
    uint8_t *stg = wsh + NMAX * 16 * 144;
    const int64_t t = blockIdx.y, n_rows = Fs + (int64_t)K * F;
    const float *x = xn + t * H;
    auto stage = [&]() {
#pragma unroll
        for (int i = 0; i < NMAX; i++)
            if (i < n) moe_q8_stage(x, sb0 + i, lane, stg + i * MQW_B);
    };
    const int64_t row0 = moe_gu_load(stage, wsh, tl, sb0, n, Wg, Wu, Sg, Su, row_bytes, logits, t, E, K, F, Fs, p,
                                     sid, sw, ids, wts, act);
    if (row0 < 0) return; /* uniform over the block */
    float acc[1][1][4] = {{{0.0f, 0.0f, 0.0f, 0.0f}}};
#pragma unroll
    for (int i = 0; i < NMAX; i++)
        if (i < n) {
            mmvq_raw cur;
            cur.load_sh(wsh + i * (16 * 144), gid, tig);
            mmvq_sb_lean<1, moe_q8_src, 1>(&cur, acc, moe_q8_src{stg + i * MQW_B}, 1, gid, tig);
        }
    moe_q8_part(acc[0][0], part[tl][kr], gid, tig);
    __syncthreads();
    if (threadIdx.x < 16) {
        const int i = threadIdx.x;
        act[t * n_rows + row0 + i] = silu_f(moe_q8_value(part[0], KS, i)) * moe_q8_value(part[1], KS, i);
    }
}

/* Launch contract: k_moe_tc_down's (grid (H / 16, T), block 32 * min(n_items, MOE_TC_DN_WARPS), TD Q4_K or
 * Q6_K with its F, Fs multiples, rows 16-byte aligned), dynamic shared memory (block warps) * MQW_B. Warp w
 * takes items w, w + warps, ..: the item's 16 rows (requested first), then its slot's act super-block
 * staged; thread i < 16 folds row r0 + i as k_moe_tc_down does, a slot's dot being moe_q8_value of its
 * items. */
template <int TD>
__global__ void __launch_bounds__(32 * MOE_TC_DN_WARPS)
    k_moe_q8_down(const uint8_t *__restrict__ Wd, size_t rb, const uint8_t *__restrict__ Sd, size_t rbs, int64_t F,
                  int64_t Fs, int64_t H, int32_t E, int32_t K, const int32_t *__restrict__ ids,
                  const float *__restrict__ wts, const float *__restrict__ act, const float *__restrict__ sg,
                  int64_t sg_stride, float *__restrict__ x) {
    pdl_start();
    extern __shared__ __align__(16) uint8_t q8d_sh[];
    __shared__ float part[MOE_TC_ITEMS][16][3];
    __shared__ float sw[MOE_MAX_USED];
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, gid = lane >> 2, tig = lane & 3, nw = blockDim.x >> 5;
    const int64_t t = blockIdx.y, r0 = (int64_t)blockIdx.x * 16, n_rows = Fs + (int64_t)K * F;
    const int nsb = (int)(F / 256), nsbs = (int)(Fs / 256), n_items = K * nsb + nsbs;
    const float *a = act + t * n_rows;
    uint8_t *stg = q8d_sh + warp * MQW_B;
    /* the fold's inputs, loaded now rather than after the dots */
    for (int j = threadIdx.x; j < K; j += blockDim.x) sw[j] = wts[t * K + j];
    const int i = threadIdx.x;
    float xv = 0.0f, gate = 0.0f;
    if (i < 16) xv = x[t * H + r0 + i], gate = Fs ? sg[t * sg_stride] : 0.0f;
    for (int it = warp; it < n_items; it += nw) {
        moe_dn_item m;
        if (!moe_dn_pick(it, t, Wd, rb, Sd, rbs, F, Fs, H, E, K, ids, a, m)) {
            if (lane < 16) part[it][lane][0] = part[it][lane][1] = part[it][lane][2] = NAN;
            continue;
        }
        const int sb = m.sb;
        const float *xa = m.xa;
        const uint8_t *row0 = m.base + (r0 + gid) * (int64_t)m.b, *row1 = row0 + 8 * (int64_t)m.b;
        float acc[1][1][4] = {{{0.0f, 0.0f, 0.0f, 0.0f}}};
        __syncwarp(); /* the previous item's fragments are read */
        if constexpr (TD == MEMRA_TYPE_Q4_K) {
            mmvq_raw w;
            w.load(row0, row1, sb, tig);
            moe_q8_stage(xa, sb, lane, stg);
            __syncwarp();
            mmvq_sb_lean<1, moe_q8_src, 1>(&w, acc, moe_q8_src{stg}, 1, gid, tig);
        } else {
            mmvq_raw6 w;
            w.load(row0, row1, sb, tig);
            moe_q8_stage(xa, sb, lane, stg);
            __syncwarp();
            mmvq_sb6<1, moe_q8_src, 1>(&w, acc, moe_q8_src{stg}, 1, gid, tig);
        }
        moe_q8_part(acc[0][0], part[it], gid, tig);
    }
    __syncthreads();
    if (i < 16) {
        float acc = 0.0f;
        for (int j = 0; j < K; j++) acc = fmaf(sw[j], moe_q8_value(part + j * nsb, nsb, i), acc);
        float y = xv + acc;
        if (Fs) y = fmaf(sigmoid_f(gate), moe_q8_value(part + K * nsb, nsbs, i), y);
        x[t * H + r0 + i] = y;
    }
}

/* ---- the grouped path (T >= MOE_GRP_MIN_T: prefill, large batches) ----
 *
 * Per token, k_moe_tc_gu and k_moe_tc_down read every selected expert's
 * rows again: at T = 512 a layer's ~450 MB of expert weights are read
 * ~16 times over (35B-A3B prefill was ~75% MoE this way). Here the tokens
 * are grouped by expert first, and a block multiplies W 16-row tiles of
 * one expert with up to 4 NG of its tokens at once (the token groups
 * of 4 that mmv_sb_q4k / mmv6_sb already take):
 *  - k_moe_route routes every token (warp_route: the same ids and weights
 *    as the decode kernels).
 *  - k_moe_grp_plan (one block) sorts the entries (t, slot j) by expert,
 *    stably (token order within an expert), appends the shared expert's
 *    entries (t, K) for every token, and cuts each expert's run into tiles
 *    of at most 4 NG entries.
 *  - k_moe_grp_gu: block (tile of entries, W x 16 rows of its expert);
 *    per super-block the block stages the tile's tokens once, and each
 *    warp multiplies its gate and up tiles (each token in its own MMA
 *    column); the accumulation replays k_moe_tc_gu's (its KS chains over
 *    the same super-block ranges, added in order); writes act[entry].
 *  - k_moe_grp_down: block (tile of entries, W x 32 output rows); per
 *    super-block: stage once, fresh C, each entry's dot = the super-block
 *    values added in order (k_moe_tc_down's items); writes dd[t][j].
 *  - k_moe_grp_fold: x[t] += the fold of k_moe_tc_down over dd[t].
 * An MMA column's result depends only on its own B column, so a token's
 * every rounding is the one it gets at T = 1 in the decode kernels: the
 * grouped path gives the same bits as T separate decode steps (checked by
 * gate kernels' moe_block-inv at T >= MOE_GRP_MIN_T). Entries with an
 * expert id out of range (non-finite logits) go to bucket E: NaN rows.
 * Measured on the H200 (35B-A3B q4_k_m, memra bench --prefill 512
 * --profile): per-token decode kernels 1,292 us per layer, this 832 us;
 * prefill 512 1,247 -> 3,770 tok/s with the first version (one warp per
 * 16-row tile, each warp staging its own tokens), 5,730 with this one. */

#define MOE_GRP_MIN_T 16
#define MOE_GRP_NG 4 /* token groups of 4 per tile: 16 tokens (MEMRA_MOE_NG=2: 8, a lab switch) */
#define MOE_GRP_GMIN 8 /* the smallest tile of any NG: bounds the tile count */
/* warps per block (W) and blocks per SM the registers are held to (MINB):
 * gate/up (161 registers; 540 bytes spilled at 128), Q4_K down (157), Q6_K down (128) */
#define MOE_GRP_GU_W 4
#define MOE_GRP_GU_MINB 3
#define MOE_GRP_D4_W 4
#define MOE_GRP_D4_MINB 3
#define MOE_GRP_D6_W 8
#define MOE_GRP_D6_MINB 2
#define MOE_GRP_PLAN_WARPS 8

/* Tiles at most: each non-empty bucket adds at most one partial tile. */
static inline int64_t moe_grp_max_tiles(int64_t T, int32_t E, int32_t K) {
    return (T * K + MOE_GRP_GMIN - 1) / MOE_GRP_GMIN + (E + 1) + (T + MOE_GRP_GMIN - 1) / MOE_GRP_GMIN;
}

/* The grouped path's scratch after act ([T][Fs + K F] floats): dd
 * [T][K + 1][H] floats, ent [T (K + 1)], tiles [max][3] ({first entry,
 * count, bucket: expert, E = invalid, E + 1 = shared}), n_tiles. */
struct moe_grp_mem {
    float *dd;
    int32_t *ent, *tiles, *n_tiles;
};

static moe_grp_mem moe_grp_layout(void *scratch, int64_t T, int32_t E, int32_t K, int64_t F, int64_t Fs, int64_t H) {
    moe_grp_mem m;
    char *p = (char *)scratch + (size_t)(T * (Fs + (int64_t)K * F)) * sizeof(float);
    m.dd = (float *)p, p += (size_t)(T * (K + 1) * H) * sizeof(float);
    m.ent = (int32_t *)p, p += (size_t)(T * (K + 1)) * sizeof(int32_t);
    m.tiles = (int32_t *)p, p += (size_t)(3 * moe_grp_max_tiles(T, E, K)) * sizeof(int32_t);
    m.n_tiles = (int32_t *)p;
    return m;
}

/* Launch contract: grid 1, block 32 * MOE_GRP_PLAN_WARPS, dynamic shared
 * memory (MOE_GRP_PLAN_WARPS + 2) * (E + 2) ints. Warp w owns entries
 * [w n / W, (w + 1) n / W) of the n = T K routed entries: it counts them per
 * bucket, then, from its own base in each bucket (the buckets' offsets plus
 * the lower warps' counts), places them in order (rank within 32 entries by
 * __match_any_sync). Writes ent, tiles of at most G entries (G >=
 * MOE_GRP_GMIN), n_tiles (shared expert tiles after the routed ones when
 * has_shared). */
__global__ void __launch_bounds__(32 * MOE_GRP_PLAN_WARPS)
    k_moe_grp_plan(const int32_t *__restrict__ ids, int32_t T, int32_t E, int32_t K, int has_shared, int G,
                   int32_t *__restrict__ ent, int32_t *__restrict__ tiles, int32_t *__restrict__ n_tiles) {
    pdl_start();
    extern __shared__ int32_t plan_sh[];
    const int NB = E + 1, W = MOE_GRP_PLAN_WARPS; /* buckets: experts, then invalid ids */
    int32_t *hist = plan_sh;              /* [W][NB]: counts, then each warp's next position */
    int32_t *off = plan_sh + W * (E + 2); /* [NB + 1]: bucket offsets */
    int32_t *toff = off + (E + 2);        /* [NB + 1]: tile offsets */
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int n = T * K, e0 = (int)((int64_t)warp * n / W), e1 = (int)((int64_t)(warp + 1) * n / W);
    auto bucket = [&](int i) {
        const int32_t e = ids[i];
        return e >= 0 && e < E ? e : E;
    };
    for (int i = threadIdx.x; i < W * NB; i += blockDim.x) hist[(i / NB) * (E + 2) + i % NB] = 0;
    __syncthreads();
    for (int i = e0 + lane; i < e1; i += 32) atomicAdd(&hist[warp * (E + 2) + bucket(i)], 1);
    __syncthreads();
    /* each bucket's warp bases (a prefix over the warps), then the offsets
     * of the buckets and of their tiles (a block scan over contiguous runs
     * of buckets, one run per thread) */
    __shared__ int32_t wsum[MOE_GRP_PLAN_WARPS][2];
    const int per = (NB + (int)blockDim.x - 1) / (int)blockDim.x;
    const int b0 = min(NB, (int)threadIdx.x * per), b1 = min(NB, b0 + per);
    int sc = 0, st = 0;
    for (int b = b0; b < b1; b++) {
        int c = 0;
        for (int w = 0; w < W; w++) {
            const int h = hist[w * (E + 2) + b];
            hist[w * (E + 2) + b] = c;
            c += h;
        }
        off[b] = c; /* the count for now */
        sc += c, st += (c + G - 1) / G;
    }
    int ic = sc, it = st; /* inclusive warp scan */
    for (int d = 1; d < 32; d <<= 1) {
        const int a = __shfl_up_sync(0xFFFFFFFFu, ic, d), u = __shfl_up_sync(0xFFFFFFFFu, it, d);
        if (lane >= d) ic += a, it += u;
    }
    if (lane == 31) wsum[warp][0] = ic, wsum[warp][1] = it;
    __syncthreads();
    int oc = ic - sc, ot = it - st;
    for (int w = 0; w < warp; w++) oc += wsum[w][0], ot += wsum[w][1];
    for (int b = b0; b < b1; b++) {
        const int c = off[b];
        off[b] = oc, toff[b] = ot;
        oc += c, ot += (c + G - 1) / G;
    }
    if (threadIdx.x == blockDim.x - 1) {
        off[NB] = oc, toff[NB] = ot;
        *n_tiles = ot + (has_shared ? (T + G - 1) / G : 0);
    }
    __syncthreads();
    for (int b = threadIdx.x; b < NB; b += blockDim.x) {
        const int c = off[b + 1] - off[b];
        for (int k = 0; k * G < c; k++) {
            int32_t *tl = tiles + 3 * (toff[b] + k);
            tl[0] = off[b] + k * G, tl[1] = min(G, c - k * G), tl[2] = b;
        }
    }
    if (has_shared)
        for (int k = threadIdx.x; k * G < T; k += blockDim.x) {
            int32_t *tl = tiles + 3 * (toff[NB] + k);
            tl[0] = n + k * G, tl[1] = min(G, T - k * G), tl[2] = E + 1;
        }
    for (int t = threadIdx.x; has_shared && t < T; t += blockDim.x) ent[n + t] = t * (K + 1) + K;
    /* stable placement, 32 entries a step */
    for (int c = e0; c < e1; c += 32) {
        const int i = c + lane;
        const int b = i < e1 ? bucket(i) : -1 - lane; /* past the range: a bucket of its own */
        const unsigned same = __match_any_sync(0xFFFFFFFFu, b);
        if (i < e1) {
            const int rank = __popc(same & ((1u << lane) - 1u));
            const int base = hist[warp * (E + 2) + b];
            const int t = i / K, j = i - t * K;
            ent[off[b] + base + rank] = t * (K + 1) + j;
        }
        __syncwarp();
        if (i < e1 && lane == 31 - __clz(same)) hist[warp * (E + 2) + b] += __popc(same);
        __syncwarp();
    }
}

/* Launch contract: grid (T (K + 1)), block 32 MOE_GRP_PLAN_WARPS. The
 * down phase's activations staged once per (entry, super-block) (entry e =
 * t (K + 1) + j: slot j < K, or the shared expert): mmv_stage / mmv6_stage
 * of act[t]'s slot j into xs + (c NE + e) mmvg_tok_w words, 1 / s into
 * xsinv[c NE + e], NE = T (K + 1). */
template <int TD>
__global__ void __launch_bounds__(32 * MOE_GRP_PLAN_WARPS)
    k_moe_grp_prep(const float *__restrict__ act, int64_t F, int64_t Fs, int32_t K, int64_t NE,
                   uint32_t *__restrict__ xs, float *__restrict__ xsinv) {
    pdl_start();
    const int64_t e = blockIdx.x, t = e / (K + 1);
    const int j = (int)(e - t * (K + 1));
    const float *x = act + t * (Fs + (int64_t)K * F) + (j < K ? Fs + (int64_t)j * F : 0);
    mmvg_stage_row<TD, MOE_GRP_PLAN_WARPS>(x, j < K ? F : Fs, nullptr, nullptr, NE, e, xs, xsinv);
}

/* Launch contract: grid (moe_grp_max_tiles, ceil(max(F, Fs) / (16 W))),
 * block 32 W; the shapes and alignment of k_moe_tc_gu; xs, xsinv: the
 * stagings of xn by k_mmvg_prep<Q4_K> (rows = tokens, NR = T). Block (i, by)
 * takes tile i's entries and warp w the gate and up rows 16 (W by + w) +
 * 0..15 of the tile's expert; blocks past n_tiles return, warps past the
 * expert's rows only copy. mmvg_loop: per super-block the tile's tokens'
 * stagings are copied into shared memory once (cp.async, double-buffered)
 * and each warp multiplies its two tiles; the accumulation replays
 * k_moe_tc_gu's (MOE_TC_GU_KS chains over its super-block ranges, added in
 * chain order). (Tiles on x: consecutive blocks are the tiles of one
 * expert, so its rows come from DRAM once and then from L2.) */
template <int NG, int W, int MINB>
__global__ void __launch_bounds__(32 * W, MINB)
    k_moe_grp_gu(const uint8_t *__restrict__ Wg, const uint8_t *__restrict__ Wu, const uint8_t *__restrict__ Sg,
                 const uint8_t *__restrict__ Su, size_t row_bytes, int64_t H, int64_t F, int64_t Fs, int32_t E,
                 int32_t K, float *__restrict__ act, const int32_t *__restrict__ ent,
                 const int32_t *__restrict__ tiles, const int32_t *__restrict__ n_tiles,
                 const uint32_t *__restrict__ xs, const float *__restrict__ xsinv, int32_t T) {
    pdl_start();
    constexpr int G = 4 * NG;
    __shared__ __align__(16) uint32_t stg[2][G * MMV_TOK_W];
    __shared__ int32_t ro[G];
    __shared__ int64_t ao[G];
    if ((int)blockIdx.x >= *n_tiles) return;
    const int32_t *tl = tiles + 3 * blockIdx.x;
    const int first = tl[0], cnt = tl[1], b = tl[2];
    const bool shared = b == E + 1;
    const int64_t nr = shared ? Fs : F, n_rows = Fs + (int64_t)K * F, blk0 = (int64_t)blockIdx.y * W * 16;
    if (blk0 >= nr) return;
    if (threadIdx.x < cnt) {
        const int32_t en = ent[first + threadIdx.x], t = en / (K + 1), j = en - t * (K + 1);
        ro[threadIdx.x] = t;
        ao[threadIdx.x] = (int64_t)t * n_rows + (j < K ? Fs + (int64_t)j * F : 0);
    }
    __syncthreads();
    if (b == E) { /* ids out of range */
        for (int i = threadIdx.x; i < 16 * W * cnt; i += blockDim.x) {
            const int64_t row = blk0 + i % (16 * W);
            if (row < nr) act[ao[i / (16 * W)] + row] = NAN;
        }
        return;
    }
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, gid = lane >> 2, tig = lane & 3;
    const int64_t tile = blk0 + 16 * warp;
    const bool live = tile < nr; /* uniform over the warp */
    const uint8_t *Gm = shared ? Sg : Wg, *Um = shared ? Su : Wu;
    const int64_t r0 = (shared ? 0 : (int64_t)b * F) + (live ? tile : 0);
    const uint8_t *rows[2][2];
#pragma unroll
    for (int r = 0; r < 2; r++) {
        rows[0][r] = Gm + (r0 + gid + 8 * r) * (int64_t)row_bytes;
        rows[1][r] = Um + (r0 + gid + 8 * r) * (int64_t)row_bytes;
    }
    float tot[2][NG][2];
    mmvg_q4k_pair<NG, W>((int)(H / 256), MOE_TC_GU_KS, T, 0, ro, cnt, xs, xsinv, stg, rows, live, tot);
    if (!live) return;
#pragma unroll
    for (int g = 0; g < NG; g++) {
        const int e = 4 * g + tig; /* C columns 2 tig, 2 tig + 1 of group g */
        if (e < cnt)
#pragma unroll
            for (int r = 0; r < 2; r++) act[ao[e] + tile + gid + 8 * r] = silu_f(tot[0][g][r]) * tot[1][g][r];
    }
}

/* Launch contract: grid (moe_grp_max_tiles, ceil(H / (32 W))), block 32 W;
 * the down shapes of k_moe_tc_down; xs, xsinv from k_moe_grp_prep<TD> (NE
 * rows). Block (i, by) takes tile i's entries and warp w the output rows
 * 32 (W by + w) + 0..31 (two 16-row tiles sharing the staged activations).
 * mmvg_loop with one chain per super-block: fresh C, and each entry's dot
 * is the super-block values added in order (k_moe_tc_down's items);
 * written to dd[t][j]. */
template <int TD, int NG, int W, int MINB>
__global__ void __launch_bounds__(32 * W, MINB)
    k_moe_grp_down(const uint8_t *__restrict__ Wd, size_t rb, const uint8_t *__restrict__ Sd, size_t rbs, int64_t F,
                   int64_t Fs, int64_t H, int32_t E, int32_t K, float *__restrict__ dd,
                   const int32_t *__restrict__ ent, const int32_t *__restrict__ tiles,
                   const int32_t *__restrict__ n_tiles, const uint32_t *__restrict__ xs,
                   const float *__restrict__ xsinv, int64_t NE) {
    pdl_start();
    constexpr int G = 4 * NG;
    __shared__ __align__(16) uint32_t stg[2][G * mmvg_tok_w<TD>()];
    __shared__ int32_t ro[G];
    if ((int)blockIdx.x >= *n_tiles) return;
    const int32_t *tl = tiles + 3 * blockIdx.x;
    const int first = tl[0], cnt = tl[1], b = tl[2];
    const bool shared = b == E + 1;
    const int64_t blk0 = (int64_t)blockIdx.y * W * 32;
    if (threadIdx.x < cnt) ro[threadIdx.x] = ent[first + threadIdx.x];
    __syncthreads();
    if (b == E) {
        for (int i = threadIdx.x; i < 32 * W * cnt; i += blockDim.x) {
            const int64_t row = blk0 + i % (32 * W);
            if (row < H) dd[(int64_t)ro[i / (32 * W)] * H + row] = NAN;
        }
        return;
    }
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, gid = lane >> 2, tig = lane & 3;
    const int64_t tile = blk0 + 32 * warp; /* rows tile .. tile + 31: tiles q = 0, 1 */
    const bool live = tile < H;
    const int nsb = (int)((shared ? Fs : F) / 256);
    const size_t bytes = shared ? rbs : rb;
    const uint8_t *base = (shared ? Sd : Wd + (int64_t)b * H * rb) + ((live ? tile : 0) + gid) * (int64_t)bytes;
    const uint8_t *rows[2][2]; /* tile q = rows tile + 16 q .., rows gid and gid + 8 */
#pragma unroll
    for (int q = 0; q < 2; q++)
#pragma unroll
        for (int r = 0; r < 2; r++) rows[q][r] = base + (16 * q + 8 * r) * (int64_t)bytes;
    float d[2][NG][2];
    if constexpr (TD == MEMRA_TYPE_Q4_K)
        mmvg_q4k_pair<NG, W>(nsb, nsb, NE, 0, ro, cnt, xs, xsinv, stg, rows, live, d);
    else
        mmvg_q6k_pair<NG, W>(nsb, nsb, NE, 0, ro, cnt, xs, xsinv, stg, rows, live, d);
    if (!live) return;
#pragma unroll
    for (int g = 0; g < NG; g++) {
        const int e = 4 * g + tig;
        if (e < cnt)
#pragma unroll
            for (int q = 0; q < 2; q++)
#pragma unroll
                for (int r = 0; r < 2; r++) dd[(int64_t)ro[e] * H + tile + 16 * q + gid + 8 * r] = d[q][g][r];
    }
}

/* Launch contract: grid (ceil(H / 128), T), block 128; k_moe_tc_down's fold
 * of row r of token t from dd[t]. */
__global__ void __launch_bounds__(128)
    k_moe_grp_fold(const float *__restrict__ dd, const float *__restrict__ wts, const float *__restrict__ sg,
                   int64_t sg_stride, int64_t H, int32_t K, int has_shared, float *__restrict__ x) {
    pdl_start();
    const int64_t t = blockIdx.y, r = (int64_t)blockIdx.x * 128 + threadIdx.x;
    if (r >= H) return;
    const float *d = dd + t * (K + 1) * H + r;
    float acc = 0.0f;
    for (int j = 0; j < K; j++) acc = fmaf(__ldg(wts + t * K + j), d[(int64_t)j * H], acc);
    float y = x[t * H + r] + acc;
    if (has_shared) y = fmaf(sigmoid_f(sg[t * sg_stride]), d[(int64_t)K * H], y);
    x[t * H + r] = y;
}

/* MEMRA_MOE_TC=0 in the environment (read once) sends moe_block back to
 * the fp32 kernels above (a fallback switch like matmul.cu's MEMRA_MMV). */
static int moe_tc_on(void) {
    static int on = -1;
    return env_on("MEMRA_MOE_TC", &on);
}

/* MEMRA_MOE_GU2=0 (read once): k_moe_tc_gu for the decode gate/up phase even where k_moe_tc_gu2 fits
 * (the same bits). */
static int moe_gu2_on(void) {
    static int on = -1;
    return env_on("MEMRA_MOE_GU2", &on);
}

/* MEMRA_MOE_Q8 (read once): which decode phases take the int8 kernels. Bit 0: gate/up (k_moe_q8_gu), bit 1:
 * down (k_moe_q8_down); "1" both, "gu" or "down" one, "0" neither; unset or another value: the default, gate/up
 * only. Why gu only: H100, 35b-a3b q4_k_m decode@0 tok/s, two interleaved rounds (bench/results/
 * 2026-12-07c-h100.md): fp16 both 460.4 / 454.7, int8 both 464.4 / 456.4, int8 gate/up 467.8 / 466.9. ncu
 * (serialized, no PDL): gu 14.2-15.2 -> 13.3-14.3 us; down Q4_K 8.9-9.1 either way, down Q6_K 10.2-10.4 ->
 * 11.3-11.6 us. As the default (2026-12-07d-h100.md): 467.5 / 460.2 against MEMRA_MOE_Q8=0's 460.7 / 460.2. */
static int moe_q8_mode(void) {
    static int mode = -1;
    if (mode < 0) {
        const char *e = getenv("MEMRA_MOE_Q8");
        mode = !e ? 1 : !strcmp(e, "0") ? 0 : !strcmp(e, "1") ? 3 : !strcmp(e, "down") ? 2 : 1;
    }
    return mode;
}

/* Whether the tensor-core kernels take this layer's gate/up, down phase. */
static bool moe_tc_gu_ok(uint32_t tgu, int64_t H, int64_t F, int64_t Fs) {
    return tgu == MEMRA_TYPE_Q4_K && H % 256 == 0 && F % 16 == 0 && Fs % 16 == 0;
}
static bool moe_tc_down_ok(uint32_t td, int64_t H, int64_t F, int64_t Fs, int32_t K) {
    const int64_t q = td == MEMRA_TYPE_Q4_K ? 256 : td == MEMRA_TYPE_Q6_K ? 512 : 0;
    return q && H % 16 == 0 && F % q == 0 && Fs % q == 0 && K * (F / 256) + Fs / 256 <= MOE_TC_ITEMS;
}

/* Whether the grouped path takes the layer: the tensor-core types and
 * shapes of both phases. */
static bool moe_grp_ok(uint32_t tgu, uint32_t td, int64_t H, int64_t F, int64_t Fs) {
    const int64_t q = td == MEMRA_TYPE_Q4_K ? 256 : td == MEMRA_TYPE_Q6_K ? 512 : 0;
    return moe_tc_gu_ok(tgu, H, F, Fs) && q && F % q == 0 && Fs % q == 0 && H % 32 == 0 && F > 0;
}

/* MEMRA_MOE_NG=2 in the environment (read once): tiles of 8 tokens instead
 * of 16 in the grouped path (a lab switch; the bits do not change). 16 was
 * 2-4% faster at T = 512 on the H200 (35B-A3B moe_block 711 -> 680 us per
 * layer, bench/results/2026-12-03c-h200.md). */
static int moe_grp_ng(void) {
    static int ng = 0;
    if (!ng) {
        const char *e = getenv("MEMRA_MOE_NG");
        ng = e && atoi(e) == 2 ? 2 : MOE_GRP_NG;
    }
    return ng;
}

template <int NG>
static void moe_grp_gu_launch(dim3 g, cudaStream_t s, const memra_moe_params *p, const uint8_t *Sg, const uint8_t *Su,
                              int64_t H, int64_t F, int64_t Fs, int32_t E, int32_t K, float *act, const moe_grp_mem &m,
                              const uint32_t *xg, const float *xgs, int64_t T) {
    constexpr int MB = NG == 2 ? MOE_GRP_GU_MINB : 2;
    cuda_launch(k_moe_grp_gu<NG, MOE_GRP_GU_W, MB>, g, 32 * MOE_GRP_GU_W, 0, s,
                (const uint8_t *)p->gate_exps->data, (const uint8_t *)p->up_exps->data, Sg, Su,
                (size_t)p->gate_exps->row_bytes, H, F, Fs, E, K, act, (const int32_t *)m.ent, (const int32_t *)m.tiles,
                (const int32_t *)m.n_tiles, xg, xgs, (int32_t)T);
}

template <int NG>
static void moe_grp_down_launch(uint32_t td, unsigned nt, cudaStream_t s, const uint8_t *Wd, size_t rbd,
                                const uint8_t *Sd, size_t rbs, int64_t F, int64_t Fs, int64_t H, int32_t E, int32_t K,
                                const moe_grp_mem &m, const uint32_t *xd, const float *xds, int64_t NE) {
    if (td == MEMRA_TYPE_Q4_K) {
        constexpr int MB = NG == 2 ? MOE_GRP_D4_MINB : 2;
        const int64_t dr = 32 * MOE_GRP_D4_W;
        cuda_launch(k_moe_grp_down<MEMRA_TYPE_Q4_K, NG, MOE_GRP_D4_W, MB>, dim3(nt, (unsigned)((H + dr - 1) / dr)),
                    32 * MOE_GRP_D4_W, 0, s, Wd, rbd, Sd, rbs, F, Fs, H, E, K, m.dd,
                    (const int32_t *)m.ent, (const int32_t *)m.tiles, (const int32_t *)m.n_tiles, xd, xds, NE);
    } else {
        constexpr int MB = NG == 2 ? MOE_GRP_D6_MINB : 1;
        const int64_t dr = 32 * MOE_GRP_D6_W;
        cuda_launch(k_moe_grp_down<MEMRA_TYPE_Q6_K, NG, MOE_GRP_D6_W, MB>, dim3(nt, (unsigned)((H + dr - 1) / dr)),
                    32 * MOE_GRP_D6_W, 0, s, Wd, rbd, Sd, rbs, F, Fs, H, E, K, m.dd, (const int32_t *)m.ent,
                    (const int32_t *)m.tiles, (const int32_t *)m.n_tiles, xd, xds, NE);
    }
}

/* The grouped path (section above); cuda_op_moe_block has checked the
 * weights and chosen it. */
static memra_status moe_grp_run(memra_backend *be, const memra_moe_params *p, const float *logits, const float *xn,
                                const float *sg, int64_t sg_stride, float *x, int64_t T, int32_t *ids, float *w,
                                void *scratch) {
    const int64_t H = p->gate_exps->ne[0], F = p->gate_exps->ne[1];
    const int32_t E = p->n_expert, K = p->n_used;
    const int shared = p->gate_shexp != NULL;
    const int64_t Fs = shared ? p->gate_shexp->ne[1] : 0;
    cudaStream_t s = cuda_of(be)->stream;
    float *act = (float *)scratch;
    const moe_grp_mem m = moe_grp_layout(scratch, T, E, K, F, Fs, H);
    memra_status st;
    cuda_launch(k_moe_route, (unsigned)T, 32, 0, s, logits, E, K, ids, w);
    if ((st = CUDA_LAUNCHED(be, "moe_block: route"))) return st;
    const size_t psh = (size_t)(MOE_GRP_PLAN_WARPS + 2) * (size_t)(E + 2) * sizeof(int32_t);
    const int ng = moe_grp_ng();
    cuda_launch(k_moe_grp_plan, 1, 32 * MOE_GRP_PLAN_WARPS, psh, s, (const int32_t *)ids, (int32_t)T, E, K, shared,
                4 * ng, m.ent, m.tiles, m.n_tiles);
    if ((st = CUDA_LAUNCHED(be, "moe_block: plan"))) return st;
    const unsigned nt = (unsigned)moe_grp_max_tiles(T, E, K);
    const uint8_t *Sg = shared ? (const uint8_t *)p->gate_shexp->data : NULL;
    const uint8_t *Su = shared ? (const uint8_t *)p->up_shexp->data : NULL;
    const uint8_t *Sd = shared ? (const uint8_t *)p->down_shexp->data : NULL;
    /* the activations staged once: xn per (super-block, token), act per (super-block, entry) */
    const uint32_t td = p->down_exps->type;
    const int64_t NE = T * (K + 1);
    const int64_t fmax = F > Fs ? F : Fs;
    const size_t gub = mmvg_ws_bytes(MEMRA_TYPE_Q4_K, T, H);
    if ((st = cuda_xs_reserve(be, gub + mmvg_ws_bytes(td, NE, fmax)))) return st;
    uint32_t *xg = (uint32_t *)cuda_of(be)->xs, *xd = (uint32_t *)((char *)xg + gub);
    float *xgs = mmvg_xsinv(xg, MEMRA_TYPE_Q4_K, T, H), *xds = mmvg_xsinv(xd, td, NE, fmax);
    cuda_launch(k_mmvg_prep<MEMRA_TYPE_Q4_K>, (unsigned)T, 32u * MMVG_PREP_W, 0, s, xn, H, (int)T,
                (const float *)nullptr, 0.0f, xg, xgs);
    if ((st = CUDA_LAUNCHED(be, "moe_block: gate/up staging"))) return st;
    const dim3 ggu(nt, (unsigned)((fmax + 16 * MOE_GRP_GU_W - 1) / (16 * MOE_GRP_GU_W)));
    if (ng == 4)
        moe_grp_gu_launch<4>(ggu, s, p, Sg, Su, H, F, Fs, E, K, act, m, xg, xgs, T);
    else
        moe_grp_gu_launch<2>(ggu, s, p, Sg, Su, H, F, Fs, E, K, act, m, xg, xgs, T);
    if ((st = CUDA_LAUNCHED(be, "moe_block: grouped gate/up"))) return st;
    if (td == MEMRA_TYPE_Q4_K)
        cuda_launch(k_moe_grp_prep<MEMRA_TYPE_Q4_K>, (unsigned)NE, 32 * MOE_GRP_PLAN_WARPS, 0, s, (const float *)act,
                    F, Fs, K, NE, xd, xds);
    else
        cuda_launch(k_moe_grp_prep<MEMRA_TYPE_Q6_K>, (unsigned)NE, 32 * MOE_GRP_PLAN_WARPS, 0, s, (const float *)act,
                    F, Fs, K, NE, xd, xds);
    if ((st = CUDA_LAUNCHED(be, "moe_block: down staging"))) return st;
    const uint8_t *Wd = (const uint8_t *)p->down_exps->data;
    const size_t rbd = p->down_exps->row_bytes, rbs = shared ? p->down_shexp->row_bytes : 0;
    if (ng == 4)
        moe_grp_down_launch<4>(td, nt, s, Wd, rbd, Sd, rbs, F, Fs, H, E, K, m, xd, xds, NE);
    else
        moe_grp_down_launch<2>(td, nt, s, Wd, rbd, Sd, rbs, F, Fs, H, E, K, m, xd, xds, NE);
    if ((st = CUDA_LAUNCHED(be, "moe_block: grouped down"))) return st;
    cuda_launch(k_moe_grp_fold, dim3((unsigned)((H + 127) / 128), (unsigned)T), 128, 0, s, (const float *)m.dd,
                (const float *)w, sg, sg_stride, H, K, shared, x);
    return CUDA_LAUNCHED(be, "moe_block: fold");
}

/* Whether the decode gate/up phase (T < MOE_GRP_MIN_T) of Q4_K rows takes k_moe_q8_gu: moe_q8_mode's gate/up
 * bit, a warp's super-blocks fit its slots (nmax <= 4) and the weights are aligned (al). cuda_op_moe_block and
 * memra_backend_cuda_moe_regimes_equal decide by it. */
static bool moe_q8_gu_takes(int nmax, bool al) { return (moe_q8_mode() & 1) && nmax <= 4 && al; }

/* The decode gate/up's facts for p (tc gate/up types): nmax and the alignment of the rows */
static void moe_gu_facts(const memra_moe_params *p, int *nmax, bool *al) {
    const int64_t H = p->gate_exps->ne[0];
    const bool shared = p->gate_shexp != NULL;
    *nmax = (int)((H / 256 + MOE_GU2_KS - 1) / MOE_GU2_KS);
    *al = p->gate_exps->row_bytes % 16 == 0 && cuda_aligned16(p->gate_exps->data) && cuda_aligned16(p->up_exps->data) &&
          (!shared || (cuda_aligned16(p->gate_shexp->data) && cuda_aligned16(p->up_shexp->data)));
}

/* backend.h: 1 where a token's moe_block row at T < MOE_GRP_MIN_T has the bits of the same row in a larger
 * batch. Only the grouped path (T >= MOE_GRP_MIN_T, fp16 arithmetic) can differ, and it does where a decode
 * phase runs on the int8 core (moe_q8_mode). Mirrors cuda_op_moe_block's choices. */
extern "C" int memra_backend_cuda_moe_regimes_equal(memra_backend *be, const memra_moe_params *p) {
    if (!be || !be->name || strcmp(be->name, "cuda") || !p->gate_exps || !p->down_exps) return 0;
    const int64_t H = p->gate_exps->ne[0], F = p->gate_exps->ne[1];
    const int64_t Fs = p->gate_shexp ? p->gate_shexp->ne[1] : 0;
    const uint32_t tgu = p->gate_exps->type, td = p->down_exps->type;
    if (!moe_tc_on() || !moe_grp_ok(tgu, td, H, F, Fs)) return 1; /* every T takes the decode kernels */
    int nmax;
    bool al;
    moe_gu_facts(p, &nmax, &al);
    const bool gu_q8 = moe_tc_gu_ok(tgu, H, F, Fs) && moe_q8_gu_takes(nmax, al);
    const bool dn_q8 = moe_tc_down_ok(td, H, F, Fs, p->n_used) && (moe_q8_mode() & 2);
    return !gu_q8 && !dn_q8;
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
    const int tc = moe_tc_on();
    if (tc && T >= MOE_GRP_MIN_T && moe_grp_ok(tgu, td, H, F, Fs))
        return moe_grp_run(be, p, logits, xn, sg, sg_stride, x, T, ids, w, scratch);
    const uint8_t *Sg = shared ? (const uint8_t *)p->gate_shexp->data : NULL;
    const uint8_t *Su = shared ? (const uint8_t *)p->up_shexp->data : NULL;
    const uint8_t *Sd = shared ? (const uint8_t *)p->down_shexp->data : NULL;
    size_t rbs = shared ? p->down_shexp->row_bytes : 0;
    const uint8_t *Wg = (const uint8_t *)p->gate_exps->data, *Wu = (const uint8_t *)p->up_exps->data;
    size_t rb = p->gate_exps->row_bytes;
    if (tc && moe_tc_gu_ok(tgu, H, F, Fs)) {
        dim3 g((unsigned)((Fs + (int64_t)K * F) / 16), (unsigned)T);
        int nmax;
        bool al;
        moe_gu_facts(p, &nmax, &al);
        if (moe_q8_gu_takes(nmax, al)) {
            constexpr auto k2 = k_moe_q8_gu<MOE_GU2_KS, MOE_GU2_MINB, 2>;
            constexpr auto k4 = k_moe_q8_gu<MOE_GU2_KS, 2, 4>;
            const size_t sm = moe_q8_gu_smem(MOE_GU2_KS, nmax <= 2 ? 2 : 4);
            const cudaError_t ce = nmax <= 2 ? cuda_smem_limit<k2>((int)sm) : cuda_smem_limit<k4>((int)sm);
            if (ce != cudaSuccess) return cuda_check(be, ce, "moe_block: gate/up shared memory");
            cuda_launch(nmax <= 2 ? k2 : k4, g, 64 * MOE_GU2_KS, sm, s, Wg, Wu, Sg, Su, rb, H, F, Fs, E, K, logits, xn,
                        act, ids, w);
        } else if (moe_gu2_on() && nmax <= 2 && al) {
            constexpr auto k2 = k_moe_tc_gu2<MOE_GU2_KS, MOE_GU2_MINB, 2>;
            const size_t sm = moe_gu2_smem(MOE_GU2_KS, 2);
            const cudaError_t ce = cuda_smem_limit<k2>((int)sm);
            if (ce != cudaSuccess) return cuda_check(be, ce, "moe_block: gate/up shared memory");
            cuda_launch(k2, g, 64 * MOE_GU2_KS, sm, s, Wg, Wu, Sg, Su, rb, H, F, Fs, E, K, logits, xn, act, ids, w);
        } else {
            cuda_launch(k_moe_tc_gu<MOE_TC_GU_KS, MOE_TC_GU_NB, 3>, g, 32 * MOE_TC_GU_KS, 0, s, Wg, Wu, Sg, Su, rb, H,
                        F, Fs, E, K, logits, xn, act, ids, w);
        }
    } else {
        const int64_t per_block = MOE_GU_WARPS * MOE_GU_F;
        dim3 g((unsigned)((Fs + (int64_t)K * F + per_block - 1) / per_block), (unsigned)T);
        switch (tgu) {
#define GU_CASE(TY)                                                                                                 \
    case TY:                                                                                                        \
        cuda_launch(k_moe_block_gu<TY>, g, 32 * MOE_GU_WARPS, 0, s, Wg, Wu, Sg, Su, rb, H, F, Fs, E, K, logits, xn, \
                    act, ids, w);                                                                                   \
        break;
            CUDA_FOR_EACH_TYPE(GU_CASE)
#undef GU_CASE
        default: break;
        }
    }
    if ((st = CUDA_LAUNCHED(be, "moe_block: gate/up kernel"))) return st;
    const uint8_t *Wd = (const uint8_t *)p->down_exps->data;
    const size_t rbd = p->down_exps->row_bytes;
    if (tc && moe_tc_down_ok(td, H, F, Fs, K)) {
        const int n_items = K * (int)(F / 256) + (int)(Fs / 256);
        const int nw = n_items < MOE_TC_DN_WARPS ? n_items : MOE_TC_DN_WARPS;
        dim3 g((unsigned)(H / 16), (unsigned)T);
        const size_t sm = (size_t)nw * MOE_TC_STG_B;
        if (moe_q8_mode() & 2) {
            const size_t sq = (size_t)nw * MQW_B;
            if (td == MEMRA_TYPE_Q4_K)
                cuda_launch(k_moe_q8_down<MEMRA_TYPE_Q4_K>, g, 32 * nw, sq, s, Wd, rbd, Sd, rbs, F, Fs, H, E, K, ids, w,
                            act, sg, sg_stride, x);
            else
                cuda_launch(k_moe_q8_down<MEMRA_TYPE_Q6_K>, g, 32 * nw, sq, s, Wd, rbd, Sd, rbs, F, Fs, H, E, K, ids, w,
                            act, sg, sg_stride, x);
        } else if (td == MEMRA_TYPE_Q4_K)
            cuda_launch(k_moe_tc_down<MEMRA_TYPE_Q4_K>, g, 32 * nw, sm, s, Wd, rbd, Sd, rbs, F, Fs, H, E, K, ids, w,
                        act, sg, sg_stride, x);
        else
            cuda_launch(k_moe_tc_down<MEMRA_TYPE_Q6_K>, g, 32 * nw, sm, s, Wd, rbd, Sd, rbs, F, Fs, H, E, K, ids, w,
                        act, sg, sg_stride, x);
        return CUDA_LAUNCHED(be, "moe_block: down kernel");
    }
    int S = K + shared;
    dim3 gd((unsigned)((H + MOE_DN_ROWS - 1) / MOE_DN_ROWS), (unsigned)T);
    unsigned bd = 32u * (unsigned)(S < MOE_DN_MAX_WARPS ? S : MOE_DN_MAX_WARPS);
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
