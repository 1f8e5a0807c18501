/* kv_store and gated causal GQA attention over fp32 KV caches.
 *
 * attention runs in two kernels. Phase 1 cuts each token's context [0, pos]
 * into splits of ATT_SPLIT = 64 positions (a fixed size) and, per split and
 * per q head, writes the partial softmax state (m = max score, l = sum of
 * exp(score - m), o = sum of exp(score - m) v) to the workspace; a block
 * walks splits blockIdx.x, + gridDim.x, ... so the grid does not grow with
 * the context size (up to ATT_BLOCKS blocks per token; with 256-position
 * splits and one block per split, 9b decode at depth 4096 ran 64 blocks and
 * spent 97 us per attention layer on 33 MB of cache). Phase 2
 * combines a token's splits in split order 0, 1, 2, ... and applies the
 * sigmoid gate. Split boundaries depend only on positions, so a token's
 * result depends on nothing but its own q and its sequence's cache: not on T,
 * not on how many splits or blocks a launch uses (batch invariance). */
#include <math.h>

#include "backend/cuda/ops.cuh"

#define ATT_SPLIT 64
/* Phase-1 blocks per token (over all kv heads); each loops over its splits. 512 (was 128) gives every split
 * up to 512 / n_kv of them a block of its own; with the V rows and the combine's splits loaded in batches
 * (k_att_dec's VB, ATT_CB), all the same bits, decode at depth 4096 went +3.5% (9b q4_k_m), +2.7% (35b-a3b),
 * +4.3% (27b) on the H100, and depth 0 stayed (also in a 32k context, where the grid is full):
 * bench/results/2026-12-07e-h100.md. */
#define ATT_BLOCKS 512
#define ATT_CB 16 /* splits k_att_combine loads at once */
#define ATT_MAX_G 16     /* q heads per kv head */
#define ATT_MAX_HD 512
#define ATT_WS_TARGET ((size_t)256 << 20) /* workspace per launch chunk of tokens */

/* ---- kv_store ---- */

/* Launch contract: grid (ceil(kv_dim / 256), T), block 256; thread i copies
 * element i of token blockIdx.y's k and v rows to [slot][pos]. Positions
 * outside [0, n_ctx) are dropped (the model checks the context limit). */
__global__ void k_kv_store(const int32_t *__restrict__ pos, const int32_t *__restrict__ tok_seq,
                           const int32_t *__restrict__ slot, float *__restrict__ kc, float *__restrict__ vc,
                           int32_t n_ctx, int64_t kv_dim, const float *__restrict__ k, const float *__restrict__ v) {
    pdl_start();
    int64_t t = blockIdx.y, i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= kv_dim) return;
    int32_t p = pos[t];
    if (p < 0 || p >= n_ctx) return;
    int64_t dst = ((int64_t)slot[tok_seq[t]] * n_ctx + p) * kv_dim + i;
    kc[dst] = k[t * kv_dim + i];
    vc[dst] = v[t * kv_dim + i];
}

#ifndef MEMRA_ATT_LAB /* bench/kernels/att_lab.cu includes this file for its kernels alone */
memra_status cuda_op_kv_store(memra_backend *be, const memra_batch *b, float *k_cache, float *v_cache, int32_t n_ctx,
                              int64_t kv_dim, const float *k, const float *v) {
    int64_t T = b->n_tokens;
    if (n_ctx <= 0 || kv_dim <= 0 || T > 65535)
        return CUDA_INVALID(be, "kv_store: n_ctx %d, kv_dim %lld, T %lld", n_ctx, (long long)kv_dim, (long long)T);
    if (T <= 0) return MEMRA_OK;
    dim3 grid((unsigned)((kv_dim + 255) / 256), (unsigned)T);
    cuda_launch(k_kv_store, grid, 256, 0, cuda_of(be)->stream, b->d_pos, b->d_tok_seq, b->d_slot, k_cache, v_cache, n_ctx,
                                                      kv_dim, k, v);
    return CUDA_LAUNCHED(be, "kv_store");
}
#endif

/* ---- attention ---- */

typedef struct att_args {
    const int32_t *pos, *tok_seq, *slot; /* device batch arrays, already offset to the chunk's first token */
    const float *kc, *vc;                /* [n_slots][n_ctx][n_kv * hd] */
    const float *q, *gate;               /* offset to the chunk's first token */
    int64_t q_tok_stride, q_head_stride;
    int32_t n_ctx, n_head, n_kv, hd, G, max_splits;
    float scale;
    float *part; /* [Tc][n_head][max_splits][hd + 2]: m, l, o[hd] */
    float *out;  /* offset to the chunk's first token: [Tc][n_head * hd] */
} att_args;

/* Phase 1's pieces shared by k_att_split and k_att_dec (the same operations
 * in the same order in both, hence the same partials). */

/* The G q rows of kv head kvh of token t into qs [G][hd]. */
__device__ __forceinline__ void att_stage_q(const att_args &a, float *qs, int G, int hd, int kvh, int t) {
    for (int i = threadIdx.x; i < G * hd; i += blockDim.x) {
        int gq = i / hd, d = i % hd;
        qs[i] = a.q[(int64_t)t * a.q_tok_stride + (int64_t)(kvh * G + gq) * a.q_head_stride + d];
    }
}

/* Softmax stats of a split's ns scores per head (sc [G][ATT_SPLIT]): warp w
 * takes heads w, w + 8; the scores become exp(s - m), stat_m / stat_l get
 * the max and the sum. */
__device__ __forceinline__ void att_split_stats(float *sc, int ns, int G, int w, int lane, float *stat_m,
                                                float *stat_l) {
    for (int gq = w; gq < G; gq += 8) {
        float *r = sc + gq * ATT_SPLIT;
        float m = -INFINITY;
        for (int s = lane; s < ns; s += 32) m = fmaxf(m, r[s]);
        m = warp_max(m);
        float l = 0.0f;
        for (int s = lane; s < ns; s += 32) {
            float e = expf(r[s] - m);
            r[s] = e;
            l += e;
        }
        l = warp_sum(l);
        if (lane == 0) stat_m[gq] = m, stat_l[gq] = l;
    }
}

/* Split sp's partial of q head kvh G + gq of token t: m, l, o[hd]. */
__device__ __forceinline__ float *att_part(const att_args &a, int t, int kvh, int G, int gq, int sp, int hd) {
    return a.part + (((int64_t)t * a.n_head + kvh * G + gq) * a.max_splits + sp) * (hd + 2);
}

/* Phase 1. Launch contract: grid (min(max_splits, max(ATT_BLOCKS / n_kv, 1)), n_kv, Tc),
 * block 256 (8 warps), dynamic shared memory G * (hd + ATT_SPLIT) floats.
 * Block (bx, kvh, t) owns splits sp = bx, bx + gridDim.x, ... with
 * positions [64 sp, 64 sp + 64) ∩ [0, pos[t]] for the G q heads of kv head
 * kvh; a split's result does not depend on which block computes it. Scores: warp w takes positions w,
 * w + 8, ...; lane l holds K dims l, l + 32, ... and the warp sums each head's
 * dot. Softmax stats: warp w takes heads w, w + 8. Values: thread i owns dims
 * i and i + 256. hd % 32 == 0, hd <= 512, G <= 16. */
__global__ void __launch_bounds__(256) k_att_split(att_args a) {
    pdl_start();
    extern __shared__ float sm[];
    const int G = a.G, hd = a.hd;
    float *qs = sm;               /* [G][hd] */
    float *sc = sm + G * hd;      /* [G][ATT_SPLIT] scores, then weights */
    __shared__ float stat_m[ATT_MAX_G], stat_l[ATT_MAX_G];
    const int kvh = blockIdx.y, t = blockIdx.z;
    int p = a.pos[t];
    if (p >= a.n_ctx) p = a.n_ctx - 1;
    if ((int)blockIdx.x * ATT_SPLIT > p) return;
    const int64_t kv_dim = (int64_t)a.n_kv * hd;
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;

    att_stage_q(a, qs, G, hd, kvh, t);
    __syncthreads();

    const int nd = hd / 32;
    for (int sp = blockIdx.x; sp * ATT_SPLIT <= p; sp += gridDim.x) {
        const int s0 = sp * ATT_SPLIT;
        const int ns = min(ATT_SPLIT, p + 1 - s0);
        const int64_t base = ((int64_t)a.slot[a.tok_seq[t]] * a.n_ctx + s0) * kv_dim + (int64_t)kvh * hd;
        for (int s = w; s < ns; s += 8) {
            const float *kr = a.kc + base + (int64_t)s * kv_dim;
            float kreg[ATT_MAX_HD / 32];
#pragma unroll
            for (int i = 0; i < ATT_MAX_HD / 32; i++) kreg[i] = i < nd ? kr[lane + 32 * i] : 0.0f;
            for (int gq = 0; gq < G; gq++) {
                const float *qh = qs + gq * hd;
                float acc = 0.0f;
#pragma unroll
                for (int i = 0; i < ATT_MAX_HD / 32; i++)
                    if (i < nd) acc = fmaf(kreg[i], qh[lane + 32 * i], acc);
                acc = warp_sum(acc);
                if (lane == 0) sc[gq * ATT_SPLIT + s] = acc * a.scale;
            }
        }
        __syncthreads();

        att_split_stats(sc, ns, G, w, lane, stat_m, stat_l);
        __syncthreads();

        for (int d = threadIdx.x; d < hd; d += blockDim.x) {
            float acc[ATT_MAX_G];
#pragma unroll
            for (int gq = 0; gq < ATT_MAX_G; gq++) acc[gq] = 0.0f;
            const float *vr = a.vc + base + d;
            for (int s = 0; s < ns; s++) {
                float v = vr[(int64_t)s * kv_dim];
#pragma unroll
                for (int gq = 0; gq < ATT_MAX_G; gq++)
                    if (gq < G) acc[gq] = fmaf(sc[gq * ATT_SPLIT + s], v, acc[gq]);
            }
#pragma unroll
            for (int gq = 0; gq < ATT_MAX_G; gq++) {
                if (gq < G) {
                    float *pp = att_part(a, t, kvh, G, gq, sp, hd);
                    pp[2 + d] = acc[gq];
                    if (d == 0) pp[0] = stat_m[gq], pp[1] = stat_l[gq];
                }
            }
        }
        __syncthreads(); /* sc and stat_* are rewritten by the next split */
    }
}

/* ---- decode phase 1 at the model shapes ----
 *
 * k_att_split above spends a decode step waiting: each warp loads one K row,
 * then sums its G dots one 5-step butterfly after another, and each thread
 * walks its split's V rows one load at a time (9b at depth 63: 29 us per
 * attention layer for 128 KB of cache). k_att_dec does the same arithmetic
 * with the waits taken together: a warp loads the K rows of PP positions at
 * once, forms all PP x G per-lane partial dots, and sums them with one
 * transposed butterfly (warp_scatter_sum: the same pairwise tree over the
 * lanes as warp_sum, so the same bits, in 31 or 62 shuffles instead of
 * 5 PP G); a thread loads 16 V rows before it folds them. Every score, the
 * softmax stats and every o element are computed by k_att_split's operations
 * in k_att_split's order, so its partials are k_att_split's bit for bit
 * (MEMRA_ATT_DEC=0 in the environment sends decode back to k_att_split). */

/* v[0 .. N) of every lane summed over the warp, scattered: afterwards lane l
 * holds the sums of values N / 32 l .. N / 32 l + N / 32 - 1 in v[0 ..
 * N / 32). Each stage halves the values a lane holds: of a pair of lanes
 * (l, l ^ o) the one with bit o clear keeps the lower half, its partner the
 * upper half, and each adds the other's copy to its own. Every value is
 * summed by warp_sum's tree (pairs over bit 4, then 3, .., 0; fp addition
 * is commutative), so each sum has warp_sum's bits. N = 32 or 64. */
template <int N>
__device__ __forceinline__ void warp_scatter_sum(float (&v)[N]) {
    static_assert(N == 32 || N == 64, "warp_scatter_sum: N");
    const int lane = threadIdx.x & 31;
    int c = N;
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        const bool hi = lane & o;
        const int h = c / 2;
#pragma unroll
        for (int j = 0; j < N / 2; j++) {
            if (j < h) {
                const float send = hi ? v[j] : v[j + h];
                const float keep = hi ? v[j + h] : v[j];
                v[j] = keep + __shfl_xor_sync(0xffffffffu, send, o);
            }
        }
        c = h;
    }
}

/* Launch contract: k_att_split's, with HD = a.hd, G a divisor of a.G (the q
 * heads a block takes: att_dec_launch), grid.y n_kv a.G / G and G (hd +
 * ATT_SPLIT) floats of dynamic shared memory; block (x, hg, t) takes q
 * heads hg G .. hg G + G - 1. Warp w takes the positions w + 8 j (j < 8) of
 * a split in 8 / PP passes of PP; thread d < HD owns dim d of the values. */
template <int G, int HD>
__global__ void __launch_bounds__(256) k_att_dec(att_args a) {
    pdl_start();
    static_assert(HD % 32 == 0 && HD <= 256 && G <= ATT_MAX_G, "k_att_dec: shape");
    constexpr int ND = HD / 32, PP = G > 8 ? 4 : 8, NV = PP * G <= 32 ? 32 : 64;
    static_assert(PP * G <= NV, "k_att_dec: values per lane");
    extern __shared__ float sm[];
    float *qs = sm;          /* [G][HD] */
    float *sc = sm + G * HD; /* [G][ATT_SPLIT] scores, then weights */
    __shared__ float stat_m[G], stat_l[G];
    /* head group hg: q heads hg G .. hg G + G - 1, of kv head kvh (a.G / G groups a kv head) */
    const int hg = blockIdx.y, kvh = hg / (a.G / G), t = blockIdx.z;
    int p = a.pos[t];
    if (p >= a.n_ctx) p = a.n_ctx - 1;
    if ((int)blockIdx.x * ATT_SPLIT > p) return;
    const int64_t kv_dim = (int64_t)a.n_kv * HD;
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;

    att_stage_q(a, qs, G, HD, hg, t);
    __syncthreads();

    for (int sp = blockIdx.x; sp * ATT_SPLIT <= p; sp += gridDim.x) {
        const int s0 = sp * ATT_SPLIT;
        const int ns = min(ATT_SPLIT, p + 1 - s0);
        const int64_t base = ((int64_t)a.slot[a.tok_seq[t]] * a.n_ctx + s0) * kv_dim + (int64_t)kvh * HD;
#pragma unroll 1
        for (int pass = 0; pass < 8 / PP; pass++) {
            if (w + 8 * pass * PP >= ns) break; /* uniform over the warp */
            float kr[PP][ND];
#pragma unroll
            for (int j = 0; j < PP; j++) {
                const int s = w + 8 * (pass * PP + j);
                const float *row = a.kc + base + (int64_t)s * kv_dim;
#pragma unroll
                for (int i = 0; i < ND; i++) kr[j][i] = s < ns ? row[lane + 32 * i] : 0.0f;
            }
            float v[NV];
#pragma unroll
            for (int k = 0; k < NV; k++) v[k] = 0.0f;
#pragma unroll
            for (int gq = 0; gq < G; gq++) {
                const float *qh = qs + gq * HD;
                float qv[ND];
#pragma unroll
                for (int i = 0; i < ND; i++) qv[i] = qh[lane + 32 * i];
#pragma unroll
                for (int j = 0; j < PP; j++) {
                    float acc = 0.0f;
#pragma unroll
                    for (int i = 0; i < ND; i++) acc = fmaf(kr[j][i], qv[i], acc);
                    v[j * G + gq] = acc;
                }
            }
            warp_scatter_sum<NV>(v);
#pragma unroll
            for (int k = 0; k < NV / 32; k++) {
                const int idx = lane * (NV / 32) + k;
                const int j = idx / G, gq = idx % G, s = w + 8 * (pass * PP + j);
                if (idx < PP * G && s < ns) sc[gq * ATT_SPLIT + s] = v[k] * a.scale;
            }
        }
        __syncthreads();

        att_split_stats(sc, ns, G, w, lane, stat_m, stat_l);
        __syncthreads();

        if (threadIdx.x < HD) {
            const int d = threadIdx.x;
            float acc[G];
#pragma unroll
            for (int gq = 0; gq < G; gq++) acc[gq] = 0.0f;
            const float *vr = a.vc + base + d;
            /* the split's V rows VB at a time, all in flight (one round trip for the whole split at G <= 4,
             * two at G <= 8; it was four), then added in order. VB by the registers: the K pass sets them
             * (ptxas: 110 / 103 / 128 / 128 / 167 / 127 at G 2 / 3 / 4 / 6 / 8 / 16), and G = 16 spilled
             * at VB = 64. */
            constexpr int VB = G <= 4 ? 64 : G <= 8 ? 32 : 16;
#pragma unroll 1
            for (int c = 0; c < ns; c += VB) {
                float vv[VB];
#pragma unroll
                for (int k = 0; k < VB; k++) vv[k] = c + k < ns ? vr[(int64_t)(c + k) * kv_dim] : 0.0f;
#pragma unroll
                for (int k = 0; k < VB; k++)
                    if (c + k < ns)
#pragma unroll
                        for (int gq = 0; gq < G; gq++) acc[gq] = fmaf(sc[gq * ATT_SPLIT + c + k], vv[k], acc[gq]);
            }
#pragma unroll
            for (int gq = 0; gq < G; gq++) {
                float *pp = att_part(a, t, hg, G, gq, sp, HD);
                pp[2 + d] = acc[gq];
                if (d == 0) pp[0] = stat_m[gq], pp[1] = stat_l[gq];
            }
        }
        __syncthreads(); /* sc and stat_* are rewritten by the next split */
    }
}

/* k_att_dec with gb of a kv head's q heads a block (gb divides a.G), where it has an instance; grid: (splits,
 * n_kv, tokens), its y grown here by the head groups. */
static bool att_dec_go(int gb, const att_args &a, dim3 grid, cudaStream_t s) {
    grid.y *= (unsigned)(a.G / gb);
    const size_t shm = (size_t)gb * (size_t)(a.hd + ATT_SPLIT) * sizeof(float);
    switch (gb) {
    case 2: cuda_launch(k_att_dec<2, 256>, grid, 256, shm, s, a); return true;
    case 3: cuda_launch(k_att_dec<3, 256>, grid, 256, shm, s, a); return true;
    case 4: cuda_launch(k_att_dec<4, 256>, grid, 256, shm, s, a); return true;
    case 6: cuda_launch(k_att_dec<6, 256>, grid, 256, shm, s, a); return true;
    case 8: cuda_launch(k_att_dec<8, 256>, grid, 256, shm, s, a); return true;
    case 16: cuda_launch(k_att_dec<16, 256>, grid, 256, shm, s, a); return true;
    default: return false;
    }
}

/* k_att_dec for a's shape when there is one (hd 256: every Qwen3.5 model;
 * G = 4: 0.8B, 9B; 6: 27B; 8: 35B-A3B; 16: 122B-A10B); false otherwise.
 * A block takes 4 of a kv head's q heads where G is a multiple of 4 (35B-A3B's 8 and 122B-A10B's 16 are two
 * and four blocks a kv head), else G (27B's 6); MEMRA_ATT_GB=N asks for N where it divides G and att_dec_go
 * has an instance. Every score, stat and o element is a head's own computation (warp_scatter_sum gives each
 * slot warp_sum's bits wherever it sits), so the head split moves no bit (logits cmp-equal); it gives a kv
 * head's split more blocks, hence more warps in flight (35B-A3B: 130 blocks of 167 registers at depth 4096,
 * one an SM, before; 260 of 128 now, two an SM). H100, decode tok/s, two interleaved rounds in one binary
 * (bench/results/2026-12-07e-h100.md, run 10): 35b-a3b depth 0 469.1 / 468.1 (MEMRA_ATT_GB=8, the old layout)
 * -> 473.6 / 472.3 (+0.9%), depth 4096 440.3 / 440.0 -> 441.9 / 440.9; smaller groups where the grid then
 * needs two waves lost (9b GB 2: -1.3% at depth 4096, 27b GB 3: -1%). 122B-A10B's four groups are not
 * measured. */
static bool att_dec_launch(const att_args &a, dim3 grid, cudaStream_t s) {
    if (a.hd != 256 || a.G > ATT_MAX_G) return false;
    static int want = -1;
    if (want < 0) {
        const char *e = getenv("MEMRA_ATT_GB");
        want = e && atoi(e) > 0 ? atoi(e) : 0;
    }
    if (want && a.G % want == 0 && att_dec_go(want, a, grid, s)) return true;
    return att_dec_go(a.G % 4 == 0 ? 4 : a.G, a, grid, s);
}

/* Phase 2. Launch contract: grid (n_head, Tc), block 256; thread i owns dims
 * i, i + 256 of head blockIdx.x of token blockIdx.y and folds the token's
 * splits in order 0 .. pos/64. */
__global__ void __launch_bounds__(256) k_att_combine(att_args a) {
    pdl_start();
    const int h = blockIdx.x, t = blockIdx.y, hd = a.hd;
    int p = a.pos[t];
    if (p >= a.n_ctx) p = a.n_ctx - 1;
    const int nsp = p / ATT_SPLIT + 1;
    const float *pp = a.part + ((int64_t)t * a.n_head + h) * a.max_splits * (hd + 2);
    /* the splits' values are loaded ATT_CB at a time, all in flight, then used in split order: a round trip per
     * ATT_CB splits instead of one per split (the same operations in the same order) */
    float M = -INFINITY;
    for (int i0 = 0; i0 < nsp; i0 += ATT_CB) {
        float m[ATT_CB];
#pragma unroll
        for (int k = 0; k < ATT_CB; k++) m[k] = i0 + k < nsp ? pp[(int64_t)(i0 + k) * (hd + 2)] : -INFINITY;
#pragma unroll
        for (int k = 0; k < ATT_CB; k++) M = fmaxf(M, m[k]);
    }
    for (int d = threadIdx.x; d < hd; d += blockDim.x) {
        float L = 0.0f, o = 0.0f;
        for (int i0 = 0; i0 < nsp; i0 += ATT_CB) {
            float m[ATT_CB], l[ATT_CB], od[ATT_CB];
#pragma unroll
            for (int k = 0; k < ATT_CB; k++) {
                const float *q = pp + (int64_t)(i0 + k) * (hd + 2);
                const bool in = i0 + k < nsp;
                m[k] = in ? q[0] : 0.0f, l[k] = in ? q[1] : 0.0f, od[k] = in ? q[2 + d] : 0.0f;
            }
#pragma unroll
            for (int k = 0; k < ATT_CB; k++) {
                if (i0 + k >= nsp) break;
                const float f = expf(m[k] - M);
                L = fmaf(l[k], f, L);
                o = fmaf(od[k], f, o);
            }
        }
        float r = o / L;
        if (a.gate) r *= sigmoid_f(a.gate[(int64_t)t * a.q_tok_stride + (int64_t)h * a.q_head_stride + d]);
        a.out[((int64_t)t * a.n_head + h) * hd + d] = r;
    }
}

/* ---- prefill phase 1: query tiles ----
 *
 * k_att_split recomputes each (token, split) alone: every score is a warp
 * sum and every token re-reads its split's K and V, ~840 us per layer at
 * T = 512 on the H200. k_att_pf does the same work for 64 query rows at
 * once (TQ = 64 / G tokens x the G q heads of one kv head): the split's K
 * and V are loaded into shared memory once per block, and the products are
 * register tiles of 4 x 4 (scores) and 4 x HD / 16 (values) per thread.
 *
 * Bits: each row's arithmetic is fixed by its own q and its sequence's K /
 * V, not by the tile: score = (sum over d in order, one fmaf chain) x scale;
 * m = the max; exp(s - m) as k_att_split; l = four in-order sums of 16 keys
 * added as (l0 + l1) + (l2 + l3); o = one fmaf chain over the keys in order.
 * Keys past a row's own position get exp = 0 and add exactly +0 to l and o
 * (both start at +0 and stay off -0), so a tile's other tokens do not move a
 * row's bits: the result of a token does not depend on T or on how the
 * chunk was cut (gate: attention-pf-inv). It differs from k_att_split's (the
 * decode path) in the last bits: the order of the score sums differs, the
 * known prefill / decode gap of matmul.cu. The partials have k_att_split's
 * layout, and k_att_combine folds them.
 *
 * Used at T >= ATT_PF_MIN_T for hd in {64, 128, 256};
 * MEMRA_ATT_PF=0 in the environment sends prefill back to k_att_split. */

#define ATT_PF_MIN_T 16
#define ATT_PF_ROWS 64 /* query rows per block */
#define ATT_PF_LD 68   /* row stride (floats) of the transposed tiles: 16-byte aligned, banks shifted */
#define ATT_PF_ZB 16   /* blocks per tile along the splits (each walks sp = z, z + 16, ...) */
/* q elements a thread loads before it stores them. The tile copies (q, K, V) used to store each element as
 * it came, one L2 round trip after another; loaded in batches first, prefill 8192 went +6.4% (9b q8_0) and
 * +7.3% (35b-a3b, with k_sgemm_f32's new layout) on the H100 (bench/results/2026-12-06b-h100.md). */
#define ATT_PF_LB 16

static size_t att_pf_smem(int hd) {
    const size_t kv = (size_t)hd * ATT_PF_LD > (size_t)ATT_SPLIT * hd ? (size_t)hd * ATT_PF_LD : (size_t)ATT_SPLIT * hd;
    return ((size_t)hd * ATT_PF_LD + kv + (size_t)ATT_PF_ROWS * ATT_PF_LD + 2 * ATT_PF_ROWS) * sizeof(float);
}

/* Launch contract: grid (ceil(Tc / TQ), n_kv, min(max_splits, ATT_PF_ZB)) with TQ = 64 / G (rounded
 * down), block 256, dynamic shared memory att_pf_smem(HD). Block (x, kvh, z) owns tokens t0 = x TQ .. + TQ - 1,
 * rows r = (t - t0) G + gq (rows from TQ G on stay empty), and splits z, z + gridDim.z, ... Tokens of several sequences in one tile are done in
 * passes, one per sequence. Thread (ty, tx) = (tid / 16, tid % 16): scores of rows 4 ty .. + 3 x keys
 * 4 tx .. + 3; values of rows 4 ty .. + 3 x dims 4 tx + 64 i .. + 3. */
template <int HD>
__global__ void __launch_bounds__(256, 1) k_att_pf(att_args a, int Tc) {
    pdl_start();
    extern __shared__ __align__(16) float sm[];
    constexpr int ND = HD / 64;
    float *qt = sm;                                                        /* [HD][LD]: q^T */
    float *kv = qt + HD * ATT_PF_LD;                                       /* [HD][LD]: K^T, then [64][HD]: V */
    float *pr = kv + (HD * ATT_PF_LD > ATT_SPLIT * HD ? HD * ATT_PF_LD : ATT_SPLIT * HD); /* [64 rows][LD]: P */
    float *st_m = pr + ATT_PF_ROWS * ATT_PF_LD, *st_l = st_m + ATT_PF_ROWS;
    const int G = a.G, TQ = ATT_PF_ROWS / G, kvh = blockIdx.y;
    const int t0 = blockIdx.x * TQ, tid = threadIdx.x, tx = tid & 15, ty = tid >> 4;
    const int64_t kv_dim = (int64_t)a.n_kv * HD;
    uint64_t done = 0; /* tokens of the tile already passed (bit tt) */
    for (;;) {
        /* this pass: the tokens of the first sequence not yet done */
        int seq = -1, pmax = -1;
        uint64_t in = 0; /* this pass's tokens; rows past TQ G (G not dividing 64) belong to none */
        for (int tt = 0; tt < TQ && t0 + tt < Tc; tt++) {
            if (done >> tt & 1) continue;
            const int s = a.tok_seq[t0 + tt];
            if (seq < 0) seq = s;
            if (s != seq) continue;
            in |= 1ull << tt;
            int p = a.pos[t0 + tt];
            if (p >= a.n_ctx) p = a.n_ctx - 1;
            pmax = max(pmax, p);
        }
        if (seq < 0) return;
        done |= in;
        const int64_t slot_base = (int64_t)a.slot[seq] * a.n_ctx * kv_dim + (int64_t)kvh * HD;
        __syncthreads(); /* the previous pass's readers of qt */
        /* the tile copies load ATT_PF_LB elements a thread before they store any (one L2 round trip each) */
        for (int i0 = tid; i0 < ATT_PF_ROWS * HD; i0 += 256 * ATT_PF_LB) {
            float v[ATT_PF_LB];
#pragma unroll
            for (int u = 0; u < ATT_PF_LB; u++) {
                const int i = i0 + 256 * u, r = i / HD, d = i % HD, tt = r / G;
                v[u] = in >> tt & 1
                           ? a.q[(int64_t)(t0 + tt) * a.q_tok_stride + (int64_t)(kvh * G + r % G) * a.q_head_stride + d]
                           : 0.0f;
            }
#pragma unroll
            for (int u = 0; u < ATT_PF_LB; u++) {
                const int i = i0 + 256 * u;
                qt[(i % HD) * ATT_PF_LD + i / HD] = v[u];
            }
        }
        for (int sp = blockIdx.z; sp * ATT_SPLIT <= pmax; sp += gridDim.z) {
            const int s0 = sp * ATT_SPLIT, nsm = min(ATT_SPLIT, pmax + 1 - s0);
            const float *kb = a.kc + slot_base + (int64_t)s0 * kv_dim, *vb = a.vc + slot_base + (int64_t)s0 * kv_dim;
            float kr[ATT_SPLIT * HD / 256]; /* this thread's K elements, loaded before the barrier */
#pragma unroll
            for (int u = 0; u < ATT_SPLIT * HD / 256; u++) {
                const int i = tid + 256 * u, j = i / HD, d = i % HD;
                kr[u] = j < nsm ? kb[(int64_t)j * kv_dim + d] : 0.0f;
            }
            __syncthreads(); /* the previous split's readers of kv, pr */
#pragma unroll
            for (int u = 0; u < ATT_SPLIT * HD / 256; u++) {
                const int i = tid + 256 * u;
                kv[(i % HD) * ATT_PF_LD + i / HD] = kr[u];
            }
            __syncthreads();
            /* scores */
            float s[4][4];
#pragma unroll
            for (int r = 0; r < 4; r++)
#pragma unroll
                for (int c = 0; c < 4; c++) s[r][c] = 0.0f;
#pragma unroll 8
            for (int d = 0; d < HD; d++) {
                const float4 q4 = *(const float4 *)(qt + d * ATT_PF_LD + 4 * ty);
                const float4 k4 = *(const float4 *)(kv + d * ATT_PF_LD + 4 * tx);
                const float qv[4] = {q4.x, q4.y, q4.z, q4.w}, kk[4] = {k4.x, k4.y, k4.z, k4.w};
#pragma unroll
                for (int r = 0; r < 4; r++)
#pragma unroll
                    for (int c = 0; c < 4; c++) s[r][c] = fmaf(qv[r], kk[c], s[r][c]);
            }
#pragma unroll
            for (int r = 0; r < 4; r++) {
                const int row = 4 * ty + r, tt = row / G;
                int p = (in >> tt & 1) ? a.pos[t0 + tt] : -1;
                if (p >= a.n_ctx) p = a.n_ctx - 1;
                float4 v;
                v.x = s0 + 4 * tx <= p ? s[r][0] * a.scale : -INFINITY;
                v.y = s0 + 4 * tx + 1 <= p ? s[r][1] * a.scale : -INFINITY;
                v.z = s0 + 4 * tx + 2 <= p ? s[r][2] * a.scale : -INFINITY;
                v.w = s0 + 4 * tx + 3 <= p ? s[r][3] * a.scale : -INFINITY;
                *(float4 *)(pr + row * ATT_PF_LD + 4 * tx) = v;
            }
            __syncthreads();
            /* softmax stats: 4 lanes a row, 16 keys each */
            {
                const int row = tid >> 2, q = tid & 3;
                float m = -INFINITY;
#pragma unroll
                for (int j = 0; j < 16; j++) m = fmaxf(m, pr[row * ATT_PF_LD + 16 * q + j]);
                m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, 1));
                m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, 2));
                float l = 0.0f;
#pragma unroll
                for (int j = 0; j < 16; j++) {
                    float *e = pr + row * ATT_PF_LD + 16 * q + j;
                    const float v = *e == -INFINITY ? 0.0f : expf(*e - m);
                    *e = v;
                    l += v;
                }
                l = __fadd_rn(l, __shfl_xor_sync(0xffffffffu, l, 1));
                l = __fadd_rn(l, __shfl_xor_sync(0xffffffffu, l, 2));
                if (q == 0) st_m[row] = m, st_l[row] = l;
            }
            /* V replaces K^T (its loads issued before the barrier) */
            float4 vr[ATT_SPLIT * HD / 1024];
#pragma unroll
            for (int u = 0; u < ATT_SPLIT * HD / 1024; u++) {
                const int i = tid + 256 * u, j = i / (HD / 4), d4 = i % (HD / 4);
                vr[u] = j < nsm ? *(const float4 *)(vb + (int64_t)j * kv_dim + 4 * d4)
                                : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
            }
            __syncthreads();
#pragma unroll
            for (int u = 0; u < ATT_SPLIT * HD / 1024; u++) ((float4 *)kv)[tid + 256 * u] = vr[u];
            __syncthreads();
            float o[4][ND][4];
#pragma unroll
            for (int r = 0; r < 4; r++)
#pragma unroll
                for (int i = 0; i < ND; i++)
#pragma unroll
                    for (int c = 0; c < 4; c++) o[r][i][c] = 0.0f;
            /* keys in fours: past nsm both P (0) and V (0) add exactly +0 */
            for (int j4 = 0; j4 < nsm; j4 += 4) {
                float pv[4][4];
#pragma unroll
                for (int r = 0; r < 4; r++) {
                    const float4 p4 = *(const float4 *)(pr + (4 * ty + r) * ATT_PF_LD + j4);
                    pv[r][0] = p4.x, pv[r][1] = p4.y, pv[r][2] = p4.z, pv[r][3] = p4.w;
                }
#pragma unroll
                for (int jj = 0; jj < 4; jj++)
#pragma unroll
                    for (int i = 0; i < ND; i++) {
                        const float4 v4 = *(const float4 *)(kv + (j4 + jj) * HD + 4 * tx + 64 * i);
                        const float vv[4] = {v4.x, v4.y, v4.z, v4.w};
#pragma unroll
                        for (int r = 0; r < 4; r++)
#pragma unroll
                            for (int c = 0; c < 4; c++) o[r][i][c] = fmaf(pv[r][jj], vv[c], o[r][i][c]);
                    }
            }
#pragma unroll
            for (int r = 0; r < 4; r++) {
                const int row = 4 * ty + r, tt = row / G;
                if (!(in >> tt & 1)) continue;
                const int p = a.pos[t0 + tt];
                if (min(p, a.n_ctx - 1) < s0) continue;
                float *pp = a.part + (((int64_t)(t0 + tt) * a.n_head + kvh * G + row % G) * a.max_splits + sp) * (HD + 2);
                if (tx == 0) pp[0] = st_m[row], pp[1] = st_l[row];
#pragma unroll
                for (int i = 0; i < ND; i++) {
                    float2 *dst = (float2 *)(pp + 2 + 4 * tx + 64 * i);
                    dst[0] = make_float2(o[r][i][0], o[r][i][1]);
                    dst[1] = make_float2(o[r][i][2], o[r][i][3]);
                }
            }
        }
    }
}

/* k_att_pf<HD> over the a's n tokens, its shared-memory limit raised first */
template <int HD>
static cudaError_t att_pf_launch(const att_args &a, int n, cudaStream_t s) {
    const int smem = (int)att_pf_smem(HD);
    cudaError_t e = cuda_smem_limit<k_att_pf<HD>>(smem);
    if (e != cudaSuccess) return e;
    const int tq = ATT_PF_ROWS / a.G;
    const unsigned gz = (unsigned)(a.max_splits < ATT_PF_ZB ? a.max_splits : ATT_PF_ZB);
    cuda_launch(k_att_pf<HD>, dim3((unsigned)((n + tq - 1) / tq), (unsigned)a.n_kv, gz), 256, smem, s, a, n);
    return cudaSuccess;
}

#ifndef MEMRA_ATT_LAB
memra_status cuda_op_attention(memra_backend *be, const memra_batch *b, const float *k_cache, const float *v_cache,
                               int32_t n_ctx, const float *q, const float *gate, int64_t q_tok_stride,
                               int64_t q_head_stride, int32_t n_head, int32_t n_kv, int32_t hd, float scale,
                               float *out) {
    int64_t T = b->n_tokens;
    if (n_ctx <= 0 || n_kv <= 0 || n_head <= 0 || n_head % n_kv || n_head / n_kv > ATT_MAX_G || hd <= 0 || hd % 32 ||
        hd > ATT_MAX_HD)
        return CUDA_INVALID(be,
                            "attention: n_ctx %d, n_head %d, n_kv %d, hd %d: need n_head %% n_kv == 0, "
                            "n_head / n_kv <= %d, hd %% 32 == 0, hd <= %d",
                            n_ctx, n_head, n_kv, hd, ATT_MAX_G, ATT_MAX_HD);
    if (T <= 0) return MEMRA_OK;
    cuda_impl *c = cuda_of(be);
    att_args a;
    a.kc = k_cache;
    a.vc = v_cache;
    a.gate = gate;
    a.q_tok_stride = q_tok_stride;
    a.q_head_stride = q_head_stride;
    a.n_ctx = n_ctx;
    a.n_head = n_head;
    a.n_kv = n_kv;
    a.hd = hd;
    a.G = n_head / n_kv;
    a.scale = scale;
    /* every launch sizes for the whole context: a captured step stays valid as pos grows */
    a.max_splits = (n_ctx + ATT_SPLIT - 1) / ATT_SPLIT;
    size_t per_tok = (size_t)n_head * (size_t)a.max_splits * (size_t)(hd + 2) * sizeof(float);
    int64_t Tc = (int64_t)(ATT_WS_TARGET / per_tok);
    if (Tc < 1) Tc = 1;
    if (Tc > T) Tc = T;
    if (Tc > 65535) Tc = 65535;
    memra_status st = cuda_ws_reserve(be, per_tok * (size_t)Tc);
    if (st) return st;
    a.part = (float *)c->ws;
    size_t shm = (size_t)a.G * (size_t)(hd + ATT_SPLIT) * sizeof(float);
    if (shm > 48 * 1024)
        return CUDA_INVALID(be, "attention: %d q heads per kv head x hd %d need %zu bytes of shared memory (> 48 KiB)",
                            a.G, hd, shm);
    /* prefill: the query-tiled phase 1 (k_att_pf) */
    static int pf_on = -1;
    static int dec_on = -1;
    const bool pf = T >= ATT_PF_MIN_T && (hd == 64 || hd == 128 || hd == 256) && env_on("MEMRA_ATT_PF", &pf_on);
    for (int64_t t0 = 0; t0 < T; t0 += Tc) {
        int64_t n = T - t0 < Tc ? T - t0 : Tc;
        a.pos = b->d_pos + t0;
        a.tok_seq = b->d_tok_seq + t0;
        a.slot = b->d_slot;
        a.q = q + t0 * q_tok_stride;
        a.gate = gate ? gate + t0 * q_tok_stride : NULL;
        a.out = out + t0 * (int64_t)n_head * hd;
        if (pf) {
            cudaError_t e = hd == 64    ? att_pf_launch<64>(a, (int)n, c->stream)
                            : hd == 128 ? att_pf_launch<128>(a, (int)n, c->stream)
                                        : att_pf_launch<256>(a, (int)n, c->stream);
            if ((st = cuda_check(be, e, "attention: prefill shared memory"))) return st;
        } else {
            const int gmax = ATT_BLOCKS / n_kv > 1 ? ATT_BLOCKS / n_kv : 1;
            const unsigned gx = (unsigned)(a.max_splits < gmax ? a.max_splits : gmax);
            const dim3 grid(gx, (unsigned)n_kv, (unsigned)n);
            if (!env_on("MEMRA_ATT_DEC", &dec_on) || !att_dec_launch(a, grid, c->stream))
                cuda_launch(k_att_split, grid, 256, shm, c->stream, a);
        }
        st = CUDA_LAUNCHED(be, "attention: split kernel");
        if (st) return st;
        cuda_launch(k_att_combine, dim3((unsigned)n_head, (unsigned)n), 256, 0, c->stream, a);
        st = CUDA_LAUNCHED(be, "attention: combine kernel");
        if (st) return st;
    }
    return MEMRA_OK;
}
#endif
