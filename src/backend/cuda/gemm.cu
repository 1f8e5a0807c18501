/* gemm: the prefill matmul (T >= 16 tokens) on the tensor cores,
 * y[t][o] (+)= sum_i W[o][i] x[t][i], reading the weights in their GGUF
 * encoding. Called by cuda_op_matmul (matmul.cu), which has checked the
 * shapes, the type and the alignment.
 *
 * Arithmetic ("3xFP16"): fp16 MMA (mma.sync m16n8k16, fp32 accumulation) on
 * operands split into an fp16 high part and an fp16 low part (v - hi): the
 * activations, and the weights as dq8 decodes them (fp32). The products
 * w_lo x_hi + w_hi x_lo + w_hi x_hi (small terms first; w_lo x_lo is below
 * the rest) keep about 2 x 11 mantissa bits of each operand, fewer where a low
 * part falls into fp16's subnormal range (below 6.1e-5). F16 and BF16 weights
 * have no low part (g_w_parts). Each token's activations are first scaled
 * by a power of two s_t (k_tc_scale: max|x_t s_t| in [2^14, 2^15)), so that
 * no activation overflows fp16 (real models have activations in the tens
 * of thousands) and small ones keep their low parts out of the subnormals;
 * the epilogue multiplies by 1 / s_t. Both scalings are exact, and s_t
 * depends only on the token's own row. Worst single-matmul error 1.1e-4 of max|ref| (gate kernels, 27b,
 * in 17408); fixture logits within 7.5e-6 (H200, 2026-12-02). With plain fp16
 * operands (one MMA) the fixture prefill logits moved by 2.4e-2 and, through
 * the cached state, the teacher-forced decode logits by up to 6.8e-3 (decode
 * bar 1e-3); splitting only the activations (two MMAs) still left tiny-moe
 * Q8_0 decode at 4.2e-3.
 *
 * Tiles: 128 tokens x 128 weight rows per block, 64 columns (two dq groups)
 * per step, double-buffered in shared memory: each thread loads step k + 1
 * (weights decoded by dq8, activations as float4) into registers before the
 * warps multiply step k, and writes them, split into fp16 parts, into the
 * other buffer afterwards. Fragments come from shared memory with ldmatrix.
 * Measured on the H200 at T = 512, {5120, 17408}: 57 TFLOP/s (Q8_0) .. 72
 * (F16) of useful work, i.e. ~170 of raw MMA: far from the tensor cores'
 * rate; staging (dequantization and the fp16 split in registers, 200+
 * registers a thread, one block per SM) is the bottleneck, not the MMAs.
 *
 * A token's result depends only on its own activations and the row length:
 * every output element is the same chain of MMAs over k = 0, 16, 32, ...
 * whatever the token's position in the tile or the batch size. */
#include <cuda_fp16.h>

#include "backend/cuda/matvec.cuh"
#include "backend/cuda/ops.cuh"

#define GM 128 /* tokens per block (MMA M) */
#define GN 128 /* weight rows per block (MMA N) */
#define GK 64  /* columns per step: two dq groups */
#define GLD 72 /* shared row stride in halves: 144 bytes, so ldmatrix's 8 rows hit 8 distinct 16-byte bank groups */

/* Weight matrices of at most this many rows do not take the 128 x 128 tiles, which would make a grid of a
 * few blocks (the GDN ssm_alpha / ssm_beta projections have 32 or 48 rows, the MoE routers 256 or 512: the
 * 35B-A3B router took 8 blocks and ~150 us per layer at T = 512). F32 ones of more than G_MV_MAX_ROWS_F32 rows
 * (the routers) take k_sgemm_f32, the others the matvec kernel (matvec.cuh: the decode matvec's bits; it
 * took ~130 us for the 35B-A3B router and shared-expert gate at T = 512). The choice depends on the shape
 * alone, so a token's result still does not depend on T. */
#define G_MV_MAX_ROWS 512
#define G_MV_MAX_ROWS_F32 64

/* the element count of one shared stage: 2 activation tiles (hi, lo), NW weight tiles */
#define G_STAGE(NW) ((2 * GM + (NW) * GN) * GLD)

__device__ __forceinline__ void g_ldsm4(uint32_t r[4], const __half *p) {
    uint32_t a = (uint32_t)__cvta_generic_to_shared(p);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(a));
}

__device__ __forceinline__ void g_mma(float c[4], const uint32_t a[4], const uint32_t b[2]) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%0,%1,%2,%3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

/* (a, b) -> their fp16 high parts, packed; *lo gets the fp16 rounding of the remainders */
__device__ __forceinline__ uint32_t g_pack_hi(float a, float b, uint32_t *lo) {
    __half2 h = __floats2half2_rn(a, b);
    float2 f = __half22float2(h);
    __half2 l = __floats2half2_rn(a - f.x, b - f.y);
    *lo = *(uint32_t *)&l;
    return *(uint32_t *)&h;
}

/* max |v| over the float4s i0, i0 + step, ... below n4 of a row */
__device__ __forceinline__ float g_absmax4(const float4 *__restrict__ p, int64_t n4, int i0, int step) {
    float m = 0.0f;
    for (int64_t i = i0; i < n4; i += step) {
        const float4 v = __ldg(p + i);
        m = fmaxf(m, fmaxf(fmaxf(fabsf(v.x), fabsf(v.y)), fmaxf(fabsf(v.z), fabsf(v.w))));
    }
    return m;
}

/* A token's activation scale s_t from its row's max|x| m: a power of two
 * with m s_t in [2^14, 2^15), 1 for an all-zero row, the exponent clamped to
 * the normal range (mv_split_exp). */
__device__ __forceinline__ float g_tok_scale(float m) {
    return __uint_as_float((uint32_t)((m > 0.0f ? mv_split_exp(m) : 0) + 127) << 23);
}

/* s_t for each token row of x (k_gemm's activation scale, g_tok_scale). One
 * warp per token; the max is order-free. */
__global__ void __launch_bounds__(256) k_tc_scale(const float *__restrict__ x, int64_t in, int64_t T,
                                                  float *__restrict__ scale) {
    pdl_start();
    const int64_t t = (int64_t)blockIdx.x * 8 + (threadIdx.x >> 5);
    if (t >= T) return;
    const int lane = threadIdx.x & 31;
    const float m = warp_max(g_absmax4((const float4 *)(x + t * in), in / 4, lane, 32));
    if (lane == 0) scale[t] = g_tok_scale(m);
}

/* The epilogue of k_gemm and k_gemm_q8: a warp's 64 tokens (from tb) x 32
 * rows (from ob) to y, times 1 / s_t. Accumulator (mi, ni): c0 c1 token g,
 * rows 2 (lane % 4) + 0, 1; c2 c3 token g + 8. */
__device__ __forceinline__ void g_store(const float (&acc)[4][4][4], int64_t tb, int64_t ob, int lane,
                                        const float *__restrict__ xscale, float *__restrict__ y, int64_t T,
                                        int64_t n_out, int accumulate) {
    const bool pair = (n_out & 1) == 0;
#pragma unroll
    for (int mi = 0; mi < 4; mi++)
#pragma unroll
        for (int h = 0; h < 2; h++) {
            int64_t t = tb + 16 * mi + (lane >> 2) + 8 * h;
            if (t >= T) continue;
            const float inv = 1.0f / xscale[t]; /* exact: a power of two */
#pragma unroll
            for (int ni = 0; ni < 4; ni++) {
                int64_t o = ob + 8 * ni + 2 * (lane & 3);
                float c0 = acc[mi][ni][2 * h] * inv, c1 = acc[mi][ni][2 * h + 1] * inv;
                float *yp = y + t * n_out + o;
                if (pair && o < n_out) {
                    if (accumulate) {
                        float2 old = *(float2 *)yp;
                        c0 += old.x, c1 += old.y;
                    }
                    *(float2 *)yp = make_float2(c0, c1);
                } else {
                    if (o < n_out) yp[0] = accumulate ? yp[0] + c0 : c0;
                    if (o + 1 < n_out) yp[1] = accumulate ? yp[1] + c1 : c1;
                }
            }
        }
}

/* The warp layout of k_gemm and k_gemm_q8: warp w owns tokens wm = 64 (w / 4)
 * .. + 64 x rows wn = 32 (w % 4) .. + 32, 4 x 4 MMA tiles; a_off / b_off are
 * this lane's ldmatrix row offsets in a stage: A (tokens) 16 x 16 tiles as
 * (rows 0-7 | 8-15) x (k 0-7 | 8-15), B (weight rows) two n8 tiles x k16. */
struct g_warp {
    int wm, wn, a_off, b_off;
    __device__ g_warp(int w, int lane)
        : wm((w >> 2) * 64), wn((w & 3) * 32), a_off((wm + (lane & 15)) * GLD + (lane >> 4) * 8),
          b_off((wn + (lane & 7) + ((lane >> 4) << 3)) * GLD + ((lane >> 3) & 1) * 8) {}
};

__device__ __forceinline__ void g_zero(float (&acc)[4][4][4]) {
#pragma unroll
    for (int i = 0; i < 4; i++)
#pragma unroll
        for (int j = 0; j < 4; j++)
#pragma unroll
            for (int k = 0; k < 4; k++) acc[i][j][k] = 0.0f;
}

/* Launch contract: grid (ceil(T / 128), ceil(n_out / 128)), block 256 (8
 * warps), 2 * G_STAGE(NW) * 2 bytes of dynamic shared memory. Staging, per
 * step of 64 columns (groups g0, g0 + 1): thread i decodes quarter i % 4 of
 * both groups of weight rows i / 4 and i / 4 + 64, and loads float4 i % 8 of
 * both groups of tokens i / 8 + 32 j (j < 4). Rows, tokens and a second
 * group past the end read valid memory (row 0, token 0, group g0) and are
 * zeroed by selects, so the loop body has no branches and the compiler may
 * overlap the next step's loads with this step's MMAs. Warp w owns tokens
 * 64 (w / 4) .. + 64 x rows 32 (w % 4) .. + 32: 4 x 4 MMA tiles. */
template <int TYPE, int NW>
__global__ void __launch_bounds__(256, 1)
    k_gemm(const uint8_t *__restrict__ W, size_t row_bytes, int64_t in, int64_t n_out, const float *__restrict__ x,
           const float *__restrict__ xscale, float *__restrict__ y, int64_t T, int accumulate) {
    extern __shared__ __align__(16) __half g_sm[];
    pdl_start();
    const int tid = threadIdx.x, lane = tid & 31, w = tid >> 5;
    const int64_t t0 = (int64_t)blockIdx.x * GM, r0 = (int64_t)blockIdx.y * GN;

    /* staging sources */
    const int wr = tid >> 2, q = tid & 3, xc = tid & 7, xt = tid >> 3;
    bool wok[2], xok[4];
    const uint8_t *wrow[2];
    const float *xrow[4];
#pragma unroll
    for (int r = 0; r < 2; r++) {
        wok[r] = r0 + wr + 64 * r < n_out;
        wrow[r] = W + (wok[r] ? r0 + wr + 64 * r : 0) * row_bytes;
    }
    float xs[4]; /* the staged tokens' scales s_t */
#pragma unroll
    for (int j = 0; j < 4; j++) {
        xok[j] = t0 + xt + 32 * j < T;
        xrow[j] = x + (xok[j] ? t0 + xt + 32 * j : 0) * in + 4 * xc;
        xs[j] = xscale[xok[j] ? t0 + xt + 32 * j : 0];
    }
    float wv[2][2][8];
    float4 xv[4][2];
    auto load = [&](int64_t k0) {
        const bool g1ok = k0 + 32 < in;
        const int64_t g0 = k0 / 32, g1 = g1ok ? g0 + 1 : g0;
#pragma unroll
        for (int r = 0; r < 2; r++) {
            dq8<TYPE>(wrow[r], g0, q, wv[r][0]);
            dq8<TYPE>(wrow[r], g1, q, wv[r][1]);
#pragma unroll
            for (int i = 0; i < 8; i++) {
                wv[r][0][i] = wok[r] ? wv[r][0][i] : 0.0f;
                wv[r][1][i] = wok[r] && g1ok ? wv[r][1][i] : 0.0f;
            }
        }
        const float4 z = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
#pragma unroll
        for (int j = 0; j < 4; j++) {
            float4 a = __ldg((const float4 *)(xrow[j] + 32 * g0)), b = __ldg((const float4 *)(xrow[j] + 32 * g1));
            a.x *= xs[j], a.y *= xs[j], a.z *= xs[j], a.w *= xs[j]; /* exact: powers of two */
            b.x *= xs[j], b.y *= xs[j], b.z *= xs[j], b.w *= xs[j];
            xv[j][0] = xok[j] ? a : z;
            xv[j][1] = xok[j] && g1ok ? b : z;
        }
    };
    auto store = [&](__half *st) {
        __half *xs = st, *ws = st + 2 * GM * GLD;
#pragma unroll
        for (int j = 0; j < 4; j++)
#pragma unroll
            for (int h = 0; h < 2; h++) {
                uint32_t l0, l1;
                uint2 hi = make_uint2(g_pack_hi(xv[j][h].x, xv[j][h].y, &l0), g_pack_hi(xv[j][h].z, xv[j][h].w, &l1));
                int off = (xt + 32 * j) * GLD + 32 * h + 4 * xc;
                *(uint2 *)(xs + off) = hi;
                *(uint2 *)(xs + GM * GLD + off) = make_uint2(l0, l1);
            }
#pragma unroll
        for (int r = 0; r < 2; r++)
#pragma unroll
            for (int h = 0; h < 2; h++) {
                uint32_t hi[4], lo[4];
#pragma unroll
                for (int i = 0; i < 4; i++) hi[i] = g_pack_hi(wv[r][h][2 * i], wv[r][h][2 * i + 1], &lo[i]);
                int off = (wr + 64 * r) * GLD + 32 * h + 8 * q;
                *(uint4 *)(ws + off) = make_uint4(hi[0], hi[1], hi[2], hi[3]);
                if (NW == 2) *(uint4 *)(ws + GN * GLD + off) = make_uint4(lo[0], lo[1], lo[2], lo[3]);
            }
    };

    float acc[4][4][4];
    g_zero(acc);
    const g_warp L(w, lane);
    const int wm = L.wm, wn = L.wn, a_off = L.a_off, b_off = L.b_off;

    const int64_t nk = (in + GK - 1) / GK;
    load(0);
    store(g_sm);
    __syncthreads();
    for (int64_t kt = 0; kt < nk; kt++) {
        const __half *cur = g_sm + (kt & 1) * G_STAGE(NW);
        /* the next step's operands (the last step reloads its own: harmless, and keeps the body branch-free) */
        load((kt + 1 < nk ? kt + 1 : kt) * GK);
#pragma unroll
        for (int ks = 0; ks < GK; ks += 16) {
            uint32_t a[2][4][4], b[NW][4][2];
#pragma unroll
            for (int p = 0; p < 2; p++)
#pragma unroll
                for (int mi = 0; mi < 4; mi++) g_ldsm4(a[p][mi], cur + p * GM * GLD + a_off + mi * 16 * GLD + ks);
#pragma unroll
            for (int p = 0; p < NW; p++)
#pragma unroll
                for (int nj = 0; nj < 2; nj++) {
                    uint32_t r[4];
                    g_ldsm4(r, cur + 2 * GM * GLD + p * GN * GLD + b_off + nj * 16 * GLD + ks);
                    b[p][2 * nj][0] = r[0], b[p][2 * nj][1] = r[1];
                    b[p][2 * nj + 1][0] = r[2], b[p][2 * nj + 1][1] = r[3];
                }
            /* small terms first: w_lo x_hi, w_hi x_lo, then w_hi x_hi */
#pragma unroll
            for (int mi = 0; mi < 4; mi++)
#pragma unroll
                for (int ni = 0; ni < 4; ni++) {
                    if (NW == 2) g_mma(acc[mi][ni], a[0][mi], b[NW - 1][ni]);
                    g_mma(acc[mi][ni], a[1][mi], b[0][ni]);
                    g_mma(acc[mi][ni], a[0][mi], b[0][ni]);
                }
        }
        /* the other buffer was last read before the previous barrier; after the last step nobody reads it */
        store(g_sm + ((kt + 1) & 1) * G_STAGE(NW));
        __syncthreads();
    }

    g_store(acc, t0 + wm, r0 + wn, lane, xscale, y, T, n_out, accumulate);
}

/* ---- Q8_0: exact weights ----
 *
 * A Q8_0 weight is d q with q an int8, and q is exact in fp16: the weights
 * need no low part. Per 32-column group the MMAs start from zero, so C =
 * sum q x over the group (x split into hi + lo as above: 4 MMAs per 16 x 8
 * tile and group, small terms first: lo k 0-15, lo k 16-31, hi k 0-15, hi
 * k 16-31), and the group's scale is applied in fp32: acc = fma(C, d, acc).
 * Two MMAs per product instead of three, and no dequantization or weight
 * split in the staging: a thread turns its group's 32 int8 into fp16 with
 * one byte permute and one exact HSUB2 per pair. The activations are scaled
 * and split once per token by k_gemm_xsplit (k_gemm does it in every block,
 * n_out / 128 times over) and copied into shared memory with cp.async.
 *
 * Bits: a token's result depends only on its own activations and the row
 * length, as in k_gemm (the same MMA chain per output element whatever the
 * tile or T). They differ from k_gemm's (more exact: no weight rounding) and
 * from the T < 16 matvec's, the known gap of matmul.cu.
 *
 * Needs in % 64 == 0: then every row starts 4-byte aligned (34 in / 32
 * bytes) and a 64-column step never ends inside a row. Other row lengths take
 * k_gemm. MEMRA_GEMM_Q8=0 in the environment sends Q8_0 to k_gemm too. */

#define GQ_STAGE_HALVES (3 * GM * GLD)                                     /* x hi, x lo (GM rows), weights (GN rows) */
#define GQ_STAGE_BYTES (GQ_STAGE_HALVES * 2 + 2 * GN * (int)sizeof(float)) /* + the group scales */

/* xp rows for k_gemm_q8: the hi parts of x_t s_t at xp + t in, the lo parts
 * at xp + (T + t) in, s_t (k_tc_scale's) at scale[t]. Block per token. */
__global__ void __launch_bounds__(256) k_gemm_xsplit(const float *__restrict__ x, int64_t in, int64_t T,
                                                     float *__restrict__ scale, __half *__restrict__ xp) {
    __shared__ float red[8];
    pdl_start();
    const int64_t t = blockIdx.x;
    const float4 *p = (const float4 *)(x + t * in);
    float m = warp_max(g_absmax4(p, in / 4, threadIdx.x, 256));
    if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = m;
    __syncthreads();
    m = red[0];
#pragma unroll
    for (int i = 1; i < 8; i++) m = fmaxf(m, red[i]); /* a max: any order gives k_tc_scale's value */
    const float s = g_tok_scale(m);
    if (threadIdx.x == 0) scale[t] = s;
    uint2 *hp = (uint2 *)(xp + t * in), *lp = (uint2 *)(xp + (T + t) * in);
    for (int64_t i = threadIdx.x; i < in / 4; i += 256) {
        const float4 v = __ldg(p + i);
        uint32_t l0, l1;
        hp[i] = make_uint2(g_pack_hi(v.x * s, v.y * s, &l0), g_pack_hi(v.z * s, v.w * s, &l1));
        lp[i] = make_uint2(l0, l1);
    }
}

/* c = a b, from a zero accumulator */
__device__ __forceinline__ void g_mma0(float c[4], const uint32_t a[4], const uint32_t b[2]) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%10,%10,%10,%10};\n"
                 : "=f"(c[0]), "=f"(c[1]), "=f"(c[2]), "=f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "f"(0.0f));
}

/* 4 int8 (a word) -> 2 words of 2 exact fp16: 0x64 above each biased byte
 * is 1024 + q + 128, minus 1152 */
__device__ __forceinline__ void g_q8_to_h2(uint32_t w, uint32_t *h01, uint32_t *h23) {
    const uint32_t u = w ^ 0x80808080u;
    const __half2 bias = __half2half2(__ushort_as_half(0x6480)); /* 1152 */
    uint32_t a = __byte_perm(u, 0x64646464u, 0x4140), b = __byte_perm(u, 0x64646464u, 0x4342);
    __half2 ha = __hsub2(*(__half2 *)&a, bias), hb = __hsub2(*(__half2 *)&b, bias);
    *h01 = *(uint32_t *)&ha, *h23 = *(uint32_t *)&hb;
}

/* k_gemm_q8's pieces, shared with bench/kernels/gemm_lab.cu: the B (weight)
 * fragments of group g for NI n8 tiles from b_off, their group scales, and
 * one 16 x 8 tile's group (4 MMAs from zero, then acc = fma(C, d, acc)). */
template <int NI>
__device__ __forceinline__ void g_q8_b(uint32_t (&b)[2][NI][2], const __half *cur, int b_off, int g) {
#pragma unroll
    for (int k = 0; k < 2; k++)
#pragma unroll
        for (int nj = 0; nj < NI / 2; nj++) {
            uint32_t r[4];
            g_ldsm4(r, cur + 2 * GM * GLD + b_off + nj * 16 * GLD + 32 * g + 16 * k);
            b[k][2 * nj][0] = r[0], b[k][2 * nj][1] = r[1];
            b[k][2 * nj + 1][0] = r[2], b[k][2 * nj + 1][1] = r[3];
        }
}

template <int NI>
__device__ __forceinline__ void g_q8_dv(float (&dv)[NI][2], const float *ds, int wn, int lane, int g) {
#pragma unroll
    for (int ni = 0; ni < NI; ni++)
#pragma unroll
        for (int e = 0; e < 2; e++) dv[ni][e] = ds[2 * (wn + 8 * ni + 2 * (lane & 3) + e) + g];
}

/* a[part][k16]: part 0 = x hi, 1 = x lo; b[k16]; small terms first */
__device__ __forceinline__ void g_q8_tile(float (&acc)[4], const uint32_t (&a)[2][2][4], const uint32_t (&b0)[2],
                                          const uint32_t (&b1)[2], const float (&dv)[2]) {
    float c[4];
    g_mma0(c, a[1][0], b0);
    g_mma(c, a[1][1], b1);
    g_mma(c, a[0][0], b0);
    g_mma(c, a[0][1], b1);
#pragma unroll
    for (int e = 0; e < 4; e++) acc[e] = fmaf(c[e], dv[e & 1], acc[e]);
}

/* Launch contract: grid (ceil(T / 128), ceil(n_out / 128)), block 256, 2 *
 * GQ_STAGE_BYTES of dynamic shared memory; in % 64 == 0; xp and xscale from
 * k_gemm_xsplit. Staging per step of 64 columns: thread i converts group
 * i % 2 of weight row i / 2 (the pair loads the row's 68 bytes as 17 aligned
 * words, sharing word 8) and copies 8 16-byte chunks of the x tiles
 * (part j / 4, token i / 8 + 32 (j % 4), columns 8 (i % 8)). Tokens and rows
 * past the end read token T - 1 / row 0; the rows are zeroed. Warps: as
 * k_gemm. */
__global__ void __launch_bounds__(256, 1)
    k_gemm_q8(const uint8_t *__restrict__ W, size_t row_bytes, int64_t in, int64_t n_out,
              const __half *__restrict__ xp, const float *__restrict__ xscale, float *__restrict__ y, int64_t T,
              int accumulate) {
    extern __shared__ __align__(16) __half g_sm[];
    pdl_start();
    const int tid = threadIdx.x, lane = tid & 31, w = tid >> 5;
    const int64_t t0 = (int64_t)blockIdx.x * GM, r0 = (int64_t)blockIdx.y * GN;

    const int wr = tid >> 1, wh = tid & 1;
    const bool wok = r0 + wr < n_out;
    const uint32_t *wrow = (const uint32_t *)(W + (wok ? r0 + wr : 0) * row_bytes) + 8 * wh;
    const int xc = tid & 7;
    const __half *xrow[4];
#pragma unroll
    for (int j = 0; j < 4; j++) {
        const int64_t t = t0 + (tid >> 3) + 32 * j;
        xrow[j] = xp + (t < T ? t : T - 1) * in + 8 * xc;
    }
    const int64_t lo_off = T * in;
    auto xcopy = [&](__half *st, int64_t kt) {
#pragma unroll
        for (int j = 0; j < 8; j++)
            mmv_cp16(st + (j >> 2) * GM * GLD + ((tid >> 3) + 32 * (j & 3)) * GLD + 8 * xc,
                     xrow[j & 3] + (j >> 2) * lo_off + 64 * kt);
        mmv_cp_commit();
    };
    uint32_t v[9];
    auto wload = [&](int64_t kt) {
        const uint32_t *p = wrow + 17 * kt;
#pragma unroll
        for (int i = 0; i < 9; i++) v[i] = __ldg(p + i);
    };
    auto wstore = [&](__half *st) {
        __half *ws = st + 2 * GM * GLD + wr * GLD + 32 * wh;
        float *ds = (float *)(st + GQ_STAGE_HALVES);
        const uint32_t sh = wh ? 32 : 16; /* group 0: bytes 2-33 of words 0-8; group 1: words 9-16 (v[1..8]) */
        uint32_t hw[16];
#pragma unroll
        for (int i = 0; i < 8; i++)
            g_q8_to_h2(wok ? __funnelshift_rc(v[i], v[i + 1], sh) : 0u, &hw[2 * i], &hw[2 * i + 1]);
#pragma unroll
        for (int i = 0; i < 4; i++) ((uint4 *)ws)[i] = make_uint4(hw[4 * i], hw[4 * i + 1], hw[4 * i + 2], hw[4 * i + 3]);
        const uint16_t d = (uint16_t)(wh ? v[0] >> 16 : v[0]);
        ds[2 * wr + wh] = wok ? __half2float(__ushort_as_half(d)) : 0.0f;
    };

    float acc[4][4][4];
    g_zero(acc);
    const g_warp L(w, lane);
    const int wm = L.wm, wn = L.wn, a_off = L.a_off, b_off = L.b_off;

    const int64_t nk = in / GK;
    xcopy(g_sm, 0);
    wload(0);
    wstore(g_sm);
    mmv_cp_wait<0>();
    __syncthreads();
    for (int64_t kt = 0; kt < nk; kt++) {
        const __half *cur = g_sm + (kt & 1) * (GQ_STAGE_BYTES / 2);
        __half *nxt = g_sm + ((kt + 1) & 1) * (GQ_STAGE_BYTES / 2);
        const bool more = kt + 1 < nk;
        if (more) xcopy(nxt, kt + 1), wload(kt + 1);
        const float *ds = (const float *)(cur + GQ_STAGE_HALVES);
#pragma unroll
        for (int g = 0; g < 2; g++) {
            uint32_t a[4][2][2][4], b[2][4][2]; /* a[mi][part][k16], b[k16][ni] */
            float dv[4][2];
#pragma unroll
            for (int p = 0; p < 2; p++)
#pragma unroll
                for (int k = 0; k < 2; k++)
#pragma unroll
                    for (int mi = 0; mi < 4; mi++)
                        g_ldsm4(a[mi][p][k], cur + p * GM * GLD + a_off + mi * 16 * GLD + 32 * g + 16 * k);
            g_q8_b<4>(b, cur, b_off, g);
            g_q8_dv<4>(dv, ds, wn, lane, g);
#pragma unroll
            for (int mi = 0; mi < 4; mi++)
#pragma unroll
                for (int ni = 0; ni < 4; ni++) g_q8_tile(acc[mi][ni], a[mi], b[0][ni], b[1][ni], dv[ni]);
        }
        if (more) wstore(nxt);
        mmv_cp_wait<0>();
        __syncthreads();
    }
    g_store(acc, t0 + wm, r0 + wn, lane, xscale, y, T, n_out, accumulate);
}

/* fp16 parts of a decoded weight: F16 weights are their own high part, and so are BF16 weights (8 mantissa
 * bits) except under fp16's normal range (2^-14), where the subnormal rounding error is at most 2^-25
 * absolute; the others get a w_lo term */
template <int TYPE>
constexpr int g_w_parts() {
    return TYPE == MEMRA_TYPE_F16 || TYPE == MEMRA_TYPE_BF16 ? 1 : 2;
}

template <int TYPE, int NW>
static cudaError_t launch_gemm(const uint8_t *W, size_t rb, int64_t in, int64_t n_out, const float *x,
                               const float *xscale, float *y, int64_t T, int accumulate, cudaStream_t s) {
    const int smem = 2 * G_STAGE(NW) * (int)sizeof(__half);
    cudaError_t e = cuda_smem_limit<k_gemm<TYPE, NW>>(smem);
    if (e != cudaSuccess) return e;
    dim3 grid((unsigned)((T + GM - 1) / GM), (unsigned)((n_out + GN - 1) / GN));
    cuda_launch(k_gemm<TYPE, NW>, grid, 256, smem, s, W, rb, in, n_out, x, xscale, y, T, accumulate);
    return cudaSuccess;
}

/* Launch contract: grid (ceil(T / 32), ceil(n_out / 32)), block 256; F32
 * weights, in % 32 == 0. A 32 x 32 tile of y a block; thread i owns tokens
 * 2 (i / 16) + {0, 1} x rows 2 (i % 16) + {0, 1}, each output one fmaf chain
 * over the columns in order (so a token's result depends on its own x and
 * the row length only). Tiles of 32 columns of x and W pass through shared
 * memory transposed (column-major, row stride 34). */
__global__ void __launch_bounds__(256) k_sgemm_f32(const float *__restrict__ W, int64_t in, int64_t n_out,
                                                   const float *__restrict__ x, float *__restrict__ y, int64_t T,
                                                   int accumulate) {
    __shared__ __align__(16) float xs[32 * 34], ws[32 * 34];
    pdl_start();
    const int tid = threadIdx.x, tx = tid & 15, ty = tid >> 4;
    const int64_t t0 = (int64_t)blockIdx.x * 32, r0 = (int64_t)blockIdx.y * 32;
    const int lr = tid >> 3, lc = 4 * (tid & 7); /* loader: token / row lr, columns lc .. lc + 3 */
    const bool xok = t0 + lr < T, wok = r0 + lr < n_out;
    const float *xr = x + (xok ? t0 + lr : 0) * in + lc, *wr = W + (wok ? r0 + lr : 0) * in + lc;
    float acc[2][2] = {{0.0f, 0.0f}, {0.0f, 0.0f}};
    for (int64_t k0 = 0; k0 < in; k0 += 32) {
        const float4 z = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        const float4 xv = xok ? __ldg((const float4 *)(xr + k0)) : z, wv = wok ? __ldg((const float4 *)(wr + k0)) : z;
        __syncthreads(); /* the previous tile's readers */
        xs[(lc + 0) * 34 + lr] = xv.x, xs[(lc + 1) * 34 + lr] = xv.y;
        xs[(lc + 2) * 34 + lr] = xv.z, xs[(lc + 3) * 34 + lr] = xv.w;
        ws[(lc + 0) * 34 + lr] = wv.x, ws[(lc + 1) * 34 + lr] = wv.y;
        ws[(lc + 2) * 34 + lr] = wv.z, ws[(lc + 3) * 34 + lr] = wv.w;
        __syncthreads();
#pragma unroll 8
        for (int k = 0; k < 32; k++) {
            const float2 a = *(const float2 *)(xs + k * 34 + 2 * ty), b = *(const float2 *)(ws + k * 34 + 2 * tx);
            acc[0][0] = fmaf(a.x, b.x, acc[0][0]);
            acc[0][1] = fmaf(a.x, b.y, acc[0][1]);
            acc[1][0] = fmaf(a.y, b.x, acc[1][0]);
            acc[1][1] = fmaf(a.y, b.y, acc[1][1]);
        }
    }
#pragma unroll
    for (int i = 0; i < 2; i++)
#pragma unroll
        for (int j = 0; j < 2; j++) {
            const int64_t t = t0 + 2 * ty + i, o = r0 + 2 * tx + j;
            if (t >= T || o >= n_out) continue;
            float *yp = y + t * n_out + o;
            *yp = accumulate ? *yp + acc[i][j] : acc[i][j];
        }
}

/* n_out <= G_MV_MAX_ROWS: matmul.cu's matvec (matvec.cuh) with 16 tokens per block */
template <int TYPE>
static cudaError_t launch_narrow(const uint8_t *W, size_t rb, int64_t in, int64_t n_out, const float *x, float *y,
                                 int64_t T, int accumulate, cudaStream_t s) {
    mv_multi_args a = {};
    a.W[0] = W, a.n_out[0] = n_out, a.y[0] = y;
    a.row_bytes = rb, a.in = in, a.T = T, a.accumulate = accumulate;
    launch_multi_type<TYPE>(a, 1, false, x, s);
    return cudaSuccess;
}

#ifndef MEMRA_GEMM_LAB /* bench/kernels/gemm_lab.cu includes this file for its kernels alone */
/* The per-token scales k_tc_scale writes: a buffer of the backend's own
 * (not the workspace, which the callers may hold x or y in), grown outside
 * graph capture. */
static memra_status tc_scale_reserve(memra_backend *be, int64_t T) {
    cuda_impl *c = cuda_of(be);
    if (T <= c->tc_scale_n) return MEMRA_OK;
    if (c->capturing)
        return cuda_fail(be, MEMRA_ERR_INVALID, "gemm: %lld token scales needed while capturing a graph (have %lld)",
                         (long long)T, (long long)c->tc_scale_n);
    int64_t n = (T + 4095) & ~(int64_t)4095;
    memra_status st = cuda_check(be, cudaStreamSynchronize(c->stream), "gemm: sync");
    if (st) return st;
    if (c->tc_scale) cudaFree(c->tc_scale);
    c->tc_scale = NULL, c->tc_scale_n = 0;
    if ((st = cuda_check(be, cudaMalloc((void **)&c->tc_scale, (size_t)n * sizeof(float)), "gemm: scales"))) return st;
    c->tc_scale_n = n;
    return MEMRA_OK;
}

/* The Q8_0 path (k_gemm_xsplit + k_gemm_q8): the split activations in the
 * backend's second workspace (xs), 4 bytes per element. */
static memra_status gemm_q8_run(memra_backend *be, const uint8_t *W, size_t rb, int64_t in, int64_t n_out,
                                const float *x, float *y, int64_t T, int accumulate) {
    cuda_impl *c = cuda_of(be);
    memra_status st = tc_scale_reserve(be, T);
    if (!st) st = cuda_xs_reserve(be, (size_t)T * (size_t)in * 2 * sizeof(__half));
    if (st) return st;
    __half *xp = (__half *)c->xs;
    cuda_launch(k_gemm_xsplit, (unsigned)T, 256, 0, c->stream, x, in, T, c->tc_scale, xp);
    const int smem = 2 * GQ_STAGE_BYTES;
    if ((st = cuda_check(be, cuda_smem_limit<k_gemm_q8>(smem), "gemm q8_0: shared memory"))) return st;
    dim3 grid((unsigned)((T + GM - 1) / GM), (unsigned)((n_out + GN - 1) / GN));
    cuda_launch(k_gemm_q8, grid, 256, smem, c->stream, W, rb, in, n_out, (const __half *)xp,
                (const float *)c->tc_scale, y, T, accumulate);
    return CUDA_LAUNCHED(be, "gemm q8_0");
}

memra_status cuda_gemm_tc(memra_backend *be, const memra_weight *w, const float *x, float *y, int64_t T,
                          int accumulate) {
    int64_t in = w->ne[0], n_out = w->ne[1];
    size_t rb = w->row_bytes;
    const uint8_t *W = (const uint8_t *)w->data;
    cudaStream_t s = cuda_of(be)->stream;
    const bool narrow = n_out <= G_MV_MAX_ROWS;
    if (narrow && w->type == MEMRA_TYPE_F32 && n_out > G_MV_MAX_ROWS_F32) {
        cuda_launch(k_sgemm_f32, dim3((unsigned)((T + 31) / 32), (unsigned)((n_out + 31) / 32)), 256, 0, s,
                    (const float *)w->data, in, n_out, x, y, T, accumulate);
        return CUDA_LAUNCHED(be, "gemm f32");
    }
    static int q8_on = -1;
    if (!narrow && w->type == MEMRA_TYPE_Q8_0 && in % GK == 0 && env_on("MEMRA_GEMM_Q8", &q8_on))
        return gemm_q8_run(be, W, rb, in, n_out, x, y, T, accumulate);
    cudaError_t e = cudaSuccess;
    const float *xs = NULL;
    if (!narrow) {
        memra_status st = tc_scale_reserve(be, T);
        if (st) return st;
        xs = cuda_of(be)->tc_scale;
        cuda_launch(k_tc_scale, (unsigned)((T + 7) / 8), 256, 0, s, x, in, T, cuda_of(be)->tc_scale);
    }
    switch (w->type) {
#define TC_CASE(TY)                                                                                  \
    case TY:                                                                                         \
        e = narrow ? launch_narrow<TY>(W, rb, in, n_out, x, y, T, accumulate, s)                     \
                   : launch_gemm<TY, g_w_parts<TY>()>(W, rb, in, n_out, x, xs, y, T, accumulate, s); \
        break;
        CUDA_FOR_EACH_TYPE(TC_CASE)
#undef TC_CASE
    default: return cuda_fail(be, MEMRA_ERR_UNSUPPORTED, "gemm %s: unsupported type", w->name ? w->name : "?");
    }
    if (e != cudaSuccess) return cuda_check(be, e, "gemm");
    return CUDA_LAUNCHED(be, "gemm");
}
#endif
