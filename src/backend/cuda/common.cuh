/* Shared pieces of the CUDA backend: the backend's private state, error
 * conversion, launch checks and small device helpers.
 *
 * Every .cu file of this folder reads as C with kernels: a launcher per
 * kernel (extern "C"-free static or cuda_* internal functions) that checks the
 * kernel's launch contract, launches on the backend's one stream and turns a
 * CUDA error into MEMRA_ERR_DEVICE with the CUDA error string. */
#ifndef MEMRA_CUDA_COMMON_CUH
#define MEMRA_CUDA_COMMON_CUH

#include <cuda_runtime.h>
#include <stdint.h>

extern "C" {
#include "backend/backend.h"
#include "gguf/quant.h"
}

/* Private state behind memra_backend.impl. */
typedef struct cuda_impl {
    int device;
    int sm_count;
    cudaStream_t stream;
    int capturing;  /* 1 between graph_begin and graph_end: no allocation, no host reads of batch data */
    void *ws;       /* workspace for multi-kernel ops (attention partials, gdn conv output) */
    size_t ws_bytes;
    /* A captured graph holds the workspace address it was captured with, so
     * while graphs exist a growing workspace retires the old buffer instead
     * of freeing it; the retired buffers go when the last graph does. */
    int n_graphs;     /* graphs made by graph_end and not yet freed */
    int ws_in_graph;  /* the current ws may be referenced by a live graph */
    void **retired;   /* [n_retired] older workspaces */
    int n_retired;
    memra_error err; /* last error message (ops have no err argument; see cuda_last_error) */
} cuda_impl;

static inline cuda_impl *cuda_of(memra_backend *be) { return (cuda_impl *)be->impl; }

/* Ops carry no memra_error argument, so a failing op records its message in
 * the backend (readable through memra_backend_cuda_last_error) and logs it. */
memra_status cuda_fail(memra_backend *be, memra_status st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Checks the last launch (and a CUDA call's result) and names the op. */
memra_status cuda_check(memra_backend *be, cudaError_t e, const char *what);
#define CUDA_LAUNCHED(be, what) cuda_check((be), cudaGetLastError(), (what))

/* Grows the workspace to at least `bytes` (never while capturing). */
memra_status cuda_ws_reserve(memra_backend *be, size_t bytes);

#define CUDA_INVALID(be, ...) cuda_fail((be), MEMRA_ERR_INVALID, __VA_ARGS__)

static inline int cuda_aligned16(const void *p) { return ((uintptr_t)p & 15u) == 0; }

/* ---- device helpers ---- */

/* Sum over the 32 lanes of a warp with a fixed butterfly order: every lane
 * gets the same bits, independent of anything outside the warp. */
__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

/* Block-wide sum for blockDim.x a multiple of 32 (<= 1024): warp sums, then
 * warp 0 sums the warp results in warp order. Fixed order for a fixed block
 * size. `sh` holds >= 32 floats. All threads get the result. */
__device__ __forceinline__ float block_sum(float v, float *sh) {
    int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nw = blockDim.x >> 5;
    v = warp_sum(v);
    __syncthreads(); /* sh may still be read from a previous call */
    if (lane == 0) sh[w] = v;
    __syncthreads();
    float r = lane < nw ? sh[lane] : 0.0f;
    r = warp_sum(r);
    return r;
}

__device__ __forceinline__ float block_max(float v, float *sh) {
    int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nw = blockDim.x >> 5;
    v = warp_max(v);
    __syncthreads();
    if (lane == 0) sh[w] = v;
    __syncthreads();
    float r = lane < nw ? sh[lane] : -INFINITY;
    return warp_max(r);
}

__device__ __forceinline__ float silu_f(float x) { return x / (1.0f + expf(-x)); }
__device__ __forceinline__ float sigmoid_f(float x) { return 1.0f / (1.0f + expf(-x)); }
__device__ __forceinline__ float softplus_f(float x) { return x > 20.0f ? x : log1pf(expf(x)); }

#endif
