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
#include <stdlib.h>
#include <string.h>

extern "C" {
#include "backend/backend.h"
#include "gguf/quant.h"
}

/* A fallback switch read from the environment once: 0 when NAME=0. *cache
 * starts at -1 (a benign race: every thread stores the same value). */
static inline int env_on(const char *name, int *cache) {
    if (*cache < 0) {
        const char *e = getenv(name);
        *cache = !(e && strcmp(e, "0") == 0);
    }
    return *cache;
}

/* An opt-in switch read from the environment once: 1 only when NAME=1. */
static inline int env_opt_in(const char *name, int *cache) {
    if (*cache < 0) {
        const char *e = getenv(name);
        *cache = e && strcmp(e, "1") == 0;
    }
    return *cache;
}

#define GDN_CNT_WORDS 32768 /* gdn.cu's arrival counters per backend */
#define CUDA_MQ_BYTES (4u << 20) /* mmvq.cuh's activation planes per backend */
#define AM_ROWS 64    /* misc.cu: rows of one split-argmax launch */
#define AM_BLOCKS 128 /* misc.cu: the most blocks a row is split into */
/* misc.cu's argmax scratch: AM_ROWS arrival counters, then AM_ROWS x AM_BLOCKS (value, index) partials */
#define CUDA_AM_BYTES (AM_ROWS * 4 + AM_ROWS * AM_BLOCKS * 8)

/* Private state behind memra_backend.impl. */
typedef struct cuda_impl {
    int device;
    int sm_count;
    cudaStream_t stream;
    /* matmul.cu's side branch: a matmul_multi launch group that runs beside
     * the stream's next launches (cuda_side_fork / cuda_side_join) */
    cudaStream_t side;
    cudaEvent_t fork_ev, join_ev;
    int capturing;  /* 1 between graph_begin and graph_end: no allocation, no host reads of batch data */
    void *ws;       /* workspace for multi-kernel ops (attention partials, gdn conv output) */
    size_t ws_bytes;
    /* A captured graph holds the workspace address it was captured with, so
     * while graphs exist a growing workspace retires the old buffer instead
     * of freeing it; the retired buffers go when the last graph does. */
    int n_graphs;     /* graphs made by graph_end and not yet freed */
    int ws_in_graph;  /* the current ws may be referenced by a live graph */
    void *xs;         /* second workspace: mmvg.cuh's staged activations (beside ws, which may hold its x) */
    size_t xs_bytes;
    int xs_in_graph;
    void **retired;   /* [n_retired] older workspaces (both kinds) */
    int n_retired;
    float *tc_scale;     /* gemm.cu: per-token activation scales of a prefill matmul [tc_scale_n] */
    unsigned *gdn_cnt;   /* gdn.cu: arrival counters [GDN_CNT_WORDS], zero between launches */
    uint8_t *mq;         /* mmvq.cuh: a matmul's activation planes [CUDA_MQ_BYTES] */
    uint8_t *am;         /* misc.cu: argmax counters (zero between launches) and partials [CUDA_AM_BYTES] */
    int64_t tc_scale_n;
    void **tm;       /* cuda.cu: the tile-major weights' device addresses [n_tm], ascending (cuda_weight_tm) */
    int n_tm, tm_cap;
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

/* ---- tile-major Q4_K and Q6_K weights ----
 *
 * What: c_weight_load (cuda.cu) stores a Q4_K or Q6_K matmul weight of
 * n_out rows (n_out % 16 == 0) and nsb = in / 256 super-blocks a row, with
 * blocks of bb bytes (Q4_K 144, Q6_K 210), with block (row 16 tau + i,
 * super-block sb) at byte ((tau nsb + sb) 16 + i) bb, so each 16-row tile's
 * super-block is one run of 16 bb bytes (2,304; 3,360), 16-byte aligned. The
 * blocks and their bytes are the file's; only their order moves, so every
 * kernel that reads such a weight does the same arithmetic at other
 * addresses and gives the same bits. (A Q6_K block starts 2-byte aligned
 * either way: in the file at an odd super-block, tile-major at an odd row
 * of its tile; its readers take the alignment from the address.)
 * Why: the int8 decode matvec reads a tile's super-block per warp and step.
 * In the file's layout those are 16 runs of bb bytes, 1 row_bytes apart;
 * tile-major, one run. bench/results/2026-12-03g-h200.md (section 2,
 * bench/kernels/mmvq_tm_lab.cu, H200, us per prep + matvec pair): the
 * production pair 16.2-16.6 / 15.3-15.9 / 24.9-25.2 / 29.5-30.5 us on
 * {4096, 12288} / {12288, 4096} / {5120, 17408} / {17408, 5120}; the
 * tile-major copy through a per-warp cp.async ring of 2 super-blocks
 * (the lab's k_cr<2, 1>, production's k_mmvq_tm in mmvq.cuh) 14.3 / 12.8 /
 * 21.6 / 28.5 us, 12-17% less on the first three; a ring of 4 takes the
 * last to 24.9 us. Every output memcmp-equal to the production pair's.
 * Q6_K (bench/results/2026-12-06g-h100-h200.md, H100, the same lab): k_mmv6 31.6
 * / 62.4 / 20.7 / 35.8 us on {12288, 4096} / {17408, 5120} / {4096, 8192} /
 * {5120, 10240}; the int8 pair on the file's layout 28.3 / 60.4 / 19.0 /
 * 32.3; its tile-major ring of 2 23.0 / 41.2 / 17.2 / 24.8 (a field-major
 * form of the tile, every piece 8-byte aligned, 21.2 / 40.4 / 16.0 / 22.9:
 * not taken, as every other Q6_K reader would have to change its
 * arithmetic on the bytes, not only its addresses). Decode@0 (H200, the
 * same file): 9b q4_k_m 353 / 349 -> 373 / 371 tok/s, 27b 116 / 116 ->
 * 125 / 126, 35b-a3b 466 / 467 -> 473 / 466; prefill 512 unchanged or
 * 1-2% up.
 * Which: Q4_K or Q6_K, in % 256 == 0, n_out % 16 == 0, one matrix
 * (ne[2] == ne[3] == 1), not an embedding table (embed reads rows:
 * "token_embd", so also a tied head), not moe.cu's expert or shared-expert
 * weights ("_exps", "_shexp"); for Q6_K also not the output head (k_mmv6b
 * reads it at ~83% of copy) and only where the T < 16 matmuls take the int8
 * path for it (matmul.cu: mmv6.cuh reads the file's order only).
 * MEMRA_TILED=0 in the environment keeps every weight in the file's order.
 * cuda_weight_tm says which weights are tile-major (a sorted table of their
 * device addresses, searched once per op launch on the host, i.e. at graph
 * capture). The kernels take it as a template parameter TM (or mmv_args /
 * mv_multi_args .tm) and address blocks with the helpers below; rows start
 * 16-byte aligned in either layout (Q6_K: 4-byte aligned in the file's). */
#define Q4K_TM_SB 2304 /* one tile's super-block: 16 rows x 144 bytes */
#define Q6K_TM_SB 3360 /* 16 rows x 210 bytes */

/* A type's block bytes (Q4_K 144, else Q6_K 210: the two tile-major types) */
__host__ __device__ static constexpr int64_t tm_bb(int type) { return type == MEMRA_TYPE_Q6_K ? 210 : 144; }

/* Byte offset of row `row`'s super-block 0 from the weight's start: row
 * row_bytes in the file's layout; tile-major, its tile's start (16
 * row_bytes a tile) plus bb (row % 16). A row's super-block sb is
 * tm_sb_stride(type, tm) sb bytes further. */
__host__ __device__ static inline int64_t tm_row_off(int type, size_t row_bytes, int64_t row, bool tm) {
    return tm ? (row >> 4) * 16 * (int64_t)row_bytes + (row & 15) * tm_bb(type) : row * (int64_t)row_bytes;
}
__host__ __device__ static constexpr int64_t tm_sb_stride(int type, bool tm) {
    return tm ? 16 * tm_bb(type) : tm_bb(type);
}
__host__ __device__ static inline int64_t q4k_row_off(size_t row_bytes, int64_t row, bool tm) {
    return tm_row_off(MEMRA_TYPE_Q4_K, row_bytes, row, tm);
}
__host__ __device__ static constexpr int64_t q4k_sb_stride(bool tm) { return tm_sb_stride(MEMRA_TYPE_Q4_K, tm); }

/* The address of block (row, sb) of the Q4_K weight W. */
__host__ __device__ static inline const uint8_t *q4k_blk(const uint8_t *W, size_t row_bytes, int64_t row, int64_t sb,
                                                         bool tm) {
    return W + q4k_row_off(row_bytes, row, tm) + sb * q4k_sb_stride(tm);
}

/* 1 when w (loaded by this backend) is stored tile-major. */
int cuda_weight_tm(memra_backend *be, const memra_weight *w);

/* The side stream (cuda.cu): work launched on cuda_impl.side after
 * cuda_side_fork runs after what the stream had before, beside what the
 * stream gets next (in a captured graph: a parallel branch);
 * cuda_side_join makes the stream's later work wait for all of the side's.
 * Every fork is joined before its op returns (a capture must not end with
 * a branch open). */
memra_status cuda_side_fork(memra_backend *be);
memra_status cuda_side_join(memra_backend *be);

/* Grows the workspace to at least `bytes` (never while capturing). */
memra_status cuda_ws_reserve(memra_backend *be, size_t bytes);
memra_status cuda_xs_reserve(memra_backend *be, size_t bytes); /* the same for xs */

#define CUDA_INVALID(be, ...) cuda_fail((be), MEMRA_ERR_INVALID, __VA_ARGS__)

/* ---- programmatic dependent launch (PDL) ----
 *
 * A decode step is ~240-470 small kernels in a row. Every kernel of this
 * folder is launched by cuda_launch and calls pdl_start() before it reads or
 * writes anything. On sm_90+ (unless MEMRA_PDL=0) the launches carry
 * programmatic stream serialization: a kernel's blocks may be scheduled
 * while the previous kernel's last blocks drain, and griddepcontrol.wait
 * returns when that kernel has completed and its writes are visible (it
 * waited for its own predecessor in turn, so everything before is complete
 * too). The int8 decode matvec k_mmvq (and k_mmvq_tm, its tile-major form,
 * at the same point: after its wait) calls pdl_trigger() when its weights
 * are read, so the next grid launches during its epilogue; other kernels
 * never trigger, so theirs launches as their last blocks exit. Results do
 * not change: the same instructions run on the same data, only the start
 * times move.
 * Measured on the H200 (decode tok/s, interleaved A/B): PDL alone
 * +0.2..1.5%, inside the noise (bench/results/2026-12-03-h200.md); with
 * k_mmvq's trigger +3-4% on 9b, 27b and 35b-a3b
 * (bench/results/2026-12-03g-h200.md), so it is on by default. The same
 * trigger in k_mmv6 and k_matvec_multi changed nothing, in the MoE decode
 * pair it cost 2.7% on 35b-a3b; letting every kernel trigger at its start
 * was 5-7% slower (the early blocks take SM slots wherever they are free
 * and the next matvec runs unbalanced), and an L2 prefetch of a block's
 * weight rows before the wait 7-17% slower. Launched without the attribute
 * (sm_80, MEMRA_PDL=0) the wait returns at once. */
extern int cuda_pdl; /* 1: launch with PDL (sm_90+ unless MEMRA_PDL=0), set at backend init */
extern int cuda_sm90; /* 1: the device has PDL (sm_90+): mmvq.cuh's pairs use it whatever cuda_pdl */

/* The wait itself: griddepcontrol.wait (pdl_start below). */
__device__ __forceinline__ void pdl_wait_(void) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

#ifndef MEMRA_TIMELINE
/* Every kernel's first statement. */
__device__ __forceinline__ void pdl_start(void) { pdl_wait_(); }
#else
/* ---- the kernel timeline (`make TIMELINE=1`, `memra bench --timeline`; prof.cu) ----
 *
 * A diagnostic build: pdl_start() also declares a guard in the kernel's
 * top-level scope, so thread 0 of every block stamps the global timer when
 * the block arrives at pdl_start (before the wait), when the wait returns
 * and when the guard goes out of scope (thread 0 leaves the kernel), and
 * appends one record with the launch's %gridid and the kernel's name. From
 * these prof.cu tells, inside the captured step with PDL as it runs, how
 * long each kernel works after its wait and how long the next one's wait
 * then takes to return. Costs a few registers, one atomic a block (before
 * the wait) and a few stores as thread 0 leaves, so its step is a little
 * slower than the plain build's: time both in one run. */
typedef struct cuda_tl_rec {
    unsigned long long grid, t2; /* %gridid; the exit stamp (ns) */
    const char *name;            /* the kernel's __PRETTY_FUNCTION__ (a device address) */
    unsigned t0, t1;             /* low 32 bits of the arrival and wait-return stamps */
    unsigned blk, sm;
} cuda_tl_rec;
typedef struct cuda_tl_buf {
    unsigned n, cap, on, pad;
    cuda_tl_rec rec[1]; /* cap records */
} cuda_tl_buf;

/* Each .cu file has its own copy (no relocatable device code); prof.cu binds
 * every copy through the registered binders before the first capture. */
static __device__ cuda_tl_buf *cuda_tl_dev;
typedef cudaError_t (*cuda_tl_binder)(cuda_tl_buf *buf);
int cuda_tl_register(cuda_tl_binder b);
static cudaError_t cuda_tl_bind_here(cuda_tl_buf *buf) {
    return cudaMemcpyToSymbol(cuda_tl_dev, &buf, sizeof buf);
}
static const int cuda_tl_registered = cuda_tl_register(cuda_tl_bind_here);

__device__ __forceinline__ unsigned long long cuda_tl_now(void) {
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

/* Thread 0 reserves its block's record before the wait (the atomic's round
 * trip overlaps it), so that leaving costs only the stamp and the stores. */
struct cuda_tl_guard {
    const char *name;
    cuda_tl_rec *r;
    unsigned t0, t1;
    __device__ __forceinline__ explicit cuda_tl_guard(const char *n) : name(n), r(nullptr), t0(0), t1(0) {
        if (threadIdx.x | threadIdx.y | threadIdx.z) return;
        t0 = (unsigned)cuda_tl_now();
        cuda_tl_buf *b = cuda_tl_dev;
        if (!b || !*(volatile unsigned *)&b->on) return;
        const unsigned i = atomicAdd(&b->n, 1u);
        if (i < b->cap) r = &b->rec[i];
    }
    __device__ __forceinline__ ~cuda_tl_guard() {
        if (!r) return;
        const unsigned long long t2 = cuda_tl_now();
        unsigned long long g;
        unsigned sm;
        asm volatile("mov.u64 %0, %%gridid;" : "=l"(g));
        asm volatile("mov.u32 %0, %%smid;" : "=r"(sm));
        r->grid = g, r->t2 = t2, r->name = name, r->t0 = t0, r->t1 = t1;
        r->blk = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z), r->sm = sm;
    }
};
#define pdl_start()                                        \
    cuda_tl_guard cuda_tl_g_(__PRETTY_FUNCTION__);         \
    pdl_wait_();                                           \
    cuda_tl_g_.t1 = (unsigned)cuda_tl_now()
#endif

/* Lets the next kernel launch once every block of this one has passed here
 * (or exited); that kernel still waits in pdl_start() for this one's
 * completion, so only start times move. k_mmvq calls it when its weights
 * are read, before the epilogue: the next kernel's launch and first loads
 * overlap the tail. Earlier is worse (the header above). */
__device__ __forceinline__ void pdl_trigger(void) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

/* ---- mbarriers and bulk copies (the rings of mmv.cuh, mmv6.cuh, gemm.cu) ----
 * bar, dst: shared-window addresses (__cvta_generic_to_shared). */

/* Initialises the mbarrier at bar for N arrivals (one thread). */
template <int N>
__device__ __forceinline__ void mbar_init(uint32_t bar) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(bar), "n"(N) : "memory");
}
/* Makes the initialisations above visible to the async proxy (after the last mbar_init). */
__device__ __forceinline__ void mbar_init_fence() { asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory"); }
__device__ __forceinline__ void mbar_inval(uint32_t bar) {
    asm volatile("mbarrier.inval.shared::cta.b64 [%0];" ::"r"(bar) : "memory");
}
/* Arrives on bar and expects `bytes` of bulk copies to complete its phase. */
__device__ __forceinline__ void mbar_expect_tx(uint32_t bar, uint32_t bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes) : "memory");
}
/* Copies `bytes` (a multiple of 16; both addresses 16-byte aligned) from
 * global src to shared dst, completing on bar; bulk_g2s_n: a constant size. */
__device__ __forceinline__ void bulk_g2s(uint32_t dst, const void *src, uint32_t bytes, uint32_t bar) {
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(dst),
                 "l"(src), "r"(bytes), "r"(bar)
                 : "memory");
}
template <int BYTES>
__device__ __forceinline__ void bulk_g2s_n(uint32_t dst, const void *src, uint32_t bar) {
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(dst),
                 "l"(src), "n"(BYTES), "r"(bar)
                 : "memory");
}

/* Spins until the shared-memory mbarrier at bar (a shared-window address)
 * completes the phase of the given parity (the bulk-copy rings). */
__device__ __forceinline__ void mbar_wait(uint32_t bar, uint32_t parity) {
    uint32_t done;
    do
        asm volatile("{\n .reg .pred p;\n mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
                     " selp.u32 %0, 1, 0, p;\n}"
                     : "=r"(done)
                     : "r"(bar), "r"(parity)
                     : "memory");
    while (!done);
}

/* The weight that block b of a multi-weight launch belongs to (mv_multi_args,
 * mmv_args): blk0[wi] <= b < blk0[wi + 1], wi < 4. */
__device__ __forceinline__ int cuda_blk_owner(const int (&blk0)[5], int b) {
    int wi = 0;
    while (wi < 3 && b >= blk0[wi + 1]) wi++;
    return wi;
}

/* Raises kernel K's dynamic shared-memory limit to bytes, the first time
 * only (per kernel: each K is its own instantiation). */
template <auto K>
static inline cudaError_t cuda_smem_limit(int bytes) {
    static bool done = false;
    if (done) return cudaSuccess;
    cudaError_t e = cudaFuncSetAttribute(K, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
    done = e == cudaSuccess;
    return e;
}

/* 16-byte cp.async (global -> shared, L2 only), its commit and its wait for all but N groups */
__device__ __forceinline__ void mmv_cp16(void *sdst, const void *gsrc) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"((uint32_t)__cvta_generic_to_shared(sdst)),
                 "l"(gsrc)
                 : "memory");
}
__device__ __forceinline__ void mmv_cp_commit(void) { asm volatile("cp.async.commit_group;" ::: "memory"); }
template <int N>
__device__ __forceinline__ void mmv_cp_wait(void) {
    asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory");
}

/* The launch attribute for thread-block clusters of x blocks along x */
static inline cudaLaunchAttribute cuda_cluster_attr(unsigned x) {
    cudaLaunchAttribute at;
    at.id = cudaLaunchAttributeClusterDimension;
    at.val.clusterDim.x = x, at.val.clusterDim.y = 1, at.val.clusterDim.z = 1;
    return at;
}

/* kernel<<<grid, block, smem, s>>>(args...) with the PDL attribute when
 * cuda_pdl is set, in thread-block clusters of `cluster` blocks along x
 * when cluster > 0 (sm_90). */
template <typename... P, typename... A>
static inline void cuda_launch_cl(void (*kernel)(P...), dim3 grid, dim3 block, size_t smem, cudaStream_t s,
                                  unsigned cluster, A &&...args) {
    cudaLaunchAttribute at[2];
    unsigned n = 0;
    if (cuda_pdl) {
        at[n].id = cudaLaunchAttributeProgrammaticStreamSerialization;
        at[n++].val.programmaticStreamSerializationAllowed = 1;
    }
    if (cluster) at[n++] = cuda_cluster_attr(cluster);
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = grid, cfg.blockDim = block, cfg.dynamicSmemBytes = smem, cfg.stream = s;
    cfg.attrs = at, cfg.numAttrs = n;
    (void)cudaLaunchKernelEx(&cfg, kernel, static_cast<P>(args)...);
}
template <typename... P, typename... A>
static inline void cuda_launch(void (*kernel)(P...), dim3 grid, dim3 block, size_t smem, cudaStream_t s,
                               A &&...args) {
    cuda_launch_cl(kernel, grid, block, smem, s, 0u, static_cast<A &&>(args)...);
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

/* The RMSNorm factor 1 / sqrt(mean(x^2) + eps) of the n floats at x (n % 4
 * == 0, x 16-byte aligned), computed by one warp in a fixed order: lane l
 * sums the squares of float4s l, l + 32, ... in one fmaf chain, then
 * warp_sum. Every lane gets the same bits; the order depends on n only. The
 * matvecs use it to apply a layer's input norm themselves (memra_norm):
 * x -> (x * inv) * w, rmsnorm's formula (norm.cu sums in another order). */
__device__ __forceinline__ float warp_inv_rms(const float *__restrict__ x, int64_t n, float eps) {
    const int lane = threadIdx.x & 31;
    const float4 *p = (const float4 *)x;
    float ss = 0.0f;
    for (int64_t i = lane; i < n / 4; i += 32) {
        const float4 v = __ldg(p + i);
        ss = fmaf(v.x, v.x, ss);
        ss = fmaf(v.y, v.y, ss);
        ss = fmaf(v.z, v.z, ss);
        ss = fmaf(v.w, v.w, ss);
    }
    ss = warp_sum(ss);
    return 1.0f / sqrtf(ss / (float)n + eps);
}

/* warp_inv_rms of tokens 0 .. T - 1 (rows `in` floats apart) into ninv:
 * warp w of the block takes tokens w, w + warps, ..., then the block syncs
 * (every thread must call it). The tensor-core matvecs' input norm. */
__device__ __forceinline__ void block_inv_rms(const float *__restrict__ x, int64_t in, int T, float eps, float *ninv) {
    const int lane = threadIdx.x & 31, nw = blockDim.x >> 5;
    for (int t = threadIdx.x >> 5; t < T; t += nw) {
        const float v = warp_inv_rms(x + (int64_t)t * in, in, eps);
        if (lane == 0) ninv[t] = v;
    }
    __syncthreads();
}

/* The activation staging of the tensor-core matvecs (mmv.cuh, mmv6.cuh):
 * a lane's 8 activations u0, u1 of a 256-element super-block into v, with
 * the input norm when nw is set (nw: the super-block's norm weights; inv:
 * the token's warp_inv_rms; rmsnorm's (x * inv) * w), and the warp max of
 * |v| in *mx. */
__device__ __forceinline__ void mv_stage_x8(float4 u0, float4 u1, const float *__restrict__ nw, float inv, int lane,
                                            float *v, float *mx) {
    v[0] = u0.x, v[1] = u0.y, v[2] = u0.z, v[3] = u0.w, v[4] = u1.x, v[5] = u1.y, v[6] = u1.z, v[7] = u1.w;
    if (nw) {
        const float4 *q = (const float4 *)(nw + 8 * lane);
        const float4 w0 = __ldg(q), w1 = __ldg(q + 1);
        const float wv[8] = {w0.x, w0.y, w0.z, w0.w, w1.x, w1.y, w1.z, w1.w};
#pragma unroll
        for (int i = 0; i < 8; i++) v[i] = __fmul_rn(__fmul_rn(v[i], inv), wv[i]);
    }
    float m = 0.0f;
#pragma unroll
    for (int i = 0; i < 8; i++) m = fmaxf(m, fabsf(v[i]));
    *mx = warp_max(m);
}

/* The exponent es of the power-of-two scale 2^es of an fp16 hi + lo split:
 * for the max mx in [2^(e-1), 2^e), max|x 2^es| lands in [2^14, 2^15)
 * (es = 15 for mx = 0), clamped to fp32's normal range. */
__device__ __forceinline__ int mv_split_exp(float mx) {
    const int e = mx > 0.0f ? (int)((__float_as_uint(mx) >> 23) & 255u) - 126 : 0;
    const int es = 15 - e;
    return es > 126 ? 126 : es < -126 ? -126 : es;
}

__device__ __forceinline__ float silu_f(float x) { return x / (1.0f + expf(-x)); }
__device__ __forceinline__ float sigmoid_f(float x) { return 1.0f / (1.0f + expf(-x)); }
__device__ __forceinline__ float softplus_f(float x) { return x > 20.0f ? x : log1pf(expf(x)); }

#endif
