/* Model lifetime (load, free, F32 copy) and the per-sequence state pool. */
#include "model/model.h"

#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "gguf/quant.h"

void memra_model_free(memra_model *m) {
    if (!m) return;
    if (m->weights && m->be)
        for (int64_t i = 0; i < m->n_weights; i++)
            if (m->weights[i].data) m->be->ops->weight_release(m->be, &m->weights[i]);
    for (int64_t i = 0; i < m->n_owned; i++) free(m->owned[i]);
    free(m->owned);
    free(m->weights);
    free(m->layers);
    memra_gguf_free(m->gguf);
    free(m);
}

memra_status memra_model_load_gguf(memra_gguf *g, memra_backend *be, memra_model **out, memra_error *err) {
    return memra_model_load_gguf_progress(g, be, NULL, NULL, out, err);
}

memra_status memra_model_load_gguf_progress(memra_gguf *g, memra_backend *be, void (*progress)(void *, float),
                                            void *user, memra_model **out, memra_error *err) {
    *out = NULL;
    memra_model *m = calloc(1, sizeof *m);
    if (!m) {
        memra_gguf_free(g);
        return memra_errorf(err, MEMRA_ERR_NOMEM, "out of memory");
    }
    m->gguf = g;
    m->be = be;
    memra_status st = memra_config_from_gguf(g, &m->cfg, err);
    if (st == MEMRA_OK) st = memra_weights_bind(m, err);
    /* progress by bytes: uploading the weights is what takes time on a GPU */
    uint64_t total = 0, done = 0;
    for (int64_t i = 0; st == MEMRA_OK && i < m->n_weights; i++) total += m->weights[i].nbytes;
    for (int64_t i = 0; st == MEMRA_OK && i < m->n_weights; i++) {
        st = be->ops->weight_load(be, &m->weights[i]);
        if (st != MEMRA_OK)
            memra_errorf(err, st, "backend %s: cannot load tensor '%s' (%llu bytes)", be->name, m->weights[i].name,
                         (unsigned long long)m->weights[i].nbytes);
        done += m->weights[i].nbytes;
        if (progress && total) progress(user, (float)((double)done / (double)total));
    }
    if (st != MEMRA_OK) {
        memra_model_free(m);
        return st;
    }
    const memra_model_config *c = &m->cfg;
    MEMRA_LOGD("model: %s, %d layers (%d GDN + %d attention) + %d MTP, H=%lld, vocab=%lld%s", c->arch_name, c->n_trunk,
               memra_config_count(c, MEMRA_LAYER_GDN), memra_config_count(c, MEMRA_LAYER_ATTN), c->n_nextn,
               (long long)c->n_embd, (long long)c->n_vocab, m->output == m->tok_embd ? ", tied output" : "");
    *out = m;
    return MEMRA_OK;
}

memra_status memra_model_load(const char *path, memra_backend *be, memra_model **out, memra_error *err) {
    return memra_model_load_progress(path, be, NULL, NULL, out, err);
}

memra_status memra_model_load_progress(const char *path, memra_backend *be, void (*progress)(void *, float),
                                       void *user, memra_model **out, memra_error *err) {
    *out = NULL;
    memra_gguf *g = NULL;
    memra_status st = memra_gguf_open(path, &g, err); /* its messages name the path */
    if (st != MEMRA_OK) return st;
    st = memra_model_load_gguf_progress(g, be, progress, user, out, err);
    if (st != MEMRA_OK) memra_error_prefix(err, "%s", path);
    return st;
}

memra_status memra_model_dequantize_f32(memra_model *m, memra_error *err) {
    for (int64_t i = 0; i < m->n_weights; i++) {
        memra_weight *w = &m->weights[i];
        if (w->type == MEMRA_TYPE_F32) continue;
        int64_t rows = w->ne[1] * w->ne[2] * w->ne[3];
        size_t n;
        if (memra_mul_size((size_t)rows, (size_t)w->ne[0] * sizeof(float), &n) != 0)
            return memra_errorf(err, MEMRA_ERR_NOMEM, "tensor '%s' is too large to dequantize", w->name);
        float *buf = malloc(n ? n : 1);
        if (!buf || memra_model_own(m, buf) != MEMRA_OK)
            return memra_errorf(err, MEMRA_ERR_NOMEM, "out of memory dequantizing '%s'", w->name);
        for (int64_t r = 0; r < rows; r++)
            memra_dequant_row(w->type, (const uint8_t *)w->host + (size_t)r * w->row_bytes, buf + r * w->ne[0],
                              w->ne[0]);
        if (w->data) m->be->ops->weight_release(m->be, w);
        w->type = MEMRA_TYPE_F32;
        w->row_bytes = (uint64_t)w->ne[0] * sizeof(float);
        w->nbytes = n;
        w->host = buf;
        memra_status st = m->be->ops->weight_load(m->be, w);
        if (st != MEMRA_OK) return memra_errorf(err, st, "backend %s: cannot load tensor '%s'", m->be->name, w->name);
    }
    return MEMRA_OK;
}

/* ------------------------------------------------------------------ state */

static memra_status alloc_floats(memra_backend *be, size_t a, size_t b, size_t c, float **out) {
    size_t n;
    if (memra_mul_size(a, b, &n) || memra_mul_size(n, c, &n) || memra_mul_size(n, sizeof(float), &n))
        return MEMRA_ERR_NOMEM;
    MEMRA_TRY(be->ops->alloc(be, n ? n : sizeof(float), (void **)out));
    return be->ops->zero(be, *out, n ? n : sizeof(float));
}

static int64_t max64(int64_t a, int64_t b) { return a > b ? a : b; }

/* Rows of the logits buffer: every sequence's last token, and up to 64
 * tokens at a time when all positions are wanted (memra_forward computes
 * them in chunks of this many rows). */
static int32_t logit_rows(const memra_state *st) {
    int32_t r = st->max_tokens < 64 ? st->max_tokens : 64;
    return r > st->max_seqs ? r : st->max_seqs;
}

static int backend_has_graphs(const memra_backend *be) {
    const memra_backend_ops *o = be->ops;
    return o->graph_begin && o->graph_end && o->graph_launch && o->graph_free;
}

void memra_state_drop_graphs(const memra_model *m, memra_state *st) {
    if (st->graphs)
        for (int32_t i = 0; i < st->max_seqs; i++) {
            if (st->graphs[i]) m->be->ops->graph_free(m->be, st->graphs[i]);
            st->graphs[i] = NULL;
        }
    memset(st->graph_batch, 0, sizeof st->graph_batch);
}

void memra_state_free(const memra_model *m, memra_state *st) {
    if (!st) return;
    memra_backend *be = m->be;
    memra_state_drop_graphs(m, st);
    free(st->graphs);
    free(st->warmed);
    float **per_layer[] = {st->k_cache, st->v_cache, st->conv, st->ssm};
    for (size_t j = 0; j < MEMRA_ARRAY_LEN(per_layer); j++) {
        if (!per_layer[j]) continue;
        for (int32_t i = 0; i < m->cfg.n_trunk; i++)
            if (per_layer[j][i]) be->ops->free(be, per_layer[j][i]);
        free(per_layer[j]);
    }
    void *bufs[] = {st->x, st->xn, st->tmp, st->big, st->mid, st->ids, st->route_w, st->moe_scratch, st->logits};
    for (size_t j = 0; j < MEMRA_ARRAY_LEN(bufs); j++)
        if (bufs[j]) be->ops->free(be, bufs[j]);
    free(st);
}

memra_status memra_state_init(const memra_model *m, int32_t n_slots, int32_t n_ctx, int32_t max_tokens,
                              int32_t max_seqs, memra_state **out, memra_error *err) {
    *out = NULL;
    const memra_model_config *c = &m->cfg;
    memra_backend *be = m->be;
    if (n_slots < 1 || n_ctx < 1 || max_tokens < 1 || max_seqs < 1 || max_seqs > max_tokens || max_seqs > n_slots)
        return memra_errorf(err, MEMRA_ERR_INVALID, "state: bad sizes (slots %d, ctx %d, batch %d tokens / %d seqs)",
                            n_slots, n_ctx, max_tokens, max_seqs);
    memra_state *st = calloc(1, sizeof *st);
    if (!st) return memra_errorf(err, MEMRA_ERR_NOMEM, "out of memory");
    st->n_slots = n_slots;
    st->n_ctx = n_ctx;
    st->max_tokens = max_tokens;
    st->max_seqs = max_seqs;
    size_t nl = (size_t)c->n_trunk;
    st->k_cache = calloc(nl, sizeof(float *));
    st->v_cache = calloc(nl, sizeof(float *));
    st->conv = calloc(nl, sizeof(float *));
    st->ssm = calloc(nl, sizeof(float *));
    memra_status s = (st->k_cache && st->v_cache && st->conv && st->ssm) ? MEMRA_OK : MEMRA_ERR_NOMEM;
    size_t kv_dim = (size_t)c->n_kv * (size_t)c->head_dim;
    for (int32_t i = 0; s == MEMRA_OK && i < c->n_trunk; i++) {
        if (c->kind[i] == MEMRA_LAYER_ATTN) {
            s = alloc_floats(be, (size_t)n_slots, (size_t)n_ctx, kv_dim, &st->k_cache[i]);
            if (s == MEMRA_OK) s = alloc_floats(be, (size_t)n_slots, (size_t)n_ctx, kv_dim, &st->v_cache[i]);
        } else {
            s = alloc_floats(be, (size_t)n_slots, (size_t)c->conv_dim, (size_t)(c->d_conv - 1), &st->conv[i]);
            if (s == MEMRA_OK)
                s = alloc_floats(be, (size_t)n_slots * (size_t)c->n_v, (size_t)c->d_v, (size_t)c->d_k, &st->ssm[i]);
        }
    }
    int64_t H = c->n_embd, q_dim = (int64_t)c->n_head * c->head_dim;
    int64_t attn_n = 2 * q_dim + 2 * (int64_t)kv_dim;
    int64_t gdn_n = c->conv_dim + c->value_dim + 2 * (int64_t)c->n_v;
    int64_t ffn_n = c->is_moe ? c->n_expert + 1 : 0; /* router logits, shared-expert gate logit */
    st->big_n = max64(attn_n, max64(gdn_n, ffn_n));
    st->mid_n = max64(max64(q_dim, c->value_dim), max64(c->n_ff, c->n_ff_shexp));
    size_t T = (size_t)max_tokens;
    if (s == MEMRA_OK) s = alloc_floats(be, T, (size_t)H, 1, &st->x);
    if (s == MEMRA_OK) s = alloc_floats(be, T, (size_t)H, 1, &st->xn);
    if (s == MEMRA_OK) s = alloc_floats(be, T, (size_t)H, 1, &st->tmp);
    if (s == MEMRA_OK) s = alloc_floats(be, T, (size_t)st->big_n, 1, &st->big);
    if (s == MEMRA_OK) s = alloc_floats(be, T, (size_t)st->mid_n, 1, &st->mid);
    st->logit_rows = logit_rows(st);
    if (s == MEMRA_OK && backend_has_graphs(be)) {
        st->graphs = calloc((size_t)max_seqs, sizeof *st->graphs);
        st->warmed = calloc((size_t)max_seqs, 1);
        if (!st->graphs || !st->warmed) s = MEMRA_ERR_NOMEM;
        st->use_graphs = 1;
    }
    if (s == MEMRA_OK) s = alloc_floats(be, (size_t)st->logit_rows, (size_t)c->n_vocab, 1, &st->logits);
    if (s == MEMRA_OK && c->is_moe) {
        s = alloc_floats(be, T, (size_t)c->n_expert_used, 1, (float **)&st->ids);
        if (s == MEMRA_OK) s = alloc_floats(be, T, (size_t)c->n_expert_used, 1, &st->route_w);
        if (s == MEMRA_OK) s = be->ops->alloc(be, memra_state_moe_scratch_bytes(c, max_tokens), &st->moe_scratch);
    }
    if (s != MEMRA_OK) {
        memra_state_free(m, st);
        return memra_errorf(err, s, "state: cannot allocate %d slots x %d tokens of context (backend %s)", n_slots,
                            n_ctx, be->name);
    }
    *out = st;
    return MEMRA_OK;
}

memra_status memra_state_clear_slot(const memra_model *m, memra_state *st, int32_t slot, memra_error *err) {
    const memra_model_config *c = &m->cfg;
    if (slot < 0 || slot >= st->n_slots)
        return memra_errorf(err, MEMRA_ERR_INVALID, "slot %d is out of range [0, %d)", slot, st->n_slots);
    size_t conv_n = (size_t)c->conv_dim * (size_t)(c->d_conv - 1);
    size_t ssm_n = (size_t)c->n_v * (size_t)c->d_v * (size_t)c->d_k;
    for (int32_t i = 0; i < c->n_trunk; i++) {
        if (c->kind[i] != MEMRA_LAYER_GDN) continue;
        memra_status s = m->be->ops->zero(m->be, st->conv[i] + (size_t)slot * conv_n, conv_n * sizeof(float));
        if (s == MEMRA_OK) s = m->be->ops->zero(m->be, st->ssm[i] + (size_t)slot * ssm_n, ssm_n * sizeof(float));
        if (s != MEMRA_OK) return memra_errorf(err, s, "backend %s: clearing slot %d failed", m->be->name, slot);
    }
    return MEMRA_OK;
}
