/* The Qwen3.5 forward pass (spec §12), written once against the backend ops.
 *
 *   x = token_embd[tokens]
 *   for each trunk layer:
 *       x += Mixer(rmsnorm(x, attn_norm))          GDN or gated full attention
 *       x += FFN(rmsnorm(x, post_attention_norm))  dense SwiGLU or MoE + shared expert
 *   logits = output . rmsnorm(x, output_norm)     (output = token_embd when tied)
 *
 * Activations are [T][n] rows; every op keeps a token's row independent of
 * the rest of the batch, so a sequence gets the same logits alone or batched.
 * MTP layers (n_trunk .. n_layer-1) are not run. */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "model/model.h"

typedef struct fw {
    const memra_model *m;
    const memra_model_config *c;
    memra_state *st;
    memra_batch *b;
    memra_backend *be;
    int64_t T;
    memra_error *err;
    int prof; /* mark each op on the backend's timeline (memra_forward_opts.profile) */
} fw;

/* MEMRA_SKIP_OPS=name,name,..: a timing ablation, never for results. The
 * layer ops of those names (the OP names of this file: "gdn", "attention",
 * "qk_norm_rope_store", "moe_block", "ffn down", ...) are not run, so every
 * logit is wrong; what a captured decode step then saves is what those ops
 * cost inside it, launches and waits included, which --profile (events
 * around each op of an uncaptured step) cannot show. Read once, with a
 * warning on the log. */
static const char *skip_list;
static pthread_once_t skip_once = PTHREAD_ONCE_INIT;
static void skip_init(void) {
    const char *e = getenv("MEMRA_SKIP_OPS");
    skip_list = e && *e ? e : NULL;
    if (skip_list) MEMRA_LOGW("MEMRA_SKIP_OPS=%s: those ops are not run (a timing ablation): every result is wrong", e);
}

/* Whether op `what` is in MEMRA_SKIP_OPS's comma-separated list. */
static int op_skipped(const char *what) {
    pthread_once(&skip_once, skip_init);
    if (!skip_list) return 0;
    const size_t n = strlen(what);
    for (const char *p = skip_list; p;) {
        const char *q = strchr(p, ',');
        const size_t len = q ? (size_t)(q - p) : strlen(p);
        if (len == n && !memcmp(p, what, n)) return 1;
        p = q ? q + 1 : NULL;
    }
    return 0;
}

/* Runs a backend op; a failure names the layer and the op. */
#define OP(f, il, what, call)                                              \
    do {                                                                   \
        if (op_skipped(what)) break;                                       \
        memra_status op_st_ = (f)->be->ops->call;                          \
        if (op_st_ != MEMRA_OK) return op_failed((f), (il), (what), op_st_); \
        if ((f)->prof) (f)->be->ops->prof_mark((f)->be, (what));          \
    } while (0)

static memra_status op_failed(const fw *f, int il, const char *what, memra_status st) {
    const char *detail = f->be->ops->last_error ? f->be->ops->last_error(f->be) : NULL;
    return memra_errorf(f->err, st, "forward: layer %d: %s failed on backend %s (%s%s%s)", il, what, f->be->name,
                        memra_status_str(st), detail && *detail ? ": " : "", detail ? detail : "");
}

/* Gated full attention (spec §4.2) on rmsnorm(x, attn_norm), the norm fused
 * into the projections. wq rows per head are [q(hd) | gate(hd)], so q heads
 * sit at stride 2*hd and each gate right after its q. */
static memra_status attn_block(fw *f, int il) {
    const memra_model_config *c = f->c;
    const memra_layer *L = &f->m->layers[il];
    memra_state *st = f->st;
    int64_t T = f->T, hd = c->head_dim, q_dim = (int64_t)c->n_head * hd, kv_dim = (int64_t)c->n_kv * hd;
    float *qg = st->big;              /* [T][n_head][2*hd]: q | gate per head */
    float *k = qg + T * 2 * q_dim;    /* [T][kv_dim] */
    float *v = k + T * kv_dim;        /* [T][kv_dim] */
    float *o = st->mid;               /* [T][q_dim] */
    const memra_weight *w[3] = {L->wq, L->wk, L->wv};
    float *y[3] = {qg, k, v};
    const memra_norm norm = {L->attn_norm, c->rms_eps, NULL};
    OP(f, il, "attn_norm+qkv", matmul_multi(f->be, 3, w, y, st->x, T, &norm));
    /* per-head norms come before RoPE, the gate gets neither; text-only IMROPE
     * = NeoX RoPE at position p on the first n_rot dims (spec §4.3); then k, v
     * go to the cache */
    OP(f, il, "qk_norm_rope_store",
       qk_norm_rope_store(f->be, f->b, qg, 2 * q_dim, 2 * hd, c->n_head, k, v, c->n_kv, (int32_t)hd, L->q_norm,
                          L->k_norm, c->rms_eps, c->n_rot, c->rope_theta, st->k_cache[il], st->v_cache[il],
                          st->n_ctx));
    OP(f, il, "attention",
       attention(f->be, f->b, st->k_cache[il], st->v_cache[il], st->n_ctx, qg, qg + hd, 2 * q_dim, 2 * hd,
                 c->n_head, c->n_kv, (int32_t)hd, 1.0f / sqrtf((float)hd), o));
    OP(f, il, "attn_output", matmul(f->be, L->wo, o, st->x, T, 1));
    return MEMRA_OK;
}

/* Gated DeltaNet (spec §5.3-5.6) on rmsnorm(x, attn_norm), the norm fused
 * into the input projections. */
static memra_status gdn_block(fw *f, int il) {
    const memra_model_config *c = f->c;
    const memra_layer *L = &f->m->layers[il];
    memra_state *st = f->st;
    int64_t T = f->T;
    float *mixed = st->big;            /* [T][conv_dim] */
    float *z = mixed + T * c->conv_dim; /* [T][value_dim] */
    float *braw = z + T * c->value_dim; /* [T][n_v] */
    float *araw = braw + T * c->n_v;    /* [T][n_v] */
    float *y = st->mid;                 /* [T][value_dim] */
    const memra_weight *w[4] = {L->ssm_qkv, L->ssm_z, L->ssm_beta, L->ssm_alpha};
    float *yw[4] = {mixed, z, braw, araw};
    const memra_norm norm = {L->attn_norm, c->rms_eps, NULL};
    OP(f, il, "attn_norm+ssm_in (qkv z beta alpha)", matmul_multi(f->be, 4, w, yw, st->x, T, &norm));
    memra_gdn_params p = {
        .conv1d = L->ssm_conv,
        .dt_bias = L->ssm_dt,
        .a = L->ssm_a,
        .norm = L->ssm_norm,
        .d_conv = c->d_conv,
        .n_k = c->n_k,
        .n_v = c->n_v,
        .d_k = c->d_k,
        .d_v = c->d_v,
        .kv_tiled = c->kv_tiled,
        .eps = c->rms_eps,
        .l2_eps = 1e-6f, /* HF/FLA l2norm: x * rsqrt(sum x^2 + 1e-6) */
    };
    OP(f, il, "gdn", gdn(f->be, f->b, &p, st->conv[il], st->ssm[il], mixed, z, braw, araw, y));
    OP(f, il, "ssm_out", matmul(f->be, L->ssm_out, y, st->x, T, 1));
    return MEMRA_OK;
}

/* SwiGLU: out = down . (silu(gate . xin) * (up . xin)), accumulated into y;
 * xin = rmsnorm(x) when norm is set (the norm fused into gate+up), else x. */
static memra_status swiglu_mlp(fw *f, int il, const memra_weight *gate, const memra_weight *up,
                               const memra_weight *down, const float *x, const memra_norm *norm, float *y,
                               int accumulate) {
    memra_state *st = f->st;
    int64_t T = f->T;
    OP(f, il, norm ? "post_norm+ffn gate+up swiglu" : "ffn gate+up swiglu",
       matmul_swiglu(f->be, gate, up, x, st->mid, T, norm));
    OP(f, il, "ffn down", matmul(f->be, down, st->mid, y, T, accumulate));
    return MEMRA_OK;
}

/* A MoE layer runs as the fused moe_block op at every batch size (decode:
 * two launches after the router; large batches: the CUDA backend groups
 * the tokens by expert so that each expert's rows are read once per group,
 * not once per token) when it fits: one type for the gate/up weights, one
 * for the down weights, and its scratch within the state's moe_scratch.
 * Otherwise the separate ops (moe_route, moe_ffn, the shared expert's
 * matmuls). */
static int moe_block_fits(const fw *f, const memra_layer *L) {
    const memra_model_config *c = f->c;
    uint32_t tgu = L->gate_exps->type, td = L->down_exps->type;
    if (L->up_exps->type != tgu) return 0;
    if (L->shexp_gate && (L->shexp_gate->type != tgu || L->shexp_up->type != tgu || L->shexp_down->type != td))
        return 0;
    int64_t fs = L->shexp_gate ? L->shexp_gate->ne[1] : 0;
    return memra_moe_block_scratch_bytes(c->n_ff_exp, c->n_expert_used, fs, c->n_embd, c->n_expert, f->T) <=
           memra_state_moe_scratch_bytes(c, f->st->max_tokens);
}

/* MoE (spec §6.2): softmax over all experts, top-k, renormalise; plus the
 * shared expert scaled by sigmoid(w_shgate . x). The post-attention norm
 * runs with the router's matmul (one launch at decode on the CUDA backend),
 * which also writes the normalised rows to st->xn for the experts. */
static memra_status moe_block(fw *f, int il) {
    const memra_model_config *c = f->c;
    const memra_layer *L = &f->m->layers[il];
    memra_state *st = f->st;
    int64_t T = f->T, H = c->n_embd;
    float *router = st->big; /* [T][n_expert] */
    float *sg = router + T * c->n_expert; /* [T][1] */
    const memra_norm post = {L->post_norm, c->rms_eps, st->xn};
    const memra_weight *rw[2] = {L->ffn_router, L->shexp_gate_inp};
    float *ry[2] = {router, sg};
    if (moe_block_fits(f, L)) {
        OP(f, il, L->shexp_gate ? "post_norm+ffn_gate_inp+shexp" : "post_norm+ffn_gate_inp",
           matmul_multi(f->be, L->shexp_gate ? 2 : 1, rw, ry, st->x, T, &post));
        memra_moe_params p = {.gate_exps = L->gate_exps, .up_exps = L->up_exps, .down_exps = L->down_exps,
                              .n_expert = c->n_expert, .n_used = c->n_expert_used, .gate_shexp = L->shexp_gate,
                              .up_shexp = L->shexp_up, .down_shexp = L->shexp_down};
        OP(f, il, "moe_block", moe_block(f->be, &p, router, st->xn, sg, 1, st->x, T, st->ids, st->route_w,
                                         st->moe_scratch));
        return MEMRA_OK;
    }
    OP(f, il, "post_norm+ffn_gate_inp", matmul_multi(f->be, 1, rw, ry, st->x, T, &post));
    OP(f, il, "moe_route", moe_route(f->be, router, T, c->n_expert, c->n_expert_used, st->ids, st->route_w));
    memra_moe_params p = {.gate_exps = L->gate_exps, .up_exps = L->up_exps, .down_exps = L->down_exps,
                          .n_expert = c->n_expert, .n_used = c->n_expert_used};
    OP(f, il, "moe_ffn", moe_ffn(f->be, &p, st->xn, st->ids, st->route_w, st->tmp, T, st->moe_scratch));
    OP(f, il, "moe add", add(f->be, st->x, st->tmp, T * H));
    if (!L->shexp_gate) return MEMRA_OK;
    MEMRA_TRY(swiglu_mlp(f, il, L->shexp_gate, L->shexp_up, L->shexp_down, st->xn, NULL, st->tmp, 0));
    OP(f, il, "ffn_gate_inp_shexp", matmul(f->be, L->shexp_gate_inp, st->xn, sg, T, 0));
    OP(f, il, "shared expert add", add_sigmoid_scaled(f->be, st->x, st->tmp, sg, 1, H, T));
    return MEMRA_OK;
}

/* Host-side checks of a caller-filled batch (the ops trust it). */
static memra_status check_batch(const memra_model *m, const memra_state *st, const memra_batch *b,
                                memra_error *err) {
    if (b->n_tokens < 1 || b->n_tokens > st->max_tokens || b->n_tokens > b->max_tokens)
        return memra_errorf(err, MEMRA_ERR_INVALID, "batch: %d tokens (capacity %d)", b->n_tokens,
                            st->max_tokens < b->max_tokens ? st->max_tokens : b->max_tokens);
    if (b->n_seqs < 1 || b->n_seqs > st->max_seqs || b->n_seqs > b->max_seqs)
        return memra_errorf(err, MEMRA_ERR_INVALID, "batch: %d sequences (capacity %d)", b->n_seqs,
                            st->max_seqs < b->max_seqs ? st->max_seqs : b->max_seqs);
    if (b->seq_start[0] != 0 || b->seq_start[b->n_seqs] != b->n_tokens)
        return memra_errorf(err, MEMRA_ERR_INVALID, "batch: sequences do not cover tokens [0, %d)", b->n_tokens);
    for (int32_t s = 0; s < b->n_seqs; s++) {
        int32_t t0 = b->seq_start[s], t1 = b->seq_start[s + 1];
        if (t1 <= t0) return memra_errorf(err, MEMRA_ERR_INVALID, "batch: sequence %d is empty", s);
        if (b->slot[s] < 0 || b->slot[s] >= st->n_slots)
            return memra_errorf(err, MEMRA_ERR_INVALID, "batch: sequence %d: slot %d out of range [0, %d)", s,
                                b->slot[s], st->n_slots);
        for (int32_t s2 = 0; s2 < s; s2++)
            if (b->slot[s2] == b->slot[s])
                return memra_errorf(err, MEMRA_ERR_INVALID, "batch: sequences %d and %d share slot %d", s2, s,
                                    b->slot[s]);
        for (int32_t t = t0; t < t1; t++) {
            if (b->tok_seq[t] != s)
                return memra_errorf(err, MEMRA_ERR_INVALID, "batch: token %d: tok_seq %d, expected %d", t,
                                    b->tok_seq[t], s);
            if (b->tokens[t] < 0 || b->tokens[t] >= m->cfg.n_vocab)
                return memra_errorf(err, MEMRA_ERR_INVALID, "batch: token %d: id %d is outside the vocabulary [0, %lld)",
                                    t, b->tokens[t], (long long)m->cfg.n_vocab);
            if ((int64_t)b->pos[t] != (int64_t)b->pos[t0] + (t - t0) || b->pos[t] < 0)
                return memra_errorf(err, MEMRA_ERR_INVALID, "batch: sequence %d: positions must be consecutive "
                                    "from %d (token %d has %d)", s, b->pos[t0], t, b->pos[t]);
            if (b->pos[t] >= st->n_ctx)
                return memra_errorf(err, MEMRA_ERR_LIMIT, "batch: sequence %d: position %d is beyond the context of "
                                    "%d tokens", s, b->pos[t], st->n_ctx);
        }
    }
    return MEMRA_OK;
}

static memra_status logits_rows(fw *f, const float *rows, int64_t n, float *host) {
    const memra_model *m = f->m;
    memra_state *st = f->st;
    int64_t V = m->cfg.n_vocab;
    OP(f, -1, "output_norm", rmsnorm(f->be, rows, m->cfg.n_embd, m->output_norm, st->xn, m->cfg.n_embd,
                                     m->cfg.n_embd, n, m->cfg.rms_eps));
    OP(f, -1, "output", matmul(f->be, m->output, st->xn, st->logits, n, 0));
    if (host) {
        OP(f, -1, "sync", sync(f->be));
        OP(f, -1, "download logits", download(f->be, host, st->logits, (size_t)(n * V) * sizeof(float)));
    }
    return MEMRA_OK;
}

memra_status memra_forward_prepare(const memra_model *m, memra_state *st, memra_batch *b, memra_error *err) {
    MEMRA_TRY(check_batch(m, st, b, err));
    for (int32_t s = 0; s < b->n_seqs; s++)
        if (b->pos[b->seq_start[s]] == 0) MEMRA_TRY(memra_state_clear_slot(m, st, b->slot[s], err));
    fw f = {m, &m->cfg, st, b, m->be, b->n_tokens, err, 0};
    OP(&f, -1, "batch_upload", batch_upload(f.be, b));
    return MEMRA_OK;
}

/* Embedding and the trunk layers; st->x ends as the last layer's output.
 * hidden (host) receives the embedding and each layer's output. */
static memra_status run_trunk(fw *f, float *hidden) {
    const memra_model *m = f->m;
    const memra_model_config *c = f->c;
    memra_state *st = f->st;
    int64_t T = f->T, H = c->n_embd;
    size_t bytes = (size_t)(T * H) * sizeof(float);
    OP(f, -1, "embed", embed(f->be, m->tok_embd, f->b, st->x));
    if (hidden) {
        OP(f, -1, "sync", sync(f->be));
        OP(f, -1, "download hidden", download(f->be, hidden, st->x, bytes));
    }
    for (int il = 0; il < c->n_trunk; il++) {
        const memra_layer *L = &m->layers[il];
        if (L->kind == MEMRA_LAYER_GDN) MEMRA_TRY(gdn_block(f, il));
        else MEMRA_TRY(attn_block(f, il));
        const memra_norm post = {L->post_norm, c->rms_eps, NULL};
        if (c->is_moe) {
            MEMRA_TRY(moe_block(f, il));
        } else {
            MEMRA_TRY(swiglu_mlp(f, il, L->ffn_gate, L->ffn_up, L->ffn_down, st->x, &post, st->x, 1));
        }
        if (hidden) {
            OP(f, il, "sync", sync(f->be));
            OP(f, il, "download hidden", download(f->be, hidden + (size_t)(il + 1) * (size_t)(T * H), st->x, bytes));
        }
    }
    return MEMRA_OK;
}

/* The rows whose logits are wanted in last-token mode: each sequence's last
 * token. A decode batch (one token per sequence) needs no gather. */
static memra_status gather_last(fw *f, const float **rows) {
    const memra_batch *b = f->b;
    int64_t H = f->c->n_embd;
    if (b->n_tokens == b->n_seqs) {
        *rows = f->st->x;
        return MEMRA_OK;
    }
    for (int32_t s = 0; s < b->n_seqs; s++)
        OP(f, -1, "gather", copy(f->be, f->st->tmp + (int64_t)s * H, f->st->x + (int64_t)(b->seq_start[s + 1] - 1) * H,
                                 (size_t)H * sizeof(float)));
    *rows = f->st->tmp;
    return MEMRA_OK;
}

memra_status memra_forward_run(const memra_model *m, memra_state *st, const memra_batch *b, int all_logits,
                               memra_error *err) {
    fw f = {m, &m->cfg, st, (memra_batch *)b, m->be, b->n_tokens, err, 0};
    if (all_logits && f.T > st->logit_rows)
        return memra_errorf(err, MEMRA_ERR_INVALID, "forward: %lld tokens of logits do not fit the state's %d rows",
                            (long long)f.T, st->logit_rows);
    MEMRA_TRY(run_trunk(&f, NULL));
    const float *rows = st->x;
    if (!all_logits) MEMRA_TRY(gather_last(&f, &rows));
    return logits_rows(&f, rows, all_logits ? f.T : b->n_seqs, NULL);
}

/* ---- decode graphs ---- */

/* The graphs read the batch's d_* arrays at the addresses captured: a step
 * with another batch object drops them (and their shapes start over). */
static void graph_batch_bind(const memra_model *m, memra_state *st, const memra_batch *b) {
    int32_t *d[5] = {b->d_tokens, b->d_pos, b->d_tok_seq, b->d_seq_start, b->d_slot};
    if (!memcmp(d, st->graph_batch, sizeof d)) return;
    memra_state_drop_graphs(m, st);
    memset(st->warmed, 0, (size_t)st->max_seqs);
    memcpy(st->graph_batch, d, sizeof d);
}

/* memra_forward_run of a prepared decode batch through the graph of its
 * shape (n_seqs): the first step of a shape runs uncaptured, so that every
 * workspace the ops need exists before the capture; the second captures the
 * run and launches it; later ones only launch. The logits land in st->logits
 * as the uncaptured run leaves them (one row per token = per sequence). */
static memra_status forward_decode_graph(const memra_model *m, memra_state *st, const memra_batch *b,
                                         memra_error *err) {
    memra_backend *be = m->be;
    const memra_backend_ops *o = be->ops;
    int32_t i = b->n_seqs - 1;
    graph_batch_bind(m, st, b);
    if (!st->warmed[i]) {
        MEMRA_TRY(memra_forward_run(m, st, b, 0, err));
        st->warmed[i] = 1;
        return MEMRA_OK;
    }
    fw f = {m, &m->cfg, st, (memra_batch *)b, be, b->n_tokens, err, 0};
    if (!st->graphs[i]) {
        OP(&f, -1, "graph_begin", graph_begin(be));
        memra_status s = memra_forward_run(m, st, b, 0, err);
        memra_graph *g = NULL;
        /* always end the capture: the backend must leave capture mode */
        memra_status se = o->graph_end(be, &g);
        if (s != MEMRA_OK) {
            if (g) o->graph_free(be, g);
            return s;
        }
        if (se != MEMRA_OK) return op_failed(&f, -1, "graph_end", se);
        st->graphs[i] = g;
    }
    OP(&f, -1, "graph_launch", graph_launch(be, st->graphs[i]));
    return MEMRA_OK;
}

memra_status memra_forward(const memra_model *m, memra_state *st, memra_batch *b, const memra_forward_opts *opts,
                           memra_error *err) {
    static const memra_forward_opts defaults = {0};
    if (!opts) opts = &defaults;
    if (opts->all_logits && !opts->logits && b->n_tokens > st->logit_rows)
        return memra_errorf(err, MEMRA_ERR_INVALID, "forward: %d tokens of logits do not fit the state's %d rows; "
                            "pass a host buffer", b->n_tokens, st->logit_rows);
    MEMRA_TRY(memra_forward_prepare(m, st, b, err));
    fw f = {m, &m->cfg, st, b, m->be, b->n_tokens, err, 0};
    int64_t T = f.T, H = m->cfg.n_embd, V = m->cfg.n_vocab;
    f.prof = opts->profile && m->be->ops->prof_mark;
    if (st->use_graphs && st->graphs && b->n_tokens == b->n_seqs && !opts->hidden && !f.prof) {
        /* one row per token is one row per sequence: all_logits changes nothing */
        MEMRA_TRY(forward_decode_graph(m, st, b, err));
        /* The sync stays even without a host copy: without it (524f7e1) 35b-a3b decoded ~5% slower on an H100
         * and the dense files no faster (bench/results/2026-12-07l-h100.md, section 1). */
        if (opts->logits) {
            OP(&f, -1, "sync", sync(f.be));
            OP(&f, -1, "download logits", download(f.be, opts->logits, st->logits, (size_t)(T * V) * sizeof(float)));
        }
        OP(&f, -1, "sync", sync(f.be));
        return MEMRA_OK;
    }
    MEMRA_TRY(run_trunk(&f, opts->hidden));
    if (opts->all_logits) {
        /* in chunks of the logits buffer's rows */
        for (int64_t r0 = 0; r0 < T; r0 += st->logit_rows) {
            int64_t n = T - r0 < st->logit_rows ? T - r0 : st->logit_rows;
            MEMRA_TRY(logits_rows(&f, st->x + r0 * H, n, opts->logits ? opts->logits + r0 * V : NULL));
        }
    } else {
        const float *rows;
        MEMRA_TRY(gather_last(&f, &rows));
        MEMRA_TRY(logits_rows(&f, rows, b->n_seqs, opts->logits));
    }
    OP(&f, -1, "sync", sync(f.be));
    return MEMRA_OK;
}
