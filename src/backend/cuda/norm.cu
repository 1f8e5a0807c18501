/* rmsnorm: y[r] = x[r] / sqrt(mean(x[r]^2) + eps) * w, rows strided.
 *
 * One block per row, sized so that a decode row (n = 4096: 1024 threads, one
 * float4 each) is a single round of loads: the op is latency-bound, and a
 * 256-thread block walking the row 16 loads deep took ~9 us for 4096 floats.
 *
 * Reduction order (fixed by n alone, never by n_rows): the row is cut into
 * chunks of V floats (V = 4 when n, both strides and the pointers allow
 * 16-byte access, else V = 1); the block has B = rmsnorm_threads(n / V)
 * threads and thread i owns chunks i, i + B, i + 2B, ...; it accumulates the
 * squares of its chunks in that order, element by element (fmaf), and
 * block_sum adds the lanes of each warp by a fixed butterfly, then the warp
 * sums in warp order. So a row's bits do not depend on how many rows are
 * normalised with it (batch invariance). */
#include "backend/cuda/ops.cuh"

#define RMS_MAX_THREADS 1024
#define RMS_REG 4 /* chunks per thread kept in registers between the passes */

template <int V> __device__ __forceinline__ void rms_load(const float *p, float *r) {
    if constexpr (V == 4) {
        float4 v = *(const float4 *)p;
        r[0] = v.x, r[1] = v.y, r[2] = v.z, r[3] = v.w;
    } else {
        r[0] = p[0];
    }
}

template <int V> __device__ __forceinline__ void rms_store(float *p, const float *r) {
    if constexpr (V == 4) *(float4 *)p = make_float4(r[0], r[1], r[2], r[3]);
    else p[0] = r[0];
}

/* Launch contract: grid (n_rows), block rmsnorm_threads(n / V) (a multiple
 * of 32, <= 1024); block r owns row r; V = 4 needs n, x_stride, y_stride
 * multiples of 4 and x, y, w 16-byte aligned. Chunks past RMS_REG per thread
 * (rows over 16384 floats) are read again for the second pass. In place
 * (x == y) is safe: every element is read (both times) and written by the
 * same thread, the write last. */
template <int V>
__global__ void __launch_bounds__(RMS_MAX_THREADS) k_rmsnorm(const float *x, int64_t x_stride,
                                                             const float *__restrict__ w, float *y, int64_t y_stride,
                                                             int64_t n, float eps) {
    pdl_start();
    __shared__ float sh[32];
    const float *xr = x + (int64_t)blockIdx.x * x_stride;
    float *yr = y + (int64_t)blockIdx.x * y_stride;
    const int64_t nc = n / V, B = blockDim.x;
    float v[RMS_REG][V];
#pragma unroll
    for (int k = 0; k < RMS_REG; k++) {
        int64_t c = threadIdx.x + k * B;
        if (c < nc) rms_load<V>(xr + c * V, v[k]);
    }
    float ss = 0.0f;
#pragma unroll
    for (int k = 0; k < RMS_REG; k++) {
        int64_t c = threadIdx.x + k * B;
        if (c < nc) {
#pragma unroll
            for (int e = 0; e < V; e++) ss = fmaf(v[k][e], v[k][e], ss);
        }
    }
    for (int64_t c = threadIdx.x + RMS_REG * B; c < nc; c += B) {
        float r[V];
        rms_load<V>(xr + c * V, r);
#pragma unroll
        for (int e = 0; e < V; e++) ss = fmaf(r[e], r[e], ss);
    }
    ss = block_sum(ss, sh);
    const float scale = 1.0f / sqrtf(ss / (float)n + eps);
#pragma unroll
    for (int k = 0; k < RMS_REG; k++) {
        int64_t c = threadIdx.x + k * B;
        if (c < nc) {
            float wr[V];
            rms_load<V>(w + c * V, wr);
#pragma unroll
            for (int e = 0; e < V; e++) v[k][e] = v[k][e] * scale * wr[e];
            rms_store<V>(yr + c * V, v[k]);
        }
    }
    for (int64_t c = threadIdx.x + RMS_REG * B; c < nc; c += B) {
        float r[V], wr[V];
        rms_load<V>(xr + c * V, r);
        rms_load<V>(w + c * V, wr);
#pragma unroll
        for (int e = 0; e < V; e++) r[e] = r[e] * scale * wr[e];
        rms_store<V>(yr + c * V, r);
    }
}

/* Threads for nc chunks: the fewest rounds of <= 1024 threads, the chunks
 * spread evenly over them, rounded up to whole warps. A function of nc only. */
static unsigned rmsnorm_threads(int64_t nc) {
    int64_t rounds = (nc + RMS_MAX_THREADS - 1) / RMS_MAX_THREADS;
    int64_t t = (nc + rounds - 1) / rounds;
    t = (t + 31) / 32 * 32;
    return (unsigned)(t < 32 ? 32 : t);
}

memra_status cuda_op_rmsnorm(memra_backend *be, const float *x, int64_t x_stride, const memra_weight *w, float *y,
                             int64_t y_stride, int64_t n, int64_t n_rows, float eps) {
    if (!w || !w->data || w->type != MEMRA_TYPE_F32 || w->ne[0] < n)
        return CUDA_INVALID(be, "rmsnorm: weight %s must be a loaded F32 vector of >= %lld", w && w->name ? w->name : "?",
                            (long long)n);
    if (n <= 0 || n_rows < 0 || n_rows > INT32_MAX)
        return CUDA_INVALID(be, "rmsnorm: n = %lld, rows = %lld", (long long)n, (long long)n_rows);
    if (n_rows == 0) return MEMRA_OK;
    cudaStream_t s = cuda_of(be)->stream;
    const float *wd = (const float *)w->data;
    /* x == y must be the same rows, not overlapping shifted ones */
    if (n % 4 == 0 && x_stride % 4 == 0 && y_stride % 4 == 0 && cuda_aligned16(x) && cuda_aligned16(y) &&
        cuda_aligned16(wd))
        cuda_launch(k_rmsnorm<4>, (unsigned)n_rows, rmsnorm_threads(n / 4), 0, s, x, x_stride, wd, y, y_stride, n, eps);
    else
        cuda_launch(k_rmsnorm<1>, (unsigned)n_rows, rmsnorm_threads(n), 0, s, x, x_stride, wd, y, y_stride, n, eps);
    return CUDA_LAUNCHED(be, "rmsnorm");
}

/* ---- rmsnorm fused with F32 matvecs (matmul_multi with memra_norm.out) ----
 *
 * A MoE layer's post-attention norm feeds the router ({H, n_expert} F32),
 * the shared-expert gate ({H, 1} F32) and the experts. As two launches (this
 * file's k_rmsnorm, then k_matvec_multi) a decode step paid ~5.4 + 8.1 us per
 * 35B-A3B layer for 2 MB of weights. k_rmsnorm_mv does both in one: every
 * block normalises its token's row into shared memory (block 0 also writes
 * it to memra_norm.out for the experts), with each warp's weight row already
 * loading, then each warp dots one row.
 *
 * Bits: the norm is k_rmsnorm<4>'s. That kernel's B = rmsnorm_threads(n / 4)
 * threads own one float4 chunk each (n <= 4096); here real warp w plays its
 * warps w, w + 16, ..: the same per-thread fmaf chain, the same butterfly per
 * warp, the same final sum of the warp sums in warp order, the same (x *
 * scale) * w. The dot of a row is warp_row_dot<F32, 1>'s (matvec.cuh: lane
 * l owns quarter l % 4 of groups l / 4, l / 4 + 8, .., two fmaf chains, then
 * warp_sum of c0 + c1), which is what k_matvec_multi computes for F32 at
 * T < 16. So out and y are bit for bit what rmsnorm and matmul_multi give
 * without the fusion, and a token's rows depend on nothing but that token. */

/* rows per block. 4 and 8 (the same bits) measured within the noise on 35b-a3b decode (H100, 2026-12-06b:
 * 427-433 tok/s against 428-433), so 16 stays */
#define RMV_WARPS 16
#define RMV_MAX_N 4096

struct rmv_args {
    const float *W[4];
    int64_t n_out[4];
    float *y[4];
    int n;           /* weights */
    int64_t in;      /* row length: in % 256 == 0, in <= RMV_MAX_N */
    int vb;          /* rmsnorm_threads(in / 4): k_rmsnorm's block */
    const float *x;  /* [T][in] */
    const float *nw; /* norm weight {in} */
    float eps;
    float *xn; /* [T][in]: the normalised rows */
};

/* Launch contract: grid (ceil(sum n_out / RMV_WARPS), T), block 32 *
 * RMV_WARPS, dynamic shared memory in floats; x, nw, xn 16-byte aligned. */
template <int NS>
__global__ void __launch_bounds__(32 * RMV_WARPS) k_rmsnorm_mv(rmv_args a) {
    extern __shared__ __align__(16) float xs[];
    __shared__ float sh[32];
    const int lane = threadIdx.x & 31, wp = threadIdx.x >> 5, q = lane & 3;
    const int64_t t = blockIdx.y, in = a.in, nc = in / 4;
    /* this warp's row: the weights' rows one after the other */
    int64_t r = (int64_t)blockIdx.x * RMV_WARPS + wp;
    int wi = 0;
    while (wi < a.n && r >= a.n_out[wi]) r -= a.n_out[wi++];
    const bool has_row = wi < a.n;
    float4 wv[NS][2];
    if (has_row) {
        const float4 *row = (const float4 *)(a.W[wi] + r * in);
#pragma unroll
        for (int k = 0; k < NS; k++) {
            const int64_t g = (lane >> 2) + 8 * k;
            wv[k][0] = __ldg(row + g * 8 + 2 * q), wv[k][1] = __ldg(row + g * 8 + 2 * q + 1);
        }
    }
    pdl_start(); /* the weights (constants of the step) are requested before the wait, x after it */
    /* k_rmsnorm<4> of row t with its a.vb threads, played by this block's warps */
    const float4 *xr = (const float4 *)(a.x + t * in);
    const int nvw = a.vb / 32;
    for (int vw = wp; vw < nvw; vw += RMV_WARPS) {
        const int64_t c = (int64_t)vw * 32 + lane;
        float ss = 0.0f;
        if (c < nc) {
            const float4 v = xr[c];
            ss = fmaf(v.x, v.x, ss);
            ss = fmaf(v.y, v.y, ss);
            ss = fmaf(v.z, v.z, ss);
            ss = fmaf(v.w, v.w, ss);
        }
        ss = warp_sum(ss);
        if (lane == 0) sh[vw] = ss;
    }
    __syncthreads();
    float tot = lane < nvw ? sh[lane] : 0.0f;
    tot = warp_sum(tot);
    const float scale = 1.0f / sqrtf(tot / (float)in + a.eps);
    for (int64_t c = threadIdx.x; c < nc; c += blockDim.x) {
        const float4 v = xr[c], w = ((const float4 *)a.nw)[c];
        const float4 o = make_float4(v.x * scale * w.x, v.y * scale * w.y, v.z * scale * w.z, v.w * scale * w.w);
        ((float4 *)xs)[c] = o;
        if (blockIdx.x == 0) ((float4 *)(a.xn + t * in))[c] = o;
    }
    __syncthreads();
    if (!has_row) return;
    float c0 = 0.0f, c1 = 0.0f;
#pragma unroll
    for (int k = 0; k < NS; k++) {
        const int64_t g = (lane >> 2) + 8 * k;
        const float4 u = ((const float4 *)xs)[g * 8 + 2 * q], v = ((const float4 *)xs)[g * 8 + 2 * q + 1];
        c0 = fmaf(wv[k][0].x, u.x, c0);
        c1 = fmaf(wv[k][0].y, u.y, c1);
        c0 = fmaf(wv[k][0].z, u.z, c0);
        c1 = fmaf(wv[k][0].w, u.w, c1);
        c0 = fmaf(wv[k][1].x, v.x, c0);
        c1 = fmaf(wv[k][1].y, v.y, c1);
        c0 = fmaf(wv[k][1].z, v.z, c0);
        c1 = fmaf(wv[k][1].w, v.w, c1);
    }
    const float res = warp_sum(__fadd_rn(c0, c1));
    if (lane == 0) a.y[wi][t * a.n_out[wi] + r] = res;
}

/* y_i = W_i rmsnorm(x) and norm->out = rmsnorm(x) in one launch, for F32
 * weights of a row length k_rmsnorm_mv is built for (2048: 35B-A3B; 3072:
 * 122B-A10B) and T < 16. *done = 0 (nothing launched) otherwise. */
memra_status cuda_rmsnorm_mv(memra_backend *be, int n, const memra_weight *const *w, float *const *y, const float *x,
                             int64_t T, const memra_norm *norm, int *done) {
    *done = 0;
    static int on = -1; /* MEMRA_RMV=0: the two launches instead (the same bits) */
    const int64_t in = w[0]->ne[0];
    if (!env_on("MEMRA_RMV", &on) || T < 1 || T >= 16 || (in != 2048 && in != 3072) || !norm || !norm->out ||
        !cuda_aligned16(x) || !cuda_aligned16(norm->out) || !cuda_aligned16(norm->w->data))
        return MEMRA_OK;
    rmv_args a = {};
    int64_t rows = 0;
    for (int i = 0; i < n; i++) {
        if (w[i]->type != MEMRA_TYPE_F32 || w[i]->ne[0] != in || !cuda_aligned16(w[i]->data)) return MEMRA_OK;
        a.W[i] = (const float *)w[i]->data, a.n_out[i] = w[i]->ne[1], a.y[i] = y[i];
        rows += w[i]->ne[1];
    }
    a.n = n, a.in = in, a.vb = (int)rmsnorm_threads(in / 4), a.x = x, a.nw = (const float *)norm->w->data;
    a.eps = norm->eps, a.xn = norm->out;
    const dim3 grid((unsigned)((rows + RMV_WARPS - 1) / RMV_WARPS), (unsigned)T);
    const size_t smem = (size_t)in * sizeof(float);
    cudaStream_t s = cuda_of(be)->stream;
    if (in == 2048) cuda_launch(k_rmsnorm_mv<8>, grid, 32 * RMV_WARPS, smem, s, a);
    else cuda_launch(k_rmsnorm_mv<12>, grid, 32 * RMV_WARPS, smem, s, a);
    *done = 1;
    return CUDA_LAUNCHED(be, "rmsnorm+matvec");
}
