/* Shared pieces of the kernel labs (matvec_lab.cu, mmv_lab.cu) and of
 * dequant_check.cu: a seeded random stream, valid random quant blocks, CUDA
 * error checks, the L2-flushed median timer and the device-to-device copy
 * rate that every lab % is taken against. Define LAB_SEED before including
 * to change the stream. */
#ifndef MEMRA_BENCH_LAB_CUH
#define MEMRA_BENCH_LAB_CUH

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cuda/quant.cuh"

#ifndef LAB_SEED
#define LAB_SEED 0x5EED1234ull

/* The backend's PDL switch (common.cuh; set by memra_backend_cuda_init,
 * which the labs do not call): labs time single launches without PDL. */
int cuda_pdl = 0;
/* The backend's sm_90 flag (common.cuh; memra_backend_cuda_init sets it): lab_init asks the device. */
int cuda_sm90 = 0;
#endif

static uint64_t lab_rs = LAB_SEED;

/* splitmix64 */
static inline uint64_t rnd(void) {
    uint64_t z = (lab_rs += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
static inline float rf(float lo, float hi) {
    return lo + (hi - lo) * (float)((rnd() >> 11) * (1.0 / 9007199254740992.0));
}
/* a random fp16 in [lo, hi) at p (little endian) */
static inline void put_h(uint8_t *p, float lo, float hi) {
    uint16_t h = memra_fp32_to_fp16(rf(lo, hi));
    p[0] = (uint8_t)h, p[1] = (uint8_t)(h >> 8);
}

/* Random bytes, then valid (finite, modest) scale fields per block of the
 * types the labs run. */
static inline void fill_blocks(uint32_t type, uint8_t *w, size_t bytes) {
    for (size_t i = 0; i + 8 <= bytes; i += 8) {
        uint64_t r = rnd();
        memcpy(w + i, &r, 8);
    }
    const memra_type_info *ti = memra_type_get(type);
    size_t bb = ti->block_bytes;
    for (size_t i = 0; i < bytes / bb; i++) {
        uint8_t *b = w + i * bb;
        switch (type) {
        case MEMRA_TYPE_F16: put_h(b, -1, 1); break;
        case MEMRA_TYPE_BF16: { uint16_t h = memra_fp32_to_bf16(rf(-1, 1)); memcpy(b, &h, 2); } break;
        case MEMRA_TYPE_Q4_K: case MEMRA_TYPE_Q5_K: put_h(b, -0.01f, 0.01f); put_h(b + 2, -0.01f, 0.01f); break;
        case MEMRA_TYPE_Q6_K: put_h(b + 208, -0.01f, 0.01f); break;
        case MEMRA_TYPE_MXFP4: b[0] = (uint8_t)(100 + rnd() % 50); break;
        case MEMRA_TYPE_NVFP4: break;
        default: put_h(b, -0.1f, 0.1f); break;
        }
    }
}

#define CK(call)                                                                                   \
    do {                                                                                           \
        cudaError_t e_ = (call);                                                                   \
        if (e_ != cudaSuccess) {                                                                   \
            fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_)); \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

/* n floats from the device into h */
static inline void lab_get(float *h, const float *d, size_t n) {
    CK(cudaMemcpy(h, d, n * sizeof(float), cudaMemcpyDeviceToHost));
}

/* max |got - ref| / mref over n rows; a NaN anywhere makes it NaN (so it fails every <= bar) */
static inline double lab_err(const float *got, const float *ref, int64_t n, double mref) {
    double e = 0;
    for (int64_t o = 0; o < n; o++) {
        const double d = fabs((double)got[o] - ref[o]);
        if (!(d <= e)) e = d;
    }
    return e / mref;
}

/* a device copy of `bytes` host bytes (64 more allocated: the decoders may read a little past a row) */
template <class TP>
static inline TP *lab_dev(const TP *h, size_t bytes) {
    void *d;
    CK(cudaMalloc(&d, bytes + 64));
    CK(cudaMemcpy(d, h, bytes, cudaMemcpyHostToDevice));
    return (TP *)d;
}

/* A matvec lab's problem: n_out random rows of `type` with `in` elements
 * (fill_blocks), T rows of activations in [-1, 1] (every outlier-th element
 * times 40 when outlier > 0), the CPU reference of token 0 for every row
 * (memra_dot_row) with its largest magnitude, and device copies of the
 * weights and activations. lab_mv_free releases all of it. */
typedef struct lab_mv {
    size_t rb, wb; /* row bytes, weight bytes */
    uint8_t *hw, *dw;
    float *hx, *dx, *ref;
    double mref;
} lab_mv;

static inline lab_mv lab_mv_make(uint32_t type, int64_t in, int64_t n_out, int T, int64_t outlier) {
    lab_mv m;
    m.rb = memra_type_row_bytes(type, in), m.wb = m.rb * (size_t)n_out;
    m.hw = (uint8_t *)malloc(m.wb);
    fill_blocks(type, m.hw, m.wb);
    m.hx = (float *)malloc(sizeof(float) * T * in);
    for (int64_t i = 0; i < T * in; i++) m.hx[i] = rf(-1, 1) * (outlier > 0 && i % outlier == 0 ? 40.0f : 1.0f);
    m.ref = (float *)malloc(sizeof(float) * n_out);
    m.mref = 0;
    for (int64_t o = 0; o < n_out; o++) {
        m.ref[o] = memra_dot_row(type, m.hw + o * m.rb, m.hx, in);
        m.mref = fmax(m.mref, fabs(m.ref[o]));
    }
    m.dw = lab_dev(m.hw, m.wb);
    m.dx = lab_dev(m.hx, sizeof(float) * T * in);
    return m;
}

/* The CPU reference of the layer's input norm, then the rows, for token 0
 * of m: refn[o] = row o . ((x / rms(x)) * nw) (rmsnorm's formula, the sum of
 * squares in double); returns max |refn|. */
static inline double lab_norm_ref(const lab_mv *m, uint32_t type, int64_t in, int64_t n_out, const float *nw,
                                  float eps, float *refn) {
    double ss = 0;
    for (int64_t i = 0; i < in; i++) ss += (double)m->hx[i] * m->hx[i];
    const float inv = 1.0f / sqrtf((float)(ss / (double)in) + eps);
    float *xn = (float *)malloc(sizeof(float) * in);
    for (int64_t i = 0; i < in; i++) xn[i] = (m->hx[i] * inv) * nw[i];
    double mref = 0;
    for (int64_t o = 0; o < n_out; o++) {
        refn[o] = memra_dot_row(type, m->hw + o * m->rb, xn, in);
        mref = fmax(mref, fabs(refn[o]));
    }
    free(xn);
    return mref;
}

/* The tile-major copy of a matrix of n_out rows (a multiple of 16) and
 * super-blocks of bb bytes (common.cuh's layout: row 16 tau + i's
 * super-block sb at ((tau nsb + sb) 16 + i) bb); free() it. */
static inline uint8_t *lab_tm_repack(const uint8_t *w, int64_t n_out, int nsb, size_t bb) {
    const size_t rb = (size_t)nsb * bb;
    uint8_t *o = (uint8_t *)malloc(rb * (size_t)n_out);
    for (int64_t r = 0; r < n_out; r++)
        for (int sb = 0; sb < nsb; sb++)
            memcpy(o + (((size_t)(r / 16) * nsb + sb) * 16 + (size_t)(r % 16)) * bb,
                   w + (size_t)r * rb + (size_t)sb * bb, bb);
    return o;
}

static inline void lab_mv_free(lab_mv *m) {
    free(m->hw), free(m->hx), free(m->ref);
    cudaFree(m->dw), cudaFree(m->dx);
}

static void *lab_flush_buf; /* lab_init */
static const size_t lab_flush_bytes = 256u << 20;

static inline int lab_cmp_f(const void *a, const void *b) {
    float x = *(const float *)a, y = *(const float *)b;
    return x < y ? -1 : x > y;
}

/* Median microseconds of REPS runs of launch() on stream 0, each after a
 * 256 MiB memset that flushes L2 (FLUSH; chain_lab's persistent kernels time
 * 7 runs without it); one launch each, so launch latency is included. */
template <int REPS = 15, bool FLUSH = true, class F>
static double lab_time_us(F launch) {
    enum { reps = REPS };
    float ms[reps];
    cudaEvent_t a, b;
    CK(cudaEventCreate(&a));
    CK(cudaEventCreate(&b));
    for (int i = 0; i < reps; i++) {
        if (FLUSH) CK(cudaMemsetAsync(lab_flush_buf, i, lab_flush_bytes, 0));
        CK(cudaEventRecord(a, 0));
        launch();
        CK(cudaEventRecord(b, 0));
        CK(cudaEventSynchronize(b));
        CK(cudaEventElapsedTime(&ms[i], a, b));
    }
    CK(cudaGetLastError());
    qsort(ms, reps, sizeof ms[0], lab_cmp_f);
    cudaEventDestroy(a), cudaEventDestroy(b);
    return ms[reps / 2] * 1e3;
}

/* Microseconds per launch of `n` launches back to back on stream 0, launch(i)
 * using weight copy i % copies: what a decode step sees (cold L2 when the
 * copies together exceed it, no host gap, launch overheads overlapped as the
 * stream allows). Median of 5 such runs after one warm-up run. */
template <class F>
static double lab_stream_us(F launch, int n, int copies) {
    enum { reps = 6 };
    float ms[reps];
    cudaEvent_t a, b;
    CK(cudaEventCreate(&a));
    CK(cudaEventCreate(&b));
    for (int r = 0; r < reps; r++) {
        CK(cudaEventRecord(a, 0));
        for (int i = 0; i < n; i++) launch(i % copies);
        CK(cudaEventRecord(b, 0));
        CK(cudaEventSynchronize(b));
        CK(cudaEventElapsedTime(&ms[r], a, b));
    }
    CK(cudaGetLastError());
    qsort(ms + 1, reps - 1, sizeof ms[0], lab_cmp_f);
    cudaEventDestroy(a), cudaEventDestroy(b);
    return ms[1 + (reps - 1) / 2] * 1e3 / n;
}

/* Microseconds per launch of n launches captured into one CUDA graph on a
 * stream of their own (as the decode step is replayed): launch(i, s)
 * launches on s with weight copy i % copies. Median of 5 replays after a
 * warm-up. */
template <class F>
static double lab_graph_us(F launch, int n, int copies) {
    cudaStream_t s;
    CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    cudaGraph_t g;
    cudaGraphExec_t ge;
    CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
    for (int i = 0; i < n; i++) launch(i % copies, s);
    CK(cudaStreamEndCapture(s, &g));
    CK(cudaGraphInstantiate(&ge, g, 0));
    float ms[6];
    cudaEvent_t a, b;
    CK(cudaEventCreate(&a));
    CK(cudaEventCreate(&b));
    for (int r = 0; r < 6; r++) {
        CK(cudaEventRecord(a, s));
        CK(cudaGraphLaunch(ge, s));
        CK(cudaEventRecord(b, s));
        CK(cudaEventSynchronize(b));
        CK(cudaEventElapsedTime(&ms[r], a, b));
    }
    CK(cudaGetLastError());
    qsort(ms + 1, 5, sizeof ms[0], lab_cmp_f);
    cudaEventDestroy(a), cudaEventDestroy(b);
    cudaGraphExecDestroy(ge), cudaGraphDestroy(g), cudaStreamDestroy(s);
    return ms[3] * 1e3 / n;
}

/* kernel<<<grid, block, smem, s>>>(args...), with programmatic stream
 * serialization when pdl (the backend's cuda_launch with cuda_pdl) */
template <typename... P, typename... A>
static inline void lab_launch(void (*kernel)(P...), dim3 grid, dim3 block, size_t smem, cudaStream_t s, bool pdl,
                              A &&...args) {
    const int keep = cuda_pdl;
    cuda_pdl = pdl;
    cuda_launch(kernel, grid, block, smem, s, static_cast<A &&>(args)...);
    cuda_pdl = keep;
    CK(cudaGetLastError());
}

/* Enough device copies of `bytes` at d0 (d0 itself first) that the copies
 * together are over 160 MiB (H200 L2: 50 MiB); returns their count. */
static inline int lab_copies(const uint8_t *d0, size_t bytes, const uint8_t **out, int max) {
    int k = (int)((160u << 20) / bytes) + 2;
    k = k > max ? max : k;
    out[0] = d0;
    for (int i = 1; i < k; i++) {
        void *d;
        CK(cudaMalloc(&d, bytes + 64));
        CK(cudaMemcpy(d, d0, bytes, cudaMemcpyDeviceToDevice));
        out[i] = (const uint8_t *)d;
    }
    return k;
}

/* Device-to-device copy rate of 1 GiB, read + write counted, best of 5 after
 * a warm-up: the ceiling the lab percentages refer to. */
static inline double lab_copy_gbs(void) {
    size_t n = 1u << 30;
    void *s, *d;
    CK(cudaMalloc(&s, n));
    CK(cudaMalloc(&d, n));
    CK(cudaMemset(s, 1, n));
    float best = 1e30f;
    cudaEvent_t a, b;
    CK(cudaEventCreate(&a));
    CK(cudaEventCreate(&b));
    for (int i = 0; i < 6; i++) {
        float ms;
        CK(cudaEventRecord(a, 0));
        CK(cudaMemcpyAsync(d, s, n, cudaMemcpyDeviceToDevice, 0));
        CK(cudaEventRecord(b, 0));
        CK(cudaEventSynchronize(b));
        CK(cudaEventElapsedTime(&ms, a, b));
        if (i && ms < best) best = ms;
    }
    cudaFree(s), cudaFree(d);
    return 2.0 * n / (best * 1e-3) / 1e9;
}

/* Allocates the L2 flush buffer; returns the copy rate. */
static inline double lab_init(void) {
    int major = 0;
    CK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0));
    cuda_sm90 = major >= 9;
    CK(cudaMalloc(&lab_flush_buf, lab_flush_bytes));
    return lab_copy_gbs();
}

#endif
