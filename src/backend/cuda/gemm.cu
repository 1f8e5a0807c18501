/* gemm: the prefill matmul (T >= 16 tokens) on the tensor cores,
 * y[t][o] (+)= sum_i W[o][i] x[t][i], reading the weights in their GGUF
 * encoding. Called by cuda_op_matmul (matmul.cu), which has checked the
 * shapes, the type and the alignment.
 *
 * Current kernel: 64 x 64 tiles (rows x tokens), the weights dequantized 32 columns at a time into shared
 * memory, 3xTF32 MMA (wmma m16n16k8: hi*hi + hi*lo + lo*hi, fp32
 * accumulation). Plain TF32 rounded the operands to 10-bit mantissas and moved
 * the fixture models' logits by up to 1.2e-1 of their scale through the layers
 * (gate model failed at 1e-3); with 3xTF32 the worst fixture logit error is
 * 7.8e-5 and a single matmul's error 5.3e-4 at K = 17408 (H200, 2026-12-02;
 * the MMA accumulator keeps fewer bits than an fp32 FMA, so it is not fp32). A token's result
 * depends only on its own activations (the k order is fixed by the row
 * length, the other tokens of the tile never mix in). */
#include <mma.h>

#include "backend/cuda/matvec.cuh"
#include "backend/cuda/ops.cuh"

#define TC_M 64  /* weight rows per block */
#define TC_N 64  /* tokens per block */
#define TC_K 32  /* columns per step: one dq group */
#define TC_LD 36 /* shared row stride in floats: 16-byte multiple, 32-byte aligned every 16 rows */

/* Launch contract: grid (ceil(n_out / 64), ceil(T / 64)), block 256 (8
 * warps). Thread i dequantizes quarter i % 4 of group k0 / 32 of weight row
 * i / 4 and loads the same 8 columns of token i / 4 (two 16-byte loads) per
 * k step. Warp w owns the 16 x 32 output sub-tile rows 16 (w / 2), tokens
 * 32 (w % 2) .. + 32 (two accumulators). x 16-byte aligned, in % 32 == 0. */
template <int TYPE>
__global__ void __launch_bounds__(256)
    k_matmul_tc(const uint8_t *__restrict__ W, size_t row_bytes, int64_t in, int64_t n_out,
                const float *__restrict__ x, float *__restrict__ y, int64_t T, int accumulate) {
    using namespace nvcuda;
    __shared__ __align__(32) float Ws[TC_M * TC_LD];
    __shared__ __align__(32) float Xs[TC_N * TC_LD];
    __shared__ __align__(32) float Cs[TC_N * (TC_M + 4)];
    const int tid = threadIdx.x, w = tid >> 5;
    const int64_t r0 = (int64_t)blockIdx.x * TC_M, t0 = (int64_t)blockIdx.y * TC_N;
    const int lr = tid >> 2, q = tid & 3;
    const bool row_ok = r0 + lr < n_out, tok_ok = t0 + lr < T;
    const uint8_t *wrow = W + (row_ok ? (r0 + lr) : 0) * row_bytes;
    const float *xrow = x + (tok_ok ? (t0 + lr) : 0) * in;
    wmma::fragment<wmma::accumulator, 16, 16, 8, float> acc[2];
    wmma::fill_fragment(acc[0], 0.0f);
    wmma::fill_fragment(acc[1], 0.0f);
    const int rf = w >> 1, tf = (w & 1) * 2;
    for (int64_t k0 = 0; k0 < in; k0 += TC_K) {
        float v[8];
        if (row_ok) {
            dq8<TYPE>(wrow, k0 / 32, q, v);
        } else {
#pragma unroll
            for (int i = 0; i < 8; i++) v[i] = 0.0f;
        }
        float4 a = make_float4(0, 0, 0, 0), b = a;
        if (tok_ok) {
            const float4 *xp = (const float4 *)(xrow + k0 + 8 * q);
            a = __ldg(xp);
            b = __ldg(xp + 1);
        }
        float *wd = Ws + lr * TC_LD + 8 * q, *xd = Xs + lr * TC_LD + 8 * q;
        *(float4 *)wd = make_float4(v[0], v[1], v[2], v[3]);
        *(float4 *)(wd + 4) = make_float4(v[4], v[5], v[6], v[7]);
        *(float4 *)xd = a;
        *(float4 *)(xd + 4) = b;
        __syncthreads();
#pragma unroll
        for (int kk = 0; kk < TC_K; kk += 8) {
            /* 3xTF32: each operand is split into a TF32 high part and a TF32
             * low part (v - hi); hi*hi + hi*lo + lo*hi recovers ~fp32 accuracy
             * (the lo*lo term is below fp32 rounding). The small terms go
             * first so they are not absorbed by the large one. */
            wmma::fragment<wmma::matrix_a, 16, 16, 8, wmma::precision::tf32, wmma::row_major> fa, fa_lo;
            wmma::load_matrix_sync(fa, Ws + rf * 16 * TC_LD + kk, TC_LD);
#pragma unroll
            for (int i = 0; i < fa.num_elements; i++) {
                float v = fa.x[i], hi = wmma::__float_to_tf32(v);
                fa.x[i] = hi;
                fa_lo.x[i] = wmma::__float_to_tf32(v - hi);
            }
#pragma unroll
            for (int j = 0; j < 2; j++) {
                wmma::fragment<wmma::matrix_b, 16, 16, 8, wmma::precision::tf32, wmma::col_major> fb, fb_lo;
                wmma::load_matrix_sync(fb, Xs + (tf + j) * 16 * TC_LD + kk, TC_LD);
#pragma unroll
                for (int i = 0; i < fb.num_elements; i++) {
                    float v = fb.x[i], hi = wmma::__float_to_tf32(v);
                    fb.x[i] = hi;
                    fb_lo.x[i] = wmma::__float_to_tf32(v - hi);
                }
                wmma::mma_sync(acc[j], fa_lo, fb, acc[j]);
                wmma::mma_sync(acc[j], fa, fb_lo, acc[j]);
                wmma::mma_sync(acc[j], fa, fb, acc[j]);
            }
        }
        __syncthreads();
    }
    /* C[m][n] stored column-major: Cs[n * (TC_M + 4) + m], so a token's rows are contiguous */
#pragma unroll
    for (int j = 0; j < 2; j++)
        wmma::store_matrix_sync(Cs + (tf + j) * 16 * (TC_M + 4) + rf * 16, acc[j], TC_M + 4, wmma::mem_col_major);
    __syncthreads();
    for (int i = tid; i < TC_M * TC_N; i += blockDim.x) {
        int n = i / TC_M, m = i % TC_M;
        if (t0 + n < T && r0 + m < n_out) {
            float *yp = y + (t0 + n) * n_out + r0 + m;
            float c = Cs[n * (TC_M + 4) + m];
            *yp = accumulate ? *yp + c : c;
        }
    }
}

memra_status cuda_gemm_tc(memra_backend *be, const memra_weight *w, const float *x, float *y, int64_t T,
                          int accumulate) {
    int64_t in = w->ne[0], n_out = w->ne[1];
    size_t rb = w->row_bytes;
    const uint8_t *W = (const uint8_t *)w->data;
    cudaStream_t s = cuda_of(be)->stream;
    dim3 grid((unsigned)((n_out + TC_M - 1) / TC_M), (unsigned)((T + TC_N - 1) / TC_N));
    switch (w->type) {
#define TC_CASE(TY) \
    case TY: k_matmul_tc<TY><<<grid, 256, 0, s>>>(W, rb, in, n_out, x, y, T, accumulate); break;
        CUDA_FOR_EACH_TYPE(TC_CASE)
#undef TC_CASE
    default: return cuda_fail(be, MEMRA_ERR_UNSUPPORTED, "gemm %s: unsupported type", w->name ? w->name : "?");
    }
    return CUDA_LAUNCHED(be, "gemm");
}
