/* matmul: y[t][o] (+)= sum_i W[o][i] x[t][i] for every supported weight type,
 * reading the weights in their GGUF encoding (no dequantized copy).
 *
 * One kernel serves every T < 16: a warp per R output rows, tokens taken NT
 * at a time (NT = 1, 2, 4, 8 or 16 by T), the reduction order of a row fixed
 * by the row length alone (matvec.cuh). So row t of a T-token product is bit-identical to the same
 * row computed with T = 1.
 *
 * Prefill (T >= MM_TC_MIN_T) goes to the tensor-core GEMM (gemm.cu,
 * cuda_gemm_tc). Known gap: a row computed with T >= 16 differs from the
 * same row computed with T < 16 in the last bits; `memra gate kernels`
 * checks each path's invariance separately. */
#include "backend/cuda/matvec.cuh"
#include "backend/cuda/ops.cuh"

#define MM_TC_MIN_T 16

/* T < 16: k_matvec (matvec.cuh) with the production configuration
 * mv_config<TYPE, NT>, tokens taken NT = 1, 2, 4, 8 or 16 at a time. */
template <int TYPE, int NT>
static void launch_matvec(const uint8_t *W, size_t row_bytes, int64_t in, int64_t n_out, const float *x, float *y,
                          int64_t T, int accumulate, cudaStream_t s) {
    typedef mv_config<TYPE, NT> C;
    unsigned gy = (unsigned)((T + NT - 1) / NT);
    if (C::R > 1 && n_out >= C::R * C::MIN_WARPS) {
        dim3 grid((unsigned)((n_out + C::WARPS * C::R - 1) / (C::WARPS * C::R)), gy);
        k_matvec<TYPE, NT, C::R, C::WARPS, C::U><<<grid, 32 * C::WARPS, 0, s>>>(W, row_bytes, in, n_out, x, y, T,
                                                                                 accumulate);
    } else {
        dim3 grid((unsigned)((n_out + C::WARPS - 1) / C::WARPS), gy);
        k_matvec<TYPE, NT, 1, C::WARPS, C::U1><<<grid, 32 * C::WARPS, 0, s>>>(W, row_bytes, in, n_out, x, y, T,
                                                                               accumulate);
    }
}

template <int TYPE>
static void launch_matmul(const uint8_t *W, size_t row_bytes, int64_t in, int64_t n_out, const float *x, float *y,
                          int64_t T, int accumulate, cudaStream_t s) {
    if (T == 1) {
        launch_matvec<TYPE, 1>(W, row_bytes, in, n_out, x, y, T, accumulate, s);
    } else if (T == 2) {
        launch_matvec<TYPE, 2>(W, row_bytes, in, n_out, x, y, T, accumulate, s);
    } else if (T <= 4) {
        launch_matvec<TYPE, 4>(W, row_bytes, in, n_out, x, y, T, accumulate, s);
    } else if (T <= 8) {
        launch_matvec<TYPE, 8>(W, row_bytes, in, n_out, x, y, T, accumulate, s);
    } else {
        launch_matvec<TYPE, 16>(W, row_bytes, in, n_out, x, y, T, accumulate, s);
    }
}

int cuda_type_supported(uint32_t type) { return cuda_type_row_bytes(type, 256) != 0; }

memra_status cuda_op_matmul(memra_backend *be, const memra_weight *w, const float *x, float *y, int64_t T,
                            int accumulate) {
    const char *name = w && w->name ? w->name : "?";
    if (!w || !w->data) return CUDA_INVALID(be, "matmul %s: weight not loaded", name);
    if (T < 0) return CUDA_INVALID(be, "matmul %s: T = %lld", name, (long long)T);
    if (T == 0) return MEMRA_OK;
    int64_t in = w->ne[0], n_out = w->ne[1];
    if (!cuda_type_supported(w->type))
        return cuda_fail(be, MEMRA_ERR_UNSUPPORTED, "matmul %s: type %s has no CUDA kernel", name,
                         memra_type_name(w->type));
    if (in <= 0 || n_out <= 0 || (w->ne[2] > 1) || in % 32)
        return CUDA_INVALID(be, "matmul %s: shape {%lld, %lld, %lld}: need one matrix with ne0 %% 32 == 0", name,
                            (long long)in, (long long)n_out, (long long)w->ne[2]);
    size_t rb = cuda_type_row_bytes(w->type, in);
    if (rb == 0 || rb != w->row_bytes)
        return CUDA_INVALID(be, "matmul %s: row of %lld %s elements is %zu bytes, weight says %llu", name,
                            (long long)in, memra_type_name(w->type), rb, (unsigned long long)w->row_bytes);
    if (!cuda_aligned16(x)) return CUDA_INVALID(be, "matmul %s: x not 16-byte aligned", name);
    /* the decoders' aligned 8-byte loads (Q4_K, Q5_K, IQ4_XS) need an
     * aligned start; every row is then aligned too (block sizes 144, 176, 136) */
    if ((uintptr_t)w->data & 15) return CUDA_INVALID(be, "matmul %s: weight not 16-byte aligned", name);
    if (n_out >= (int64_t)INT32_MAX || (T + 15) / 16 > 65535)
        return CUDA_INVALID(be, "matmul %s: %lld rows x %lld tokens exceed the grid", name, (long long)n_out,
                            (long long)T);
    if (T >= MM_TC_MIN_T) return cuda_gemm_tc(be, w, x, y, T, accumulate);
    cudaStream_t s = cuda_of(be)->stream;
    const uint8_t *W = (const uint8_t *)w->data;
    switch (w->type) {
#define MM_CASE(TY) \
    case TY: launch_matmul<TY>(W, rb, in, n_out, x, y, T, accumulate, s); break;
        CUDA_FOR_EACH_TYPE(MM_CASE)
#undef MM_CASE
    default: return cuda_fail(be, MEMRA_ERR_UNSUPPORTED, "matmul %s: unsupported type", name);
    }
    return CUDA_LAUNCHED(be, "matmul");
}
