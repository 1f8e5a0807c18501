/* Gated DeltaNet layer after the input projections (spec §5.3-5.6), in two
 * kernels per layer:
 *   1. k_gdn_conv: causal depthwise conv over each sequence's tokens with the
 *      raw-input conv state, SiLU, into the workspace [T][conv_dim]; updates
 *      the conv state. A separate kernel because the q/k channels are shared
 *      by several v-heads: fusing it into the per-head kernel would have
 *      several blocks read and write the same conv state.
 *   2. k_gdn_heads: per (sequence, v-head): L2 norms of q/k, the gates, the
 *      delta-rule update with the state held in registers over all of the
 *      sequence's tokens (token-sequential; exact for prefill too), the read
 *      with the updated state, and the gated RMSNorm with silu(z).
 * Every reduction has a fixed order per token; a token's result depends only
 * on its sequence's tokens and state. */
#include <math.h>

#include "backend/cuda/ops.cuh"

#define GDN_MAX_DCONV 8

/* Launch contract: grid (ceil(conv_dim / 128), n_seqs), block 128; thread
 * owns channel c of sequence blockIdx.y and walks the sequence's tokens in
 * order. conv_state [n_slots][conv_dim][dc - 1] oldest first; w [conv_dim][dc]
 * (tap dc - 1 = current token); mixed and c_out [T][conv_dim]. */
__global__ void __launch_bounds__(128)
    k_gdn_conv(const int32_t *__restrict__ seq_start, const int32_t *__restrict__ slot, const float *__restrict__ w,
               int32_t dc, int64_t conv_dim, float *__restrict__ conv_state, const float *__restrict__ mixed,
               float *__restrict__ c_out) {
    int64_t c = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= conv_dim) return;
    int s = blockIdx.y;
    float *st = conv_state + ((int64_t)slot[s] * conv_dim + c) * (dc - 1);
    float win[GDN_MAX_DCONV], wt[GDN_MAX_DCONV];
    const float wlast = w[c * dc + dc - 1]; /* tap of the current token */
#pragma unroll
    for (int k = 0; k < GDN_MAX_DCONV; k++) {
        win[k] = k < dc - 1 ? st[k] : 0.0f;
        wt[k] = k < dc - 1 ? w[c * dc + k] : 0.0f;
    }
    for (int t = seq_start[s]; t < seq_start[s + 1]; t++) {
        float x = mixed[(int64_t)t * conv_dim + c];
        /* window = [win[0..dc-2], x] */
        float acc = 0.0f;
#pragma unroll
        for (int k = 0; k < GDN_MAX_DCONV; k++)
            if (k < dc - 1) acc = fmaf(wt[k], win[k], acc);
        acc = fmaf(wlast, x, acc);
        c_out[(int64_t)t * conv_dim + c] = silu_f(acc);
#pragma unroll
        for (int k = 0; k < GDN_MAX_DCONV - 1; k++)
            if (k < dc - 2) win[k] = win[k + 1];
#pragma unroll
        for (int k = 0; k < GDN_MAX_DCONV; k++)
            if (k == dc - 2) win[k] = x;
    }
#pragma unroll
    for (int k = 0; k < GDN_MAX_DCONV; k++)
        if (k < dc - 1) st[k] = win[k];
}

typedef struct gdn_args {
    const int32_t *seq_start, *slot;
    const float *conv;            /* [T][conv_dim] silu(conv) output */
    const float *z, *braw, *araw; /* [T][n_v*d_v], [T][n_v], [T][n_v] */
    const float *dt_bias, *a, *norm;
    float *ssm_state; /* [n_slots][n_v][d_v][d_k] */
    float *out;       /* [T][n_v*d_v] */
    int64_t conv_dim;
    int32_t n_k, n_v, kv_tiled;
    float eps, l2_eps;
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

/* Launch contract: grid (n_v, n_seqs), block 256 (8 warps); DK, DV in
 * {32, 64, 96, 128} (the launcher picks the instance). KR = DK / 32 key rows
 * per lane, CW = DV / 8 value columns per warp: warp w owns columns
 * j = CW w .. CW w + CW - 1 of head blockIdx.x, lane l owns key rows
 * i = KR l .. KR l + KR - 1, so the state S[i][j] (memory j*DK + i) is read
 * once per (lane, j) (a float4 when KR = 4), kept in CW x KR registers per
 * thread over the sequence's tokens (64 at DK = DV = 128), and written back
 * at the end; ssm_state 16-byte aligned. Per token: threads 0..DK-1 hold q[i],
 * threads DK..2DK-1 k[i], threads 0..DV-1 v[j]; the norms sum the warp
 * partials of their threads in warp order. */
template <int DK, int DV>
__global__ void __launch_bounds__(256) k_gdn_heads(gdn_args a) {
    constexpr int KR = DK / 32, CW = DV / 8;
    static_assert(DK % 32 == 0 && DK <= 128 && DV % 32 == 0 && DV <= 128, "gdn: head sizes");
    __shared__ __align__(16) float qn[DK], kn[DK], vs[DV], os[DV]; /* vector reads of qn, kn */
    __shared__ float red[8];
    const int h = blockIdx.x, s = blockIdx.y;
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5, tid = threadIdx.x;
    const int kh = a.kv_tiled ? h % a.n_k : h / (a.n_v / a.n_k);
    const int64_t key_dim = (int64_t)a.n_k * DK;
    float *S = a.ssm_state + ((int64_t)a.slot[s] * a.n_v + h) * DV * DK;
    float st[CW][KR];
#pragma unroll
    for (int jj = 0; jj < CW; jj++) gdn_load<KR>(S + (int64_t)(CW * w + jj) * DK + KR * lane, st[jj]);
    const float dt_b = a.dt_bias[h], A = a.a[h], nw = tid < DV ? a.norm[tid] : 0.0f;
    const float qscale = 1.0f / sqrtf((float)DK);
    for (int t = a.seq_start[s]; t < a.seq_start[s + 1]; t++) {
        const float *ct = a.conv + (int64_t)t * a.conv_dim;
        /* q (threads 0..DK-1) and k (DK..2DK-1) of key head kh, L2-normalised */
        float x = 0.0f; /* threads past 2 DK hold nothing (zero partial sums) */
        if (tid < DK) x = ct[(int64_t)kh * DK + tid];
        else if (2 * DK == 256 || tid < 2 * DK) x = ct[key_dim + (int64_t)kh * DK + tid - DK];
        if (tid < DV) vs[tid] = ct[2 * key_dim + (int64_t)h * DV + tid];
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
        /* gated RMSNorm over the head's d_v outputs (threads 0..DV-1) */
        float o = tid < DV ? os[tid] : 0.0f;
        float oss = warp_sum(o * o);
        __syncthreads(); /* red is reused */
        if (lane == 0) red[w] = oss;
        __syncthreads();
        if (tid < DV) {
            float tot = gdn_sum_warps<DV / 32>(red);
            float zz = a.z[(int64_t)t * a.n_v * DV + (int64_t)h * DV + tid];
            a.out[(int64_t)t * a.n_v * DV + (int64_t)h * DV + tid] =
                o / sqrtf(tot / (float)DV + a.eps) * nw * silu_f(zz);
        }
        __syncthreads(); /* qn/kn/vs/os/red are rewritten by the next token */
    }
#pragma unroll
    for (int jj = 0; jj < CW; jj++) gdn_store<KR>(S + (int64_t)(CW * w + jj) * DK + KR * lane, st[jj]);
}

typedef void (*gdn_heads_fn)(gdn_args);

template <int DK> static gdn_heads_fn gdn_pick_dv(int dv) {
    switch (dv) {
    case 32: return k_gdn_heads<DK, 32>;
    case 64: return k_gdn_heads<DK, 64>;
    case 96: return k_gdn_heads<DK, 96>;
    case 128: return k_gdn_heads<DK, 128>;
    default: return NULL;
    }
}

/* The head kernel for d_k, d_v; NULL for sizes without an instance. */
static gdn_heads_fn gdn_pick(int dk, int dv) {
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
    gdn_heads_fn heads = gdn_pick(p->d_k, p->d_v);
    if (!heads)
        return CUDA_INVALID(be, "gdn: d_k %d, d_v %d: the CUDA kernel needs each in {32, 64, 96, 128}", p->d_k,
                            p->d_v);
    if (p->n_k <= 0 || p->n_v <= 0 || p->n_v % p->n_k || p->d_conv < 2 || p->d_conv > GDN_MAX_DCONV)
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
    if (b->n_seqs > 65535) return CUDA_INVALID(be, "gdn: %d sequences", b->n_seqs);
    memra_status st = cuda_ws_reserve(be, (size_t)T * (size_t)conv_dim * sizeof(float));
    if (st) return st;
    cuda_impl *c = cuda_of(be);
    float *cbuf = (float *)c->ws;
    dim3 g1((unsigned)((conv_dim + 127) / 128), (unsigned)b->n_seqs);
    k_gdn_conv<<<g1, 128, 0, c->stream>>>(b->d_seq_start, b->d_slot, (const float *)p->conv1d->data, p->d_conv,
                                          conv_dim, conv_state, mixed, cbuf);
    st = CUDA_LAUNCHED(be, "gdn: conv kernel");
    if (st) return st;
    gdn_args a;
    a.seq_start = b->d_seq_start;
    a.slot = b->d_slot;
    a.conv = cbuf;
    a.z = z;
    a.braw = braw;
    a.araw = araw;
    a.dt_bias = (const float *)p->dt_bias->data;
    a.a = (const float *)p->a->data;
    a.norm = (const float *)p->norm->data;
    a.ssm_state = ssm_state;
    a.out = out;
    a.conv_dim = conv_dim;
    a.n_k = p->n_k;
    a.n_v = p->n_v;
    a.kv_tiled = p->kv_tiled;
    a.eps = p->eps;
    a.l2_eps = p->l2_eps;
    heads<<<dim3((unsigned)p->n_v, (unsigned)b->n_seqs), 256, 0, c->stream>>>(a);
    return CUDA_LAUNCHED(be, "gdn: head kernel");
}
