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
