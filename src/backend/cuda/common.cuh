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

#define GDN_CNT_WORDS 32768 /* gdn.cu's arrival counters per backend */

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
    float *tc_scale;     /* gemm.cu: per-token activation scales of a prefill matmul [tc_scale_n] */
    unsigned *gdn_cnt;   /* gdn.cu: arrival counters [GDN_CNT_WORDS], zero between launches */
    int64_t tc_scale_n;
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

/* ---- programmatic dependent launch (PDL) ----
 *
 * A decode step is ~240-470 small kernels in a row, each of which used to
 * start only after the previous one had drained: the ramp-up and tail of every
 * kernel left HBM idle. With PDL (sm_90+), every kernel of this folder is
 * launched by cuda_launch with programmatic stream serialization and calls
 * pdl_start() first:
 *  - griddepcontrol.launch_dependents lets the NEXT kernel's blocks be
 *    scheduled as soon as every block of this one is resident, so they fill
 *    the SMs this kernel's tail leaves idle;
 *  - before griddepcontrol.wait, a kernel may only read what no earlier kernel
 *    of the step writes: the matvecs use that window to pull their first
 *    weight bytes into L2 (prefetch_l2), so the HBM stream continues across
 *    kernel boundaries;
 *  - griddepcontrol.wait returns when the previous kernel has completed and
 *    its writes are visible. That kernel waited for its own predecessor in
 *    turn, so everything before is complete too.
 * Nothing is written before the wait, and results do not change: the same
 * instructions run on the same data; only the start times move. Launched
 * without the attribute (sm_80, or MEMRA_PDL unset: the default until it
 * measures faster), the wait returns at once. */
extern int cuda_pdl; /* 1: launch with PDL (sm_90+ and MEMRA_PDL=1), set at backend init */

__device__ __forceinline__ void pdl_trigger(void) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900 && !defined(MEMRA_PDL_NO_TRIGGER)
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

__device__ __forceinline__ void pdl_wait(void) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

/* Every kernel's first statement unless it has a prologue (then
 * pdl_trigger(), the prologue, pdl_wait()). */
__device__ __forceinline__ void pdl_start(void) {
    pdl_trigger();
    pdl_wait();
}

/* Pulls [p, p + bytes) into L2 without registers (sm_90 bulk prefetch;
 * nothing on older parts). p 16-byte aligned; bytes rounded down to 16. */
__device__ __forceinline__ void prefetch_l2(const void *p, uint64_t bytes) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    const uint8_t *b = (const uint8_t *)p;
    while (bytes >= 16) {
        const uint32_t n = bytes > 65536 ? 65536u : (uint32_t)(bytes & ~(uint64_t)15);
        asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(b), "r"(n) : "memory");
        b += n, bytes -= n;
    }
#endif
}

/* The most bytes one block prefetches in its PDL prologue (0: none),
 * passed to the kernels in their arguments; MEMRA_PF=BYTES at backend init
 * overrides the default (measurements: bench/results). */
extern uint32_t cuda_pf_cap;

/* One block of a weight-streaming kernel prefetches its first `cap` bytes
 * of [p, p + bytes) in 4 KiB pieces spread over its threads (a PDL
 * prologue). */
__device__ __forceinline__ void prefetch_l2_block(const void *p, uint64_t bytes, uint64_t cap) {
    if (bytes > cap) bytes = cap;
    const uint64_t beg = (uintptr_t)p & ~(uint64_t)15, end = ((uintptr_t)p + bytes) & ~(uint64_t)15;
    for (uint64_t o = beg + 4096 * (uint64_t)threadIdx.x; o < end; o += 4096 * (uint64_t)blockDim.x)
        prefetch_l2((const void *)o, end - o < 4096 ? end - o : 4096);
}

/* kernel<<<grid, block, smem, s>>>(args...) with the PDL attribute when
 * cuda_pdl is set. */
template <typename... P, typename... A>
static inline void cuda_launch(void (*kernel)(P...), dim3 grid, dim3 block, size_t smem, cudaStream_t s,
                               A &&...args) {
    cudaLaunchAttribute at[1];
    at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    at[0].val.programmaticStreamSerializationAllowed = 1;
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = grid, cfg.blockDim = block, cfg.dynamicSmemBytes = smem, cfg.stream = s;
    cfg.attrs = at, cfg.numAttrs = cuda_pdl ? 1 : 0;
    (void)cudaLaunchKernelEx(&cfg, kernel, static_cast<P>(args)...);
}

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
