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
template <int DK, int DV>
__global__ void __launch_bounds__(256) k_gdn(gdn_args a) {
    constexpr int KR = DK / 32, CB = DV / GDN_NS, CW = CB / 8;
    static_assert(DK % 32 == 0 && DK <= 128 && DV % 32 == 0 && DV <= 128, "gdn: head sizes");
    static_assert(CB % 8 == 0 && CB <= 32, "gdn: columns per block");
    __shared__ __align__(16) float qn[DK], kn[DK]; /* vector reads of qn, kn */
    __shared__ float vs[CB], os[CB], red[8];
    __shared__ int last_key, last_head;
    const int h = blockIdx.x / GDN_NS, sp = blockIdx.x % GDN_NS, s = blockIdx.y;
    pdl_start();
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5, tid = threadIdx.x;
    const int kh = a.kv_tiled ? h % a.n_k : h / (a.n_v / a.n_k);
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
    const float qscale = 1.0f / sqrtf((float)DK);
    const int t0 = a.seq_start[s], t1 = a.seq_start[s + 1];
    for (int t = t0; t < t1; t++) {
        const float *mt = a.mixed + (int64_t)t * a.conv_dim;
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
        const float beta = sigmoid_f(a.braw[(int64_t)t * a.n_v + h]);
        const float g = A * softplus_f(a.araw[(int64_t)t * a.n_v + h] + dt_b);
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
            if (lane < CB) a.out[(int64_t)t * vdim + (int64_t)h * DV + sp * CB + lane] = o;
            if (lane == 0) a.part[((int64_t)t * a.n_v + h) * GDN_NS + sp] = p;
        }
        __syncthreads(); /* qn/kn/vs/os/red are rewritten by the next token */
    }
#pragma unroll
    for (int jj = 0; jj < CW; jj++) gdn_store<KR>(S + (int64_t)(CW * w + jj) * DK + KR * lane, st[jj]);
    if (tid < CB) gdn_ch_save(cv, a.conv_state + (slot * a.conv_dim + ch_v) * (dc - 1), dc);
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
        a.out[idx] = o / sqrtf(tot / (float)DV + a.eps) * a.norm[j] * silu_f(a.z[idx]);
    }
}

typedef void (*gdn_fn)(gdn_args);

template <int DK> static gdn_fn gdn_pick_dv(int dv) {
    switch (dv) {
    case 32: return k_gdn<DK, 32>;
    case 64: return k_gdn<DK, 64>;
    case 96: return k_gdn<DK, 96>;
    case 128: return k_gdn<DK, 128>;
    default: return NULL;
    }
}

/* The head kernel for d_k, d_v; NULL for sizes without an instance. */
static gdn_fn gdn_pick(int dk, int dv) {
    switch (dk) {
    case 32: return gdn_pick_dv<32>(dv);
    case 64: return gdn_pick_dv<64>(dv);
    case 96: return gdn_pick_dv<96>(dv);
    case 128: return gdn_pick_dv<128>(dv);
    default: return NULL;
    }
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
    /* sequences in launches of at most GDN_MAX_COUNTERS / n_v (the counters' capacity) */
    int32_t per = GDN_MAX_COUNTERS / p->n_v;
    if (per > 65535) per = 65535;
    for (int32_t s0 = 0; s0 < b->n_seqs; s0 += per) {
        int32_t n = b->n_seqs - s0 < per ? b->n_seqs - s0 : per;
        a.seq_start = b->d_seq_start + s0;
        a.slot = b->d_slot + s0;
        cuda_launch(kern, dim3((unsigned)(p->n_v * GDN_NS), (unsigned)n), 256, 0, c->stream, a);
        st = CUDA_LAUNCHED(be, "gdn");
        if (st) return st;
    }
    return MEMRA_OK;
}
