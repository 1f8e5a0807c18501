/* rmsnorm: y[r] = x[r] / sqrt(mean(x[r]^2) + eps) * w, rows strided. */
#include "backend/cuda/ops.cuh"

/* Launch contract: grid (n_rows), block 256; block r owns row r: thread i
 * sums x[i], x[i + 256], ... (fixed order), block_sum combines warps in
 * order, then each thread scales its own elements. In place (x == y) is safe:
 * every element is read before the barrier inside block_sum and written by
 * the same thread after it. No alignment needed. */
__global__ void __launch_bounds__(256) k_rmsnorm(const float *__restrict__ x, int64_t x_stride,
                                                 const float *__restrict__ w, float *y, int64_t y_stride, int64_t n,
                                                 float eps) {
    __shared__ float sh[32];
    const float *xr = x + (int64_t)blockIdx.x * x_stride;
    float *yr = y + (int64_t)blockIdx.x * y_stride;
    float ss = 0.0f;
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) ss = fmaf(xr[i], xr[i], ss);
    ss = block_sum(ss, sh);
    float scale = 1.0f / sqrtf(ss / (float)n + eps);
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) yr[i] = xr[i] * scale * w[i];
}

memra_status cuda_op_rmsnorm(memra_backend *be, const float *x, int64_t x_stride, const memra_weight *w, float *y,
                             int64_t y_stride, int64_t n, int64_t n_rows, float eps) {
    if (!w || !w->data || w->type != MEMRA_TYPE_F32 || w->ne[0] < n)
        return CUDA_INVALID(be, "rmsnorm: weight %s must be a loaded F32 vector of >= %lld", w && w->name ? w->name : "?",
                            (long long)n);
    if (n <= 0 || n_rows < 0 || n_rows > INT32_MAX)
        return CUDA_INVALID(be, "rmsnorm: n = %lld, rows = %lld", (long long)n, (long long)n_rows);
    if (n_rows == 0) return MEMRA_OK;
    /* x == y must be the same rows, not overlapping shifted ones */
    k_rmsnorm<<<(unsigned)n_rows, 256, 0, cuda_of(be)->stream>>>(x, x_stride, (const float *)w->data, y, y_stride, n,
                                                                 eps);
    return CUDA_LAUNCHED(be, "rmsnorm");
}
