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

/* ---- argmax ----
 *
 * What: out[t] = the lowest index of the largest non-NaN value of row t (0
 * for a row of NaNs), the CPU reference's function. Each row is split into
 * nb slices of one block each; a block writes its slice's (value, index),
 * and the last block of the row to arrive (an arrival counter, reset by that
 * block) combines the nb pairs and writes out[t].
 * Why: one 1,024-thread block per row took 96 us on the 248,320-entry head
 * of 9b (ncu, H100, bench/results/2026-12-05-h100.md), 3% of a decode step;
 * one row over ~61 SMs reads the megabyte in a few us.
 * Bits: the result is a function of the row alone: the maximum with the
 * lowest-index tie rule does not depend on the order pairs are combined in,
 * nor on how the row is split. */

__device__ __forceinline__ void am_take(float *bv, int *bi, float v, int i) {
    if (v > *bv || (v == *bv && i < *bi)) {
        *bv = v;
        *bi = i;
    }
}

/* The block's best (value, index) pair, valid in thread 0; blockDim.x is a
 * multiple of 32, at most 1,024. */
__device__ __forceinline__ void am_block(float *bv, int *bi) {
    __shared__ float sv[32];
    __shared__ int si[32];
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        float ov = __shfl_xor_sync(0xffffffffu, *bv, o);
        int oi = __shfl_xor_sync(0xffffffffu, *bi, o);
        am_take(bv, bi, ov, oi);
    }
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    if (lane == 0) sv[w] = *bv, si[w] = *bi;
    __syncthreads();
    if (w == 0) {
        *bv = lane < (int)(blockDim.x >> 5) ? sv[lane] : -INFINITY;
        *bi = lane < (int)(blockDim.x >> 5) ? si[lane] : INT32_MAX;
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) {
            float ov = __shfl_xor_sync(0xffffffffu, *bv, o);
            int oi = __shfl_xor_sync(0xffffffffu, *bi, o);
            am_take(bv, bi, ov, oi);
        }
    }
}

/* Launch contract: grid (T), block 1024; block t scans row t alone
 * (MEMRA_ARGMAX_SPLIT=0; ~96 us for 248,320 logits on the H100, one SM). */
__global__ void __launch_bounds__(1024) k_argmax1(const float *__restrict__ logits, int64_t n,
                                                  int32_t *__restrict__ out) {
    pdl_start();
    const float *l = logits + (int64_t)blockIdx.x * n;
    float bv = -INFINITY;
    int bi = INT32_MAX;
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) am_take(&bv, &bi, l[i], (int)i);
    am_block(&bv, &bi);
    if (threadIdx.x == 0) out[blockIdx.x] = bi == INT32_MAX ? 0 : bi;
}

#define AM_THREADS 256

/* Launch contract: grid (nb, rows), block AM_THREADS, nb <= AM_BLOCKS, rows
 * <= AM_ROWS; slice ch (a multiple of 4) with nb ch >= n; cnt[0..rows) zero
 * at launch (and again at exit); part holds AM_ROWS x AM_BLOCKS pairs. Block
 * (b, r) scans [b ch, min(n, (b + 1) ch)) of row r, by float4 where the row
 * starts 16-byte aligned. */
__global__ void __launch_bounds__(AM_THREADS) k_argmax(const float *__restrict__ logits, int64_t n, int64_t ch,
                                                       unsigned *__restrict__ cnt, float2 *__restrict__ part,
                                                       int32_t *__restrict__ out) {
    pdl_start();
    __shared__ bool last;
    const int r = blockIdx.y, b = blockIdx.x, nb = gridDim.x;
    const float *l = logits + (int64_t)r * n;
    const int64_t lo = (int64_t)b * ch, hi = lo + ch < n ? lo + ch : n;
    float bv = -INFINITY;
    int bi = INT32_MAX;
    if (((uintptr_t)l & 15) == 0) {
        const int64_t hi4 = lo + ((hi - lo) & ~(int64_t)3);
        for (int64_t i = lo + 4 * (int64_t)threadIdx.x; i < hi4; i += 4 * AM_THREADS) {
            const float4 v = __ldcs((const float4 *)(l + i));
            am_take(&bv, &bi, v.x, (int)i);
            am_take(&bv, &bi, v.y, (int)i + 1);
            am_take(&bv, &bi, v.z, (int)i + 2);
            am_take(&bv, &bi, v.w, (int)i + 3);
        }
        for (int64_t i = hi4 + threadIdx.x; i < hi; i += AM_THREADS) am_take(&bv, &bi, l[i], (int)i);
    } else {
        for (int64_t i = lo + threadIdx.x; i < hi; i += AM_THREADS) am_take(&bv, &bi, l[i], (int)i);
    }
    am_block(&bv, &bi);
    float2 *p = part + (int64_t)r * AM_BLOCKS;
    if (threadIdx.x == 0) {
        p[b] = make_float2(bv, __int_as_float(bi));
        __threadfence();
        last = atomicAdd(&cnt[r], 1u) == (unsigned)nb - 1;
    }
    __syncthreads();
    if (!last) return;
    __threadfence();
    bv = -INFINITY, bi = INT32_MAX;
    if ((int)threadIdx.x < nb) {
        const float2 q = __ldcg(p + threadIdx.x);
        bv = q.x, bi = __float_as_int(q.y);
    }
    __syncthreads(); /* am_block's shared arrays are reused */
    am_block(&bv, &bi);
    if (threadIdx.x == 0) {
        out[r] = bi == INT32_MAX ? 0 : bi;
        cnt[r] = 0;
    }
}

/* The split kernel unless MEMRA_ARGMAX_SPLIT=0 (the one-block k_argmax1).
 * H100, 2026-12-06 (bench/results/2026-12-06-h100.md): decode 9b q4_k_m
 * 301.6 / 299.2 -> 309.8 / 306.1 tok/s, 35b-a3b q4_k_m 398.5 / 398.5 ->
 * 412.7 / 411.0 (two interleaved rounds); the gates' argmax rows exact. */
static int argmax_split(void) {
    static int on = -1;
    return env_on("MEMRA_ARGMAX_SPLIT", &on);
}

memra_status cuda_op_argmax(memra_backend *be, const float *logits, int64_t n, int64_t T, int32_t *out) {
    if (n <= 0 || n > INT32_MAX || T < 0 || T > INT32_MAX)
        return CUDA_INVALID(be, "argmax: n = %lld, T = %lld", (long long)n, (long long)T);
    static_assert(AM_BLOCKS <= AM_THREADS, "argmax: the last block reads one pair a thread");
    cuda_impl *c = cuda_of(be);
    if (T == 0) return MEMRA_OK;
    if (!argmax_split()) {
        cuda_launch(k_argmax1, (unsigned)T, 1024, 0, c->stream, logits, n, out);
        return CUDA_LAUNCHED(be, "argmax");
    }
    /* ~4,096 entries a block (4 float4 loads a thread), at most AM_BLOCKS */
    int64_t nb = (n + 4095) / 4096;
    nb = nb > AM_BLOCKS ? AM_BLOCKS : nb;
    int64_t ch = (n + nb - 1) / nb;
    ch = (ch + 3) & ~(int64_t)3;
    nb = (n + ch - 1) / ch;
    unsigned *cnt = (unsigned *)c->am;
    float2 *part = (float2 *)(c->am + AM_ROWS * 4);
    for (int64_t t0 = 0; t0 < T; t0 += AM_ROWS) { /* the launches run in order: the counters are zero again */
        const int64_t rows = T - t0 < AM_ROWS ? T - t0 : AM_ROWS;
        cuda_launch(k_argmax, dim3((unsigned)nb, (unsigned)rows), AM_THREADS, 0, c->stream, logits + t0 * n, n, ch,
                    cnt, part, out + t0);
        memra_status st = CUDA_LAUNCHED(be, "argmax");
        if (st) return st;
    }
    return MEMRA_OK;
}
