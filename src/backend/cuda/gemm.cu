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
 * whatever the token's position in the tile or the batch size.
 *
 * Q8_0 weights take exact-weight kernels instead (the integer weights in
 * fp16, the group scales applied in fp32): k_gemm_q8 (mma.sync) and, first
 * on sm_90a, k_gemm_wg (wgmma), which does Q4_K too; see their sections
 * below.
 *
 * Tile-major Q4_K and Q6_K weights (common.cuh): k_gemm, k_gemm_wg and the narrow
 * path's matvec take TM = true and read the same blocks at their addresses
 * there (the same bits as in the file's layout). */
#include <cuda.h> /* CUtensorMap and its enums (types only: the encoder is reached through cudart) */
#include <cuda_fp16.h>
#include <cudaTypedefs.h>

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
 * 64 (w / 4) .. + 64 x rows 32 (w % 4) .. + 32: 4 x 4 MMA tiles. TM: the
 * weight is tile-major (Q4_K or Q6_K; wrow[r] at the row's super-block 0,
 * dq8_tm). */
template <int TYPE, int NW, bool TM = false>
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
        wrow[r] = W + tm_row_off(TYPE, row_bytes, wok[r] ? r0 + wr + 64 * r : 0, TM);
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
            dq8_tm<TYPE, TM>(wrow[r], g0, q, wv[r][0]);
            dq8_tm<TYPE, TM>(wrow[r], g1, q, wv[r][1]);
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
 * k_gemm. MEMRA_GEMM_Q8=0 in the environment sends Q8_0 to k_gemm too. On
 * sm_90a, k_gemm_wg (below: the same arithmetic on wgmma) comes first. */

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

/* ---- k_gemm_wg: Q8_0 and Q4_K on wgmma (sm_90a) ----
 *
 * k_gemm_q8's arithmetic on the Hopper MMA: per 32-column group the integer
 * weights q (exact in fp16) times the split activations from a zero
 * accumulator, C = sum q (x_hi + x_lo) (small terms first: lo k 0-15, lo
 * k 16-31, hi k 0-15, hi k 16-31), then acc = fma(C, d, acc) in fp32. Q4_K
 * (w = d sc q - dmin m per 32-column sub-block): the group scale is d sc
 * (exact: 11 x 6 bits), and each group adds acc = fma(-dmin m, sum(x), acc)
 * with sum(x) the sum of the group's x_hi + x_lo (k_gemm_xsum).
 *
 * Why: k_gemm_q8's warps fetch their MMA fragments with ldmatrix, 160 bytes
 * of shared memory traffic per MMA; Nsight Compute had its L1/shared pipe
 * 65% busy and the tensor pipe 32% (bench/results/2026-12-03d-h200.md).
 * wgmma (m64n128k16: a warpgroup's 64 weight rows x the block's 128 tokens)
 * reads both operands from shared memory itself. What makes it pay:
 * - tiles in the 128-byte swizzled K-major layout (row r's 16-byte chunk c
 *   at r 128 + (c ^ (r % 8)) 16; descriptors: swizzle mode 1, 1024 bytes
 *   between 8-row groups, k16 step i at + 32 i bytes);
 * - two accumulator sets, so that one group's acc = fma(C, d, acc) runs
 *   while the other group's MMAs do (wait_group 1);
 * - warp specialization (the section below): producer warpgroups copy and
 *   convert the weights, consumer warpgroups only multiply (169-183
 *   TFLOP/s useful on the 9B Q8_0 shapes, against 121-125 for the
 *   single-role kernel it replaced, 2026-12-03h).
 * The first wgmma attempt (commit dad340b, reverted: no-swizzle layout, each
 * group's MMAs waited for before the next group's) was no faster than
 * k_gemm_q8 (104-106 TFLOP/s on Q8_0 {4096, 12288}).
 *
 * Bits: a token's result depends only on its own activations and the row
 * length: every output element is the same chain of wgmma and fmas whatever
 * its tile or T (tokens past T read token T - 1 and are not stored; the lab
 * checks tokens 64-163 launched alone against a T = 512 launch, memcmp).
 * The order inside a k16 step is the hardware's, so the bits need not equal
 * k_gemm_q8's (the lab holds them to 1e-6 of max|y|), and Q4_K's differ from
 * mmvg's (the T < 16 matvec's).
 *
 * Only sm_90a has wgmma: built for another arch, k_gemm_wg is empty and
 * cuda_gemm_wg_takes says no (a device of compute capability 9.0 runs the
 * sm_90a code: a plain sm_90 build stops here). MEMRA_GEMM_WG=0 in the
 * environment sends both types back to k_gemm_q8 / mmvg. */
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ == 900 && !defined(__CUDA_ARCH_FEAT_SM90_ALL)
#error "gemm.cu: build Hopper as sm_90a (make CUDA_ARCH=sm_90a): k_gemm_wg needs wgmma"
#endif

#define WG_XT 16384 /* one 128 x 64 fp16 tile */

/* byte offset of row r's 16-byte chunk c in a 128-byte swizzled tile */
__device__ __forceinline__ uint32_t wg_sw(int r, int c) { return (uint32_t)(r * 128 + ((c ^ (r & 7)) << 4)); }

/* the shared-memory matrix descriptor of a swizzled tile at shared address a */
__device__ __forceinline__ uint64_t wg_desc(uint32_t a) {
    return (uint64_t)((a & 0x3FFFF) >> 4) | ((uint64_t)1 << 16) | ((uint64_t)(1024 >> 4) << 32) | ((uint64_t)1 << 62);
}

#define WG_C8(i)                                                                                                 \
    "+f"(c[i]), "+f"(c[i + 1]), "+f"(c[i + 2]), "+f"(c[i + 3]), "+f"(c[i + 4]), "+f"(c[i + 5]), "+f"(c[i + 6]), \
        "+f"(c[i + 7])
/* c (+)= A B over k16: A 64 x 16 at da, B 128 x 16 at db; from zero when !acc */
__device__ __forceinline__ void wg_mma(float (&c)[64], uint64_t da, uint64_t db, int acc) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 "
                 "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,"
                 "%27,%28,%29,%30,%31,%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,%48,%49,%50,%51,"
                 "%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63}, %64, %65, p, 1, 1, 0, 0;\n}\n"
                 : WG_C8(0), WG_C8(8), WG_C8(16), WG_C8(24), WG_C8(32), WG_C8(40), WG_C8(48), WG_C8(56)
                 : "l"(da), "l"(db), "r"(acc));
}
#undef WG_C8
__device__ __forceinline__ void wg_fence(void) { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wg_commit(void) { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void wg_wait(void) {
    asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}
/* makes this thread's generic-proxy shared writes (st.shared, cp.async) visible to the async proxy (wgmma) */
__device__ __forceinline__ void wg_proxy_fence(void) { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }

/* 4 nibbles (bits 0-3 of each byte of w) -> 2 words of 2 exact fp16: 0x64 above each nibble is 1024 + q */
__device__ __forceinline__ void g_q4_to_h2(uint32_t w, uint32_t *h01, uint32_t *h23) {
    const __half2 bias = __half2half2(__ushort_as_half(0x6400)); /* 1024 */
    uint32_t a = __byte_perm(w, 0x64646464u, 0x4140), b = __byte_perm(w, 0x64646464u, 0x4342);
    __half2 ha = __hsub2(*(__half2 *)&a, bias), hb = __hsub2(*(__half2 *)&b, bias);
    *h01 = *(uint32_t *)&ha, *h23 = *(uint32_t *)&hb;
}

/* 4 six-bit values (bytes of w, each < 64) -> 2 words of 2 exact fp16 q - 32: 0x64 above each byte is 1024 + q,
 * minus 1056 */
__device__ __forceinline__ void g_q6_to_h2(uint32_t w, uint32_t *h01, uint32_t *h23) {
    const __half2 bias = __half2half2(__ushort_as_half(0x6420)); /* 1056 */
    uint32_t a = __byte_perm(w, 0x64646464u, 0x4140), b = __byte_perm(w, 0x64646464u, 0x4342);
    __half2 ha = __hsub2(*(__half2 *)&a, bias), hb = __hsub2(*(__half2 *)&b, bias);
    *h01 = *(uint32_t *)&ha, *h23 = *(uint32_t *)&hb;
}

/* The Q4_K min term's sums for k_gemm_wg: sum(x) of group g (32 columns) of
 * token t = the sum of x_hi + x_lo over the group (xp from k_gemm_xsplit:
 * the values the MMAs multiply), at xsum[g Tp + t], so that group g's sums
 * of a block's 128 tokens are 512 contiguous bytes;
 * tokens T .. Tp - 1 get zeros (k_gemm_wg copies whole tiles). Each sum is a
 * fixed-order function of the token's own x: thread i adds x_hi + x_lo of
 * columns 8 (i % 4) .. + 7 of group g0 + i / 4 in column order, then the 4
 * threads of a group exchange their sums by a fixed butterfly (every one
 * gets (s0 + s1) + (s2 + s3)). Launch contract: grid Tp (T rounded up to
 * 128), block 256; in % 256 == 0 (a warp's 8 groups are all inside the row
 * or all past it), xp and xsum 16-byte aligned. */
__global__ void __launch_bounds__(256) k_gemm_xsum(const __half *__restrict__ xp, int64_t in, int64_t T, int64_t Tp,
                                                   float *__restrict__ xsum) {
    pdl_start();
    const int64_t t = blockIdx.x, ng = in / 32;
    const int q = threadIdx.x & 3;
    for (int64_t g0 = 0; g0 < ng; g0 += 64) {
        const int64_t g = g0 + (threadIdx.x >> 2);
        float s = 0.0f;
        if (t < T && g < ng) {
            const uint4 h = __ldg((const uint4 *)(xp + t * in + 32 * g + 8 * q));
            const uint4 l = __ldg((const uint4 *)(xp + (T + t) * in + 32 * g + 8 * q));
            const __half2 *hh = (const __half2 *)&h, *lh = (const __half2 *)&l;
#pragma unroll
            for (int i = 0; i < 4; i++) {
                const float2 a = __half22float2(hh[i]), b = __half22float2(lh[i]);
                s = s + (a.x + b.x);
                s = s + (a.y + b.y);
            }
        }
        s += __shfl_xor_sync(0xffffffffu, s, 1);
        s += __shfl_xor_sync(0xffffffffu, s, 2);
        if (g < ng && q == 0) xsum[g * Tp + t] = s;
    }
}

/* The kernel is warp-specialized. Nsight Compute on the previous
 * k_gemm_wg, where every thread loaded the next step's weights, converted
 * its own rows and multiplied, with a block barrier a step (Q8_0 {4096,
 * 12288}, T = 512): tensor pipe 23% busy, no eligible warp 72% of the
 * cycles, the weights' global loads the largest stall. Now the block is
 * four warpgroups:
 * - two producers (40 registers a thread after setmaxnreg, Q6_K 56); producer p
 *   takes the steps kt = p mod 2. For its step it copies the raw weight
 *   bytes, the x tiles and the Q4_K group sums into stage kt % WS_D with
 *   cp.async, coalesced (consecutive threads, consecutive 16-byte chunks);
 *   once they landed (its own next step's copies already in flight) thread
 *   i converts row i into the stage's swizzled fp16 tile and scales, and
 *   the producer marks the stage full (an mbarrier, 128 arrivals).
 * - two consumers (216 registers: weight rows 0-63 and 64-127 x the 128
 *   tokens) only multiply and scale. The next step's group 0 is issued
 *   before this step's group 1 is scaled, so the tensor cores always have a
 *   group queued; a stage is released (an mbarrier, one arrival a warp)
 *   when both of its groups are done.
 * WS_D = 3 stages of 61 KB. A producer copies its step kt + 2 once step
 * kt - 1 is released; the consumers release kt - 1 after issuing kt's first
 * group, whose stage the other producer filled: no cycle.
 *
 * Measured with bench/kernels/gemm_lab.cu (H200, T = 512, TFLOP/s useful;
 * the new kernel's bits memcmp-equal to the old one's on every shape):
 *
 *   shape                 old k_gemm_wg   1 producer   2 producers   + shared loads (this)
 *   Q8_0 {4096, 12288}    121.8           137.2        165.1         169.3
 *   Q8_0 {12288, 4096}    124.3           140.5        174.5         182.7
 *   Q4_K {5120, 17408}    104.7           107.1        110.7         129.6
 *   Q4_K {17408, 5120}     76.9            79.9         86.3          99.3
 *
 * With one producer the conversion was on the critical path (skipping it:
 * 137 -> 183); the x copies as one token a thread (uncoalesced) had made it
 * slower than the old kernel (103). The last column: the consumers' loads
 * of the scales and group sums are shared-space loads (the stage pointer
 * had been made from an integer, which made them generic loads), and a
 * group's sums are read as 16 float2, not 32 floats (k_gemm_xsum writes
 * them group-major).
 *
 * XT, the TMA variant (the default: wg_xt). Above, a
 * producer's chain a step was: copy (x tiles, sums and raw weights, 17-18
 * cp.async a thread), wait for them to land, convert, arrive; and the copy
 * could not start before the stage was free. Two producers thus gave a step
 * every ~1.7 us (H100) against ~0.6 us of tensor work. In XT:
 * - the stage's x tiles (and Q4_K's group sums) come by TMA (one thread, a
 *   tensor map of xp in the 128-byte swizzle, completing on the stage's full
 *   barrier with expect_tx), issued as soon as the stage is free;
 * - the raw weight bytes go through a ring of each producer's own, WS_R_T
 *   slots deep and outside the stages, so they are requested R - 1 of its
 *   steps ahead of their conversion, with no wait for a consumer.
 * A producer's step is then the conversion and two barriers. The data and
 * arithmetic are the same, so are the bits (gemm_lab LAB_XT=1 against
 * LAB_DUMP of the other kernel: memcmp-equal on every shape). H100, T = 512,
 * us (2026-12-06d run 2): Q4_K {5120, 17408} 708 -> 631, {17408, 5120} at
 * S = 4 629 -> 563, {4096, 12288} 345 -> 311, {12288, 4096} 327 -> 291;
 * Q8_0 {4096, 12288} 306 -> 270, {12288, 4096} 280 -> 250. Q6_K's 20 KB of
 * raw bytes a step leave room for one slot a producer (its copies wait for
 * the conversion before, as above, but the x tiles no longer do): {17408,
 * 5120} at S = 4 1,086 -> 902 us, {5120, 10240} at S = 2 661 -> 562 (run 3);
 * 40 -> 48 producer registers gained nothing on Q4_K or Q8_0 XT (run 3). */
#define WS_D 3                                /* stages */
#define WS_NP 2                               /* producer warpgroups: producer p takes the steps kt = p mod WS_NP */
#define WS_THREADS (128 * (WS_NP + 2))
#define WS_ENTRY (65536 / WS_THREADS / 8 * 8) /* registers a thread at launch */
#ifndef WS_PREG /* (bench/kernels/gemm_lab.cu builds variants with -DWS_PREG=n) */
#define WS_PREG 40 /* a producer thread's registers after setmaxnreg */
#endif
/* Q6_K's producers: 56 (the consumers 200). gemm_lab, H100, T = 512 (2026-12-06c run 5): {17408, 5120} at
 * S = 4 1,133 -> 1,074 us, {5120, 10240} at S = 2 681 -> 662 us against 40; Q4_K gained nothing from 48 or 56 */
#define WS_PREG_T(TY) ((TY) == MEMRA_TYPE_Q6_K ? 56 : WS_PREG)
#define WS_RAW 80                             /* raw bytes a row and step: Q8_0's 68 from a 16-byte aligned start */
#define WS_XL WG_XT                           /* stage offsets: x hi at 0, x lo, */
#define WS_W (2 * WG_XT)                      /* the fp16 weight tile, */
#define WS_SC (3 * WG_XT)                     /* 2 GN group scales, 2 GN (Q4_K) group mins, */
#define WS_XS (WS_SC + 4 * GN * 4)            /* (Q4_K) the step's group sums of 128 tokens, */
#define WS_RW (WS_XS + 2 * GM * 4)            /* the raw weight bytes */
#define WS_RAW6 160 /* Q6_K: 64 ql, 32 qh and the 18-byte tail (scales, d) bytes a row and step, each run copied
                      from the 16-byte boundary below it (5 + 3 + 2 chunks) */
#define WS_RAW_T(TY) ((TY) == MEMRA_TYPE_Q6_K ? WS_RAW6 : WS_RAW)
/* XT (wg_xt): the x tiles and group sums come by TMA into the stage, and the raw weight bytes go to a ring of each
 * producer's own, WS_R_T slots deep, outside the stages (Q6_K: 1 slot, what 227 KB leave for its 20 KB a step) */
#define WS_RAWX_T(TY) ((TY) == MEMRA_TYPE_Q4_K ? 48 : WS_RAW_T(TY)) /* XT: raw bytes a row and step (Q4_K: 3 chunks) */
#ifndef WS_RQ4 /* (gemm_lab variants: -DWS_RQ4=n, 2 <= n <= 6 fit the 227 KB) */
#define WS_RQ4 4
#endif
#define WS_R_T(TY) ((TY) == MEMRA_TYPE_Q4_K ? WS_RQ4 : (TY) == MEMRA_TYPE_Q6_K ? 1 : 3) /* XT: raw slots a producer */
#define WS_STAGE_T(TY) ((WS_RW + GN * WS_RAW_T(TY) + 1023) / 1024 * 1024)
#define WS_STAGEX_T(TY) ((WS_RW + 1023) / 1024 * 1024) /* XT: a stage without the raw bytes */
#define WS_RING_T(TY) (WS_NP * WS_R_T(TY) * GN * WS_RAWX_T(TY))
/* the stages (and rings), the mbarriers, 1024 bytes of alignment slack */
#define WS_SMEM_TX(TY, XT)                                                                           \
    ((XT) ? WS_D * WS_STAGEX_T(TY) + WS_RING_T(TY) + 16 * WS_D + 1024 : WS_D * WS_STAGE_T(TY) + 16 * WS_D + 1024)
#define WS_SMEM_T(TY) WS_SMEM_TX(TY, 0)
#define WS_STAGE WS_STAGE_T(MEMRA_TYPE_Q8_0) /* Q8_0 and Q4_K */
#define WS_SMEM WS_SMEM_T(MEMRA_TYPE_Q8_0)

/* One TMA copy of a 2-D box of the tensor map (x: the 64-column step c0, tokens from c1, a 128 x 128-byte tile in
 * the 128-byte swizzle, which is wg_sw's layout) into shared dst, completing on bar */
__device__ __forceinline__ void wg_tma2d(uint32_t dst, const CUtensorMap *map, int c0, int c1, uint32_t bar) {
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, "
                 "%3}], [%4];" ::"r"(dst),
                 "l"((uint64_t)map), "r"(c0), "r"(c1), "r"(bar)
                 : "memory");
}

/* 16-byte cp.async of which only the first n bytes are read (the rest zero-filled) */
__device__ __forceinline__ void ws_cp16n(void *sdst, const void *gsrc, int n) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"((uint32_t)__cvta_generic_to_shared(sdst)),
                 "l"(gsrc), "r"(n)
                 : "memory");
}
__device__ __forceinline__ void ws_arrive(uint32_t bar) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(bar) : "memory");
}

/* Launch contract: grid (ceil(T / 128), ceil(n_out1 / 128) [+ ceil(n_out2 /
 * 128)], S), block
 * WS_THREADS (512), WS_SMEM_T(TYPE) bytes of dynamic shared memory (the
 * 1024-aligned stages start inside its first 1024 bytes); sm_90a; in % 64 ==
 * 0 (Q4_K, Q6_K: in % 256 == 0); W 16-byte aligned, followed by at least 16
 * readable bytes (Q6_K's tail copies; c_weight_load pads 64); xp and xscale
 * from k_gemm_xsplit; Q4_K: xsum (16-byte aligned) from k_gemm_xsum with Tp
 * = T rounded up to 128 (not read for Q8_0 and Q6_K). Step kt covers columns
 * 64 kt .. + 63, two groups (Q4_K: quarter kt % 4 of super-block kt / 4, its
 * sub-blocks 2 (kt % 4) + {0, 1}: the low and high nibbles of one 32-byte
 * run) or, for Q6_K, four groups of 16 (quarter q = kt % 4 of super-block kt
 * / 4: nibble q % 2 of ql[64 (q / 2) ..], bits 4 (q % 2) + {0, 2} of qh[32 (q
 * / 2) ..], scales 4 q .. + 3; the weights as exact fp16 q - 32 and d sc in
 * fp32, so that a group is C = W x_lo + W x_hi from zero, then acc = fma(C,
 * d sc, acc): the same scheme as Q8_0's and Q4_K's, with Q6_K's 16-column
 * scales and no min term). Tokens past T read token T - 1 and are not
 * stored; rows past n_out read row 0 and are zeroed.
 * y[t][o] = accumulate ? y[t][o] + v : v, for W1 into y1 and, when W2 is
 * given (a second weight of the same type, layout and row length: the
 * swiglu pair), row tiles ry = ceil(n_out1 / 128) .. of W2 into y2, so
 * that the two share one grid's waves (with S = 1). S > 1 (the K split, wg_ksplit):
 * block z takes steps z nk / S .. (z + 1) nk / S - 1 (nk = in / 64, a
 * multiple of S, of 4 S for Q4_K and Q6_K) and writes its partial sums to y
 * + z T n_out (the caller passes accumulate = 0 and k_gemm_ksum adds them).
 * TM: the Q4_K or Q6_K weight
 * is tile-major (common.cuh): a row's super-block kt / 4 at its tile-major
 * address (q4k_blk; Q6_K: tm_row_off + Q6K_TM_SB (kt / 4)).
 * Q6_K runs at about half of Q4_K's rate (gemm_lab, H100, T = 512: 81-85
 * TFLOP/s useful at {17408, 5120}, S = 4, against 145 for Q4_K; 2026-12-06c
 * runs 4-5): its four 16-column groups a step each end in a readback of the
 * accumulators, against Q4_K's two. MEMRA_GEMM_Q6=0 keeps it on mmvg. */
template <int TYPE, bool TM = false, int XT = 0>
__global__ void __launch_bounds__(WS_THREADS, 1)
    k_gemm_wg(const uint8_t *__restrict__ W1, size_t row_bytes, int64_t in, int64_t n_out1,
              const __half *__restrict__ xp, const float *__restrict__ xsum, const float *__restrict__ xscale,
              float *__restrict__ y1, int64_t T, int accumulate, const uint8_t *__restrict__ W2, int64_t n_out2,
              float *__restrict__ y2, int ry, const __grid_constant__ CUtensorMap xmap) {
    pdl_start();
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    /* the block's weight: W1 for row tiles blockIdx.y < ry, else (when W2 is given) W2 from its row 0 */
    const bool second = W2 != nullptr && (int)blockIdx.y >= ry;
    const uint8_t *const W = second ? W2 : W1;
    const int64_t n_out = second ? n_out2 : n_out1;
    float *const y = second ? y2 : y1;
    constexpr bool Q4K = TYPE == MEMRA_TYPE_Q4_K, Q6K = TYPE == MEMRA_TYPE_Q6_K;
    constexpr int STAGE = XT ? WS_STAGEX_T(TYPE) : WS_STAGE_T(TYPE), RAW = XT ? WS_RAWX_T(TYPE) : WS_RAW_T(TYPE);
    constexpr int R = WS_R_T(TYPE); /* XT: raw ring slots a producer */
    static_assert(WS_SMEM_TX(TYPE, XT) <= 227 * 1024, "k_gemm_wg: more shared memory than a block may have");
    static_assert(XT == 0 || XT == 1, "k_gemm_wg: XT is 0 or 1");
    static_assert(XT == 0 || R >= 1, "k_gemm_wg: a raw ring needs a slot");
    /* a consumer thread's registers: the rest of the block's (ptxas: no spills) */
    constexpr int PREG = WS_PREG_T(TYPE), CREG = (WS_ENTRY * WS_THREADS - 128 * WS_NP * PREG) / 256 / 8 * 8;
    extern __shared__ uint8_t wg_raw[];
    /* the stages 1024-aligned (the swizzled tiles), by an offset from the array so that the compiler keeps its
     * loads in the shared space (a pointer from an integer made them generic loads) */
    uint8_t *sm = wg_raw + ((1024u - ((uint32_t)__cvta_generic_to_shared(wg_raw) & 1023u)) & 1023u);
    const uint32_t sbase = (uint32_t)__cvta_generic_to_shared(sm);
    /* an mbarrier per stage, after the stages (XT: and the raw rings) */
    const uint32_t full = sbase + WS_D * STAGE + (XT ? WS_RING_T(TYPE) : 0), empty = full + 8 * WS_D;
    const int tid = threadIdx.x;
    const int64_t t0 = (int64_t)blockIdx.x * GM, r0 = (int64_t)((int)blockIdx.y - (second ? ry : 0)) * GN;
    const int64_t nk = in / GK;
    /* this block's K range: steps kb .. ke - 1 (split z = blockIdx.z of gridDim.z); stages and mbarrier phases
     * count from kb */
    const int64_t nks = nk / gridDim.z, kb = (int64_t)blockIdx.z * nks, ke = kb + nks;
    auto sl = [&](int64_t kt) { return (uint32_t)((kt - kb) % WS_D); };       /* step kt's stage */
    auto ph = [&](int64_t kt) { return (uint32_t)(((kt - kb) / WS_D) & 1); }; /* its full barrier's phase */
    const int64_t Tp = (T + GM - 1) / GM * GM;
    if (tid == 0) {
        for (int s = 0; s < WS_D; s++) {
            mbar_init<XT ? 129 : 128>(full + 8 * s); /* XT: + the TMA thread's expect_tx arrival */
            mbar_init<8>(empty + 8 * s);
        }
        mbar_init_fence();
    }
    __syncthreads();
    if (tid < 128 * WS_NP) { /* a producer: thread i copies and converts row i */
        asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(PREG) : "memory");
        const int i = tid & 127, pw = tid >> 7;
        const bool wok = r0 + i < n_out;
        const uint8_t *wrow = W + (wok ? r0 + i : 0) * row_bytes;
        /* Copies, coalesced (consecutive threads read consecutive 16-byte chunks): the raw rows as chunk k = i + 128
         * m of the tile's 5 (Q8_0) or 3 (Q4_K) a row, the x tiles as chunk i % 8 of tokens i / 8 + 16 q. */
        /* XT: producer pw's ring slot of step kt (its own steps kb + pw, kb + pw + WS_NP, .. in turn) */
        auto rslot = [&](int64_t kt) {
            return sm + WS_D * STAGE + (size_t)(pw * R + (int)(((kt - kb) / WS_NP) % R)) * (GN * RAW);
        };
        auto copy = [&](int64_t kt) { /* step kt's raw rows, x tiles and (Q4_K) sums into its stage (XT: raw only) */
            uint8_t *st = sm + sl(kt) * STAGE;
            int i = tid & 127; /* opaque to the compiler: the addresses are recomputed each step (a few integer ops)
                          * instead of 20+ pointers held over the loop in the producer's 40 registers */
            asm volatile("" : "+r"(i));
            constexpr int NC = Q6K ? 10 : Q4K ? 3 : 5; /* chunks a row */
#pragma unroll
            for (int m = 0; m < NC; m++) {
                const int k = i + 128 * m, row = k / NC, ch = k - NC * row;
                const uint8_t *w = W + (r0 + row < n_out ? r0 + row : 0) * row_bytes;
                uint8_t *raw = (XT ? rslot(kt) : st + WS_RW) + RAW * row + 16 * ch;
                if (Q6K) { /* quarter q = kt % 4 of super-block kt / 4: ql[64 (q / 2) ..] (chunks 0-4), qh[32 (q / 2)
                            * ..] (5-7), the tail from byte 192 (8-9), each from the 16-byte boundary below */
                    const uint8_t *b = TM ? W + tm_row_off(TYPE, row_bytes, r0 + row < n_out ? r0 + row : 0, true) +
                                                Q6K_TM_SB * (kt >> 2)
                                          : w + 210 * (kt >> 2);
                    const int n = (int)(kt >> 1) & 1, rc = ch < 5 ? ch : ch < 8 ? ch - 5 : ch - 8;
                    const uint8_t *run = ch < 5 ? b + 64 * n : ch < 8 ? b + 128 + 32 * n : b + 192;
                    mmv_cp16(raw, (const uint8_t *)((uintptr_t)run & ~(uintptr_t)15) + 16 * rc);
                } else if (Q4K) { /* the 16-byte header, then the quarter's 32 nibble bytes */
                    const uint8_t *b = TM ? q4k_blk(W, row_bytes, r0 + row < n_out ? r0 + row : 0, kt >> 2, true)
                                          : w + 144 * (kt >> 2);
                    mmv_cp16(raw, ch == 0 ? b : b + 32 * (kt & 3) + 16 * ch);
                } else { /* 68 bytes at a 4-byte aligned address, from the 16-byte boundary below; the last chunk
                          * cut at the step's end */
                    const uint8_t *p = w + 68 * kt, *a = (const uint8_t *)((uintptr_t)p & ~(uintptr_t)15);
                    ws_cp16n(raw, a + 16 * ch, ch < 4 ? 16 : (int)(p - a) + 4);
                }
            }
            if (XT) return;
            if (Q4K && i < 64) /* group 2 kt + i / 32, tokens 4 (i % 32) .. + 3 */
                mmv_cp16(st + WS_XS + 16 * i, xsum + (2 * kt + (i >> 5)) * Tp + t0 + 4 * (i & 31));
#pragma unroll
            for (int q = 0; q < 8; q++) {
                const int n = (i >> 3) + 16 * q, c = i & 7;
                const int64_t t = t0 + n < T ? t0 + n : T - 1;
                const __half *src = xp + t * in + 64 * kt + 8 * c;
                mmv_cp16(st + wg_sw(n, c), src);
                mmv_cp16(st + WS_XL + wg_sw(n, c), src + T * in);
            }
        };
        auto convert = [&](int64_t kt) { /* row i of step kt's fp16 tile and its group scales (mins) */
            uint8_t *st = sm + sl(kt) * STAGE;
            const uint8_t *raw = (XT ? rslot(kt) : st + WS_RW) + RAW * i;
            float *sc = (float *)(st + WS_SC);
            if (Q6K) {
                /* the three runs sit at one offset o from their 16-byte boundaries (64 n, 128 + 32 n, 192 are
                 * multiples of 16); o is even (210 and the row bytes are) */
                /* tile-major: tiles and tile super-blocks start 16-byte aligned, o is the row's place in its tile */
                const int q = (int)(kt & 3), hs = q & 1,
                          o = TM ? (int)((((wok ? r0 + i : 0) & 15) * 210) & 15)
                                 : (int)((uintptr_t)(wrow + 210 * (kt >> 2)) & 15);
                const uint32_t *rq = (const uint32_t *)raw, *rh = (const uint32_t *)(raw + 80),
                               *rt = (const uint32_t *)(raw + 128);
                auto w32 = [&](const uint32_t *r, int off) { /* the 4 bytes at byte off (even) of a run */
                    return __funnelshift_r(r[off >> 2], r[(off >> 2) + 1], 8 * (off & 3));
                };
                const float d = __half2float(__ushort_as_half((uint16_t)w32(rt, o + 16))); /* byte 208 */
                const uint32_t scw = w32(rt, o + 4 * q);                                    /* scales 4 q .. + 3 */
#pragma unroll
                for (int u = 0; u < 4; u++) /* sub-block u (16 columns): d sc, exact (11 x 8 bits) */
                    sc[4 * i + u] = wok ? d * (float)(int8_t)(scw >> (8 * u)) : 0.0f;
#pragma unroll
                for (int m = 0; m < 8; m++) { /* columns 8 m .. + 7: ql bytes 8 m .., qh bytes 8 (m % 4) .. */
                    const int sh = 4 * hs + 2 * (m >> 2);
                    uint32_t o4[4];
#pragma unroll
                    for (int h = 0; h < 2; h++) {
                        const uint32_t lo = (w32(rq, o + 8 * m + 4 * h) >> (4 * hs)) & 0x0F0F0F0Fu;
                        const uint32_t hi = ((w32(rh, o + 8 * (m & 3) + 4 * h) >> sh) & 0x03030303u) << 4;
                        g_q6_to_h2(lo | hi, &o4[2 * h], &o4[2 * h + 1]);
                    }
                    *(uint4 *)(st + WS_W + wg_sw(i, m)) =
                        wok ? make_uint4(o4[0], o4[1], o4[2], o4[3]) : make_uint4(0u, 0u, 0u, 0u);
                }
            } else if (Q4K) {
                const uint4 h = *(const uint4 *)raw;
                const int j0 = 2 * (int)(kt & 3);
                auto sb = [&](int k) { /* header byte 4 + k (scales[k]), by selects */
                    const uint32_t w = (k >> 2) == 0 ? h.y : (k >> 2) == 1 ? h.z : h.w;
                    return (int)((w >> (8 * (k & 3))) & 0xFFu);
                };
                const float d = __half2float(__ushort_as_half((uint16_t)h.x)),
                            dm = __half2float(__ushort_as_half((uint16_t)(h.x >> 16)));
#pragma unroll
                for (int wh = 0; wh < 2; wh++) {
                    const int j = j0 + wh;
                    const int s6 = j < 4 ? sb(j) & 63 : (sb(j + 4) & 0xF) | ((sb(j - 4) >> 6) << 4);
                    const int m6 = j < 4 ? sb(j + 4) & 63 : (sb(j + 4) >> 4) | ((sb(j) >> 6) << 4);
                    sc[2 * i + wh] = wok ? d * (float)s6 : 0.0f; /* exact: 11 x 6 bits */
                    sc[2 * GN + 2 * i + wh] = wok ? dm * (float)m6 : 0.0f;
#pragma unroll
                    for (int c = 0; c < 4; c++) {
                        const uint2 q = *(const uint2 *)(raw + 16 + 8 * c);
                        uint32_t o[4];
                        g_q4_to_h2(wok ? (q.x >> (4 * wh)) & 0x0F0F0F0Fu : 0u, &o[0], &o[1]);
                        g_q4_to_h2(wok ? (q.y >> (4 * wh)) & 0x0F0F0F0Fu : 0u, &o[2], &o[3]);
                        *(uint4 *)(st + WS_W + wg_sw(i, 4 * wh + c)) = make_uint4(o[0], o[1], o[2], o[3]);
                    }
                }
            } else {
                const uint32_t *p = (const uint32_t *)(raw + ((uintptr_t)(wrow + 68 * kt) & 15));
#pragma unroll
                for (int wh = 0; wh < 2; wh++) {
                    const uint32_t sh = wh ? 32 : 16;
                    const uint32_t w0 = p[8 * wh];
                    sc[2 * i + wh] = wok ? __half2float(__ushort_as_half((uint16_t)(wh ? w0 >> 16 : w0))) : 0.0f;
                    uint32_t prev = w0;
#pragma unroll
                    for (int c = 0; c < 4; c++) {
                        const uint32_t a = p[8 * wh + 2 * c + 1], b = p[8 * wh + 2 * c + 2];
                        uint32_t o[4];
                        g_q8_to_h2(wok ? __funnelshift_rc(prev, a, sh) : 0u, &o[0], &o[1]);
                        g_q8_to_h2(wok ? __funnelshift_rc(a, b, sh) : 0u, &o[2], &o[3]);
                        prev = b;
                        *(uint4 *)(st + WS_W + wg_sw(i, 4 * wh + c)) = make_uint4(o[0], o[1], o[2], o[3]);
                    }
                }
            }
        };
        if constexpr (XT) {
            /* Step kt's x tiles (and Q4_K sums) by TMA, issued by one thread once the stage is free: they complete
             * on its full barrier, with no producer waiting for them. Tokens past T in the last token tile read
             * lo rows (hi tile) or zeros (lo tile) where the cp.async kernel reads token T - 1: a wgmma column is
             * one token's, and those tokens are not stored, so the stored bits are the same. */
            auto tma = [&](int64_t kt) {
                const uint32_t st = sbase + sl(kt) * STAGE, bar = full + 8 * sl(kt);
                mbar_expect_tx(bar, 2 * WG_XT + (Q4K ? 2 * GM * 4 : 0));
                wg_tma2d(st, &xmap, (int)(64 * kt), (int)t0, bar);               /* x hi: tokens t0 .. */
                wg_tma2d(st + WS_XL, &xmap, (int)(64 * kt), (int)(T + t0), bar); /* x lo: rows T + t0 .. */
                if (Q4K)
#pragma unroll
                    for (int g = 0; g < 2; g++)
                        bulk_g2s_n<GM * 4>(st + WS_XS + GM * 4 * g, xsum + (2 * kt + g) * Tp + t0, bar);
            };
            /* after step kt: this producer's next step takes its stage once free, and its x tiles */
            auto next_x = [&](int64_t kt) {
                const int64_t j = kt + WS_NP;
                if (j < ke) {
                    if (j - kb >= WS_D) mbar_wait(empty + 8 * sl(j), ph(j) ^ 1u);
                    if (tid == 128 * pw) tma(j);
                }
            };
            if (tid == 128 * pw && kb + pw < ke) tma(kb + pw); /* stage pw: fresh */
            /* The raw bytes of this producer's own steps n = 0, 1, .. go R - 1 ahead through its ring: at own
             * step n, once every thread is done with step n - 1's slot (the bar.sync), that slot takes step
             * n + R - 1. With one slot (Q6_K), step n + 1's copies are issued once every thread is done with
             * step n's. */
#pragma unroll 1
            for (int n = 0; n < (R > 1 ? R - 1 : 1); n++) {
                if (kb + pw + WS_NP * n < ke) copy(kb + pw + WS_NP * n);
                mmv_cp_commit();
            }
            for (int64_t kt = kb + pw; kt < ke; kt += WS_NP) {
                if constexpr (R > 1) {
                    mmv_cp_wait<R - 2>(); /* this thread's raw copies of kt, then every thread's (kt - 2 done) */
                    asm volatile("bar.sync %0, 128;" ::"r"(1 + pw) : "memory");
                    if (kt + WS_NP * (R - 1) < ke) copy(kt + WS_NP * (R - 1));
                    mmv_cp_commit();
                    convert(kt);
                } else {
                    mmv_cp_wait<0>();
                    asm volatile("bar.sync %0, 128;" ::"r"(1 + pw) : "memory");
                    convert(kt);
                    asm volatile("bar.sync %0, 128;" ::"r"(1 + pw) : "memory"); /* all done with the slot */
                    if (kt + WS_NP < ke) copy(kt + WS_NP);
                    mmv_cp_commit();
                }
                wg_proxy_fence(); /* its stores, to the consumers' wgmma */
                ws_arrive(full + 8 * sl(kt));
                next_x(kt);
            }
            return;
        }
        if (kb + pw < ke) copy(kb + pw); /* stage pw: fresh */
        mmv_cp_commit();
        for (int64_t kt = kb + pw; kt < ke; kt += WS_NP) {
            mmv_cp_wait<0>(); /* this thread's copies of step kt, */
            asm volatile("bar.sync %0, 128;" ::"r"(1 + pw) : "memory"); /* and every thread's of this producer */
            convert(kt);
            wg_proxy_fence(); /* its copies and stores, to the consumers' wgmma */
            ws_arrive(full + 8 * sl(kt));
            const int64_t j = kt + WS_NP; /* this producer's next step */
            if (j < ke) {
                if (j - kb >= WS_D) mbar_wait(empty + 8 * sl(j), ph(j) ^ 1u);
                copy(j);
            }
            mmv_cp_commit();
        }
        return;
    }
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(CREG) : "memory");
    const int ct = tid - 128 * WS_NP, lane = ct & 31, cw = ct >> 7, wq = (ct >> 5) & 3;
    const int R1 = 64 * cw + 16 * wq + (lane >> 2); /* this thread's rows R1, R1 + 8 */
    /* Each register zeroed by its own instruction ("= 0.0f" made them copies of one zero register; with these
     * ptxas spills nothing for Q4_K, against 12 bytes). */
    float acc[64], c0[64], c1[64];
#pragma unroll
    for (int k = 0; k < 64; k++) {
        asm("mov.b32 %0, 0;" : "=f"(acc[k]));
        asm("mov.b32 %0, 0;" : "=f"(c0[k]));
        asm("mov.b32 %0, 0;" : "=f"(c1[k]));
    }
    /* group g (columns 32 g .. + 31 of the step) of step kt into c: lo k 0-15, lo k 16-31, hi k 0-15, hi k 16-31 */
    auto issue = [&](int64_t kt, int g, float (&c)[64]) {
        const uint32_t sx = sbase + sl(kt) * STAGE + 64 * g, sw = sx + WS_W + cw * 64 * 128;
        wg_fence();
        wg_mma(c, wg_desc(sw), wg_desc(sx + WS_XL), 0);
        wg_mma(c, wg_desc(sw + 32), wg_desc(sx + WS_XL + 32), 1);
        wg_mma(c, wg_desc(sw), wg_desc(sx), 1);
        wg_mma(c, wg_desc(sw + 32), wg_desc(sx + 32), 1);
        wg_commit();
    };
    /* acc = fma(C, d, acc) for group g of step kt; Q4_K: acc -= dmin m sum(x) (acc[4 j + e]: row R1 + 8 (e >> 1),
     * token 8 j + 2 (lane % 4) + (e & 1)) */
    auto scale = [&](int64_t kt, int g, const float(&c)[64]) {
        const uint8_t *st = sm + sl(kt) * STAGE;
        const float *ds = (const float *)(st + WS_SC);
        const float d1 = ds[2 * R1 + g], d2 = ds[2 * (R1 + 8) + g];
#pragma unroll
        for (int k = 0; k < 64; k++) acc[k] = fmaf(c[k], (k & 2) ? d2 : d1, acc[k]);
        if (Q4K) {
            const float *sxs = (const float *)(st + WS_XS) + GM * g; /* group g's sums, token order */
            const float m1 = -ds[2 * GN + 2 * R1 + g], m2 = -ds[2 * GN + 2 * (R1 + 8) + g];
#pragma unroll
            for (int j = 0; j < 16; j++) {
                const float2 sx = *(const float2 *)(sxs + 8 * j + 2 * (lane & 3)); /* tokens e = 0, 1 */
                acc[4 * j] = fmaf(m1, sx.x, acc[4 * j]);
                acc[4 * j + 2] = fmaf(m2, sx.x, acc[4 * j + 2]);
                acc[4 * j + 1] = fmaf(m1, sx.y, acc[4 * j + 1]);
                acc[4 * j + 3] = fmaf(m2, sx.y, acc[4 * j + 3]);
            }
        }
    };
    /* The last step is peeled off, so the loop body is the same at every step (with "if (more)" branches ptxas
     * also injected a wgmma wait, C7517). ptxas still reports C7514 (wgmma serialized: c0 is read at the top
     * while group 1, issued in the previous iteration, is in flight). The variants without it were slower
     * (2026-12-03h run 10): waiting for both groups at the top, 162 / 174 / 128 / 94.5 TFLOP/s on the four
     * lab shapes against 169 / 183 / 130 / 99; no group in flight over the back-edge, 158 / 159 / 124 / 93. */
    /* Q6_K: a group is one sub-block (16 columns, its own int8 scale): C = W x_lo + W x_hi from zero, then
     * acc = fma(C, d sc, acc); four a step, alternating between c0 and c1 as Q4_K's two do */
    auto issue6 = [&](int64_t kt, int u, float (&c)[64]) {
        const uint32_t sx = sbase + sl(kt) * STAGE + 32 * u, sw = sx + WS_W + cw * 64 * 128;
        wg_fence();
        wg_mma(c, wg_desc(sw), wg_desc(sx + WS_XL), 0);
        wg_mma(c, wg_desc(sw), wg_desc(sx), 1);
        wg_commit();
    };
    auto scale6 = [&](int64_t kt, int u, const float(&c)[64]) {
        const float *ds = (const float *)(sm + sl(kt) * STAGE + WS_SC);
        const float d1 = ds[4 * R1 + u], d2 = ds[4 * (R1 + 8) + u];
#pragma unroll
        for (int k = 0; k < 64; k++) acc[k] = fmaf(c[k], (k & 2) ? d2 : d1, acc[k]);
    };
    mbar_wait(full, 0);
    int64_t kt = kb;
    if constexpr (Q6K) {
        issue6(kb, 0, c0);
        issue6(kb, 1, c1);
        for (; kt + 1 < ke; kt++) {
            wg_wait<1>();
            scale6(kt, 0, c0);
            issue6(kt, 2, c0);
            wg_wait<1>();
            scale6(kt, 1, c1);
            issue6(kt, 3, c1);
            wg_wait<1>();
            scale6(kt, 2, c0);
            mbar_wait(full + 8 * sl(kt + 1), ph(kt + 1));
            issue6(kt + 1, 0, c0);
            wg_wait<1>();
            scale6(kt, 3, c1);
            __syncwarp();
            if (lane == 0) ws_arrive(empty + 8 * sl(kt));
            issue6(kt + 1, 1, c1);
        }
        wg_wait<1>();
        scale6(kt, 0, c0);
        issue6(kt, 2, c0);
        wg_wait<1>();
        scale6(kt, 1, c1);
        issue6(kt, 3, c1);
        wg_wait<1>();
        scale6(kt, 2, c0);
        wg_wait<0>();
        scale6(kt, 3, c1);
    } else {
        issue(kb, 0, c0);
        issue(kb, 1, c1);
        for (; kt + 1 < ke; kt++) {
            wg_wait<1>(); /* group 0 of step kt */
            scale(kt, 0, c0);
            /* the next step's group 0 runs while group 1 of this one is scaled */
            mbar_wait(full + 8 * sl(kt + 1), ph(kt + 1));
            issue(kt + 1, 0, c0);
            wg_wait<1>();
            scale(kt, 1, c1);
            __syncwarp();
            if (lane == 0) ws_arrive(empty + 8 * sl(kt)); /* this warp is done with the stage */
            issue(kt + 1, 1, c1);
        }
        wg_wait<1>();
        scale(kt, 0, c0);
        wg_wait<0>();
        scale(kt, 1, c1);
    }
#pragma unroll
    for (int j = 0; j < 16; j++)
#pragma unroll
        for (int e = 0; e < 4; e++) {
            const int64_t t = t0 + 8 * j + 2 * (lane & 3) + (e & 1), o = r0 + R1 + 8 * (e >> 1);
            if (t < T && o < n_out) {
                float *yp = y + ((int64_t)blockIdx.z * T + t) * n_out + o; /* split z's partials at z T n_out */
                const float yv = acc[4 * j + e] * (1.0f / xscale[t]); /* exact: a power of two */
                *yp = accumulate ? *yp + yv : yv;
            }
        }
#endif
}

/* fp16 parts of a decoded weight: F16 weights are their own high part, and so are BF16 weights (8 mantissa
 * bits) except under fp16's normal range (2^-14), where the subnormal rounding error is at most 2^-25
 * absolute; the others get a w_lo term */
template <int TYPE>
constexpr int g_w_parts() {
    return TYPE == MEMRA_TYPE_F16 || TYPE == MEMRA_TYPE_BF16 ? 1 : 2;
}

template <int TYPE, int NW, bool TM>
static cudaError_t launch_gemm_tm(const uint8_t *W, size_t rb, int64_t in, int64_t n_out, const float *x,
                                  const float *xscale, float *y, int64_t T, int accumulate, cudaStream_t s) {
    const int smem = 2 * G_STAGE(NW) * (int)sizeof(__half);
    cudaError_t e = cuda_smem_limit<k_gemm<TYPE, NW, TM>>(smem);
    if (e != cudaSuccess) return e;
    dim3 grid((unsigned)((T + GM - 1) / GM), (unsigned)((n_out + GN - 1) / GN));
    cuda_launch(k_gemm<TYPE, NW, TM>, grid, 256, smem, s, W, rb, in, n_out, x, xscale, y, T, accumulate);
    return cudaSuccess;
}

/* tm: the weight is tile-major (Q4_K or Q6_K) */
template <int TYPE, int NW>
static cudaError_t launch_gemm(const uint8_t *W, size_t rb, int64_t in, int64_t n_out, const float *x,
                               const float *xscale, float *y, int64_t T, int accumulate, cudaStream_t s, int tm) {
    if constexpr (TYPE == MEMRA_TYPE_Q4_K || TYPE == MEMRA_TYPE_Q6_K)
        if (tm) return launch_gemm_tm<TYPE, NW, true>(W, rb, in, n_out, x, xscale, y, T, accumulate, s);
    return launch_gemm_tm<TYPE, NW, false>(W, rb, in, n_out, x, xscale, y, T, accumulate, s);
}

/* Launch contract: grid (ceil(T / 32), ceil(n_out / 32)), block 128; F32
 * weights, in % 32 == 0. A 32 x 32 tile of y a block; thread i owns tokens
 * 2 (i / 8) + {0, 1} x rows 4 (i % 8) + {0, .., 3}, each output one fmaf
 * chain over the columns in order (so a token's result depends on its own x
 * and the row length only). Tiles of 32 columns of x and W pass through
 * shared memory transposed (column-major, row stride 36), the next tile's
 * loads in flight while this one is multiplied.
 * It was 256 threads of 2 x 2 outputs (8 bytes of shared loads per fmaf,
 * now 3). H100, 35B-A3B prefill 512 (bench/results/2026-12-06b-h100.md):
 * the loads in flight +1.7%; then this layout together with k_att_pf's
 * batched tile loads (attention.cu) +2.6%, not timed apart. */
__global__ void __launch_bounds__(128) k_sgemm_f32(const float *__restrict__ W, int64_t in, int64_t n_out,
                                                   const float *__restrict__ x, float *__restrict__ y, int64_t T,
                                                   int accumulate) {
    __shared__ __align__(16) float xs[32 * 36], ws[32 * 36];
    pdl_start();
    const int tid = threadIdx.x, tx = tid & 7, ty = tid >> 3;
    const int64_t t0 = (int64_t)blockIdx.x * 32, r0 = (int64_t)blockIdx.y * 32;
    /* loader: token / row lr and lr + 16, columns lc .. lc + 3 */
    const int lr = tid >> 3, lc = 4 * (tid & 7);
    const float4 z = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    const float *xr[2], *wr[2];
    bool xok[2], wok[2];
#pragma unroll
    for (int h = 0; h < 2; h++) {
        xok[h] = t0 + lr + 16 * h < T, wok[h] = r0 + lr + 16 * h < n_out;
        xr[h] = x + (xok[h] ? t0 + lr + 16 * h : 0) * in + lc, wr[h] = W + (wok[h] ? r0 + lr + 16 * h : 0) * in + lc;
    }
    float acc[2][4] = {};
    float4 xn[2], wn[2];
#pragma unroll
    for (int h = 0; h < 2; h++)
        xn[h] = xok[h] ? __ldg((const float4 *)xr[h]) : z, wn[h] = wok[h] ? __ldg((const float4 *)wr[h]) : z;
    for (int64_t k0 = 0; k0 < in; k0 += 32) {
        float4 xv[2], wv[2];
#pragma unroll
        for (int h = 0; h < 2; h++) {
            xv[h] = xn[h], wv[h] = wn[h];
            if (k0 + 32 < in) {
                xn[h] = xok[h] ? __ldg((const float4 *)(xr[h] + k0 + 32)) : z;
                wn[h] = wok[h] ? __ldg((const float4 *)(wr[h] + k0 + 32)) : z;
            }
        }
        __syncthreads(); /* the previous tile's readers */
#pragma unroll
        for (int h = 0; h < 2; h++) {
            const int c = lr + 16 * h;
            xs[(lc + 0) * 36 + c] = xv[h].x, xs[(lc + 1) * 36 + c] = xv[h].y;
            xs[(lc + 2) * 36 + c] = xv[h].z, xs[(lc + 3) * 36 + c] = xv[h].w;
            ws[(lc + 0) * 36 + c] = wv[h].x, ws[(lc + 1) * 36 + c] = wv[h].y;
            ws[(lc + 2) * 36 + c] = wv[h].z, ws[(lc + 3) * 36 + c] = wv[h].w;
        }
        __syncthreads();
#pragma unroll 8
        for (int k = 0; k < 32; k++) {
            const float2 a = *(const float2 *)(xs + k * 36 + 2 * ty);
            const float4 b = *(const float4 *)(ws + k * 36 + 4 * tx);
            acc[0][0] = fmaf(a.x, b.x, acc[0][0]);
            acc[0][1] = fmaf(a.x, b.y, acc[0][1]);
            acc[0][2] = fmaf(a.x, b.z, acc[0][2]);
            acc[0][3] = fmaf(a.x, b.w, acc[0][3]);
            acc[1][0] = fmaf(a.y, b.x, acc[1][0]);
            acc[1][1] = fmaf(a.y, b.y, acc[1][1]);
            acc[1][2] = fmaf(a.y, b.z, acc[1][2]);
            acc[1][3] = fmaf(a.y, b.w, acc[1][3]);
        }
    }
#pragma unroll
    for (int i = 0; i < 2; i++)
#pragma unroll
        for (int j = 0; j < 4; j++) {
            const int64_t t = t0 + 2 * ty + i, o = r0 + 4 * tx + j;
            if (t >= T || o >= n_out) continue;
            float *yp = y + t * n_out + o;
            *yp = accumulate ? *yp + acc[i][j] : acc[i][j];
        }
}

/* The narrow path's tokens per block NT (1, 2, 4, 8 or 16): the largest whose grid still has 4 blocks per SM.
 * launch_multi_type's NT = 16 for T >= 16 made a few rows times many tokens a handful of long warps: the GDN
 * beta / alpha rows (32 x {4096} Q8_0, 9B) took 121 us a launch at T = 512 (8 x 32 blocks) and as long at T =
 * 16, the 35B-A3B shared-expert gate (1 x {2048} F32) 62 us (ncu, bench/results/2026-12-06b-h100.md). NT moves
 * no bits: a row of a T-token product is the row computed with T = 1 (matvec.cuh). */
template <int TYPE, int NT>
static bool narrow_fills(int64_t n_out, int64_t T, int sms) {
    typedef mv_config<TYPE, NT> C;
    const int64_t r = NT > 1 && C::R > 1 ? C::R : 1; /* launch_matvec_multi_tm's R at these row counts */
    const int64_t bx = (n_out + C::WARPS * r - 1) / (C::WARPS * r), by = (T + NT - 1) / NT;
    return by <= 65535 && bx * by >= 4 * (int64_t)sms;
}

/* n_out <= G_MV_MAX_ROWS: matmul.cu's matvec (matvec.cuh), NT tokens per block (narrow_fills) */
template <int TYPE>
static cudaError_t launch_narrow(const uint8_t *W, size_t rb, int64_t in, int64_t n_out, const float *x, float *y,
                                 int64_t T, int accumulate, cudaStream_t s, int tm, int sms) {
    mv_multi_args a = {};
    a.W[0] = W, a.n_out[0] = n_out, a.y[0] = y;
    a.row_bytes = rb, a.in = in, a.T = T, a.accumulate = accumulate, a.tm = tm;
    /* the next smaller NT when this one does not fill the device, unless that one's grid would pass 65,535 */
    if (narrow_fills<TYPE, 16>(n_out, T, sms) || (T + 7) / 8 > 65535)
        launch_matvec_multi<TYPE, 16>(a, 1, false, x, s);
    else if (narrow_fills<TYPE, 8>(n_out, T, sms) || (T + 3) / 4 > 65535)
        launch_matvec_multi<TYPE, 8>(a, 1, false, x, s);
    else if (narrow_fills<TYPE, 4>(n_out, T, sms) || (T + 1) / 2 > 65535)
        launch_matvec_multi<TYPE, 4>(a, 1, false, x, s);
    else if (narrow_fills<TYPE, 2>(n_out, T, sms) || T > 65535)
        launch_matvec_multi<TYPE, 2>(a, 1, false, x, s);
    else
        launch_matvec_multi<TYPE, 1>(a, 1, false, x, s);
    return cudaSuccess;
}

/* The K split's sums: y[i] (+)= ((p_0[i] + p_1[i]) + p_2[i]) + ..., the S
 * partials of k_gemm_wg at part + z n in z order (n = T n_out). Launch
 * contract: n % 4 == 0, part and y 16-byte aligned. */
__global__ void __launch_bounds__(256) k_gemm_ksum(const float *__restrict__ part, int S, int64_t n,
                                                   float *__restrict__ y, int accumulate) {
    pdl_start();
    for (int64_t i = (int64_t)blockIdx.x * 256 + threadIdx.x; i < n / 4; i += (int64_t)gridDim.x * 256) {
        float4 v = __ldg((const float4 *)part + i);
        for (int z = 1; z < S; z++) {
            const float4 p = __ldg((const float4 *)(part + z * n) + i);
            v.x += p.x, v.y += p.y, v.z += p.z, v.w += p.w;
        }
        if (accumulate) {
            const float4 o = ((const float4 *)y)[i];
            v.x = o.x + v.x, v.y = o.y + v.y, v.z = o.z + v.z, v.w = o.w + v.w;
        }
        ((float4 *)y)[i] = v;
    }
}

/* The TMA map of k_gemm_wg's split activations xp ([2 T][in] fp16: the hi rows, then the lo rows): boxes of 64
 * columns x GM tokens in the 128-byte swizzle (wg_sw's layout); rows past 2 T read as zeros. The encoder is the
 * driver's, reached through cudart (no -lcuda). */
static cudaError_t wg_xmap(const __half *xp, int64_t T, int64_t in, CUtensorMap *map) {
    static PFN_cuTensorMapEncodeTiled_v12000 enc = NULL;
    static int tried = 0;
    if (!tried) {
        void *fn = NULL;
        cudaDriverEntryPointQueryResult q = cudaDriverEntryPointSymbolNotFound;
        if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000, cudaEnableDefault, &q) ==
                cudaSuccess &&
            q == cudaDriverEntryPointSuccess)
            enc = (PFN_cuTensorMapEncodeTiled_v12000)fn;
        (void)cudaGetLastError(); /* a failed query must not be reported by the next launch check */
        tried = 1;
    }
    if (!enc) return cudaErrorNotSupported;
    const cuuint64_t dim[2] = {(cuuint64_t)in, (cuuint64_t)(2 * T)}, stride[1] = {(cuuint64_t)in * sizeof(__half)};
    const cuuint32_t box[2] = {64, GM}, es[2] = {1, 1};
    const CUresult r = enc(map, CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 2, (void *)xp, dim, stride, box, es,
                           CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                           CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    return r == CUDA_SUCCESS ? cudaSuccess : cudaErrorInvalidValue;
}

/* Which k_gemm_wg variant a type takes: its TMA variant (XT = 1) unless MEMRA_GEMM_TMA=0 (Q8_0, Q4_K) or
 * MEMRA_GEMM_TMA6=0 (Q6_K: the cp.async kernel, XT = 0). The same bits. H100, T = 512 (bench/results/
 * 2026-12-06d-h100.md): 11-13% less time a Q8_0 or Q4_K GEMM in gemm_lab, 27b q4_k_m prefill 512 +6.6%, 9b q8_0
 * +8%, 9b q4_k_m +5.7% (run 2); Q6_K with its one raw slot a producer 15-17% less a GEMM, then 27b +3.6%,
 * 35b-a3b +1.7% (run 3). A three-slot raw ring that Q6_K's two producers shared (XT = 2, step k's bytes copied by
 * the producer that converted step k - 3) was slower: {17408, 5120} 911 -> 1,043 us, {5120, 10240} 562 -> 647, 27b
 * prefill 512 -3.2% (2026-12-06e run 1); removed. */
static inline int wg_xt(int type) {
    static int on = -1, m6 = -1;
    return type != MEMRA_TYPE_Q6_K ? env_on("MEMRA_GEMM_TMA", &on) : env_on("MEMRA_GEMM_TMA6", &m6);
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

/* The exact-weight paths' first step: T rows of x split by k_gemm_xsplit
 * into the backend's second workspace (xs, 4 bytes per element; the token
 * scales in tc_scale), with `after` more bytes reserved from the 16-byte
 * aligned end of the split rows (*after_off). */
static memra_status gemm_xsplit_run(memra_backend *be, const float *x, int64_t in, int64_t T, size_t after,
                                    size_t *after_off) {
    cuda_impl *c = cuda_of(be);
    const size_t off = ((size_t)T * (size_t)in * 2 * sizeof(__half) + 15) & ~(size_t)15;
    memra_status st = tc_scale_reserve(be, T);
    if (!st) st = cuda_xs_reserve(be, off + after);
    if (st) return st;
    if (after_off) *after_off = off;
    cuda_launch(k_gemm_xsplit, (unsigned)T, 256, 0, c->stream, x, in, T, c->tc_scale, (__half *)c->xs);
    return MEMRA_OK;
}

/* The Q8_0 path (k_gemm_xsplit + k_gemm_q8). */
static memra_status gemm_q8_run(memra_backend *be, const uint8_t *W, size_t rb, int64_t in, int64_t n_out,
                                const float *x, float *y, int64_t T, int accumulate) {
    cuda_impl *c = cuda_of(be);
    memra_status st = gemm_xsplit_run(be, x, in, T, 0, NULL);
    if (st) return st;
    const __half *xp = (const __half *)c->xs;
    const int smem = 2 * GQ_STAGE_BYTES;
    if ((st = cuda_check(be, cuda_smem_limit<k_gemm_q8>(smem), "gemm q8_0: shared memory"))) return st;
    dim3 grid((unsigned)((T + GM - 1) / GM), (unsigned)((n_out + GN - 1) / GN));
    cuda_launch(k_gemm_q8, grid, 256, smem, c->stream, W, rb, in, n_out, xp, (const float *)c->tc_scale, y, T,
                accumulate);
    return CUDA_LAUNCHED(be, "gemm q8_0");
}

/* k_gemm_wg's K split S for a weight of this shape: the S of 1..4 whose
 * grid at the engine's prefill batch (T = 512, four token tiles, one block
 * an SM) wastes the least of its last wave, by a model of the time: waves x
 * (steps a split + 4 for the block's fill and drain) + the partials' extra
 * traffic, all in steps of ~1.75 us (k_gemm_wg on the H100,
 * bench/results/2026-12-06c-h100.md). A function of the shape and the
 * device's SM count only, never of the launch's T, so a token's bits do not
 * depend on its batch. Why: {17408, 5120} is 40 row tiles, 160 blocks: 1.2
 * waves on 132 SMs, the second one 21% full. */
static int wg_ksplit(uint32_t type, int64_t in, int64_t n_out, int sms) {
    static int on = -1;
    if (!env_on("MEMRA_GEMM_KSPLIT", &on) || sms <= 0) return 1;
    const int64_t nk = in / GK, unit = type == MEMRA_TYPE_Q8_0 ? 1 : 4, blocks = 4 * ((n_out + GN - 1) / GN);
    int best = 1;
    double best_t = 0.0;
    for (int S = 1; S <= 4; S++) {
        if (nk % (unit * S) || (S > 1 && nk / S < 16)) continue;
        const double waves = (double)((blocks * S + sms - 1) / sms);
        /* the partials: written and read back, S + 1 passes over T n_out floats at ~2.5 TB/s, in 1.75 us steps */
        const double extra = S > 1 ? (double)(S + 1) * 512.0 * (double)n_out * 4.0 / 2.5e6 / 1.75 + 2.0 : 0.0;
        const double t = waves * ((double)nk / S + 4.0) + extra;
        if (S == 1 || t < best_t) best = S, best_t = t;
    }
    return best;
}

/* One k_gemm_wg<TYPE, TM, XT> launch (its shared memory limit set first) */
template <int TYPE, bool TM, int XT>
static memra_status gemm_wg_launch(memra_backend *be, dim3 grid, const uint8_t *W, size_t rb, int64_t in,
                                   int64_t n_out, const __half *xp, const float *xsum, float *y, int64_t T,
                                   int accumulate, const uint8_t *W2, int64_t n_out2, float *y2, int ry,
                                   const CUtensorMap &xmap) {
    constexpr int smem = WS_SMEM_TX(TYPE, XT);
    cuda_impl *c = cuda_of(be);
    memra_status st = cuda_check(be, cuda_smem_limit<k_gemm_wg<TYPE, TM, XT>>(smem), "gemm wg: shared memory");
    if (!st)
        cuda_launch(k_gemm_wg<TYPE, TM, XT>, grid, WS_THREADS, smem, c->stream, W, rb, in, n_out, xp, xsum,
                    (const float *)c->tc_scale, y, T, accumulate, W2, n_out2, y2, ry, xmap);
    return st;
}

/* The wgmma path (k_gemm_xsplit, for Q4_K k_gemm_xsum, then k_gemm_wg) in
 * the backend's second workspace (xs): the split activations xp (4 T in
 * bytes), then for Q4_K the group sums xsum (4 Tp in / 32 bytes, Tp = T
 * rounded up to 128, 16-byte aligned); the token scales in tc_scale. */
template <int TYPE, bool TM>
static memra_status gemm_wg_run(memra_backend *be, const uint8_t *W, size_t rb, int64_t in, int64_t n_out,
                                const float *x, float *y, int64_t T, int accumulate, const uint8_t *W2 = NULL,
                                int64_t n_out2 = 0, float *y2 = NULL) {
    constexpr bool q4k = TYPE == MEMRA_TYPE_Q4_K;
    cuda_impl *c = cuda_of(be);
    const int64_t Tp = (T + GM - 1) / GM * GM;
    const int S = W2 || (T * n_out) % 4 ? 1 : wg_ksplit(TYPE, in, n_out, c->sm_count);
    const int ry = (int)((n_out + GN - 1) / GN), ry2 = W2 ? (int)((n_out2 + GN - 1) / GN) : 0;
    /* after the split activations: (Q4_K) the group sums, then (S > 1) the partials, each 16-byte aligned */
    const size_t sum_bytes = q4k ? ((size_t)Tp * (size_t)(in / 32) * sizeof(float) + 15) & ~(size_t)15 : 0;
    const size_t part_bytes = S > 1 ? (size_t)S * (size_t)T * (size_t)n_out * sizeof(float) : 0;
    size_t sum_off = 0;
    memra_status st = gemm_xsplit_run(be, x, in, T, sum_bytes + part_bytes, &sum_off);
    if (st) return st;
    const __half *xp = (const __half *)c->xs;
    float *xsum = q4k ? (float *)((uint8_t *)c->xs + sum_off) : NULL;
    float *part = S > 1 ? (float *)((uint8_t *)c->xs + sum_off + sum_bytes) : NULL;
    if (q4k) cuda_launch(k_gemm_xsum, (unsigned)Tp, 256, 0, c->stream, xp, in, T, Tp, xsum);
    dim3 grid((unsigned)((T + GM - 1) / GM), (unsigned)(ry + ry2), (unsigned)S);
    CUtensorMap xmap;
    memset(&xmap, 0, sizeof xmap);
    int xt = wg_xt(TYPE);
    if (xt && wg_xmap(xp, T, in, &xmap) != cudaSuccess) xt = 0; /* no tensor map: the cp.async kernel */
    float *yo = S > 1 ? part : y;
    const int acc = S > 1 ? 0 : accumulate;
    if (xt)
        st = gemm_wg_launch<TYPE, TM, 1>(be, grid, W, rb, in, n_out, xp, xsum, yo, T, acc, W2, n_out2, y2, ry, xmap);
    else
        st = gemm_wg_launch<TYPE, TM, 0>(be, grid, W, rb, in, n_out, xp, xsum, yo, T, acc, W2, n_out2, y2, ry, xmap);
    if (st) return st;
    if (S > 1) {
        const int64_t n = T * n_out, nb = (n / 4 + 255) / 256;
        cuda_launch(k_gemm_ksum, (unsigned)(nb < 4 * c->sm_count ? nb : 4 * c->sm_count), 256, 0, c->stream,
                    (const float *)part, S, n, y, accumulate);
    }
    return CUDA_LAUNCHED(be, q4k                           ? "gemm wg q4_k"
                             : TYPE == MEMRA_TYPE_Q6_K ? "gemm wg q6_k"
                                                       : "gemm wg q8_0");
}

/* gemm_wg_run for w's type and layout (cuda_gemm_wg_takes: Q8_0, Q4_K or Q6_K), with w2 (of the same type and
 * layout) into y2 when given */
static memra_status gemm_wg_typed(memra_backend *be, const memra_weight *w, const float *x, float *y, int64_t T,
                                  int accumulate, const memra_weight *w2 = NULL, float *y2 = NULL) {
    const int64_t in = w->ne[0], n_out = w->ne[1], n2 = w2 ? w2->ne[1] : 0;
    const size_t rb = w->row_bytes;
    const uint8_t *W = (const uint8_t *)w->data, *W2 = w2 ? (const uint8_t *)w2->data : NULL;
    switch (w->type) {
    case MEMRA_TYPE_Q6_K:
        return cuda_weight_tm(be, w)
                   ? gemm_wg_run<MEMRA_TYPE_Q6_K, true>(be, W, rb, in, n_out, x, y, T, accumulate, W2, n2, y2)
                   : gemm_wg_run<MEMRA_TYPE_Q6_K, false>(be, W, rb, in, n_out, x, y, T, accumulate, W2, n2, y2);
    case MEMRA_TYPE_Q4_K:
        return cuda_weight_tm(be, w)
                   ? gemm_wg_run<MEMRA_TYPE_Q4_K, true>(be, W, rb, in, n_out, x, y, T, accumulate, W2, n2, y2)
                   : gemm_wg_run<MEMRA_TYPE_Q4_K, false>(be, W, rb, in, n_out, x, y, T, accumulate, W2, n2, y2);
    default: return gemm_wg_run<MEMRA_TYPE_Q8_0, false>(be, W, rb, in, n_out, x, y, T, accumulate, W2, n2, y2);
    }
}

/* k_gemm_wg's device: compute capability 9.0, which runs the sm_90a code
 * (the only Hopper build: see the #error above k_gemm_wg). Asked once; one
 * device per process. */
static int wg_device(void) {
    static int ok = -1;
    if (ok < 0) {
        int dev = 0, major = 0, minor = 0;
        ok = cudaGetDevice(&dev) == cudaSuccess &&
             cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) == cudaSuccess &&
             cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev) == cudaSuccess && major == 9 &&
             minor == 0;
        (void)cudaGetLastError(); /* a failed query must not be reported by the next launch check */
    }
    return ok;
}

/* Q6_K takes the GEMM unless MEMRA_GEMM_Q6=0 (then mmvg, as before it had
 * a wgmma path). */
int cuda_gemm_wg_takes(uint32_t type, int64_t in, int64_t n_out) {
    static int on = -1, q6 = -1;
    const int shape_ok =
        (type == MEMRA_TYPE_Q8_0 && in % GK == 0) || (type == MEMRA_TYPE_Q4_K && in % 256 == 0) ||
        (type == MEMRA_TYPE_Q6_K && in % 256 == 0 && env_on("MEMRA_GEMM_Q6", &q6));
    return shape_ok && n_out > G_MV_MAX_ROWS && env_on("MEMRA_GEMM_WG", &on) && wg_device();
}

int cuda_gemm_wg_fills(memra_backend *be, int64_t n_out) {
    const int64_t T = 512; /* the engine's prefill batch (engine.c, max_batch): never the launch's own T */
    const int64_t tiles = ((T + GM - 1) / GM) * ((n_out + GN - 1) / GN), sms = cuda_of(be)->sm_count;
    const int64_t waves = (tiles + sms - 1) / sms;
    return sms > 0 && tiles * 2 >= waves * sms; /* half of their waves (2026-12-03h; was 80% for the slower kernel) */
}

/* Whether cuda_gemm_tc_pair takes w1 and w2: both on the wgmma GEMM (and not
 * on mmvg), of one type, layout and row length, and their joint grid needs
 * no K split (wg_ksplit of the joint shape is 1, as it is for each of
 * 27b's and 9b's gate / up alone, so the pair keeps their bits). A function
 * of the shapes only. MEMRA_GEMM_PAIR=0: never. */
int cuda_gemm_wg_pairs(memra_backend *be, const memra_weight *w1, const memra_weight *w2) {
    static int on = -1;
    const int64_t in = w1->ne[0];
    return env_on("MEMRA_GEMM_PAIR", &on) && w1->type == w2->type && in == w2->ne[0] &&
           cuda_weight_tm(be, w1) == cuda_weight_tm(be, w2) && w1->row_bytes == w2->row_bytes &&
           cuda_gemm_wg_takes(w1->type, in, w1->ne[1]) && cuda_gemm_wg_takes(w2->type, in, w2->ne[1]) &&
           wg_ksplit(w1->type, in, w1->ne[1] + w2->ne[1], cuda_of(be)->sm_count) == 1;
}

/* y1 = w1 x and y2 = w2 x (T >= 16 tokens) in one k_gemm_wg launch, after one
 * k_gemm_xsplit (and k_gemm_xsum) of x: the two weights' row tiles share the
 * grid's waves. Why: 27b's gate and up {5120, 17408} are 544 blocks each at
 * T = 512, 4.1 waves on 132 SMs, so 10 waves for the two apart and 9
 * together. matmul_swiglu takes it for gate and up, matmul_multi for two
 * weights that would each run cuda_gemm_tc (the GDN in-projections qkv and
 * z). Contract: cuda_gemm_wg_pairs(be, w1, w2). */
memra_status cuda_gemm_tc_pair(memra_backend *be, const memra_weight *w1, const memra_weight *w2, const float *x,
                               float *y1, float *y2, int64_t T) {
    return gemm_wg_typed(be, w1, x, y1, T, 0, w2, y2);
}

memra_status cuda_gemm_tc(memra_backend *be, const memra_weight *w, const float *x, float *y, int64_t T,
                          int accumulate) {
    int64_t in = w->ne[0], n_out = w->ne[1];
    size_t rb = w->row_bytes;
    const uint8_t *W = (const uint8_t *)w->data;
    cudaStream_t s = cuda_of(be)->stream;
    const bool narrow = n_out <= G_MV_MAX_ROWS;
    const int tm = cuda_weight_tm(be, w);
    if (narrow && w->type == MEMRA_TYPE_F32 && n_out > G_MV_MAX_ROWS_F32) {
        cuda_launch(k_sgemm_f32, dim3((unsigned)((T + 31) / 32), (unsigned)((n_out + 31) / 32)), 128, 0, s,
                    (const float *)w->data, in, n_out, x, y, T, accumulate);
        return CUDA_LAUNCHED(be, "gemm f32");
    }
    if (cuda_gemm_wg_takes(w->type, in, n_out)) return gemm_wg_typed(be, w, x, y, T, accumulate);
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
        e = narrow ? launch_narrow<TY>(W, rb, in, n_out, x, y, T, accumulate, s, tm, cuda_of(be)->sm_count) \
                   : launch_gemm<TY, g_w_parts<TY>()>(W, rb, in, n_out, x, xs, y, T, accumulate, s, tm); \
        break;
        CUDA_FOR_EACH_TYPE(TC_CASE)
#undef TC_CASE
    default: return cuda_fail(be, MEMRA_ERR_UNSUPPORTED, "gemm %s: unsupported type", w->name ? w->name : "?");
    }
    if (e != cudaSuccess) return cuda_check(be, e, "gemm");
    return CUDA_LAUNCHED(be, "gemm");
}
#endif
