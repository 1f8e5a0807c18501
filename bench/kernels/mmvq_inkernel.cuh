/* LAB ONLY (bench/kernels/mmvq_lab.cu): the int8 decode matvec of Q4_K rows
 * as a drop-in for k_mmv (mmv.cuh: same mmv_args, T = 1..15, multi-weight,
 * swiglu and input-norm launches), with the activations converted inside
 * the kernel. It passed `memra gate kernels --model 9b` / `--model 27b` on
 * the H200 and was NOT faster, so production stays on k_mmv
 * (bench/results/2026-12-03e-h200.md):
 *  - first version, each warp converting a super-block's x right after
 *    issuing its weight loads (as k_mmv does): 9b q4_k_m decode 260.5 tok/s
 *    against k_mmv's 268.0;
 *  - this version, each warp converting its whole super-block range first
 *    (mmvq_chunk at a time), then the MMAs: 243 tok/s; back to back in the
 *    lab 29-34% of copy against k_mmv's 31-39% (PF = 1, the next
 *    super-block's weights in registers: 21-24%).
 * The prototype with the conversion in a separate launch (k_mmvq_lab + its
 * prep) runs at 42-50% back to back, the prep not counted. Reading: the
 * integer core is cheaper, but every block converting the whole x again
 * (384 blocks x 16 super-blocks per {4096, 12288} launch) costs about
 * what it saves; a conversion done once per token (in the kernel that
 * writes x, or a prep launch hidden by PDL) is the way to use it.
 *
 * The arithmetic and its pieces (mmvq_convert, mmvq_sb, mmvq_finish) are
 * production's (src/backend/cuda/mmvq.cuh); here they read and write a
 * warp's staging area instead of the prep's planes.
 *
 * Arithmetic, per (token, super-block):
 *  - X = rint(x 2^e), e chosen from the super-block max so that max|X| is
 *    in [2^20, 2^21): 22-bit fixed point, split into three signed 8-bit
 *    limbs X = 2^16 l0 + 2^8 l1 + l2 (balanced digits). Error: half a unit
 *    of 2^-e per element, ~2.4e-6 of max|y| on the lab's rows with x40
 *    outliers (k_mmv: 5e-7), a quarter of the gate's 1e-5.
 *  - B columns (token, limb): column n = 3 (token % 2) + limb, so one MMA
 *    serves two tokens (columns 6, 7 stay zero). Products and sums are
 *    exact integers (any order gives the same bits); the 6-bit sub-scale
 *    multiplies each sub-block's sums by an integer multiply-add
 *    (|A| < 2^25).
 *  - Per super-block, in fp32: acc_n = fma(d 2^-e, A_n, acc_n) per column;
 *    the Q4_K min term, dmin 2^-e sum_j m_j S_j (S_j = the sub-block sums of
 *    X, exact in int, one rounding to float), goes into the limb-0 column
 *    times 2^-16 (exact), so the row's value is (2^16 acc_0 + 2^8 acc_1) +
 *    acc_2 after the warps' partial columns are added in warp order.
 *  - A NaN or Inf among a super-block's x makes its 2^-e NaN: they propagate.
 * Every order is a function of the row length (the K split, mmv_ks) and the
 * token's own x: never of T, the token's pair, the grid, or which rows share
 * a block. matmul, matmul_multi and matmul_swiglu give a row the same bits.
 *
 * Layout: the block and row mapping of k_mmv (mmv_args, mmv_blocks; KS warps
 * split the row into fixed super-block ranges; a warp owns two 16-row tiles,
 * for swiglu the gate and up tiles of the same 16 rows). Each warp converts
 * the x of its own super-blocks (lane L: elements 8 L .. 8 L + 7) into its
 * shared-memory staging area in the order of the MMA's B fragments; with
 * the input norm (mmv_args.nw) it converts x * nw and the row's value is
 * multiplied by 1 / rms at the end (the sum of squares from the staging).
 *
 * Contract: in % 256 == 0, rows 16-byte aligned (144-byte blocks), x 16-byte
 * aligned, T in 1..15. */
#ifndef MEMRA_BENCH_MMVQ_INKERNEL_CUH
#define MEMRA_BENCH_MMVQ_INKERNEL_CUH

#include "backend/cuda/mmvq.cuh"
#include "mmvq_sb_ref.cuh"

/* A token's staging area: limb planes [limb][t][sub-block][8 bytes] with a
 * t stride of 80 and a limb stride of 320 bytes, then S_j (8 floats) and
 * 2^-e; 1088 bytes per token. The paddings put the 8 lanes of each phase of
 * the B fragments' lds.128 in distinct banks (tokens 2p and 2p + 1 too). */
#define MQ_T_B 80
#define MQ_LIMB_B 320
#define MQ_S_OFF 960
#define MQ_SINV_OFF 992
#define MQ_TOK_B 1088

/* mmvq_sb's activations from a warp's staging area (token tok at stg + tok
 * MQ_TOK_B) */
struct mmvq_ssrc {
    const uint8_t *stg;
    __device__ __forceinline__ const uint4 *limbs(int tok, int limb, int t) const {
        return (const uint4 *)(stg + tok * MQ_TOK_B + limb * MQ_LIMB_B + t * MQ_T_B);
    }
    __device__ __forceinline__ uint4 ld(const uint4 *p) const { return *p; }
    __device__ __forceinline__ float sx(int tok) const { return *(const float *)(stg + tok * MQ_TOK_B + MQ_SINV_OFF); }
    __device__ __forceinline__ float s(int tok, int j) const {
        return ((const float *)(stg + tok * MQ_TOK_B + MQ_S_OFF))[j];
    }
};

/* Super-blocks sbA .. sbA + n - 1 of tokens 0..T-1 into the warp's staging
 * area stg ((i T + t) MQ_TOK_B for super-block sbA + i, token t): lane L
 * converts elements 8 L .. 8 L + 7 of x (times the norm weight nw when
 * given) with mmvq_convert. The x loads of MQ_CH super-blocks go out
 * together. With nw, ssw[t] (lane 0) accumulates each super-block's sum of
 * x^2 (a lane's 8 in order, then the warp's butterfly) in super-block
 * order: the input norm's sum, applied after the products. */
#define MQ_CH 2
__device__ __forceinline__ void mmvq_stage(const float *__restrict__ x, int64_t in, int T, int sbA, int n, int lane,
                                           uint8_t *stg, const float *__restrict__ nw, float *ssw) {
    __syncwarp(); /* the previous chunk's fragments are read */
    for (int t = 0; t < T; t++) {
        for (int c = 0; c < n; c += MQ_CH) {
            float4 u[MQ_CH][2], wv[MQ_CH][2];
#pragma unroll
            for (int k = 0; k < MQ_CH; k++) {
                if (c + k >= n) break;
                const int64_t off = (int64_t)(sbA + c + k) * 256 + 8 * lane;
                const float4 *p = (const float4 *)(x + (int64_t)t * in + off);
                u[k][0] = __ldg(p), u[k][1] = __ldg(p + 1);
                if (nw) wv[k][0] = __ldg((const float4 *)(nw + off)), wv[k][1] = __ldg((const float4 *)(nw + off) + 1);
            }
#pragma unroll
            for (int k = 0; k < MQ_CH; k++) {
                if (c + k >= n) break;
                const float xr[8] = {u[k][0].x, u[k][0].y, u[k][0].z, u[k][0].w,
                                     u[k][1].x, u[k][1].y, u[k][1].z, u[k][1].w};
                float v[8], m = 0.0f, z = 0.0f;
                if (nw) {
                    const float wr[8] = {wv[k][0].x, wv[k][0].y, wv[k][0].z, wv[k][0].w,
                                         wv[k][1].x, wv[k][1].y, wv[k][1].z, wv[k][1].w};
                    float ss = 0.0f;
#pragma unroll
                    for (int i = 0; i < 8; i++) v[i] = __fmul_rn(xr[i], wr[i]), ss = fmaf(xr[i], xr[i], ss);
                    ss = warp_sum(ss);
                    if (lane == 0) ssw[t] = __fadd_rn(ssw[t], ss);
                } else {
#pragma unroll
                    for (int i = 0; i < 8; i++) v[i] = xr[i];
                }
#pragma unroll
                for (int i = 0; i < 8; i++) m = fmaxf(m, fabsf(v[i])), z = fmaf(v[i], 0.0f, z);
                const float mx = warp_max(m);
                const bool bad = __any_sync(0xFFFFFFFFu, !(z == 0.0f));
                uint8_t *st = stg + ((c + k) * T + t) * MQ_TOK_B;
                mmvq_convert<MQ_LIMB_B, MQ_T_B>(v, mx, bad, lane, st, (float *)(st + MQ_S_OFF),
                                                (float *)(st + MQ_SINV_OFF));
            }
        }
    }
    __syncwarp(); /* the fragments are written */
}

/* Super-blocks a warp stages at once at T tokens: at most MQ_STAGE_B bytes
 * of staging per warp, at least one super-block. */
#define MQ_STAGE_B 16384
__host__ __device__ static inline int mmvq_chunk(int T, int nsb, int ks) {
    const int per = (nsb + ks - 1) / ks;
    int c = MQ_STAGE_B / (T * MQ_TOK_B);
    c = c < 1 ? 1 : c;
    return c < per ? c : per;
}

/* Dynamic shared memory of a k_mmvq_ik block of ks warps: the staging areas
 * (a chunk of the warp's super-blocks, at most ceil(nsb / ks)), later
 * reused for the partial columns [ks][2][np][16][8]. */
static inline size_t mmvq_ik_smem_bytes(int np, int ks, int T, int64_t in) {
    size_t stage = (size_t)ks * mmvq_chunk(T, (int)(in / 256), ks) * T * MQ_TOK_B, part = mmvq_smem_bytes(np, 2, ks);
    return stage > part ? stage : part;
}

/* Launch contract: grid (blk0[4]), block 32 ks (ks = mmv_ks(in / 256)),
 * dynamic shared memory mmvq_ik_smem_bytes(NP, ks, T, in), T <= 2 NP. Warp
 * w stages its super-blocks [w nsb / ks, (w + 1) nsb / ks) mmvq_chunk at a
 * time, then multiplies them one by one; PF = 1 loads the next super-block's
 * weights while one is multiplied (same bits). With an input norm the
 * products use x * nw and the row's value is multiplied by 1 / rms at the
 * end (the sum of squares from the staging: the warps' parts in warp
 * order). */
template <int NP, int PF>
__global__ void __launch_bounds__(32 * MMV_KS_MAX, NP == 1 ? 2 : 1) k_mmvq_ik(mmv_args a) {
    extern __shared__ __align__(16) uint8_t mq_sh[];
    const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3, wp = threadIdx.x >> 5;
    const int ks = blockDim.x >> 5;
    __shared__ float ssw[MMV_KS_MAX][MMV_MAX_T]; /* the warps' sums of x^2 per token */
    __shared__ float tinv[MMV_MAX_T];
    const uint8_t *rows[2][2];
    int64_t rbase[2], nrow[2];
    const int wi = mmvq_tiles(a, g, rows, rbase, nrow);
    const int nsb = (int)(a.in / 256);
    const int sb0 = wp * nsb / ks, sb1 = (wp + 1) * nsb / ks;
    mmvq_raw cur[2], nxt[2];
    if (sb0 < sb1)
#pragma unroll
        for (int tl = 0; tl < 2; tl++) cur[tl].load(rows[tl][0], rows[tl][1], sb0, t);
    pdl_start();
    if (lane < a.T) ssw[wp][lane] = 0.0f;
    const int ch = mmvq_chunk(a.T, nsb, ks);
    uint8_t *stg = mq_sh + (size_t)wp * ch * a.T * MQ_TOK_B;
    float acc[2][NP][4];
#pragma unroll
    for (int tl = 0; tl < 2; tl++)
#pragma unroll
        for (int p = 0; p < NP; p++) acc[tl][p][0] = acc[tl][p][1] = acc[tl][p][2] = acc[tl][p][3] = 0.0f;
#pragma unroll 1
    for (int c0 = sb0; c0 < sb1; c0 += ch) {
        const int n = sb1 - c0 < ch ? sb1 - c0 : ch;
        mmvq_stage(a.x, a.in, a.T, c0, n, lane, stg, a.nw, ssw[wp]);
#pragma unroll 1
        for (int i = 0; i < n; i++) {
            const int sb = c0 + i;
            if (PF) {
                if (sb + 1 < sb1)
#pragma unroll
                    for (int tl = 0; tl < 2; tl++) nxt[tl].load(rows[tl][0], rows[tl][1], sb + 1, t);
            } else if (sb > sb0) {
#pragma unroll
                for (int tl = 0; tl < 2; tl++) cur[tl].load(rows[tl][0], rows[tl][1], sb, t);
            }
            mmvq_sb<NP>(cur, acc, mmvq_ssrc{stg + (size_t)i * a.T * MQ_TOK_B}, a.T, g, t);
            if (PF) cur[0] = nxt[0], cur[1] = nxt[1];
        }
    }
    __syncthreads(); /* every warp is done with its area: reused for the partial columns */
    if (a.nw && (int)threadIdx.x < a.T) {
        float ss = ssw[0][threadIdx.x];
        for (int k = 1; k < ks; k++) ss = __fadd_rn(ss, ssw[k][threadIdx.x]);
        tinv[threadIdx.x] = 1.0f / sqrtf(ss / (float)a.in + a.eps);
    }
    mmvq_finish<NP>(acc, (float *)mq_sh, a, wi, rbase, nrow, a.nw ? tinv : nullptr);
}

/* PF of the lab's launches */
#ifndef MQ_PF
#define MQ_PF 0
#endif

template <int NP, int PF>
static cudaError_t mmvq_ik_launch_np(const mmv_args &a, cudaStream_t s, int ks) {
    /* the opt-in above 48 KiB, once, for any row length: a warp stages at
     * most MQ_STAGE_B bytes (T MQ_TOK_B <= MQ_STAGE_B up to MMV_MAX_T) */
    static_assert(MMV_MAX_T * MQ_TOK_B <= MQ_STAGE_B, "mmvq: one super-block of staging fits");
    const size_t stage = (size_t)MMV_KS_MAX * MQ_STAGE_B, part = mmvq_smem_bytes(NP, 2, MMV_KS_MAX);
    cudaError_t e = cuda_smem_limit<k_mmvq_ik<NP, PF>>((int)(stage > part ? stage : part));
    if (e != cudaSuccess) return e;
    cuda_launch(k_mmvq_ik<NP, PF>, (unsigned)a.blk0[4], 32u * (unsigned)ks, mmvq_ik_smem_bytes(NP, ks, a.T, a.in), s,
                a);
    return cudaSuccess;
}

/* The launch for T = 1..15 (blk0 from mmv_blocks(a, n)); ks as mmv_launch. */
template <int PF = MQ_PF>
static inline cudaError_t mmvq_ik_launch(const mmv_args &a, cudaStream_t s, int ks = 0) {
    if (!ks) ks = mmv_ks((int)(a.in / 256));
    if (a.T <= 2) return mmvq_ik_launch_np<1, PF>(a, s, ks);
    if (a.T <= 4) return mmvq_ik_launch_np<2, PF>(a, s, ks);
    if (a.T <= 8) return mmvq_ik_launch_np<4, PF>(a, s, ks);
    return mmvq_ik_launch_np<8, PF>(a, s, ks);
}

#endif
