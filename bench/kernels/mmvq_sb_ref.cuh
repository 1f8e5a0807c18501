/* The Q4_K int8 arithmetic of the prep's planes before mmvq_sb_lean (production's until 41bb2c9, the MoE
 * staging's until session 37), kept as the labs' reference: sb_lab's V0 / V1 and mmvq_inkernel.cuh time it,
 * mmvq_lab builds on its pieces. The min term is dmin 2^-e sum_j m_j S_j in fp32, put into the limb-0 column
 * times 2^-16; its rounding differs from mmvq_sb_lean's by ~1.5e-6 of max |y|. Also mmvq_sb6_split, a Q6_K
 * form that was bit-equal to production's mmvq_sb6 and faster in sb_lab, but slower in the 9b step. */
#pragma once

#include "backend/cuda/mmvq.cuh"

__device__ __forceinline__ uint32_t mmvq_byte(uint32_t w, int i) { return (w >> (8 * i)) & 0xFFu; }

/* A Q4_K super-block's min sum M = sum_j m_j S_j, in j order: its 6-bit
 * mins m_j (from the 16-byte head h) against the sub-block sums S_j of x. */
__device__ __forceinline__ float mmvq_min_sum(const uint4 h, const float (&S)[8]) {
    const uint32_t mw0 = h.z & 0x3F3F3F3Fu;
    const uint32_t mw1 = ((h.w >> 4) & 0x0F0F0F0Fu) | ((h.z >> 2) & 0x30303030u);
    float M = 0.0f;
#pragma unroll
    for (int j = 0; j < 8; j++) M = fmaf((float)mmvq_byte(j < 4 ? mw0 : mw1, j & 3), S[j], M);
    return M;
}

/* The MMAs and the fp32 update of one Q4_K super-block (activations from src)
 * for the warp's two tiles w[0], w[1] and token pairs 0..NP-1.
 * acc[tl][p][2 r + e]: tile tl's row g + 8 r, column 2 t + e of pair p. */
template <int NP, class SRC, int TL = 2>
__device__ __forceinline__ void mmvq_sb(const mmvq_raw *w, float (*acc)[NP][4], const SRC &src, int T, int g, int t) {
    uint32_t scw[TL][2][2];
#pragma unroll
    for (int tl = 0; tl < TL; tl++)
#pragma unroll
        for (int r = 0; r < 2; r++) {
            const uint4 h = w[tl].head[r];
            scw[tl][r][0] = h.y & 0x3F3F3F3Fu;
            scw[tl][r][1] = (h.w & 0x0F0F0F0Fu) | ((h.y >> 2) & 0x30303030u);
        }
    const uint4 *bp[NP];
    float sx[NP][2];
    mmvq_cols<NP>(src, T, g, t, bp, sx);
    int A[TL][NP][4];
    mmvq_azero(A);
#pragma unroll
    for (int k = 0; k < 4; k++) {
        uint4 bb[NP];
        mmvq_bload<NP>(src, bp, k, bb);
#pragma unroll
        for (int tl = 0; tl < TL; tl++) {
            uint32_t lo[2][2], hi[2][2];
#pragma unroll
            for (int r = 0; r < 2; r++) {
                const uint2 q = w[tl].qs[r][k];
                lo[r][0] = q.x & 0x0F0F0F0Fu, lo[r][1] = q.y & 0x0F0F0F0Fu;
                hi[r][0] = (q.x >> 4) & 0x0F0F0F0Fu, hi[r][1] = (q.y >> 4) & 0x0F0F0F0Fu;
            }
            const int j0 = 2 * k, j1 = 2 * k + 1;
#pragma unroll
            for (int p = 0; p < NP; p++) {
                int c0[4] = {0, 0, 0, 0}, c1[4] = {0, 0, 0, 0};
                mmvq_imma(c0, lo[0][0], lo[1][0], lo[0][1], lo[1][1], bb[p].x, bb[p].y); /* sub-block 2 k */
                mmvq_imma(c1, hi[0][0], hi[1][0], hi[0][1], hi[1][1], bb[p].z, bb[p].w); /* sub-block 2 k + 1 */
#pragma unroll
                for (int r = 0; r < 2; r++) {
                    const int s0 = (int)mmvq_byte(scw[tl][r][j0 >> 2], j0 & 3);
                    const int s1 = (int)mmvq_byte(scw[tl][r][j1 >> 2], j1 & 3);
                    A[tl][p][2 * r] += s0 * c0[2 * r] + s1 * c1[2 * r];
                    A[tl][p][2 * r + 1] += s0 * c0[2 * r + 1] + s1 * c1[2 * r + 1];
                }
            }
        }
    }
#pragma unroll
    for (int p = 0; p < NP; p++) {
        /* the limb-0 columns: t = 0, e = 0 (token 2 p) and t = 1, e = 1 (token 2 p + 1) */
        const int tm = 2 * p + t;
        const bool has_m = t < 2 && tm < T;
        float Sj[8];
#pragma unroll
        for (int jj = 0; jj < 8; jj++) Sj[jj] = has_m ? src.s(tm, jj) : 0.0f;
#pragma unroll
        for (int tl = 0; tl < TL; tl++)
#pragma unroll
            for (int r = 0; r < 2; r++) {
                const uint4 h = w[tl].head[r];
                const float d = __half2float(__ushort_as_half((unsigned short)(h.x & 0xFFFF)));
#pragma unroll
                for (int e = 0; e < 2; e++)
                    acc[tl][p][2 * r + e] =
                        fmaf(__fmul_rn(d, sx[p][e]), (float)A[tl][p][2 * r + e], acc[tl][p][2 * r + e]);
                if (has_m) {
                    const float dmin = __half2float(__ushort_as_half((unsigned short)(h.x >> 16)));
                    const float M = mmvq_min_sum(h, Sj);
                    /* - dmin 2^-e M, times 2^-16 for the limb-0 column e = t (exact) */
#pragma unroll
                    for (int e = 0; e < 2; e++)
                        if (e == t)
                            acc[tl][p][2 * r + e] =
                                fmaf(-__fmul_rn(__fmul_rn(dmin, sx[p][e]), 1.0f / 65536.0f), M, acc[tl][p][2 * r + e]);
                }
            }
    }
}

/* mmvq_sb6's work (acc as there) with one MMA a sub-block and token, its columns split by scale group
 * (session 37, lab only: bench/results/2026-12-07i-h100.md, section 3).
 *  - B column n = 2 l + h of a token holds limb l where k falls in half h of the sub-block (lane t's bytes are
 *    half t / 2), zeros elsewhere; so C's columns 2 t, 2 t + 1 in lane t are limb t's sums over the two halves,
 *    C_lo and C_hi, and A_l += sc_2j C_lo + sc_2j+1 C_hi stays in the lane.
 *  - These are the integers of production's two MMAs with A masked to each half, in half the MMAs at T = 1 and
 *    with no masks.
 *  - Per super-block they move to mmvq_sb's column layout (one shuffle a column: lane t's columns 2 t + e are
 *    token 2 p + n / 3, limb n % 3, n = 2 t + e) and take the same fma: bit-equal to mmvq_sb6 at every T. */
template <int NP, class SRC, int TL = 2>
__device__ __forceinline__ void mmvq_sb6_split(const mmvq_raw6 *w, float (*acc)[NP][4], const SRC &src, int T, int g,
                                               int t) {
    constexpr int NT = 2 * NP;
    const uint4 *bp[NP];
    float sx[NP][2];
    mmvq_cols<NP>(src, T, g, t, bp, sx); /* sx only: the B columns differ */
    const uint4 *bq[NT];
    const bool mine = g < 6 && (t >> 1) == (g & 1);
#pragma unroll
    for (int k = 0; k < NT; k++) bq[k] = mine && k < T ? src.limbs(k, g >> 1, t) : nullptr;
    int A[TL][NT][2]; /* [tile][token][row g, g + 8]: limb t's integer (t < 3) */
#pragma unroll
    for (int tl = 0; tl < TL; tl++)
#pragma unroll
        for (int k = 0; k < NT; k++) A[tl][k][0] = A[tl][k][1] = 0;
#pragma unroll
    for (int k = 0; k < 4; k++) {
        uint4 bb[NT];
        mmvq_bload<NT>(src, bq, k, bb);
#pragma unroll
        for (int tl = 0; tl < TL; tl++) {
            uint32_t sw[2];
            mmvq_q6_scales(w[tl], g, k, sw);
#pragma unroll
            for (int hj = 0; hj < 2; hj++) { /* sub-block j = 2 k + hj */
                uint32_t a[2][2];
                int s0[2], s1[2];
                mmvq_q6_sub(w[tl], sw, k, hj, a, s0, s1);
#pragma unroll
                for (int k2 = 0; k2 < NT; k2++) {
                    if (k2 >= T) break; /* uniform */
                    const uint32_t b0 = hj ? bb[k2].z : bb[k2].x, b1 = hj ? bb[k2].w : bb[k2].y;
                    int cc[4] = {0, 0, 0, 0};
                    mmvq_imma8(cc, a[0][0], a[1][0], a[0][1], a[1][1], b0, b1);
#pragma unroll
                    for (int r = 0; r < 2; r++) A[tl][k2][r] += s0[r] * cc[2 * r] + s1[r] * cc[2 * r + 1];
                }
            }
        }
    }
    /* lane t, column e takes (token 2 p + n / 3, limb n % 3), n = 2 t + e, from lane n % 3: e = 0 from lanes
     * 0, 2, 1, which send tokens 2 p, 2 p, 2 p + 1; e = 1 from lanes 1, 0, 2, which send 2 p, 2 p + 1, 2 p + 1 */
    const int from0 = 4 * g + (t == 0 ? 0 : 3 - t), from1 = 4 * g + (t == 2 ? 2 : 1 - (t & 1));
#pragma unroll
    for (int tl = 0; tl < TL; tl++)
#pragma unroll
        for (int r = 0; r < 2; r++) {
            const float d = __half2float(__ushort_as_half((unsigned short)w[tl].d[r]));
#pragma unroll
            for (int p = 0; p < NP; p++) {
                const int ev = A[tl][2 * p][r], od = A[tl][2 * p + 1][r];
                int v[2];
                v[0] = __shfl_sync(0xFFFFFFFFu, t == 1 ? od : ev, from0);
                v[1] = __shfl_sync(0xFFFFFFFFu, t == 1 ? ev : od, from1);
#pragma unroll
                for (int e = 0; e < 2; e++)
                    acc[tl][p][2 * r + e] = fmaf(__fmul_rn(d, sx[p][e]), (float)(t < 3 ? v[e] : 0),
                                                 acc[tl][p][2 * r + e]);
            }
        }
}
