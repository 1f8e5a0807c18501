/* The warp-per-row dot product core shared by matmul.cu and moe.cu.
 *
 * One warp computes the dot products of one weight row (any supported type)
 * with up to NT activation rows. The row is walked 256 elements (8 groups of
 * 32) per step: lane l owns quarter q = l % 4 (8 elements) of group
 * 8 * step + l / 4, so a warp reads 256 contiguous activations (two 16-byte
 * loads per lane, coalesced) and the weight bytes of 8 consecutive groups.
 * Each lane dequantizes its 8 weights once (dq8) and multiplies them into
 * every token's accumulators: 2 independent fp32 chains per token (even /
 * odd elements), merged as c0 + c1, then summed over the warp with a fixed
 * butterfly. The order of every operation depends only on the row length,
 * never on NT, nt or the other tokens: a token's result is bit-identical
 * whatever batch it is computed in (batch invariance). FMAs are written out
 * (fmaf) so the compiler cannot contract differently per NT.
 *
 * warp_row_dot (one row; moe.cu) and warp_rows_dot + k_matvec_multi (R rows
 * per warp; matmul.cu's T < 16 path) do the same operations per row, so the two
 * give the same bits. The T = 1 path is issue-bound for the quantized types
 * (~4 instructions per weight with fp32 activations; bench/results/matvec.md).
 *
 * Tile-major Q4_K and Q6_K weights (common.cuh; TM = true): rows[r] points
 * at the row's super-block 0 and its super-block g / 8 is g / 8 2,304
 * (3,360) bytes further (dq8_tm): the same dq8 on the same bytes.
 *
 * Contract: x rows 16-byte aligned, x_stride a multiple of 4 floats, the row
 * length a multiple of 32 (of the type's block size for the bigger blocks). */
#ifndef MEMRA_CUDA_MATVEC_CUH
#define MEMRA_CUDA_MATVEC_CUH

#include "backend/cuda/common.cuh"
#include "backend/cuda/quant.cuh"

/* dq8 of group g of a row starting at row: in the file's layout, or (TM,
 * Q4_K or Q6_K) tile-major, where the row's super-block g / 8 lies at row +
 * (g / 8) tm_sb_stride. */
template <int TYPE, bool TM>
__device__ __forceinline__ void dq8_tm(const uint8_t *__restrict__ row, int64_t g, int q, float *v) {
    static_assert(!TM || TYPE == MEMRA_TYPE_Q4_K || TYPE == MEMRA_TYPE_Q6_K, "tile-major weights are Q4_K or Q6_K");
    if constexpr (TM)
        dq8<TYPE>(row + (g >> 3) * tm_sb_stride(TYPE, true), g & 7, q, v);
    else
        dq8<TYPE>(row, g, q, v);
}

template <int TYPE, int NT>
__device__ __forceinline__ void warp_row_dot(const uint8_t *__restrict__ row, int64_t n_groups,
                                             const float *__restrict__ x, int64_t x_stride, int nt, float *res) {
    const int lane = threadIdx.x & 31, q = lane & 3;
    float acc[NT][2];
#pragma unroll
    for (int t = 0; t < NT; t++) acc[t][0] = acc[t][1] = 0.0f;
#pragma unroll 4
    for (int64_t g = lane >> 2; g < n_groups; g += 8) {
        float v[8];
        dq8<TYPE>(row, g, q, v);
#pragma unroll
        for (int t = 0; t < NT; t++) {
            if (t < nt) {
                const float4 *xp = (const float4 *)(x + (int64_t)t * x_stride + g * 32 + 8 * q);
                float4 a = __ldg(xp), b = __ldg(xp + 1);
                acc[t][0] = fmaf(v[0], a.x, acc[t][0]);
                acc[t][1] = fmaf(v[1], a.y, acc[t][1]);
                acc[t][0] = fmaf(v[2], a.z, acc[t][0]);
                acc[t][1] = fmaf(v[3], a.w, acc[t][1]);
                acc[t][0] = fmaf(v[4], b.x, acc[t][0]);
                acc[t][1] = fmaf(v[5], b.y, acc[t][1]);
                acc[t][0] = fmaf(v[6], b.z, acc[t][0]);
                acc[t][1] = fmaf(v[7], b.w, acc[t][1]);
            }
        }
    }
#pragma unroll
    for (int t = 0; t < NT; t++) res[t] = warp_sum(__fadd_rn(acc[t][0], acc[t][1]));
}

/* The same per-row computation for R rows at once: each lane loads its 8
 * activations of a token once and uses them for all R rows, which divides
 * the activation traffic through L1 by R (for a 4.5-bit type a warp
 * otherwise reads 7 times more activation bytes from L1 than weight bytes
 * from DRAM), and the weights of U steps (U * R independent loads per lane)
 * are fetched before any of them is used, to keep enough bytes in flight.
 * Row r's operations are exactly warp_row_dot's (same lane layout, steps in
 * the same order, same fmaf chains, same butterfly), so a row's result does
 * not depend on R, U, NT or which rows share its warp. rows[r] must be valid
 * pointers (callers repeat the last row past the end and drop its result). */
template <int NT, int R>
__device__ __forceinline__ void mv_fma_step(float (*acc)[R][2], const float (*v)[8], const float *__restrict__ x,
                                            int64_t x_stride, int g, int q, int nt) {
#pragma unroll
    for (int t = 0; t < NT; t++) {
        if (t < nt) {
            const float4 *xp = (const float4 *)(x + (int64_t)t * x_stride + g * 32 + 8 * q);
            float4 a = __ldg(xp), b = __ldg(xp + 1);
#pragma unroll
            for (int r = 0; r < R; r++) {
                acc[t][r][0] = fmaf(v[r][0], a.x, acc[t][r][0]);
                acc[t][r][1] = fmaf(v[r][1], a.y, acc[t][r][1]);
                acc[t][r][0] = fmaf(v[r][2], a.z, acc[t][r][0]);
                acc[t][r][1] = fmaf(v[r][3], a.w, acc[t][r][1]);
                acc[t][r][0] = fmaf(v[r][4], b.x, acc[t][r][0]);
                acc[t][r][1] = fmaf(v[r][5], b.y, acc[t][r][1]);
                acc[t][r][0] = fmaf(v[r][6], b.z, acc[t][r][0]);
                acc[t][r][1] = fmaf(v[r][7], b.w, acc[t][r][1]);
            }
        }
    }
}

template <int TYPE, int NT, int R, int U, bool TM = false>
__device__ __forceinline__ void warp_rows_dot(const uint8_t *const *rows, int64_t n_groups, const float *__restrict__ x,
                                              int64_t x_stride, int nt, float (*res)[R]) {
    const int lane = threadIdx.x & 31, q = lane & 3;
    float acc[NT][R][2];
#pragma unroll
    for (int t = 0; t < NT; t++)
#pragma unroll
        for (int r = 0; r < R; r++) acc[t][r][0] = acc[t][r][1] = 0.0f;
    const int ng = (int)n_groups;
    int g = lane >> 2;
#pragma unroll 1
    for (; g + 8 * (U - 1) < ng; g += 8 * U) {
        float v[U][R][8];
#pragma unroll
        for (int u = 0; u < U; u++)
#pragma unroll
            for (int r = 0; r < R; r++) dq8_tm<TYPE, TM>(rows[r], g + 8 * u, q, v[u][r]);
#pragma unroll
        for (int u = 0; u < U; u++) mv_fma_step<NT, R>(acc, v[u], x, x_stride, g + 8 * u, q, nt);
    }
#pragma unroll 1
    for (; g < ng; g += 8) {
        float v[R][8];
#pragma unroll
        for (int r = 0; r < R; r++) dq8_tm<TYPE, TM>(rows[r], g, q, v[r]);
        mv_fma_step<NT, R>(acc, v, x, x_stride, g, q, nt);
    }
#pragma unroll
    for (int t = 0; t < NT; t++)
#pragma unroll
        for (int r = 0; r < R; r++) res[t][r] = warp_sum(__fadd_rn(acc[t][r][0], acc[t][r][1]));
}

/* The k_matvec launch: up to 4 weights of one type and row length in one
 * grid. Block b belongs to weight i for blk0[i] <= b < blk0[i + 1] and owns
 * rows (b - blk0[i]) * WARPS * R .. + WARPS * R of it (warp w: R rows from
 * (b - blk0[i]) * WARPS * R + w * R) for tokens [by * NT, by * NT + NT) ∩
 * [0, T). accumulate: y += instead of y =. SWIGLU: one weight pair (W[0] =
 * gate, W[1] = up), each warp computes gate row o (rows[0]) and up row o
 * (rows[1]) and writes silu(g) * u (misc.cu k_swiglu's expression) to y[0].
 * warp_rows_dot gives every row the same bits whatever R, the other rows of
 * its warp and the other weights of the launch, so matmul, matmul_multi and
 * matmul_swiglu agree bit for bit. */
struct mv_multi_args {
    const uint8_t *W[4];
    int64_t n_out[4];
    float *y[4];
    int blk0[5];
    size_t row_bytes;
    int64_t in, T;
    int accumulate;
    int tm; /* 1: every W is tile-major Q4_K or Q6_K (common.cuh) */
};

/* Launch contract: grid (blk0[4], ceil(T / NT)), block 32 * WARPS, W rows
 * row_bytes apart and 16-byte aligned (cudaMalloc; the Q4_K/Q5_K/IQ4_XS/
 * NVFP4/Q2_K decoders use aligned wide loads); x rows `in` floats apart,
 * 16-byte aligned; in % 32 == 0 (the type's block size). TM: the weights
 * are tile-major (Q4_K or Q6_K, a.tm). */
template <int TYPE, int NT, int R, int WARPS, int U, bool SWIGLU, bool TM = false>
__global__ void __launch_bounds__(32 * WARPS) k_matvec_multi(mv_multi_args a, const float *__restrict__ x) {
    pdl_start();
    const int wi = cuda_blk_owner(a.blk0, (int)blockIdx.x);
    const int64_t n_out = a.n_out[wi];
    constexpr int RO = SWIGLU ? 1 : R; /* output rows per warp */
    const int64_t blk_row = (int64_t)((int)blockIdx.x - a.blk0[wi]) * WARPS * RO;
    const int64_t row0 = blk_row + (int64_t)(threadIdx.x >> 5) * RO;
    if (row0 >= n_out) return;
    const int64_t t0 = (int64_t)blockIdx.y * NT;
    const int nt = (int)min((int64_t)NT, a.T - t0);
    const uint8_t *rows[R];
#pragma unroll
    for (int r = 0; r < R; r++)
        rows[r] = SWIGLU ? a.W[r] + tm_row_off(TYPE, a.row_bytes, row0, TM)
                         : a.W[wi] + tm_row_off(TYPE, a.row_bytes, min(row0 + r, n_out - 1), TM);
    float res[NT][R];
    warp_rows_dot<TYPE, NT, R, U, TM>(rows, a.in / 32, x + t0 * a.in, a.in, nt, res);
    if ((threadIdx.x & 31) != 0) return;
#pragma unroll
    for (int t = 0; t < NT; t++) {
        if (t >= nt) continue;
        if constexpr (SWIGLU) {
            a.y[0][(t0 + t) * n_out + row0] = silu_f(res[t][0]) * res[t][1];
        } else {
#pragma unroll
            for (int r = 0; r < R; r++) {
                if (row0 + r >= n_out) continue;
                float *yp = a.y[wi] + (t0 + t) * n_out + row0 + r;
                *yp = a.accumulate ? *yp + res[t][r] : res[t][r];
            }
        }
    }
}

/* Production configuration of the T < 16 path, by token bucket NT: rows per
 * warp R (fewer for big NT: the accumulators are NT * R * 2 floats), warps
 * per block and weight steps fetched ahead U; at T = 1, matrices with fewer
 * than R * MIN_WARPS rows run R = 1, U = U1 instead, so that enough warps
 * stream (R only changes speed, never a row's result). Chosen from the lab
 * (bench/results/matvec.md): R = 2 and U = 1 on {5120, 17408}, R = 1 on
 * {17408, 5120} at T = 1, R = 2 at T = 8 on both. bench/kernels/matvec_lab.cu
 * variant 0 is the R config. */
template <int TYPE, int NT>
struct mv_config {
    static constexpr int R = NT <= 8 ? 2 : 1;
    static constexpr int WARPS = 4;
    static constexpr int U = 1;
    static constexpr int U1 = 1;
    static constexpr int64_t MIN_WARPS = NT == 1 ? 132 * 32 : 0; /* T > 1: x traffic needs R = 2 */
};

/* n weights in a (swiglu: the pair, n = 1), tokens NT at a time, with the
 * production configuration mv_config<TYPE, NT>; R from the rows of the
 * whole launch (R only changes speed, never a row's bits). TM: a.tm's
 * layout (launch_matvec_multi picks it). */
template <int TYPE, int NT, bool TM>
static void launch_matvec_multi_tm(mv_multi_args a, int n, bool swiglu, const float *x, cudaStream_t s) {
    typedef mv_config<TYPE, NT> C;
    const dim3 block(32 * C::WARPS);
    const unsigned gy = (unsigned)((a.T + NT - 1) / NT);
    if (swiglu) {
        a.blk0[0] = 0, a.blk0[1] = a.blk0[2] = a.blk0[3] = a.blk0[4] = (int)((a.n_out[0] + C::WARPS - 1) / C::WARPS);
        cuda_launch(k_matvec_multi<TYPE, NT, 2, C::WARPS, C::U, true, TM>, dim3((unsigned)a.blk0[1], gy), block, 0, s,
                    a, x);
        return;
    }
    int64_t total = 0;
    for (int i = 0; i < n; i++) total += a.n_out[i];
    const bool use_r = C::R > 1 && total >= C::R * C::MIN_WARPS;
    const int64_t rows_per_block = (int64_t)C::WARPS * (use_r ? C::R : 1);
    a.blk0[0] = 0;
    for (int i = 0; i < 4; i++)
        a.blk0[i + 1] = a.blk0[i] + (i < n ? (int)((a.n_out[i] + rows_per_block - 1) / rows_per_block) : 0);
    const dim3 grid((unsigned)a.blk0[n], gy);
    if (use_r)
        cuda_launch(k_matvec_multi<TYPE, NT, C::R, C::WARPS, C::U, false, TM>, grid, block, 0, s, a, x);
    else
        cuda_launch(k_matvec_multi<TYPE, NT, 1, C::WARPS, C::U1, false, TM>, grid, block, 0, s, a, x);
}

template <int TYPE, int NT>
static void launch_matvec_multi(const mv_multi_args &a, int n, bool swiglu, const float *x, cudaStream_t s) {
    if constexpr (TYPE == MEMRA_TYPE_Q4_K || TYPE == MEMRA_TYPE_Q6_K)
        if (a.tm) return launch_matvec_multi_tm<TYPE, NT, true>(a, n, swiglu, x, s);
    launch_matvec_multi_tm<TYPE, NT, false>(a, n, swiglu, x, s);
}

/* The token bucket NT = 1, 2, 4, 8 or 16 (T >= 16: 16 at a time) for a.T. */
template <int TYPE>
static void launch_multi_type(const mv_multi_args &a, int n, bool swiglu, const float *x, cudaStream_t s) {
    if (a.T == 1) launch_matvec_multi<TYPE, 1>(a, n, swiglu, x, s);
    else if (a.T == 2) launch_matvec_multi<TYPE, 2>(a, n, swiglu, x, s);
    else if (a.T <= 4) launch_matvec_multi<TYPE, 4>(a, n, swiglu, x, s);
    else if (a.T <= 8) launch_matvec_multi<TYPE, 8>(a, n, swiglu, x, s);
    else launch_matvec_multi<TYPE, 16>(a, n, swiglu, x, s);
}

#endif
