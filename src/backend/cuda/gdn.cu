/* Gated DeltaNet layer after the input projections (spec §5.3-5.6), in one
 * kernel per layer (k_gdn): block (v-head h, split sp) of a sequence owns
 * the value columns [sp DV/GDN_NS, (sp+1) DV/GDN_NS) of head h, so a layer
 * runs on n_v * GDN_NS blocks per sequence (a decode step is latency-bound:
 * more blocks, fewer state registers per thread). Per token, each block
 *   - runs the causal conv (with the raw-input conv state) and SiLU for the
 *     q/k channels of its key head and its own v channels: the q/k channels
 *     are recomputed by every block of that key head (identical bits);
 *   - L2-normalises q and k, forms the gates, updates and reads its state
 *     columns (held in registers over all of the sequence's tokens:
 *     token-sequential, exact for prefill too) and writes the raw outputs o
 *     and the sum of their squares (its part of the gated RMSNorm) to memory.
 * The state of a v channel has one owner, which writes it. The q/k channels'
 * conv state and the RMSNorm over d_v span blocks, so each block counts
 * itself in (an atomic counter per (sequence, key head) and per (sequence,
 * v-head), after a fence): the last block of a key head writes the q/k conv
 * state (every block has read the old one by then), and the last of a
 * v-head sums the head's GDN_NS parts of each token in split order 0, 1, ..
 * and applies rmsnorm * norm * silu(z) to the head's outputs. Every
 * reduction has a fixed order per token; a token's result depends only on
 * its sequence's tokens and state, never on T or on the other sequences. */
#include <math.h>

#include <cooperative_groups.h>

#include "backend/cuda/ops.cuh"

#define GDN_MAX_DCONV 8
#define GDN_NS 4                  /* blocks per v-head */
#define GDN_MAX_COUNTERS 16384    /* (sequence, head) pairs per launch */

/* Arrival counters: the backend's own (cuda_impl.gdn_cnt, GDN_CNT_WORDS
 * zeroed words allocated with the backend: [seq][n_k] key counters, then
 * [seq][n_v] head counters at GDN_MAX_COUNTERS), zero between launches (the
 * last arrival resets its counter); the backend's launches are ordered on
 * its one stream, so one launch at a time uses them. */
static_assert(GDN_CNT_WORDS == 2 * GDN_MAX_COUNTERS, "gdn: counter words");

/* One conv channel in registers: the last dc - 1 raw inputs (oldest first)
 * and the taps; tap dc - 1 multiplies the current token. */
typedef struct gdn_ch {
    float win[GDN_MAX_DCONV], wt[GDN_MAX_DCONV], wlast;
} gdn_ch;

__device__ __forceinline__ void gdn_ch_load(gdn_ch &c, const float *w, const float *st, int dc) {
    c.wlast = w[dc - 1];
#pragma unroll
    for (int k = 0; k < GDN_MAX_DCONV; k++) {
        c.win[k] = k < dc - 1 ? st[k] : 0.0f;
        c.wt[k] = k < dc - 1 ? w[k] : 0.0f;
    }
}

/* silu(conv) of the window followed by x, then x joins the window. */
__device__ __forceinline__ float gdn_ch_step(gdn_ch &c, float x, int dc) {
    float acc = 0.0f;
#pragma unroll
    for (int k = 0; k < GDN_MAX_DCONV; k++)
        if (k < dc - 1) acc = fmaf(c.wt[k], c.win[k], acc);
    acc = fmaf(c.wlast, x, acc);
    /* one select per slot (not a guarded shift, which puts the window in local memory) */
#pragma unroll
    for (int k = 0; k < GDN_MAX_DCONV - 1; k++) c.win[k] = k < dc - 2 ? c.win[k + 1] : (k == dc - 2 ? x : c.win[k]);
    return silu_f(acc);
}

__device__ __forceinline__ void gdn_ch_save(const gdn_ch &c, float *st, int dc) {
#pragma unroll
    for (int k = 0; k < GDN_MAX_DCONV; k++)
        if (k < dc - 1) st[k] = c.win[k];
}

typedef struct gdn_args {
    const int32_t *seq_start, *slot; /* offset to the launch's first sequence */
    const float *mixed;              /* [T][conv_dim] raw conv inputs q | k | v */
    const float *conv_w;             /* [conv_dim][dc] */
    float *conv_state;               /* [n_slots][conv_dim][dc - 1] */
    const float *z, *braw, *araw;    /* [T][n_v*d_v], [T][n_v], [T][n_v] */
    const float *dt_bias, *a, *norm;
    float *ssm_state; /* [n_slots][n_v][d_v][d_k] */
    float *out;       /* [T][n_v*d_v]: raw o, then normalised by the head's last block */
    float *part;      /* workspace [T][n_v][GDN_NS]: each split's sum of o^2 */
    int64_t conv_dim;
    int32_t n_k, n_v, kv_tiled, dc;
    float eps, l2_eps;
    unsigned *cnt; /* the arrival counters (above) */
} gdn_args;

/* n consecutive floats, as one float4 / float2 load where n allows it
 * (the launcher checks the 16-byte alignment of the state). */
template <int N> __device__ __forceinline__ void gdn_load(const float *p, float *r) {
    if constexpr (N == 4) {
        float4 v = *(const float4 *)p;
        r[0] = v.x, r[1] = v.y, r[2] = v.z, r[3] = v.w;
    } else if constexpr (N == 2) {
        float2 v = *(const float2 *)p;
        r[0] = v.x, r[1] = v.y;
    } else {
#pragma unroll
        for (int i = 0; i < N; i++) r[i] = p[i];
    }
}

template <int N> __device__ __forceinline__ void gdn_store(float *p, const float *r) {
    if constexpr (N == 4) {
        *(float4 *)p = make_float4(r[0], r[1], r[2], r[3]);
    } else if constexpr (N == 2) {
        *(float2 *)p = make_float2(r[0], r[1]);
    } else {
#pragma unroll
        for (int i = 0; i < N; i++) p[i] = r[i];
    }
}

/* Sum of the n warp partials red[0..n), n <= 4, in a fixed pairwise order. */
template <int N> __device__ __forceinline__ float gdn_sum_warps(const float *red) {
    if constexpr (N == 1) return red[0];
    else if constexpr (N == 2) return red[0] + red[1];
    else if constexpr (N == 3) return (red[0] + red[1]) + red[2];
    else return (red[0] + red[1]) + (red[2] + red[3]);
}

/* r[0..N) . k[0..N) accumulated from element 0 up (fixed order). */
template <int N> __device__ __forceinline__ float gdn_dot(const float *r, const float *k) {
    float acc = r[0] * k[0];
#pragma unroll
    for (int i = 1; i < N; i++) acc = fmaf(r[i], k[i], acc);
    return acc;
}

/* ---- CL: the decode step's cross-block sums in a thread-block cluster ----
 *
 * What: k_gdn for launches of one token a sequence (a decode step), with
 * the blocks that share a key head launched as one cluster (sm_90; 8 blocks
 * on 9B and 35B-A3B, 4 on 0.8B, 12 on 27B: above the portable 8, where the
 * device must allow it). Cluster c is key head c: its (n_v / n_k) GDN_NS
 * blocks take the v-heads of key head c (h = c + i n_k when kv_tiled, else
 * c n_v / n_k + i) and their splits, in that order. A block keeps its raw o in shared
 * memory and its o^2 part in one shared float; after a cluster barrier each
 * block reads its head's GDN_NS parts from the other blocks' shared memory
 * (distributed shared memory), adds them in split order 0, 1, .. as the last
 * block does in k_gdn, and writes its own columns of the gated norm; the
 * cluster's rank 0 writes the q/k conv state (every block read the old one
 * before the barrier). No counters, fences or global round trips of o and
 * the parts: k_gdn's end is a __threadfence, two atomics and the last
 * block's reads of o and the parts from L2, in series after the state's
 * stores. A sequence of more than one token in such a launch (T = n_seqs
 * with an empty sequence beside it) takes k_gdn's end for its blocks.
 * Bits: the same operations on the same values in the same order (o, the
 * parts' warp sums, tot = ((p0 + p1) + p2) + p3, the norm's expression).
 * On by default where the cluster is at most 8 blocks (gdn_cluster). */

/* Launch contract: grid (n_v * GDN_NS, n_seqs of this launch <=
 * GDN_MAX_COUNTERS / n_v), block 256 (8 warps); DK, DV in {32, 64, 96, 128}
 * (the launcher picks the instance); the counters are zero. CB = DV / GDN_NS
 * columns per block, CW = CB / 8 per warp, KR = DK / 32 key rows per lane:
 * warp w owns the block's columns CW w .. CW w + CW - 1, lane l key rows
 * KR l .. KR l + KR - 1, so the state S[i][j] (memory j*DK + i) is read once
 * per (lane, j) (a float4 when KR = 4) into CW x KR registers and written
 * back at the end; ssm_state 16-byte aligned. Threads 0..DK-1 own the conv
 * channel and value of q[i], threads DK..2DK-1 of k[i], threads 0..CB-1 the
 * block's v channels; the q/k norms sum their warps' partials in warp order,
 * a block's o^2 part is the warp sum of warp 0 (CB <= 32). */
template <int DK, int DV, bool CL = false>
__global__ void __launch_bounds__(256) k_gdn(gdn_args a) {
    constexpr int KR = DK / 32, CB = DV / GDN_NS, CW = CB / 8;
    static_assert(DK % 32 == 0 && DK <= 128 && DV % 32 == 0 && DV <= 128, "gdn: head sizes");
    static_assert(CB % 8 == 0 && CB <= 32, "gdn: columns per block");
    __shared__ __align__(16) float qn[DK], kn[DK]; /* vector reads of qn, kn */
    __shared__ float vs[CB], os[CB], red[8];
    __shared__ int last_key, last_head;
    __shared__ float pcl; /* CL: this block's o^2 part of the step's token */
    const int ratio = a.n_v / a.n_k, sp = blockIdx.x % GDN_NS, s = blockIdx.y;
    int h = blockIdx.x / GDN_NS;
    if (CL) { /* cluster c: key head c's v-heads i = 0 .. ratio - 1 */
        const int c = h / ratio, i = h % ratio;
        h = a.kv_tiled ? c + i * a.n_k : c * ratio + i;
    }
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5, tid = threadIdx.x;
    const int kh = a.kv_tiled ? h % a.n_k : h / ratio;
    const int64_t key_dim = (int64_t)a.n_k * DK, vdim = (int64_t)a.n_v * DV;
    const int64_t slot = a.slot[s];
    const int dc = a.dc;
    /* this thread's conv channels (q/k: tid < 2 DK; v: tid < CB) */
    const int64_t ch_qk = tid < DK ? (int64_t)kh * DK + tid : key_dim + (int64_t)kh * DK + tid - DK;
    const int64_t ch_v = 2 * key_dim + (int64_t)h * DV + sp * CB + tid;
    gdn_ch cqk, cv;
    if (tid < 2 * DK)
        gdn_ch_load(cqk, a.conv_w + ch_qk * dc, a.conv_state + (slot * a.conv_dim + ch_qk) * (dc - 1), dc);
    if (tid < CB) gdn_ch_load(cv, a.conv_w + ch_v * dc, a.conv_state + (slot * a.conv_dim + ch_v) * (dc - 1), dc);
    float *S = a.ssm_state + ((slot * a.n_v + h) * DV + sp * CB) * DK;
    float st[CW][KR];
#pragma unroll
    for (int jj = 0; jj < CW; jj++) gdn_load<KR>(S + (int64_t)(CW * w + jj) * DK + KR * lane, st[jj]);
    const float dt_b = a.dt_bias[h], A = a.a[h];
    /* Everything above is loaded before the wait: the weights, and the
     * states, which only this layer's previous gdn launch wrote, two or more
     * launches back. That launch is complete when this one starts: the
     * kernel right before this one (the ssm_in matvec) let it launch only
     * after its own wait returned (k_mmvq triggers after its wait, the
     * others at exit; k_mmvq_prep, which triggers before, is never the one
     * right before a gdn). Only the projections below come from that
     * kernel. Two gdn launches on one state back to back (no op between)
     * would race here; the forward pass never makes them. */
    pdl_start();
    const float qscale = 1.0f / sqrtf((float)DK);
    const int t0 = a.seq_start[s], t1 = a.seq_start[s + 1];
    const bool clp = CL && t1 - t0 <= 1; /* the cluster's end: the same for every block of a cluster (one sequence) */
    for (int t = t0; t < t1; t++) {
        const float *mt = a.mixed + (int64_t)t * a.conv_dim;
        /* the gate inputs load with the conv inputs, not after the norms' barriers */
        const float braw = a.braw[(int64_t)t * a.n_v + h], araw = a.araw[(int64_t)t * a.n_v + h];
        float x = 0.0f; /* threads past 2 DK hold nothing (zero partial sums) */
        if (tid < 2 * DK) x = gdn_ch_step(cqk, mt[ch_qk], dc);
        if (tid < CB) vs[tid] = gdn_ch_step(cv, mt[ch_v], dc);
        float ss = warp_sum(x * x);
        if (lane == 0) red[w] = ss;
        __syncthreads();
        if (tid < DK) {
            qn[tid] = x / sqrtf(gdn_sum_warps<KR>(red) + a.l2_eps) * qscale;
        } else if (tid < 2 * DK) {
            kn[tid - DK] = x / sqrtf(gdn_sum_warps<KR>(red + KR) + a.l2_eps);
        }
        __syncthreads();
        const float beta = sigmoid_f(braw);
        const float g = A * softplus_f(araw + dt_b);
        const float eg = expf(g);
        float kr[KR], qr[KR];
        gdn_load<KR>(kn + KR * lane, kr);
        gdn_load<KR>(qn + KR * lane, qr);
#pragma unroll
        for (int jj = 0; jj < CW; jj++) {
            const int j = CW * w + jj;
            float *r = st[jj];
#pragma unroll
            for (int i = 0; i < KR; i++) r[i] *= eg;
            const float kv = warp_sum(gdn_dot<KR>(r, kr));
            const float d = beta * (vs[j] - kv);
#pragma unroll
            for (int i = 0; i < KR; i++) r[i] = fmaf(kr[i], d, r[i]);
            const float o = warp_sum(gdn_dot<KR>(r, qr));
            if (lane == 0) os[j] = o;
        }
        __syncthreads();
        if (w == 0) {
            float o = lane < CB ? os[lane] : 0.0f;
            float p = warp_sum(o * o);
            if (clp) {
                if (lane == 0) pcl = p; /* o stays in os: one token a sequence */
            } else {
                if (lane < CB) a.out[(int64_t)t * vdim + (int64_t)h * DV + sp * CB + lane] = o;
                if (lane == 0) a.part[((int64_t)t * a.n_v + h) * GDN_NS + sp] = p;
            }
        }
        if (clp) break;  /* one token a sequence: os and pcl are read after the cluster barrier */
        __syncthreads(); /* qn/kn/vs/os/red are rewritten by the next token */
    }
#pragma unroll
    for (int jj = 0; jj < CW; jj++) gdn_store<KR>(S + (int64_t)(CW * w + jj) * DK + KR * lane, st[jj]);
    if (tid < CB) gdn_ch_save(cv, a.conv_state + (slot * a.conv_dim + ch_v) * (dc - 1), dc);
    if (clp) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
        namespace cg = cooperative_groups;
        cg::cluster_group cl = cg::this_cluster();
        const bool has = t1 > t0;
        const int64_t idx = (int64_t)t0 * vdim + (int64_t)h * DV + sp * CB + tid;
        const float zv = has && tid < CB ? a.z[idx] : 0.0f, nv = tid < CB ? a.norm[sp * CB + tid] : 0.0f;
        cl.sync(); /* every block's part and os are written, and its reads of the old q/k conv state done */
        if (cl.block_rank() == 0 && tid < 2 * DK)
            gdn_ch_save(cqk, a.conv_state + (slot * a.conv_dim + ch_qk) * (dc - 1), dc);
        if (has && tid < CB) {
            const unsigned r0 = cl.block_rank() - (unsigned)sp; /* split 0 of this head */
            float tot = *cl.map_shared_rank(&pcl, r0);
#pragma unroll
            for (int k = 1; k < GDN_NS; k++) tot += *cl.map_shared_rank(&pcl, r0 + (unsigned)k);
            a.out[idx] = os[tid] / sqrtf(tot / (float)DV + a.eps) * nv * silu_f(zv);
        }
        cl.sync(); /* no block leaves while another reads its shared memory */
#endif
        return;
    }
    /* the gated norm's z and norm weight, loaded by every block before the count (one pass: a decode
     * step), so that the head's last block does not wait for them after it */
    const bool one_pass = (int64_t)(t1 - t0) * DV <= (int64_t)blockDim.x;
    float z_pre = 0.0f, nw_pre = 0.0f;
    if (one_pass && tid < (t1 - t0) * DV) {
        z_pre = a.z[(int64_t)(t0 + tid / DV) * vdim + (int64_t)h * DV + tid % DV];
        nw_pre = a.norm[tid % DV];
    }
    /* count this block in: its reads of the q/k conv state and its writes of o and part come first */
    __threadfence();
    __syncthreads();
    if (tid == 0) {
        const int n_key = (a.n_v / a.n_k) * GDN_NS; /* blocks sharing key head kh */
        unsigned *ck = a.cnt + s * a.n_k + kh, *ch = a.cnt + GDN_MAX_COUNTERS + s * a.n_v + h;
        last_key = atomicAdd(ck, 1u) == (unsigned)n_key - 1;
        last_head = atomicAdd(ch, 1u) == GDN_NS - 1;
        if (last_key) *ck = 0;
        if (last_head) *ch = 0;
    }
    __syncthreads();
    if (last_key && tid < 2 * DK) gdn_ch_save(cqk, a.conv_state + (slot * a.conv_dim + ch_qk) * (dc - 1), dc);
    if (!last_head) return;
    __threadfence();
    /* gated RMSNorm of the head's outputs, all tokens of the sequence; the
     * other splits' o and parts are read past L1 (__ldcg) */
    for (int64_t e = tid; e < (int64_t)(t1 - t0) * DV; e += blockDim.x) {
        const int64_t t = t0 + e / DV;
        const int j = (int)(e % DV);
        const float *pp = a.part + (t * a.n_v + h) * GDN_NS;
        float tot = __ldcg(pp);
#pragma unroll
        for (int k = 1; k < GDN_NS; k++) tot += __ldcg(pp + k);
        const int64_t idx = t * vdim + (int64_t)h * DV + j;
        const float o = __ldcg(a.out + idx);
        const float zv = one_pass ? z_pre : a.z[idx], nv = one_pass ? nw_pre : a.norm[j];
        a.out[idx] = o / sqrtf(tot / (float)DV + a.eps) * nv * silu_f(zv);
    }
}

typedef void (*gdn_fn)(gdn_args);

template <int DK, bool CL> static gdn_fn gdn_pick_dv(int dv) {
    switch (dv) {
    case 32: return k_gdn<DK, 32, CL>;
    case 64: return k_gdn<DK, 64, CL>;
    case 96: return k_gdn<DK, 96, CL>;
    case 128: return k_gdn<DK, 128, CL>;
    default: return NULL;
    }
}

/* The head kernel for d_k, d_v (cl: its cluster variant); NULL for sizes without an instance. */
template <bool CL = false> static gdn_fn gdn_pick(int dk, int dv) {
    switch (dk) {
    case 32: return gdn_pick_dv<32, CL>(dv);
    case 64: return gdn_pick_dv<64, CL>(dv);
    case 96: return gdn_pick_dv<96, CL>(dv);
    case 128: return gdn_pick_dv<128, CL>(dv);
    default: return NULL;
    }
}

/* The cluster size of k_gdn<.., true> for p's heads, or 0 where it does not
 * take the launch: MEMRA_GDN_CLUSTER=0, not sm_90, more than 16 blocks a
 * key head, a sequence with more than one token (T != n_seqs), or a size
 * the device cannot run. By default only portable sizes (at most 8: 9B,
 * 35B-A3B, 0.8B); MEMRA_GDN_CLUSTER=1 also takes the larger ones (27B: 12),
 * which the kernel is allowed where the device fits at least one such
 * cluster (cudaOccupancyMaxActiveClusters, asked once a size).
 * Why (H100, bench/results/2026-12-06f-h100.md; the gates passed with it on
 * every model and the logits are cmp-equal): k_gdn 8.72 -> 8.45 us a
 * launch in a 35b-a3b step (ncu); decode@0, two interleaved rounds: 35b-a3b
 * 441.1 / 439.6 -> 443.6 / 441.4 tok/s, 9b 317.3 / 316.9 -> 317.2 / 317.4,
 * 27b at 12 blocks a cluster 105.3 / 105.1 -> 104.1 / 104.1 (so not by
 * default). */
static int gdn_cluster(int64_t T, int n_seqs, const memra_gdn_params *p, gdn_fn k) {
    static int mode = -1, fits[17];
    static gdn_fn fk[17]; /* the instance fits[] was asked for */
    if (mode < 0) {
        const char *e = getenv("MEMRA_GDN_CLUSTER");
        mode = e && *e ? atoi(e) : 2; /* 0 off, 1 every size, 2 portable sizes */
    }
    const int cl = p->n_v / p->n_k * GDN_NS;
    if (!mode || !cuda_sm90 || cl > 16 || T != n_seqs || (mode != 1 && cl > 8)) return 0;
    if (cl > 8 && fk[cl] != k) { /* fits: 1 it fits, -1 it does not */
        cudaLaunchAttribute at[1] = {cuda_cluster_attr((unsigned)cl)};
        cudaLaunchConfig_t cfg = {};
        cfg.gridDim = dim3((unsigned)(p->n_v * GDN_NS)), cfg.blockDim = 256, cfg.attrs = at, cfg.numAttrs = 1;
        int n = 0;
        fits[cl] = cudaFuncSetAttribute(k, cudaFuncAttributeNonPortableClusterSizeAllowed, 1) == cudaSuccess &&
                           cudaOccupancyMaxActiveClusters(&n, k, &cfg) == cudaSuccess && n > 0
                       ? 1
                       : -1;
        fk[cl] = k;
        cudaGetLastError(); /* a refusal above is an answer, not the backend's error */
    }
    return cl <= 8 || fits[cl] > 0 ? cl : 0;
}

/* ---- prefill: the same arithmetic in three kernels (T >= GDN_SCAN_MIN_T) ----
 *
 * k_gdn walks a sequence's tokens with four block barriers and the q/k
 * preparation on every step's critical path: ~2.5 us a token, 28% of a
 * 35B-A3B prefill. Only the state update is sequential, and its columns are
 * independent, so prefill splits the kernel:
 *  - k_gdn_prep (every token at once): the causal conv + SiLU of every
 *    channel (window from the earlier tokens' raw inputs or the conv
 *    state), q and k L2-normalised, beta and exp(g): each value by the
 *    operations of k_gdn in the same order (the norms' warp sums and their
 *    pairwise sum over the warps included), into the workspace.
 *  - k_gdn_scan: a warp owns GDN_SCAN_CPW state columns of one v-head for
 *    the whole sequence (lanes: KR key rows each, k_gdn's layout) and steps
 *    through the tokens with no barrier: r *= exp(g), kv = warp_sum(r . k),
 *    r += k beta (v - kv), o = warp_sum(r . q): k_gdn's per-column
 *    operations; the inputs of the next GDN_SCAN_AHEAD tokens are in
 *    flight while a token is computed. (Tried: groups of 8 lanes per column,
 *    k_gdn's warp_sum tree rebuilt from in-thread adds and 3 shuffles that
 *    each serve 4 columns: 392 against 354 us a layer at T = 512 on the
 *    H200; not kept.) Writes raw o and the final state.
 *  - k_gdn_finish: each (token, v-head)'s GDN_NS split sums of o^2 (a warp
 *    sum over the split's columns, as k_gdn's blocks make them), added in
 *    split order, and the gated RMSNorm; extra blocks write each
 *    sequence's new conv state.
 * So a token's output and the states are bit-identical to the token-at-a-
 * time kernel (gate kernels: gdn-scan, memcmp against T = 1 steps). */

#define GDN_SCAN_MIN_T 16
#define GDN_SCAN_CPW 4 /* state columns per warp */
#define GDN_SCAN_AHEAD 4 /* tokens whose inputs a warp has in flight (8: prefill 512 +0.3%, 2026-12-04b) */

typedef struct gdn_scan_args {
    const int32_t *seq_start, *slot, *tok_seq; /* the batch's device arrays */
    const float *mixed, *conv_w, *z, *braw, *araw, *dt_bias, *a, *norm;
    float *conv_state, *ssm_state, *out;
    float *qn, *kn, *v, *beta, *eg; /* workspace: [T][n_k][DK] twice, [T][n_v][DV], [T][n_v] twice */
    int64_t conv_dim;
    int32_t n_k, n_v, kv_tiled, dc, n_seqs;
    float eps, l2_eps;
} gdn_scan_args;

/* silu(conv) of channel ch at token t of the sequence starting at t0:
 * gdn_ch_step's operations on the window the token-at-a-time kernel holds. */
__device__ __forceinline__ float gdn_conv_at(const gdn_scan_args &a, int64_t ch, int t, int t0, int64_t slot) {
    const int dc = a.dc;
    const float *w = a.conv_w + ch * dc;
    const float *st = a.conv_state + (slot * a.conv_dim + ch) * (dc - 1);
    float acc = 0.0f;
    for (int k = 0; k < dc - 1; k++) {
        const int p = t - (dc - 1) + k;
        const float x = p >= t0 ? a.mixed[(int64_t)p * a.conv_dim + ch] : st[p - t0 + dc - 1];
        acc = fmaf(w[k], x, acc);
    }
    acc = fmaf(w[dc - 1], a.mixed[(int64_t)t * a.conv_dim + ch], acc);
    return silu_f(acc);
}

/* Launch contract: grid (T, n_k + n_v), block max(2 DK, DV) (multiple of
 * 32). Block (t, y < n_k): q and k of key head y; (t, n_k + h): v of head h,
 * beta and exp(g). */
template <int DK, int DV>
__global__ void __launch_bounds__(256) k_gdn_prep(gdn_scan_args a) {
    constexpr int KR = DK / 32;
    __shared__ float red[8];
    pdl_start();
    const int t = blockIdx.x, tid = threadIdx.x, lane = tid & 31, w = tid >> 5;
    const int s = a.tok_seq[t], t0 = a.seq_start[s];
    const int64_t slot = a.slot[s], key_dim = (int64_t)a.n_k * DK;
    if ((int)blockIdx.y < a.n_k) {
        const int kh = blockIdx.y;
        float x = 0.0f;
        const int64_t ch = tid < DK ? (int64_t)kh * DK + tid : key_dim + (int64_t)kh * DK + tid - DK;
        if (tid < 2 * DK) x = gdn_conv_at(a, ch, t, t0, slot);
        const float ss = warp_sum(x * x);
        if (lane == 0) red[w] = ss;
        __syncthreads();
        const float qscale = 1.0f / sqrtf((float)DK);
        if (tid < DK)
            a.qn[((int64_t)t * a.n_k + kh) * DK + tid] = x / sqrtf(gdn_sum_warps<KR>(red) + a.l2_eps) * qscale;
        else if (tid < 2 * DK)
            a.kn[((int64_t)t * a.n_k + kh) * DK + tid - DK] = x / sqrtf(gdn_sum_warps<KR>(red + KR) + a.l2_eps);
        return;
    }
    const int h = blockIdx.y - a.n_k;
    if (tid < DV) a.v[((int64_t)t * a.n_v + h) * DV + tid] = gdn_conv_at(a, 2 * key_dim + (int64_t)h * DV + tid, t, t0, slot);
    if (tid == 0) {
        const int64_t i = (int64_t)t * a.n_v + h;
        a.beta[i] = sigmoid_f(a.braw[i]);
        const float g = a.a[h] * softplus_f(a.araw[i] + a.dt_bias[h]);
        a.eg[i] = expf(g);
    }
}

/* Launch contract: grid (n_v DV / (4 GDN_SCAN_CPW), n_seqs), block 128; DV
 * % (4 GDN_SCAN_CPW) == 0; ssm_state 16-byte aligned. Warp w of block x
 * owns columns GDN_SCAN_CPW (4 x + w) + 0.. of the flattened (head, column)
 * range of sequence blockIdx.y. */
template <int DK, int DV>
__global__ void __launch_bounds__(128) k_gdn_scan(gdn_scan_args a) {
    constexpr int KR = DK / 32, CPW = GDN_SCAN_CPW;
    pdl_start();
    const int lane = threadIdx.x & 31, s = blockIdx.y;
    const int64_t c0 = ((int64_t)blockIdx.x * 4 + (threadIdx.x >> 5)) * CPW;
    const int h = (int)(c0 / DV), j0 = (int)(c0 % DV);
    const int kh = a.kv_tiled ? h % a.n_k : h / (a.n_v / a.n_k);
    const int64_t slot = a.slot[s];
    float *S = a.ssm_state + ((slot * a.n_v + h) * DV + j0) * DK;
    float st[CPW][KR];
#pragma unroll
    for (int jj = 0; jj < CPW; jj++) gdn_load<KR>(S + (int64_t)jj * DK + KR * lane, st[jj]);
    const int t0 = a.seq_start[s], t1 = a.seq_start[s + 1];
    const int64_t vdim = (int64_t)a.n_v * DV;
    /* the inputs of token t: k, q (this lane's rows), beta, exp(g), v of the warp's columns */
    struct in_t {
        float k[KR], q[KR], b, e, v[CPW];
    };
    auto load = [&](int t, in_t &x) {
        gdn_load<KR>(a.kn + ((int64_t)t * a.n_k + kh) * DK + KR * lane, x.k);
        gdn_load<KR>(a.qn + ((int64_t)t * a.n_k + kh) * DK + KR * lane, x.q);
        const int64_t i = (int64_t)t * a.n_v + h;
        x.b = a.beta[i], x.e = a.eg[i];
#pragma unroll
        for (int jj = 0; jj < CPW; jj++) x.v[jj] = a.v[i * DV + j0 + jj];
    };
    /* a queue of GDN_SCAN_AHEAD tokens' inputs in flight (an L2 round trip
     * is several tokens' compute): slot i holds token t + i, refilled with
     * token t + i + GDN_SCAN_AHEAD as soon as it is taken */
    in_t q[GDN_SCAN_AHEAD];
#pragma unroll
    for (int i = 0; i < GDN_SCAN_AHEAD; i++)
        if (t0 + i < t1) load(t0 + i, q[i]);
    for (int tb = t0; tb < t1; tb += GDN_SCAN_AHEAD) {
#pragma unroll
        for (int i = 0; i < GDN_SCAN_AHEAD; i++) {
            const int t = tb + i;
            if (t >= t1) break;
            const in_t cur = q[i];
            if (t + GDN_SCAN_AHEAD < t1) load(t + GDN_SCAN_AHEAD, q[i]);
            float o[CPW];
#pragma unroll
            for (int jj = 0; jj < CPW; jj++) {
                float *r = st[jj];
#pragma unroll
                for (int k = 0; k < KR; k++) r[k] *= cur.e;
                const float kv = warp_sum(gdn_dot<KR>(r, cur.k));
                const float d = cur.b * (cur.v[jj] - kv);
#pragma unroll
                for (int k = 0; k < KR; k++) r[k] = fmaf(cur.k[k], d, r[k]);
                o[jj] = warp_sum(gdn_dot<KR>(r, cur.q));
            }
            if (lane < CPW) {
                float ov = o[0];
#pragma unroll
                for (int jj = 1; jj < CPW; jj++) ov = lane == jj ? o[jj] : ov;
                a.out[(int64_t)t * vdim + (int64_t)h * DV + j0 + lane] = ov;
            }
        }
    }
#pragma unroll
    for (int jj = 0; jj < CPW; jj++) gdn_store<KR>(S + (int64_t)jj * DK + KR * lane, st[jj]);
}

/* Launch contract: grid (T + n_seqs ceil(conv_dim / 128), n_v), block 32
 * GDN_NS = 128. Block (t < T, h): the gated RMSNorm of token t's head h
 * (warp sp sums the squares of columns sp CB .. sp CB + CB - 1, CB = DV /
 * GDN_NS). Blocks x >= T (y = 0 only): the conv state of sequence (x - T)
 * / ceil(conv_dim / 128), 128 channels each: the last dc - 1 raw inputs
 * (from the old state where the sequence is shorter). */
template <int DV>
__global__ void __launch_bounds__(32 * GDN_NS) k_gdn_finish(gdn_scan_args a, int32_t T) {
    constexpr int CB = DV / GDN_NS;
    __shared__ float red[GDN_NS];
    pdl_start();
    const int tid = threadIdx.x, lane = tid & 31, sp = tid >> 5;
    if ((int)blockIdx.x >= T) {
        if (blockIdx.y != 0) return;
        const int nb = (int)((a.conv_dim + 127) / 128), x = (int)blockIdx.x - T, s = x / nb;
        const int64_t ch = (int64_t)(x % nb) * 128 + tid;
        if (ch >= a.conv_dim) return;
        const int t0 = a.seq_start[s], t1 = a.seq_start[s + 1], dc = a.dc;
        float *st = a.conv_state + ((int64_t)a.slot[s] * a.conv_dim + ch) * (dc - 1);
        for (int k = 0; k < dc - 1; k++) { /* reads old entries k + n > k only: in place, ascending */
            const int p = t1 - (dc - 1) + k;
            st[k] = p >= t0 ? a.mixed[(int64_t)p * a.conv_dim + ch] : st[k + (t1 - t0)];
        }
        return;
    }
    const int64_t t = blockIdx.x, h = blockIdx.y;
    const int j = sp * CB + lane;
    const int64_t idx = t * a.n_v * DV + h * DV + j;
    const float o = lane < CB ? a.out[idx] : 0.0f;
    const float p = warp_sum(o * o);
    if (lane == 0) red[sp] = p;
    __syncthreads();
    float tot = red[0];
#pragma unroll
    for (int k = 1; k < GDN_NS; k++) tot += red[k];
    if (lane < CB) a.out[idx] = o / sqrtf(tot / (float)DV + a.eps) * a.norm[j] * silu_f(a.z[idx]);
}

typedef void (*gdn_scan_fn)(gdn_scan_args);
typedef void (*gdn_finish_fn)(gdn_scan_args, int32_t);
typedef struct gdn_scan_kernels {
    gdn_scan_fn prep, scan;
    gdn_finish_fn finish;
} gdn_scan_kernels;

template <int DK> static gdn_scan_kernels gdn_scan_pick_dv(int dv) {
    switch (dv) {
    case 32: return {k_gdn_prep<DK, 32>, k_gdn_scan<DK, 32>, k_gdn_finish<32>};
    case 64: return {k_gdn_prep<DK, 64>, k_gdn_scan<DK, 64>, k_gdn_finish<64>};
    case 96: return {k_gdn_prep<DK, 96>, k_gdn_scan<DK, 96>, k_gdn_finish<96>};
    case 128: return {k_gdn_prep<DK, 128>, k_gdn_scan<DK, 128>, k_gdn_finish<128>};
    default: return {NULL, NULL, NULL};
    }
}

static gdn_scan_kernels gdn_scan_pick(int dk, int dv) {
    switch (dk) {
    case 32: return gdn_scan_pick_dv<32>(dv);
    case 64: return gdn_scan_pick_dv<64>(dv);
    case 96: return gdn_scan_pick_dv<96>(dv);
    case 128: return gdn_scan_pick_dv<128>(dv);
    default: return {NULL, NULL, NULL};
    }
}

/* The three launches of a prefill batch; cuda_op_gdn has checked the
 * parameters. */
static memra_status gdn_scan_run(memra_backend *be, const memra_batch *b, const memra_gdn_params *p,
                                 float *conv_state, float *ssm_state, const float *mixed, const float *z,
                                 const float *braw, const float *araw, float *out, int64_t conv_dim) {
    const int64_t T = b->n_tokens;
    const gdn_scan_kernels k = gdn_scan_pick(p->d_k, p->d_v);
    const size_t nq = (size_t)T * (size_t)p->n_k * (size_t)p->d_k, nv = (size_t)T * (size_t)p->n_v * (size_t)p->d_v,
                 ng = (size_t)T * (size_t)p->n_v;
    memra_status st = cuda_ws_reserve(be, (2 * nq + nv + 2 * ng) * sizeof(float));
    if (st) return st;
    cuda_impl *c = cuda_of(be);
    gdn_scan_args a;
    a.seq_start = b->d_seq_start, a.slot = b->d_slot, a.tok_seq = b->d_tok_seq;
    a.mixed = mixed, a.conv_w = (const float *)p->conv1d->data, a.z = z, a.braw = braw, a.araw = araw;
    a.dt_bias = (const float *)p->dt_bias->data, a.a = (const float *)p->a->data;
    a.norm = (const float *)p->norm->data;
    a.conv_state = conv_state, a.ssm_state = ssm_state, a.out = out;
    a.qn = (float *)c->ws, a.kn = a.qn + nq, a.v = a.kn + nq, a.beta = a.v + nv, a.eg = a.beta + ng;
    a.conv_dim = conv_dim;
    a.n_k = p->n_k, a.n_v = p->n_v, a.kv_tiled = p->kv_tiled, a.dc = p->d_conv, a.n_seqs = b->n_seqs;
    a.eps = p->eps, a.l2_eps = p->l2_eps;
    const int pt = 2 * p->d_k > p->d_v ? 2 * p->d_k : p->d_v;
    cuda_launch(k.prep, dim3((unsigned)T, (unsigned)(p->n_k + p->n_v)), (unsigned)pt, 0, c->stream, a);
    if ((st = CUDA_LAUNCHED(be, "gdn: prep"))) return st;
    cuda_launch(k.scan, dim3((unsigned)((int64_t)p->n_v * p->d_v / (4 * GDN_SCAN_CPW)), (unsigned)b->n_seqs), 128, 0,
                c->stream, a);
    if ((st = CUDA_LAUNCHED(be, "gdn: scan"))) return st;
    const int64_t nb = (conv_dim + 127) / 128;
    cuda_launch(k.finish, dim3((unsigned)(T + (int64_t)b->n_seqs * nb), (unsigned)p->n_v), 32 * GDN_NS, 0,
                c->stream, a, (int32_t)T);
    return CUDA_LAUNCHED(be, "gdn: finish");
}

memra_status cuda_op_gdn(memra_backend *be, const memra_batch *b, const memra_gdn_params *p, float *conv_state,
                         float *ssm_state, const float *mixed, const float *z, const float *braw, const float *araw,
                         float *out) {
    int64_t T = b->n_tokens;
    gdn_fn kern = gdn_pick(p->d_k, p->d_v);
    if (!kern)
        return CUDA_INVALID(be, "gdn: d_k %d, d_v %d: the CUDA kernel needs each in {32, 64, 96, 128}", p->d_k,
                            p->d_v);
    if (p->n_k <= 0 || p->n_v <= 0 || p->n_v % p->n_k || p->n_v > GDN_MAX_COUNTERS || p->d_conv < 2 ||
        p->d_conv > GDN_MAX_DCONV)
        return CUDA_INVALID(be, "gdn: n_k %d, n_v %d, d_conv %d", p->n_k, p->n_v, p->d_conv);
    int64_t conv_dim = 2 * (int64_t)p->n_k * p->d_k + (int64_t)p->n_v * p->d_v;
    if (!p->conv1d || !p->conv1d->data || p->conv1d->type != MEMRA_TYPE_F32 || p->conv1d->ne[0] != p->d_conv ||
        p->conv1d->ne[1] != conv_dim)
        return CUDA_INVALID(be, "gdn: conv1d must be a loaded F32 {%d, %lld}", p->d_conv, (long long)conv_dim);
    const memra_weight *vecs[3] = {p->dt_bias, p->a, p->norm};
    int64_t vlen[3] = {p->n_v, p->n_v, p->d_v};
    for (int i = 0; i < 3; i++)
        if (!vecs[i] || !vecs[i]->data || vecs[i]->type != MEMRA_TYPE_F32 || vecs[i]->ne[0] < vlen[i])
            return CUDA_INVALID(be, "gdn: dt_bias/a/norm must be loaded F32 vectors");
    if (!cuda_aligned16(ssm_state)) return CUDA_INVALID(be, "gdn: ssm_state not 16-byte aligned");
    if (T <= 0 || b->n_seqs <= 0) return MEMRA_OK;
    if (T >= GDN_SCAN_MIN_T && (int64_t)p->n_v * p->d_v % (4 * GDN_SCAN_CPW) == 0 && 2 * p->d_k <= 256)
        return gdn_scan_run(be, b, p, conv_state, ssm_state, mixed, z, braw, araw, out, conv_dim);
    memra_status st = cuda_ws_reserve(be, (size_t)T * (size_t)p->n_v * GDN_NS * sizeof(float));
    if (st) return st;
    cuda_impl *c = cuda_of(be);
    gdn_args a;
    a.mixed = mixed;
    a.conv_w = (const float *)p->conv1d->data;
    a.conv_state = conv_state;
    a.z = z;
    a.braw = braw;
    a.araw = araw;
    a.dt_bias = (const float *)p->dt_bias->data;
    a.a = (const float *)p->a->data;
    a.norm = (const float *)p->norm->data;
    a.ssm_state = ssm_state;
    a.out = out;
    a.part = (float *)c->ws;
    a.conv_dim = conv_dim;
    a.n_k = p->n_k;
    a.n_v = p->n_v;
    a.kv_tiled = p->kv_tiled;
    a.dc = p->d_conv;
    a.eps = p->eps;
    a.l2_eps = p->l2_eps;
    a.cnt = c->gdn_cnt;
    const gdn_fn kcl = gdn_pick<true>(p->d_k, p->d_v);
    const int cl = gdn_cluster(T, b->n_seqs, p, kcl);
    /* sequences in launches of at most GDN_MAX_COUNTERS / n_v (the counters' capacity) */
    int32_t per = GDN_MAX_COUNTERS / p->n_v;
    if (per > 65535) per = 65535;
    for (int32_t s0 = 0; s0 < b->n_seqs; s0 += per) {
        int32_t n = b->n_seqs - s0 < per ? b->n_seqs - s0 : per;
        a.seq_start = b->d_seq_start + s0;
        a.slot = b->d_slot + s0;
        cuda_launch_cl(cl ? kcl : kern, dim3((unsigned)(p->n_v * GDN_NS), (unsigned)n), 256, 0, c->stream,
                       (unsigned)cl, a);
        st = CUDA_LAUNCHED(be, "gdn");
        if (st) return st;
    }
    return MEMRA_OK;
}
