/* The CPU reference backend: the oracle every other backend is checked
 * against. Written for clarity: each op is the formula of its backend.h
 * comment, threaded with memra_pool_for over output rows, tokens or heads.
 *
 * Determinism: a task computes whole outputs (a row of a matmul, a (token,
 * head) of attention, a (sequence, v-head) of the delta rule) with a loop
 * order fixed by the op, so results are identical for any thread count, any
 * batch size and any batch composition (batch invariance, checked bit for
 * bit by tests/test_model.c). Reductions that are cheap (norms, softmax
 * denominators, attention accumulators) are carried in double. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "base/threads.h"
#include "gguf/quant.h"

typedef struct cpu_impl {
    memra_pool *pool;
    float *scratch; /* grown on demand by ops that need a temporary (gdn) */
    size_t scratch_floats;
} cpu_impl;

static cpu_impl *impl_of(memra_backend *be) { return be->impl; }
static memra_pool *pool_of(memra_backend *be) { return impl_of(be)->pool; }

static float silu(float x) { return x / (1.0f + expf(-x)); }
static float sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }
/* PyTorch's softplus threshold: above 20 it returns x. */
static float softplus(float x) { return x > 20.0f ? x : log1pf(expf(x)); }

/* Rows per task so that one task does at least ~work_min multiply-adds
 * (waking a worker costs more than a small op). */
static int64_t min_chunk_for(int64_t work_per_index) {
    const int64_t work_min = 1 << 17;
    if (work_per_index <= 0) return 1;
    int64_t c = work_min / work_per_index;
    return c < 1 ? 1 : c;
}

static memra_status scratch_get(memra_backend *be, size_t n_floats, float **out) {
    cpu_impl *c = impl_of(be);
    if (n_floats > c->scratch_floats) {
        float *p = realloc(c->scratch, n_floats * sizeof(float));
        if (!p) return MEMRA_ERR_NOMEM;
        c->scratch = p;
        c->scratch_floats = n_floats;
    }
    *out = c->scratch;
    return MEMRA_OK;
}

/* ------------------------------------------------------------------ memory */

static memra_status cpu_alloc(memra_backend *be, size_t bytes, void **out) {
    (void)be;
    size_t n = (bytes + 63) & ~(size_t)63;
    if (n < bytes) return MEMRA_ERR_NOMEM;
    *out = aligned_alloc(64, n ? n : 64);
    return *out ? MEMRA_OK : MEMRA_ERR_NOMEM;
}

static void cpu_free(memra_backend *be, void *ptr) {
    (void)be;
    free(ptr);
}

static memra_status cpu_memcpy(memra_backend *be, void *dst, const void *src, size_t bytes) {
    (void)be;
    if (bytes) memmove(dst, src, bytes);
    return MEMRA_OK;
}

static memra_status cpu_zero(memra_backend *be, void *dst, size_t bytes) {
    (void)be;
    if (bytes) memset(dst, 0, bytes);
    return MEMRA_OK;
}

static memra_status cpu_weight_load(memra_backend *be, memra_weight *w) {
    (void)be;
    w->data = (void *)w->host;
    return MEMRA_OK;
}

static void cpu_weight_release(memra_backend *be, memra_weight *w) {
    (void)be;
    w->data = NULL;
}

static memra_status cpu_batch_upload(memra_backend *be, memra_batch *b) {
    (void)be;
    if (b->n_tokens < 0 || b->n_tokens > b->max_tokens || b->n_seqs < 0 || b->n_seqs > b->max_seqs)
        return MEMRA_ERR_INVALID;
    size_t nt = (size_t)b->n_tokens * sizeof(int32_t), ns = (size_t)b->n_seqs * sizeof(int32_t);
    memcpy(b->d_tokens, b->tokens, nt);
    memcpy(b->d_pos, b->pos, nt);
    memcpy(b->d_tok_seq, b->tok_seq, nt);
    memcpy(b->d_seq_start, b->seq_start, ns + sizeof(int32_t));
    memcpy(b->d_slot, b->slot, ns);
    return MEMRA_OK;
}

static memra_status cpu_sync(memra_backend *be) {
    (void)be;
    return MEMRA_OK;
}

/* ------------------------------------------------------------------- embed */

typedef struct embed_ctx {
    const memra_weight *table;
    const int32_t *tokens;
    float *out; /* [T][H] */
} embed_ctx;

static void embed_range(void *p, int64_t t0, int64_t t1) {
    embed_ctx *c = p;
    int64_t H = c->table->ne[0];
    for (int64_t t = t0; t < t1; t++) {
        const uint8_t *row = (const uint8_t *)c->table->data + (uint64_t)c->tokens[t] * c->table->row_bytes;
        memra_dequant_row(c->table->type, row, c->out + t * H, H);
    }
}

static memra_status cpu_embed(memra_backend *be, const memra_weight *table, const memra_batch *b, float *out) {
    for (int32_t t = 0; t < b->n_tokens; t++)
        if (b->d_tokens[t] < 0 || b->d_tokens[t] >= table->ne[1]) return MEMRA_ERR_INVALID;
    embed_ctx c = {table, b->d_tokens, out};
    memra_pool_for(pool_of(be), b->n_tokens, min_chunk_for(table->ne[0]), embed_range, &c);
    return MEMRA_OK;
}

/* ----------------------------------------------------------------- rmsnorm */

typedef struct rmsnorm_ctx {
    const float *x;
    int64_t x_stride;
    const float *w; /* [n] */
    float *y;
    int64_t y_stride, n;
    float eps;
} rmsnorm_ctx;

static void rmsnorm_range(void *p, int64_t r0, int64_t r1) {
    rmsnorm_ctx *c = p;
    for (int64_t r = r0; r < r1; r++) {
        const float *x = c->x + r * c->x_stride;
        float *y = c->y + r * c->y_stride;
        double ss = 0.0;
        for (int64_t i = 0; i < c->n; i++) ss += (double)x[i] * x[i];
        float inv = (float)(1.0 / sqrt(ss / (double)c->n + (double)c->eps));
        for (int64_t i = 0; i < c->n; i++) y[i] = (x[i] * inv) * c->w[i];
    }
}

static memra_status cpu_rmsnorm(memra_backend *be, const float *x, int64_t x_stride, const memra_weight *w, float *y,
                                int64_t y_stride, int64_t n, int64_t n_rows, float eps) {
    if (w->type != MEMRA_TYPE_F32 || w->ne[0] != n) return MEMRA_ERR_INVALID;
    rmsnorm_ctx c = {x, x_stride, w->data, y, y_stride, n, eps};
    memra_pool_for(pool_of(be), n_rows, min_chunk_for(n), rmsnorm_range, &c);
    return MEMRA_OK;
}

/* ------------------------------------------------------------------ matmul */

typedef struct matmul_ctx {
    const memra_weight *w;
    const float *x; /* [T][in] */
    float *y;       /* [T][out] */
    int64_t T;
    int accumulate;
} matmul_ctx;

/* Row o of w for memra_dot_row, and its type in *type: with deq (room for
 * one row of floats) the row is dequantized into it once, so that several
 * tokens can be dotted in F32. memra_dot_row is defined as the F32 lane dot
 * of exactly the dequantized values (quant.h), so both ways give the same
 * bits and a token's result does not depend on T (tests/test_cpu_ops.c
 * checks this equality). */
static const uint8_t *dot_row(const memra_weight *w, int64_t o, float *deq, uint32_t *type) {
    const uint8_t *row = (const uint8_t *)w->data + (uint64_t)o * w->row_bytes;
    *type = w->type;
    if (!deq || w->type == MEMRA_TYPE_F32) return row;
    memra_dequant_row(w->type, row, deq, w->ne[0]);
    *type = MEMRA_TYPE_F32;
    return (const uint8_t *)deq;
}

/* A task owns output rows [o0, o1) for every token; with several tokens
 * each weight row is dequantized once (dot_row). */
static void matmul_range(void *p, int64_t o0, int64_t o1) {
    matmul_ctx *c = p;
    int64_t in = c->w->ne[0], out = c->w->ne[1];
    float *deq = c->T > 1 && c->w->type != MEMRA_TYPE_F32 ? malloc((size_t)in * sizeof(float)) : NULL;
    for (int64_t o = o0; o < o1; o++) {
        uint32_t type;
        const uint8_t *row = dot_row(c->w, o, deq, &type);
        for (int64_t t = 0; t < c->T; t++) {
            float v = memra_dot_row(type, row, c->x + t * in, in);
            if (c->accumulate) c->y[t * out + o] += v;
            else c->y[t * out + o] = v;
        }
    }
    free(deq);
}

static memra_status cpu_matmul(memra_backend *be, const memra_weight *w, const float *x, float *y, int64_t T,
                               int accumulate) {
    if (w->ne[2] != 1 || w->ne[3] != 1) return MEMRA_ERR_INVALID;
    matmul_ctx c = {w, x, y, T, accumulate};
    memra_pool_for(pool_of(be), w->ne[1], min_chunk_for(w->ne[0] * (T > 0 ? T : 1)), matmul_range, &c);
    return MEMRA_OK;
}

/* The input of a matmul op with a norm: rmsnorm(x), exactly the rmsnorm op,
 * into norm->out or else a new buffer (*tmp, freed by the caller); without
 * one, x itself. */
static memra_status norm_input(memra_backend *be, const memra_norm *norm, const float *x, int64_t in, int64_t T,
                               const float **xin, float **tmp) {
    *xin = x, *tmp = NULL;
    if (!norm) return MEMRA_OK;
    if (!norm->w || norm->w->ne[0] != in) return MEMRA_ERR_INVALID;
    float *dst = norm->out;
    if (!dst) {
        *tmp = dst = malloc((size_t)((T > 0 ? T : 1) * in) * sizeof(float));
        if (!dst) return MEMRA_ERR_NOMEM;
    }
    *xin = dst;
    return cpu_rmsnorm(be, x, in, norm->w, dst, in, in, T, norm->eps);
}

/* Several matmuls of one input: each is cpu_matmul (the same rows, the same
 * bits); the fusion is the interface's, for backends that read x once. */
static memra_status cpu_matmul_multi(memra_backend *be, int n, const memra_weight *const *w, float *const *y,
                                     const float *x, int64_t T, const memra_norm *norm) {
    if (n < 1 || n > 4) return MEMRA_ERR_INVALID;
    for (int i = 0; i < n; i++)
        if (w[i]->ne[0] != w[0]->ne[0]) return MEMRA_ERR_INVALID;
    const float *xin;
    float *tmp;
    memra_status st = norm_input(be, norm, x, w[0]->ne[0], T, &xin, &tmp);
    for (int i = 0; i < n && !st; i++) st = cpu_matmul(be, w[i], xin, y[i], T, 0);
    free(tmp);
    return st;
}

typedef struct mm_swiglu_ctx {
    const memra_weight *gate, *up;
    const float *x; /* [T][in] */
    float *out;     /* [T][n_ff] */
    int64_t T;
} mm_swiglu_ctx;

/* A task owns rows [o0, o1) of both weights for every token: the two dots of
 * matmul_range (dot_row, so the same bits), then swiglu's silu(g) * u. */
static void mm_swiglu_range(void *p, int64_t o0, int64_t o1) {
    mm_swiglu_ctx *c = p;
    int64_t in = c->gate->ne[0], n_ff = c->gate->ne[1];
    float *deq = c->T > 1 ? malloc(2 * (size_t)in * sizeof(float)) : NULL;
    for (int64_t o = o0; o < o1; o++) {
        uint32_t type[2];
        const uint8_t *row[2] = {dot_row(c->gate, o, deq, &type[0]),
                                 dot_row(c->up, o, deq ? deq + in : NULL, &type[1])};
        for (int64_t t = 0; t < c->T; t++) {
            float g = memra_dot_row(type[0], row[0], c->x + t * in, in);
            float u = memra_dot_row(type[1], row[1], c->x + t * in, in);
            c->out[t * n_ff + o] = silu(g) * u;
        }
    }
    free(deq);
}

static memra_status cpu_matmul_swiglu(memra_backend *be, const memra_weight *gate, const memra_weight *up,
                                      const float *x, float *out, int64_t T, const memra_norm *norm) {
    if (gate->ne[0] != up->ne[0] || gate->ne[1] != up->ne[1] || gate->ne[2] != 1 || gate->ne[3] != 1 ||
        up->ne[2] != 1 || up->ne[3] != 1)
        return MEMRA_ERR_INVALID;
    const float *xin;
    float *tmp;
    memra_status st = norm_input(be, norm, x, gate->ne[0], T, &xin, &tmp);
    if (!st) {
        mm_swiglu_ctx c = {gate, up, xin, out, T};
        memra_pool_for(pool_of(be), gate->ne[1], min_chunk_for(2 * gate->ne[0] * (T > 0 ? T : 1)), mm_swiglu_range,
                       &c);
    }
    free(tmp);
    return st;
}

/* --------------------------------------------------------- elementwise ops */

typedef struct ew_ctx {
    float *y;
    const float *x, *a, *b;
    int64_t n, stride;
} ew_ctx;

static void add_range(void *p, int64_t i0, int64_t i1) {
    ew_ctx *c = p;
    for (int64_t i = i0; i < i1; i++) c->y[i] += c->x[i];
}

static memra_status cpu_add(memra_backend *be, float *y, const float *x, int64_t n) {
    ew_ctx c = {.y = y, .x = x};
    memra_pool_for(pool_of(be), n, 1 << 14, add_range, &c);
    return MEMRA_OK;
}

static void add_sig_range(void *p, int64_t t0, int64_t t1) {
    ew_ctx *c = p; /* a = gate */
    for (int64_t t = t0; t < t1; t++) {
        float g = sigmoid(c->a[t * c->stride]);
        for (int64_t i = 0; i < c->n; i++) c->y[t * c->n + i] += g * c->x[t * c->n + i];
    }
}

static memra_status cpu_add_sigmoid_scaled(memra_backend *be, float *y, const float *x, const float *gate,
                                           int64_t gate_stride, int64_t n, int64_t T) {
    ew_ctx c = {.y = y, .x = x, .a = gate, .n = n, .stride = gate_stride};
    memra_pool_for(pool_of(be), T, min_chunk_for(n), add_sig_range, &c);
    return MEMRA_OK;
}

static void swiglu_range(void *p, int64_t i0, int64_t i1) {
    ew_ctx *c = p; /* a = gate, b = up */
    for (int64_t i = i0; i < i1; i++) c->y[i] = silu(c->a[i]) * c->b[i];
}

static memra_status cpu_swiglu(memra_backend *be, const float *gate, const float *up, float *out, int64_t n,
                               int64_t T) {
    ew_ctx c = {.y = out, .a = gate, .b = up};
    memra_pool_for(pool_of(be), n * T, 1 << 13, swiglu_range, &c);
    return MEMRA_OK;
}

/* -------------------------------------------------------------------- rope */

typedef struct rope_ctx {
    float *x;
    const int32_t *pos;
    int64_t n_heads, head_stride, tok_stride;
    int32_t n_rot;
    double theta;
} rope_ctx;

/* Angles in double: p * theta^(-2j/n_rot) is exact enough at any position,
 * where an fp32 product would lose ~1e-7 * p radians. */
static void rope_range(void *p, int64_t i0, int64_t i1) {
    rope_ctx *c = p;
    int32_t half = c->n_rot / 2;
    for (int64_t i = i0; i < i1; i++) {
        int64_t t = i / c->n_heads, h = i % c->n_heads;
        float *v = c->x + t * c->tok_stride + h * c->head_stride;
        for (int32_t j = 0; j < half; j++) {
            double ang = (double)c->pos[t] * pow(c->theta, -2.0 * j / (double)c->n_rot);
            float cs = (float)cos(ang), sn = (float)sin(ang);
            float x0 = v[j], x1 = v[j + half];
            v[j] = x0 * cs - x1 * sn;
            v[j + half] = x1 * cs + x0 * sn;
        }
    }
}

static memra_status cpu_rope_neox(memra_backend *be, float *x, const memra_batch *b, int64_t n_heads,
                                  int64_t head_stride, int64_t tok_stride, int32_t n_rot, float theta) {
    if (n_rot < 2 || n_rot % 2) return MEMRA_ERR_INVALID;
    rope_ctx c = {x, b->d_pos, n_heads, head_stride, tok_stride, n_rot, theta};
    memra_pool_for(pool_of(be), (int64_t)b->n_tokens * n_heads, min_chunk_for(4 * n_rot), rope_range, &c);
    return MEMRA_OK;
}

/* --------------------------------------------------------------- attention */

static memra_status cpu_kv_store(memra_backend *be, const memra_batch *b, float *k_cache, float *v_cache,
                                 int32_t n_ctx, int64_t kv_dim, const float *k, const float *v) {
    (void)be;
    for (int32_t t = 0; t < b->n_tokens; t++) {
        int32_t slot = b->d_slot[b->d_tok_seq[t]], pos = b->d_pos[t];
        if (slot < 0 || pos < 0 || pos >= n_ctx) return MEMRA_ERR_INVALID;
        size_t row = ((size_t)slot * (size_t)n_ctx + (size_t)pos) * (size_t)kv_dim;
        memcpy(k_cache + row, k + (size_t)t * kv_dim, (size_t)kv_dim * sizeof(float));
        memcpy(v_cache + row, v + (size_t)t * kv_dim, (size_t)kv_dim * sizeof(float));
    }
    return MEMRA_OK;
}

/* The reference sequence itself (backend.h qk_norm_rope_store). */
static memra_status cpu_qk_norm_rope_store(memra_backend *be, const memra_batch *b, float *q, int64_t q_tok_stride,
                                           int64_t q_head_stride, int32_t n_head, float *k, const float *v,
                                           int32_t n_kv, int32_t hd, const memra_weight *q_norm,
                                           const memra_weight *k_norm, float eps, int32_t n_rot, float theta,
                                           float *k_cache, float *v_cache, int32_t n_ctx) {
    int64_t T = b->n_tokens, kv_dim = (int64_t)n_kv * hd;
    if (n_head < 1 || n_kv < 1 || hd < 1 || n_rot > hd || q_head_stride < hd || q_tok_stride < q_head_stride * n_head)
        return MEMRA_ERR_INVALID;
    /* per token: the q heads of a token are rows of stride q_head_stride, the tokens q_tok_stride apart */
    for (int64_t t = 0; t < T; t++)
        MEMRA_TRY(cpu_rmsnorm(be, q + t * q_tok_stride, q_head_stride, q_norm, q + t * q_tok_stride, q_head_stride,
                              hd, n_head, eps));
    MEMRA_TRY(cpu_rmsnorm(be, k, hd, k_norm, k, hd, hd, T * n_kv, eps));
    MEMRA_TRY(cpu_rope_neox(be, q, b, n_head, q_head_stride, q_tok_stride, n_rot, theta));
    MEMRA_TRY(cpu_rope_neox(be, k, b, n_kv, hd, kv_dim, n_rot, theta));
    return cpu_kv_store(be, b, k_cache, v_cache, n_ctx, kv_dim, k, v);
}

#define CPU_MAX_HEAD_DIM 4096

typedef struct attn_ctx {
    const memra_batch *b;
    const float *k_cache, *v_cache;
    int32_t n_ctx;
    const float *q, *gate;
    int64_t q_tok_stride, q_head_stride;
    int32_t n_head, n_kv, hd;
    float scale;
    float *out;
} attn_ctx;

/* One (token, head) per index. Two passes over the keys (max, then the
 * exponentials) so the softmax needs no per-task buffer. */
static void attn_range(void *p, int64_t i0, int64_t i1) {
    attn_ctx *c = p;
    int64_t kv_dim = (int64_t)c->n_kv * c->hd;
    int32_t group = c->n_head / c->n_kv;
    double acc[CPU_MAX_HEAD_DIM];
    for (int64_t i = i0; i < i1; i++) {
        int64_t t = i / c->n_head;
        int32_t h = (int32_t)(i % c->n_head), kvh = h / group;
        int32_t slot = c->b->d_slot[c->b->d_tok_seq[t]], pos = c->b->d_pos[t];
        const float *q = c->q + t * c->q_tok_stride + h * c->q_head_stride;
        const float *K = c->k_cache + (size_t)slot * c->n_ctx * kv_dim + (size_t)kvh * c->hd;
        const float *V = c->v_cache + (size_t)slot * c->n_ctx * kv_dim + (size_t)kvh * c->hd;
        float mx = -INFINITY;
        for (int32_t s = 0; s <= pos; s++) {
            float d = 0.0f;
            for (int32_t e = 0; e < c->hd; e++) d += q[e] * K[(size_t)s * kv_dim + e];
            d *= c->scale;
            if (d > mx) mx = d;
        }
        double sum = 0.0;
        for (int32_t e = 0; e < c->hd; e++) acc[e] = 0.0;
        for (int32_t s = 0; s <= pos; s++) {
            float d = 0.0f;
            for (int32_t e = 0; e < c->hd; e++) d += q[e] * K[(size_t)s * kv_dim + e];
            double w = exp((double)(d * c->scale) - (double)mx);
            sum += w;
            for (int32_t e = 0; e < c->hd; e++) acc[e] += w * V[(size_t)s * kv_dim + e];
        }
        float *o = c->out + t * (int64_t)c->n_head * c->hd + (int64_t)h * c->hd;
        const float *g = c->gate ? c->gate + t * c->q_tok_stride + h * c->q_head_stride : NULL;
        for (int32_t e = 0; e < c->hd; e++) {
            float v = (float)(acc[e] / sum);
            o[e] = g ? v * sigmoid(g[e]) : v;
        }
    }
}

static memra_status cpu_attention(memra_backend *be, const memra_batch *b, const float *k_cache,
                                  const float *v_cache, int32_t n_ctx, const float *q, const float *gate,
                                  int64_t q_tok_stride, int64_t q_head_stride, int32_t n_head, int32_t n_kv,
                                  int32_t hd, float scale, float *out) {
    if (n_kv < 1 || n_head % n_kv || hd < 1 || hd > CPU_MAX_HEAD_DIM) return MEMRA_ERR_INVALID;
    for (int32_t t = 0; t < b->n_tokens; t++)
        if (b->d_pos[t] < 0 || b->d_pos[t] >= n_ctx || b->d_slot[b->d_tok_seq[t]] < 0) return MEMRA_ERR_INVALID;
    attn_ctx c = {b, k_cache, v_cache, n_ctx, q, gate, q_tok_stride, q_head_stride, n_head, n_kv, hd, scale, out};
    memra_pool_for(pool_of(be), (int64_t)b->n_tokens * n_head, 1, attn_range, &c);
    return MEMRA_OK;
}

/* --------------------------------------------------------------------- gdn */

typedef struct gdn_ctx {
    const memra_batch *b;
    const memra_gdn_params *p;
    float *conv_state, *ssm_state;
    const float *mixed, *z, *braw, *araw;
    float *c;   /* scratch [T][conv_dim]: q | k | v after conv + SiLU (q, k then L2-normed) */
    float *out; /* [T][n_v*d_v] */
    int64_t key_dim, conv_dim;
} gdn_ctx;

/* Phase 1, one (sequence, channel) per index: causal conv over the run with
 * the slot's last d_conv-1 raw inputs in front; the state keeps raw inputs. */
static void gdn_conv_range(void *p, int64_t i0, int64_t i1) {
    gdn_ctx *c = p;
    int32_t K = c->p->d_conv, K1 = K - 1;
    for (int64_t i = i0; i < i1; i++) {
        int64_t s = i / c->conv_dim, ch = i % c->conv_dim;
        int32_t slot = c->b->d_slot[s];
        float *st = c->conv_state + ((size_t)slot * c->conv_dim + ch) * K1;
        const float *w = (const float *)c->p->conv1d->data + ch * K;
        for (int32_t t = c->b->d_seq_start[s]; t < c->b->d_seq_start[s + 1]; t++) {
            float xin = c->mixed[(size_t)t * c->conv_dim + ch];
            float acc = 0.0f;
            for (int32_t k = 0; k < K1; k++) acc += w[k] * st[k];
            acc += w[K1] * xin;
            for (int32_t k = 0; k + 1 < K1; k++) st[k] = st[k + 1];
            if (K1 > 0) st[K1 - 1] = xin;
            c->c[(size_t)t * c->conv_dim + ch] = silu(acc);
        }
    }
}

/* Phase 2, one (token, q-or-k head) per index: x / sqrt(sum x^2 + l2_eps);
 * q heads are also scaled by 1/sqrt(d_k). */
static void gdn_l2_range(void *p, int64_t i0, int64_t i1) {
    gdn_ctx *c = p;
    int32_t n_k = c->p->n_k, d_k = c->p->d_k;
    for (int64_t i = i0; i < i1; i++) {
        int64_t t = i / (2 * n_k), hh = i % (2 * n_k);
        float *x = c->c + (size_t)t * c->conv_dim + hh * d_k;
        double ss = 0.0;
        for (int32_t e = 0; e < d_k; e++) ss += (double)x[e] * x[e];
        float inv = (float)(1.0 / sqrt(ss + (double)c->p->l2_eps));
        if (hh < n_k) inv *= (float)(1.0 / sqrt((double)d_k));
        for (int32_t e = 0; e < d_k; e++) x[e] *= inv;
    }
}

/* Phase 3, one (sequence, v-head) per index: the delta rule over the run's
 * tokens in order, then the gated RMSNorm of the output. State row j (value
 * index) holds S[0..d_k)[j]; each row's decay, retrieval, update and read
 * are independent of the other rows. */
static void gdn_delta_range(void *p, int64_t i0, int64_t i1) {
    gdn_ctx *c = p;
    const memra_gdn_params *P = c->p;
    int32_t n_v = P->n_v, d_k = P->d_k, d_v = P->d_v, r = P->n_v / P->n_k;
    const float *A = P->a->data, *dt = P->dt_bias->data, *nw = P->norm->data;
    float o[CPU_MAX_HEAD_DIM];
    for (int64_t i = i0; i < i1; i++) {
        int64_t s = i / n_v;
        int32_t h = (int32_t)(i % n_v), kh = P->kv_tiled ? h % P->n_k : h / r;
        int32_t slot = c->b->d_slot[s];
        float *S = c->ssm_state + ((size_t)slot * n_v + h) * (size_t)d_v * d_k;
        for (int32_t t = c->b->d_seq_start[s]; t < c->b->d_seq_start[s + 1]; t++) {
            const float *ct = c->c + (size_t)t * c->conv_dim;
            const float *q = ct + (size_t)kh * d_k, *k = ct + c->key_dim + (size_t)kh * d_k;
            const float *v = ct + 2 * c->key_dim + (size_t)h * d_v;
            float beta = sigmoid(c->braw[(size_t)t * n_v + h]);
            float g = A[h] * softplus(c->araw[(size_t)t * n_v + h] + dt[h]);
            float decay = expf(g);
            for (int32_t j = 0; j < d_v; j++) {
                float *row = S + (size_t)j * d_k;
                float kv = 0.0f;
                for (int32_t e = 0; e < d_k; e++) {
                    row[e] *= decay;
                    kv += row[e] * k[e];
                }
                float delta = beta * (v[j] - kv);
                float oj = 0.0f;
                for (int32_t e = 0; e < d_k; e++) {
                    row[e] += k[e] * delta;
                    oj += row[e] * q[e];
                }
                o[j] = oj;
            }
            double ss = 0.0;
            for (int32_t j = 0; j < d_v; j++) ss += (double)o[j] * o[j];
            float inv = (float)(1.0 / sqrt(ss / d_v + (double)P->eps));
            const float *zt = c->z + (size_t)t * n_v * d_v + (size_t)h * d_v;
            float *y = c->out + (size_t)t * n_v * d_v + (size_t)h * d_v;
            for (int32_t j = 0; j < d_v; j++) y[j] = (o[j] * inv) * nw[j] * silu(zt[j]);
        }
    }
}

static memra_status cpu_gdn(memra_backend *be, const memra_batch *b, const memra_gdn_params *p, float *conv_state,
                            float *ssm_state, const float *mixed, const float *z, const float *braw,
                            const float *araw, float *out) {
    if (p->n_k < 1 || p->n_v % p->n_k || p->d_conv < 1 || p->d_k < 1 || p->d_v < 1 || p->d_v > CPU_MAX_HEAD_DIM)
        return MEMRA_ERR_INVALID;
    int64_t key_dim = (int64_t)p->n_k * p->d_k, conv_dim = 2 * key_dim + (int64_t)p->n_v * p->d_v;
    if (p->conv1d->type != MEMRA_TYPE_F32 || p->conv1d->ne[0] != p->d_conv || p->conv1d->ne[1] != conv_dim)
        return MEMRA_ERR_INVALID;
    for (int32_t s = 0; s < b->n_seqs; s++)
        if (b->d_slot[s] < 0) return MEMRA_ERR_INVALID;
    float *cbuf;
    MEMRA_TRY(scratch_get(be, (size_t)b->n_tokens * (size_t)conv_dim, &cbuf));
    gdn_ctx c = {b, p, conv_state, ssm_state, mixed, z, braw, araw, cbuf, out, key_dim, conv_dim};
    memra_pool_for(pool_of(be), (int64_t)b->n_seqs * conv_dim, 256, gdn_conv_range, &c);
    memra_pool_for(pool_of(be), (int64_t)b->n_tokens * 2 * p->n_k, min_chunk_for(p->d_k), gdn_l2_range, &c);
    memra_pool_for(pool_of(be), (int64_t)b->n_seqs * p->n_v, 1, gdn_delta_range, &c);
    return MEMRA_OK;
}

/* --------------------------------------------------------------------- moe */

static memra_status cpu_moe_route(memra_backend *be, const float *logits, int64_t T, int32_t n_expert,
                                  int32_t n_used, int32_t *ids, float *w) {
    (void)be;
    if (n_expert < 1 || n_used < 1 || n_used > n_expert) return MEMRA_ERR_INVALID;
    float *prob = malloc((size_t)n_expert * sizeof(float));
    unsigned char *taken = malloc((size_t)n_expert);
    if (!prob || !taken) {
        free(prob);
        free(taken);
        return MEMRA_ERR_NOMEM;
    }
    for (int64_t t = 0; t < T; t++) {
        const float *l = logits + t * n_expert;
        float mx = l[0];
        for (int32_t e = 1; e < n_expert; e++)
            if (l[e] > mx) mx = l[e];
        double sum = 0.0;
        for (int32_t e = 0; e < n_expert; e++) sum += exp((double)l[e] - mx);
        for (int32_t e = 0; e < n_expert; e++) {
            prob[e] = (float)(exp((double)l[e] - mx) / sum);
            taken[e] = 0;
        }
        /* top n_used by probability; scanning upwards with '>' keeps the
         * lowest id among equal probabilities */
        double wsum = 0.0;
        for (int32_t j = 0; j < n_used; j++) {
            int32_t best = -1;
            for (int32_t e = 0; e < n_expert; e++)
                if (!taken[e] && (best < 0 || prob[e] > prob[best])) best = e;
            taken[best] = 1;
            ids[t * n_used + j] = best;
            w[t * n_used + j] = prob[best];
            wsum += prob[best];
        }
        if (wsum < 6.103515625e-5) wsum = 6.103515625e-5;
        for (int32_t j = 0; j < n_used; j++) w[t * n_used + j] = (float)(w[t * n_used + j] / wsum);
    }
    free(prob);
    free(taken);
    return MEMRA_OK;
}

typedef struct moe_ctx {
    const memra_moe_params *p;
    const float *x; /* [T][H] */
    const int32_t *ids;
    const float *w;
    float *out;     /* [T][H] */
    float *act;     /* [T][n_used][n_ff] */
    int64_t H, n_ff;
} moe_ctx;

static const uint8_t *expert_row(const memra_weight *w, int32_t e, int64_t row) {
    return (const uint8_t *)w->data + ((uint64_t)e * (uint64_t)w->ne[1] + (uint64_t)row) * w->row_bytes;
}

/* Phase 1, one (token, slot j, ffn row) per index: silu(gate_e x) * up_e x. */
static void moe_up_range(void *p, int64_t i0, int64_t i1) {
    moe_ctx *c = p;
    int32_t n_used = c->p->n_used;
    for (int64_t i = i0; i < i1; i++) {
        int64_t tj = i / c->n_ff, o = i % c->n_ff, t = tj / n_used;
        int32_t e = c->ids[tj];
        const float *x = c->x + t * c->H;
        float g = memra_dot_row(c->p->gate_exps->type, expert_row(c->p->gate_exps, e, o), x, c->H);
        float u = memra_dot_row(c->p->up_exps->type, expert_row(c->p->up_exps, e, o), x, c->H);
        c->act[i] = silu(g) * u;
    }
}

/* Phase 2, one (token, output row) per index: the weighted sum over the
 * token's experts in slot order. */
static void moe_down_range(void *p, int64_t i0, int64_t i1) {
    moe_ctx *c = p;
    int32_t n_used = c->p->n_used;
    for (int64_t i = i0; i < i1; i++) {
        int64_t t = i / c->H, o = i % c->H;
        float acc = 0.0f;
        for (int32_t j = 0; j < n_used; j++) {
            int64_t tj = t * n_used + j;
            float d = memra_dot_row(c->p->down_exps->type, expert_row(c->p->down_exps, c->ids[tj], o),
                                    c->act + tj * c->n_ff, c->n_ff);
            acc += c->w[tj] * d;
        }
        c->out[i] = acc;
    }
}

static memra_status cpu_moe_ffn(memra_backend *be, const memra_moe_params *p, const float *x, const int32_t *ids,
                                const float *w, float *out, int64_t T, void *scratch) {
    int64_t H = p->gate_exps->ne[0], n_ff = p->gate_exps->ne[1];
    if (p->down_exps->ne[0] != n_ff || p->down_exps->ne[1] != H) return MEMRA_ERR_INVALID;
    for (int64_t i = 0; i < T * p->n_used; i++)
        if (ids[i] < 0 || ids[i] >= p->n_expert || ids[i] >= p->gate_exps->ne[2]) return MEMRA_ERR_INVALID;
    /* scratch holds [gate | up | act]; this reference fuses the first two
     * into act and uses only the last third */
    float *act = (float *)scratch + 2 * n_ff * p->n_used * T;
    moe_ctx c = {p, x, ids, w, out, act, H, n_ff};
    memra_pool_for(pool_of(be), T * p->n_used * n_ff, min_chunk_for(2 * H), moe_up_range, &c);
    memra_pool_for(pool_of(be), T * H, min_chunk_for(n_ff * p->n_used), moe_down_range, &c);
    return MEMRA_OK;
}

/* moe_block: act[t] = [shared expert (Fs) | slot 0 (F) | ... | slot K-1 (F)]. */
typedef struct moe_block_ctx {
    const memra_moe_params *p;
    const float *xn, *sg;
    int64_t sg_stride;
    float *x, *act;
    const int32_t *ids;
    const float *w;
    int64_t H, F, Fs, n_items;
} moe_block_ctx;

/* Phase 1, one (token, item) per index: silu(gate . xn) * (up . xn) of a
 * shared expert row or a selected expert's row. */
static void moe_block_up_range(void *p, int64_t i0, int64_t i1) {
    moe_block_ctx *c = p;
    for (int64_t i = i0; i < i1; i++) {
        int64_t t = i / c->n_items, item = i % c->n_items;
        const uint8_t *g, *u;
        if (item < c->Fs) {
            g = expert_row(c->p->gate_shexp, 0, item);
            u = expert_row(c->p->up_shexp, 0, item);
        } else {
            int64_t j = (item - c->Fs) / c->F, f = (item - c->Fs) % c->F;
            int32_t e = c->ids[t * c->p->n_used + j];
            g = expert_row(c->p->gate_exps, e, f);
            u = expert_row(c->p->up_exps, e, f);
        }
        const float *x = c->xn + t * c->H;
        uint32_t type = c->p->gate_exps->type; /* one type for all four (the op's requirement) */
        c->act[i] = silu(memra_dot_row(type, g, x, c->H)) * memra_dot_row(type, u, x, c->H);
    }
}

/* Phase 2, one (token, output row) per index: the routed sum in slot order,
 * added to x, then the gated shared expert added. */
static void moe_block_down_range(void *p, int64_t i0, int64_t i1) {
    moe_block_ctx *c = p;
    int32_t n_used = c->p->n_used;
    uint32_t type = c->p->down_exps->type;
    for (int64_t i = i0; i < i1; i++) {
        int64_t t = i / c->H, o = i % c->H;
        const float *a = c->act + t * c->n_items;
        float acc = 0.0f;
        for (int32_t j = 0; j < n_used; j++) {
            int64_t tj = t * n_used + j;
            acc += c->w[tj] * memra_dot_row(type, expert_row(c->p->down_exps, c->ids[tj], o), a + c->Fs + j * c->F,
                                            c->F);
        }
        c->x[i] += acc;
        if (c->Fs) {
            float d = memra_dot_row(type, expert_row(c->p->down_shexp, 0, o), a, c->Fs);
            c->x[i] += sigmoid(c->sg[t * c->sg_stride]) * d;
        }
    }
}

static memra_status cpu_moe_block(memra_backend *be, const memra_moe_params *p, const float *logits,
                                  const float *xn, const float *sg, int64_t sg_stride, float *x, int64_t T,
                                  int32_t *ids, float *w, void *scratch) {
    int64_t H = p->gate_exps->ne[0], F = p->gate_exps->ne[1];
    int64_t Fs = p->gate_shexp ? p->gate_shexp->ne[1] : 0;
    if (p->up_exps->ne[0] != H || p->up_exps->ne[1] != F || p->down_exps->ne[0] != F || p->down_exps->ne[1] != H ||
        p->gate_exps->ne[2] < p->n_expert || p->up_exps->ne[2] < p->n_expert || p->down_exps->ne[2] < p->n_expert)
        return MEMRA_ERR_INVALID;
    uint32_t tgu = p->gate_exps->type, td = p->down_exps->type;
    if (p->up_exps->type != tgu) return MEMRA_ERR_UNSUPPORTED;
    if (Fs) {
        if (!p->up_shexp || !p->down_shexp || !sg || p->gate_shexp->ne[0] != H || p->up_shexp->ne[0] != H ||
            p->up_shexp->ne[1] != Fs || p->down_shexp->ne[0] != Fs || p->down_shexp->ne[1] != H)
            return MEMRA_ERR_INVALID;
        if (p->gate_shexp->type != tgu || p->up_shexp->type != tgu || p->down_shexp->type != td)
            return MEMRA_ERR_UNSUPPORTED;
    }
    MEMRA_TRY(cpu_moe_route(be, logits, T, p->n_expert, p->n_used, ids, w));
    moe_block_ctx c = {p, xn, sg, sg_stride, x, scratch, ids, w, H, F, Fs, Fs + (int64_t)p->n_used * F};
    memra_pool_for(pool_of(be), T * c.n_items, min_chunk_for(2 * H), moe_block_up_range, &c);
    memra_pool_for(pool_of(be), T * H, min_chunk_for(Fs + F * p->n_used), moe_block_down_range, &c);
    return MEMRA_OK;
}

/* ------------------------------------------------------------------ argmax */

static memra_status cpu_argmax(memra_backend *be, const float *logits, int64_t n, int64_t T, int32_t *out) {
    (void)be;
    for (int64_t t = 0; t < T; t++) {
        const float *l = logits + t * n;
        int64_t best = 0;
        for (int64_t i = 1; i < n; i++)
            if (l[i] > l[best] || (isnan(l[best]) && !isnan(l[i]))) best = i; /* strict: lowest index wins ties; NaN never wins */
        out[t] = (int32_t)best;
    }
    return MEMRA_OK;
}

/* ----------------------------------------------------------------- backend */

static void cpu_destroy(memra_backend *be) {
    cpu_impl *c = impl_of(be);
    memra_pool_free(c->pool);
    free(c->scratch);
    free(c);
    free(be);
}

static const memra_backend_ops cpu_ops = {
    .alloc = cpu_alloc,
    .free = cpu_free,
    .upload = cpu_memcpy,
    .download = cpu_memcpy,
    .copy = cpu_memcpy,
    .zero = cpu_zero,
    .weight_load = cpu_weight_load,
    .weight_release = cpu_weight_release,
    .batch_upload = cpu_batch_upload,
    .sync = cpu_sync,
    .embed = cpu_embed,
    .rmsnorm = cpu_rmsnorm,
    .matmul = cpu_matmul,
    .matmul_multi = cpu_matmul_multi,
    .matmul_swiglu = cpu_matmul_swiglu,
    .add = cpu_add,
    .add_sigmoid_scaled = cpu_add_sigmoid_scaled,
    .swiglu = cpu_swiglu,
    .rope_neox = cpu_rope_neox,
    .kv_store = cpu_kv_store,
    .qk_norm_rope_store = cpu_qk_norm_rope_store,
    .attention = cpu_attention,
    .gdn = cpu_gdn,
    .moe_route = cpu_moe_route,
    .moe_ffn = cpu_moe_ffn,
    .moe_block = cpu_moe_block,
    .argmax = cpu_argmax,
    .destroy = cpu_destroy,
};

memra_status memra_backend_cpu_init(memra_backend **out, int n_threads, memra_error *err) {
    *out = NULL;
    memra_backend *be = calloc(1, sizeof *be);
    cpu_impl *c = calloc(1, sizeof *c);
    if (!be || !c || memra_pool_init(&c->pool, n_threads) != MEMRA_OK) {
        free(be);
        free(c);
        return memra_errorf(err, MEMRA_ERR_NOMEM, "cpu backend: cannot create %d threads", n_threads);
    }
    be->ops = &cpu_ops;
    be->name = "cpu";
    be->impl = c;
    *out = be;
    return MEMRA_OK;
}
