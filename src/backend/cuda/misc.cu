/* Small ops: embed, add, add_sigmoid_scaled, swiglu, argmax. */
#include <math.h>

#include "backend/cuda/ops.cuh"
#include "backend/cuda/quant.cuh"

/* ---- embed ---- */

/* Launch contract: grid (T), block 128; block t writes out[t][0..H): thread i
 * dequantizes groups i, i + 128, ... of table row tokens[t]. An id outside
 * [0, n_vocab) writes NaNs (the host checks ids where it can; a captured
 * graph cannot report, so the poison makes a bad id visible). */
template <int TYPE>
__global__ void __launch_bounds__(128) k_embed(const uint8_t *__restrict__ table, size_t row_bytes, int64_t n_vocab,
                                               const int32_t *__restrict__ tokens, int64_t H, float *__restrict__ out) {
    pdl_start();
    int64_t t = blockIdx.x;
    int32_t id = tokens[t];
    float *o = out + t * H;
    if (id < 0 || id >= n_vocab) {
        for (int64_t i = threadIdx.x; i < H; i += blockDim.x) o[i] = NAN;
        return;
    }
    const uint8_t *row = table + (int64_t)id * row_bytes;
    for (int64_t g = threadIdx.x; g < H / 32; g += blockDim.x) {
        float v[32];
        dq32<TYPE>(row, g, v);
#pragma unroll
        for (int k = 0; k < 32; k++) o[g * 32 + k] = v[k];
    }
}

memra_status cuda_op_embed(memra_backend *be, const memra_weight *table, const memra_batch *b, float *out) {
    int64_t T = b->n_tokens, H = table->ne[0];
    if (T == 0) return MEMRA_OK;
    if (!table->data) return CUDA_INVALID(be, "embed: table not loaded");
    size_t rb = cuda_type_row_bytes(table->type, H);
    if (H % 32 || rb == 0 || rb != table->row_bytes)
        return CUDA_INVALID(be, "embed: table type %s with row %lld is not supported (row_bytes %llu)",
                            memra_type_name(table->type), (long long)H, (unsigned long long)table->row_bytes);
    if (T < 0 || T > INT32_MAX) return CUDA_INVALID(be, "embed: T = %lld", (long long)T);
    if (cuda_weight_tm(be, table)) /* c_weight_load keeps embedding tables in the file's order */
        return CUDA_INVALID(be, "embed %s: the table is tile-major", table->name ? table->name : "?");
    cudaStream_t s = cuda_of(be)->stream;
    const uint8_t *W = (const uint8_t *)table->data;
    switch (table->type) {
#define EMB_CASE(TY) \
    case TY: cuda_launch(k_embed<TY>, (unsigned)T, 128, 0, s, W, rb, table->ne[1], b->d_tokens, H, out); break;
        CUDA_FOR_EACH_TYPE(EMB_CASE)
#undef EMB_CASE
    default: return cuda_fail(be, MEMRA_ERR_UNSUPPORTED, "embed: type %s", memra_type_name(table->type));
    }
    return CUDA_LAUNCHED(be, "embed");
}

/* ---- elementwise ---- */

static unsigned ew_blocks(int64_t n) {
    int64_t b = (n + 255) / 256;
    return (unsigned)(b > 65535 * 64 ? 65535 * 64 : b);
}

/* Launch contract (all elementwise kernels): 1-D grid-stride loop, block 256;
 * thread i handles elements i, i + gridDim*256, ...; no alignment needed. */
__global__ void k_add(float *__restrict__ y, const float *__restrict__ x, int64_t n) {
    pdl_start();
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        y[i] += x[i];
}

memra_status cuda_op_add(memra_backend *be, float *y, const float *x, int64_t n) {
    if (n < 0) return CUDA_INVALID(be, "add: n = %lld", (long long)n);
    if (n == 0) return MEMRA_OK;
    cuda_launch(k_add, ew_blocks(n), 256, 0, cuda_of(be)->stream, y, x, n);
    return CUDA_LAUNCHED(be, "add");
}

__global__ void k_add_sigmoid_scaled(float *__restrict__ y, const float *__restrict__ x,
                                     const float *__restrict__ gate, int64_t gate_stride, int64_t n, int64_t total) {
    pdl_start();
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < total;
         i += (int64_t)gridDim.x * blockDim.x) {
        int64_t t = i / n;
        y[i] += sigmoid_f(gate[t * gate_stride]) * x[i];
    }
}

memra_status cuda_op_add_sigmoid_scaled(memra_backend *be, float *y, const float *x, const float *gate,
                                        int64_t gate_stride, int64_t n, int64_t T) {
    if (n < 0 || T < 0) return CUDA_INVALID(be, "add_sigmoid_scaled: n = %lld, T = %lld", (long long)n, (long long)T);
    if (n == 0 || T == 0) return MEMRA_OK;
    cuda_launch(k_add_sigmoid_scaled, ew_blocks(n * T), 256, 0, cuda_of(be)->stream, y, x, gate, gate_stride, n, n * T);
    return CUDA_LAUNCHED(be, "add_sigmoid_scaled");
}

__global__ void k_swiglu(const float *__restrict__ gate, const float *__restrict__ up, float *__restrict__ out,
                         int64_t total) {
    pdl_start();
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < total;
         i += (int64_t)gridDim.x * blockDim.x)
        out[i] = silu_f(gate[i]) * up[i];
}

memra_status cuda_op_swiglu(memra_backend *be, const float *gate, const float *up, float *out, int64_t n, int64_t T) {
    if (n < 0 || T < 0) return CUDA_INVALID(be, "swiglu: n = %lld, T = %lld", (long long)n, (long long)T);
    if (n == 0 || T == 0) return MEMRA_OK;
    cuda_launch(k_swiglu, ew_blocks(n * T), 256, 0, cuda_of(be)->stream, gate, up, out, n * T);
    return CUDA_LAUNCHED(be, "swiglu");
}

/* ---- argmax ---- */

/* Launch contract: grid (T), block 1024; block t scans logits[t][0..n):
 * thread i takes i, i + 1024, ...; then a warp butterfly and a pass over the
 * 32 warp results. Larger value wins, equal values: lower index. NaNs are
 * skipped (a row of NaNs gives index 0). */
__device__ __forceinline__ void am_take(float *bv, int *bi, float v, int i) {
    if (v > *bv || (v == *bv && i < *bi)) {
        *bv = v;
        *bi = i;
    }
}

__global__ void __launch_bounds__(1024) k_argmax(const float *__restrict__ logits, int64_t n, int32_t *__restrict__ out) {
    pdl_start();
    __shared__ float sv[32];
    __shared__ int si[32];
    const float *l = logits + (int64_t)blockIdx.x * n;
    float bv = -INFINITY;
    int bi = INT32_MAX;
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) am_take(&bv, &bi, l[i], (int)i);
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        float ov = __shfl_xor_sync(0xffffffffu, bv, o);
        int oi = __shfl_xor_sync(0xffffffffu, bi, o);
        am_take(&bv, &bi, ov, oi);
    }
    int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    if (lane == 0) sv[w] = bv, si[w] = bi;
    __syncthreads();
    if (w == 0) {
        bv = lane < (int)(blockDim.x >> 5) ? sv[lane] : -INFINITY;
        bi = lane < (int)(blockDim.x >> 5) ? si[lane] : INT32_MAX;
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) {
            float ov = __shfl_xor_sync(0xffffffffu, bv, o);
            int oi = __shfl_xor_sync(0xffffffffu, bi, o);
            am_take(&bv, &bi, ov, oi);
        }
        if (lane == 0) out[blockIdx.x] = bi == INT32_MAX ? 0 : bi;
    }
}

memra_status cuda_op_argmax(memra_backend *be, const float *logits, int64_t n, int64_t T, int32_t *out) {
    if (n <= 0 || n > INT32_MAX || T < 0 || T > INT32_MAX)
        return CUDA_INVALID(be, "argmax: n = %lld, T = %lld", (long long)n, (long long)T);
    if (T == 0) return MEMRA_OK;
    cuda_launch(k_argmax, (unsigned)T, 1024, 0, cuda_of(be)->stream, logits, n, out);
    return CUDA_LAUNCHED(be, "argmax");
}
