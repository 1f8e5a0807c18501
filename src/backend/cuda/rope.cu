/* NeoX ("rotate-half") RoPE on the first n_rot dims of each head (spec §4.3),
 * alone (rope_neox) and fused with the q/k head norms and the KV store
 * (qk_norm_rope_store):
 * pair (j, j + n_rot/2), angle pos * theta^(-2j/n_rot). The angle is formed
 * in double precision: at positions near 262144 an fp32 angle would be off
 * by ~1e-2 rad. */
#include "backend/cuda/ops.cuh"

/* Launch contract: grid (ceil(n_heads * n_rot/2 / 128), T), block 128;
 * thread (h, j) rotates pair j of head h of token blockIdx.y. In place. */
__global__ void k_rope_neox(float *x, const int32_t *__restrict__ pos, int64_t n_heads, int64_t head_stride,
                            int64_t tok_stride, int32_t n_rot, double log_theta) {
    pdl_start();
    int64_t t = blockIdx.y;
    int half = n_rot / 2;
    int64_t idx = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= n_heads * half) return;
    int64_t h = idx / half;
    int j = (int)(idx % half);
    double inv_freq = exp(-log_theta * (double)(2 * j) / (double)n_rot);
    double ang = (double)pos[t] * inv_freq;
    double sd, cd;
    sincos(ang, &sd, &cd);
    float s = (float)sd, c = (float)cd;
    float *p = x + t * tok_stride + h * head_stride;
    float a = p[j], b = p[j + half];
    p[j] = a * c - b * s;
    p[j + half] = b * c + a * s;
}

memra_status cuda_op_rope_neox(memra_backend *be, float *x, const memra_batch *b, int64_t n_heads,
                               int64_t head_stride, int64_t tok_stride, int32_t n_rot, float theta) {
    int64_t T = b->n_tokens;
    if (n_rot <= 0 || n_rot % 2 || n_heads <= 0 || !(theta > 0.0f) || T > 65535)
        return CUDA_INVALID(be, "rope_neox: n_rot %d, heads %lld, theta %g, T %lld", n_rot, (long long)n_heads,
                            (double)theta, (long long)T);
    if (T <= 0) return MEMRA_OK;
    int64_t pairs = n_heads * (n_rot / 2);
    dim3 grid((unsigned)((pairs + 127) / 128), (unsigned)T);
    cuda_launch(k_rope_neox, grid, 128, 0, cuda_of(be)->stream, x, b->d_pos, n_heads, head_stride, tok_stride, n_rot,
                                                       log((double)theta));
    return CUDA_LAUNCHED(be, "rope_neox");
}

/* ---- qk_norm_rope_store (backend.h): the head work of an attention layer in one launch ---- */

#define QKN_THREADS 128
#define QKN_MAX_HD 512
#define QKN_PER (QKN_MAX_HD / QKN_THREADS) /* elements of a head per thread */

typedef struct qkn_args {
    const int32_t *pos, *tok_seq, *slot; /* device batch arrays */
    float *q;                            /* head h of token t at q + t*q_tok_stride + h*q_head_stride */
    int64_t q_tok_stride, q_head_stride;
    float *k;       /* [T][n_kv*hd], in place */
    const float *v; /* [T][n_kv*hd] */
    const float *qw, *kw; /* {hd} norm weights */
    float *kc, *vc;       /* [n_slots][n_ctx][n_kv*hd] */
    int32_t n_head, n_kv, hd, n_rot, n_ctx;
    float eps;
    double log_theta;
} qkn_args;

/* Launch contract: grid (n_head + n_kv, T), block QKN_THREADS; hd <= 512,
 * n_rot even and <= hd. Block (h, t) owns q head h of token t for
 * h < n_head, else k head h - n_head (whose block also stores that head's k
 * and v rows at [slot][pos]; positions outside [0, n_ctx) store nothing, as
 * kv_store). Thread i holds elements i, i + 128, ... of the head and sums
 * their squares in that order; block_sum combines them in a fixed order, so
 * the result depends on hd alone. The normalised head goes through shared
 * memory so that thread j < n_rot/2 rotates the pair (j, j + n_rot/2) with
 * rope.cu's double-precision angle.
 * The angles (double exp and sincos, ~1 us of dependent latency) and the
 * norm weight are taken before the wait for the previous kernel: pos is
 * written by batch_upload before the step, never by a kernel of it, and the
 * weights are constants. The bits are the same. */
__global__ void __launch_bounds__(QKN_THREADS) k_qk_norm_rope_store(qkn_args a) {
    __shared__ float hs[QKN_MAX_HD];
    __shared__ float sh[32];
    const int t = blockIdx.y, hd = a.hd;
    const int half = a.n_rot / 2;
    const int32_t pos = a.pos[t];
    float cs[QKN_PER / 2], sn[QKN_PER / 2]; /* pair j = threadIdx.x + e QKN_THREADS (n_rot / 2 <= 256) */
#pragma unroll
    for (int e = 0; e < QKN_PER / 2; e++) {
        const int j = threadIdx.x + e * QKN_THREADS;
        cs[e] = sn[e] = 0.0f;
        if (j < half) {
            double sd, cd;
            sincos((double)pos * exp(-a.log_theta * (double)(2 * j) / (double)a.n_rot), &sd, &cd);
            sn[e] = (float)sd, cs[e] = (float)cd;
        }
    }
    const bool is_q = (int)blockIdx.x < a.n_head;
    const int h = is_q ? (int)blockIdx.x : (int)blockIdx.x - a.n_head;
    const int64_t kv_dim = (int64_t)a.n_kv * hd;
    float *p = is_q ? a.q + t * a.q_tok_stride + h * a.q_head_stride : a.k + t * kv_dim + (int64_t)h * hd;
    const float *wn = is_q ? a.qw : a.kw;
    float wr[QKN_PER];
#pragma unroll
    for (int e = 0; e < QKN_PER; e++) {
        int i = threadIdx.x + e * QKN_THREADS;
        wr[e] = i < hd ? wn[i] : 0.0f;
    }
    pdl_start();
    float r[QKN_PER];
#pragma unroll
    for (int e = 0; e < QKN_PER; e++) {
        int i = threadIdx.x + e * QKN_THREADS;
        r[e] = i < hd ? p[i] : 0.0f;
    }
    float ss = 0.0f;
#pragma unroll
    for (int e = 0; e < QKN_PER; e++) ss = fmaf(r[e], r[e], ss);
    ss = block_sum(ss, sh);
    const float scale = 1.0f / sqrtf(ss / (float)hd + a.eps);
#pragma unroll
    for (int e = 0; e < QKN_PER; e++) {
        int i = threadIdx.x + e * QKN_THREADS;
        if (i < hd) hs[i] = r[e] * scale * wr[e];
    }
    __syncthreads();
#pragma unroll
    for (int e = 0; e < QKN_PER / 2; e++) {
        const int j = threadIdx.x + e * QKN_THREADS;
        if (j >= half) break;
        const float s = sn[e], c = cs[e];
        float x0 = hs[j], x1 = hs[j + half];
        hs[j] = x0 * c - x1 * s;
        hs[j + half] = x1 * c + x0 * s;
    }
    __syncthreads();
    for (int i = threadIdx.x; i < hd; i += QKN_THREADS) p[i] = hs[i];
    if (is_q || pos < 0 || pos >= a.n_ctx) return;
    int64_t dst = ((int64_t)a.slot[a.tok_seq[t]] * a.n_ctx + pos) * kv_dim + (int64_t)h * hd;
    const float *vr = a.v + t * kv_dim + (int64_t)h * hd;
    for (int i = threadIdx.x; i < hd; i += QKN_THREADS) {
        a.kc[dst + i] = hs[i];
        a.vc[dst + i] = vr[i];
    }
}

memra_status cuda_op_qk_norm_rope_store(memra_backend *be, const memra_batch *b, float *q, int64_t q_tok_stride,
                                        int64_t q_head_stride, int32_t n_head, float *k, const float *v, int32_t n_kv,
                                        int32_t hd, const memra_weight *q_norm, const memra_weight *k_norm, float eps,
                                        int32_t n_rot, float theta, float *k_cache, float *v_cache, int32_t n_ctx) {
    int64_t T = b->n_tokens;
    if (n_head <= 0 || n_kv <= 0 || hd <= 0 || hd > QKN_MAX_HD || n_rot <= 0 || n_rot % 2 || n_rot > hd ||
        !(theta > 0.0f) || n_ctx <= 0 || T > 65535)
        return CUDA_INVALID(be, "qk_norm_rope_store: heads %d/%d, hd %d (<= %d), n_rot %d, theta %g, n_ctx %d, T %lld",
                            n_head, n_kv, hd, QKN_MAX_HD, n_rot, (double)theta, n_ctx, (long long)T);
    const memra_weight *nw[2] = {q_norm, k_norm};
    for (int i = 0; i < 2; i++)
        if (!nw[i] || !nw[i]->data || nw[i]->type != MEMRA_TYPE_F32 || nw[i]->ne[0] < hd)
            return CUDA_INVALID(be, "qk_norm_rope_store: %s must be a loaded F32 vector of >= %d",
                                nw[i] && nw[i]->name ? nw[i]->name : "the norm weight", hd);
    if (T <= 0) return MEMRA_OK;
    qkn_args a;
    a.pos = b->d_pos;
    a.tok_seq = b->d_tok_seq;
    a.slot = b->d_slot;
    a.q = q;
    a.q_tok_stride = q_tok_stride;
    a.q_head_stride = q_head_stride;
    a.k = k;
    a.v = v;
    a.qw = (const float *)q_norm->data;
    a.kw = (const float *)k_norm->data;
    a.kc = k_cache;
    a.vc = v_cache;
    a.n_head = n_head;
    a.n_kv = n_kv;
    a.hd = hd;
    a.n_rot = n_rot;
    a.n_ctx = n_ctx;
    a.eps = eps;
    a.log_theta = log((double)theta);
    cuda_launch(k_qk_norm_rope_store, dim3((unsigned)(n_head + n_kv), (unsigned)T), QKN_THREADS, 0, cuda_of(be)->stream, a);
    return CUDA_LAUNCHED(be, "qk_norm_rope_store");
}
