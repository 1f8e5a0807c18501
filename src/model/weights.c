/* Weight binding: every tensor the architecture needs is looked up by name
 * and its shape and type checked (spec §4.1, §5.1, §6, §7, §8.2). Missing,
 * mis-shaped or unsupported tensors fail with a message naming the tensor and
 * the expected vs actual shape or type.
 *
 * The qwen3next fused projections (ssm_in = per k-head [q|k|v|z], ssm_ba =
 * per k-head [b|a], spec §5.7) are turned into the split form the forward
 * uses by copying whole rows (works for any quant type: rows are
 * independent). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf/quant.h"
#include "model/model.h"

typedef struct binder {
    memra_model *m;
    int64_t cap; /* capacity of m->weights (never reallocated: layers point into it) */
    memra_error *err;
} binder;

memra_status memra_model_own(memra_model *m, void *p) {
    void **n = realloc(m->owned, (size_t)(m->n_owned + 1) * sizeof *n);
    if (!n) {
        free(p);
        return MEMRA_ERR_NOMEM;
    }
    m->owned = n;
    m->owned[m->n_owned++] = p;
    return MEMRA_OK;
}

static void shape_str(const int64_t *ne, char *buf, size_t n) {
    int nd = 4;
    while (nd > 1 && ne[nd - 1] == 1) nd--;
    size_t o = (size_t)snprintf(buf, n, "{");
    for (int i = 0; i < nd && o < n; i++) o += (size_t)snprintf(buf + o, n - o, i ? ", %lld" : "%lld", (long long)ne[i]);
    if (o < n) snprintf(buf + o, n - o, "}");
}

static memra_status new_weight(binder *b, const char *name, memra_weight **out) {
    memra_model *m = b->m;
    if (m->n_weights >= b->cap) return memra_errorf(b->err, MEMRA_ERR_LIMIT, "too many weights (internal limit %lld)",
                                                    (long long)b->cap);
    char *nm = strdup(name);
    if (!nm || memra_model_own(m, nm) != MEMRA_OK) return memra_errorf(b->err, MEMRA_ERR_NOMEM, "out of memory");
    memra_weight *w = &m->weights[m->n_weights++];
    memset(w, 0, sizeof *w);
    w->name = nm;
    *out = w;
    return MEMRA_OK;
}

enum { REQUIRED = 0, OPTIONAL = 1 };
enum { ANY_TYPE = 0, F32_ONLY = 1 };

/* Binds tensor `name` with shape {e0, e1, e2} (unused dims 1). Sets *out to
 * NULL when an OPTIONAL tensor is absent. */
static memra_status bind(binder *b, const char *name, int64_t e0, int64_t e1, int64_t e2, int f32_only, int optional,
                         const memra_weight **out) {
    *out = NULL;
    const memra_gguf_tensor *t = memra_gguf_find_tensor(b->m->gguf, name);
    if (!t) {
        if (optional) return MEMRA_OK;
        return memra_errorf(b->err, MEMRA_ERR_NOT_FOUND, "missing tensor '%s'", name);
    }
    int64_t want[4] = {e0, e1, e2, 1};
    if (memcmp(want, t->ne, sizeof want) != 0) {
        char ws[96], gs[96];
        shape_str(want, ws, sizeof ws);
        shape_str(t->ne, gs, sizeof gs);
        return memra_errorf(b->err, MEMRA_ERR_FORMAT, "tensor '%s' has shape %s, expected %s", name, gs, ws);
    }
    const memra_type_info *ti = memra_type_get(t->type);
    if (!ti || !ti->supported)
        return memra_errorf(b->err, MEMRA_ERR_UNSUPPORTED, "tensor '%s' has type %s (ggml type %u), which memra cannot "
                            "compute with", name, ti && ti->name ? ti->name : "unknown", t->type);
    if (f32_only && t->type != MEMRA_TYPE_F32)
        return memra_errorf(b->err, MEMRA_ERR_UNSUPPORTED, "tensor '%s' has type %s; memra expects F32 for it", name,
                            ti->name);
    size_t rb = memra_type_row_bytes(t->type, t->ne[0]);
    if (rb == 0)
        return memra_errorf(b->err, MEMRA_ERR_FORMAT, "tensor '%s': a row of %lld elements does not fit %s blocks of %u",
                            name, (long long)t->ne[0], ti->name, ti->block_elems);
    if ((uint64_t)rb * (uint64_t)(t->ne[1] * t->ne[2] * t->ne[3]) != t->nbytes)
        return memra_errorf(b->err, MEMRA_ERR_FORMAT, "tensor '%s': %llu bytes do not match its shape and type %s", name,
                            (unsigned long long)t->nbytes, ti->name);
    memra_weight *w;
    MEMRA_TRY(new_weight(b, name, &w));
    w->type = t->type;
    memcpy(w->ne, t->ne, sizeof w->ne);
    w->nbytes = t->nbytes;
    w->row_bytes = rb;
    w->host = t->data;
    *out = w;
    return MEMRA_OK;
}

/* A new weight of n_rows rows of src, row i copied from src row map[i]. */
static memra_status row_copy(binder *b, const memra_weight *src, const char *name, const int64_t *map, int64_t n_rows,
                             const memra_weight **out) {
    uint8_t *buf = malloc((size_t)n_rows * src->row_bytes);
    if (!buf || memra_model_own(b->m, buf) != MEMRA_OK)
        return memra_errorf(b->err, MEMRA_ERR_NOMEM, "out of memory copying rows of '%s'", src->name);
    for (int64_t i = 0; i < n_rows; i++)
        memcpy(buf + (size_t)i * src->row_bytes, (const uint8_t *)src->host + (size_t)map[i] * src->row_bytes,
               src->row_bytes);
    memra_weight *w;
    MEMRA_TRY(new_weight(b, name, &w));
    w->type = src->type;
    w->ne[0] = src->ne[0];
    w->ne[1] = n_rows;
    w->ne[2] = w->ne[3] = 1;
    w->row_bytes = src->row_bytes;
    w->nbytes = (uint64_t)n_rows * src->row_bytes;
    w->host = buf;
    *out = w;
    return MEMRA_OK;
}

/* qwen3next ssm_in {H, 2*key_dim + 2*value_dim}, per k head kh the rows
 * [q(d_k) | k(d_k) | v(r*d_v) | z(r*d_v)], into ssm_qkv (all q | all k | all v,
 * v heads grouped) and ssm_z. */
static memra_status split_ssm_in(binder *b, int li, const memra_weight *in, memra_layer *L) {
    const memra_model_config *c = &b->m->cfg;
    int64_t r = c->n_v / c->n_k, grp = 2 * (int64_t)c->d_k + 2 * r * c->d_v;
    int64_t *map = malloc((size_t)(c->conv_dim + c->value_dim) * sizeof *map);
    if (!map) return memra_errorf(b->err, MEMRA_ERR_NOMEM, "out of memory");
    int64_t *zmap = map + c->conv_dim;
    for (int64_t kh = 0; kh < c->n_k; kh++) {
        for (int64_t i = 0; i < c->d_k; i++) {
            map[kh * c->d_k + i] = kh * grp + i;
            map[c->key_dim + kh * c->d_k + i] = kh * grp + c->d_k + i;
        }
        for (int64_t i = 0; i < r * c->d_v; i++) {
            map[2 * c->key_dim + kh * r * c->d_v + i] = kh * grp + 2 * c->d_k + i;
            zmap[kh * r * c->d_v + i] = kh * grp + 2 * c->d_k + r * c->d_v + i;
        }
    }
    char name[96];
    snprintf(name, sizeof name, "blk.%d.ssm_in.weight[qkv]", li);
    memra_status st = row_copy(b, in, name, map, c->conv_dim, &L->ssm_qkv);
    snprintf(name, sizeof name, "blk.%d.ssm_in.weight[z]", li);
    if (st == MEMRA_OK) st = row_copy(b, in, name, zmap, c->value_dim, &L->ssm_z);
    free(map);
    return st;
}

/* qwen3next ssm_ba {H, 2*n_v}, per k head [b(r) | a(r)], into beta and alpha. */
static memra_status split_ssm_ba(binder *b, int li, const memra_weight *ba, memra_layer *L) {
    const memra_model_config *c = &b->m->cfg;
    int64_t r = c->n_v / c->n_k;
    int64_t *map = malloc((size_t)(2 * c->n_v) * sizeof *map);
    if (!map) return memra_errorf(b->err, MEMRA_ERR_NOMEM, "out of memory");
    for (int64_t kh = 0; kh < c->n_k; kh++)
        for (int64_t j = 0; j < r; j++) {
            map[kh * r + j] = kh * 2 * r + j;
            map[c->n_v + kh * r + j] = kh * 2 * r + r + j;
        }
    char name[96];
    snprintf(name, sizeof name, "blk.%d.ssm_ba.weight[b]", li);
    memra_status st = row_copy(b, ba, name, map, c->n_v, &L->ssm_beta);
    snprintf(name, sizeof name, "blk.%d.ssm_ba.weight[a]", li);
    if (st == MEMRA_OK) st = row_copy(b, ba, name, map + c->n_v, c->n_v, &L->ssm_alpha);
    free(map);
    return st;
}

#define NAME(...) (snprintf(nm, sizeof nm, __VA_ARGS__), nm)

static int has_tensor(const memra_model *m, const char *name) { return memra_gguf_find_tensor(m->gguf, name) != NULL; }

static memra_status bind_gdn(binder *b, int i, memra_layer *L) {
    const memra_model_config *c = &b->m->cfg;
    int64_t H = c->n_embd;
    char nm[96];
    if (has_tensor(b->m, NAME("blk.%d.ssm_in.weight", i))) {
        if (c->arch != MEMRA_ARCH_QWEN3NEXT)
            return memra_errorf(b->err, MEMRA_ERR_UNSUPPORTED, "tensor '%s': the fused qkvz projection is only "
                                "supported for qwen3next (grouped v heads)", nm);
        const memra_weight *in;
        MEMRA_TRY(bind(b, nm, H, c->conv_dim + c->value_dim, 1, ANY_TYPE, REQUIRED, &in));
        MEMRA_TRY(split_ssm_in(b, i, in, L));
    } else {
        MEMRA_TRY(bind(b, NAME("blk.%d.attn_qkv.weight", i), H, c->conv_dim, 1, ANY_TYPE, REQUIRED, &L->ssm_qkv));
        MEMRA_TRY(bind(b, NAME("blk.%d.attn_gate.weight", i), H, c->value_dim, 1, ANY_TYPE, REQUIRED, &L->ssm_z));
    }
    if (has_tensor(b->m, NAME("blk.%d.ssm_ba.weight", i))) {
        if (c->arch != MEMRA_ARCH_QWEN3NEXT)
            return memra_errorf(b->err, MEMRA_ERR_UNSUPPORTED, "tensor '%s': the fused beta/alpha projection is only "
                                "supported for qwen3next (grouped v heads)", nm);
        const memra_weight *ba;
        MEMRA_TRY(bind(b, nm, H, 2 * (int64_t)c->n_v, 1, ANY_TYPE, REQUIRED, &ba));
        MEMRA_TRY(split_ssm_ba(b, i, ba, L));
    } else {
        MEMRA_TRY(bind(b, NAME("blk.%d.ssm_beta.weight", i), H, c->n_v, 1, ANY_TYPE, REQUIRED, &L->ssm_beta));
        MEMRA_TRY(bind(b, NAME("blk.%d.ssm_alpha.weight", i), H, c->n_v, 1, ANY_TYPE, REQUIRED, &L->ssm_alpha));
    }
    MEMRA_TRY(bind(b, NAME("blk.%d.ssm_conv1d.weight", i), c->d_conv, c->conv_dim, 1, F32_ONLY, REQUIRED,
                   &L->ssm_conv));
    /* some converters write ssm_dt without ".bias" (spec §5.7) */
    MEMRA_TRY(bind(b, NAME("blk.%d.ssm_dt.bias", i), c->n_v, 1, 1, F32_ONLY, OPTIONAL, &L->ssm_dt));
    if (!L->ssm_dt) MEMRA_TRY(bind(b, NAME("blk.%d.ssm_dt", i), c->n_v, 1, 1, F32_ONLY, OPTIONAL, &L->ssm_dt));
    if (!L->ssm_dt) return memra_errorf(b->err, MEMRA_ERR_NOT_FOUND, "missing tensor 'blk.%d.ssm_dt.bias'", i);
    MEMRA_TRY(bind(b, NAME("blk.%d.ssm_a", i), c->n_v, 1, 1, F32_ONLY, REQUIRED, &L->ssm_a));
    MEMRA_TRY(bind(b, NAME("blk.%d.ssm_norm.weight", i), c->d_v, 1, 1, F32_ONLY, REQUIRED, &L->ssm_norm));
    MEMRA_TRY(bind(b, NAME("blk.%d.ssm_out.weight", i), c->value_dim, H, 1, ANY_TYPE, REQUIRED, &L->ssm_out));
    return MEMRA_OK;
}

static memra_status bind_attn(binder *b, int i, memra_layer *L) {
    const memra_model_config *c = &b->m->cfg;
    int64_t H = c->n_embd, hd = c->head_dim, q_dim = (int64_t)c->n_head * hd, kv_dim = (int64_t)c->n_kv * hd;
    char nm[96];
    if (!has_tensor(b->m, NAME("blk.%d.attn_q.weight", i)) && has_tensor(b->m, NAME("blk.%d.attn_qkv.weight", i)))
        return memra_errorf(b->err, MEMRA_ERR_UNSUPPORTED, "tensor '%s': a fused q/k/v projection in a full-attention "
                            "layer is not supported (expected blk.%d.attn_q/attn_k/attn_v)", nm, i);
    MEMRA_TRY(bind(b, NAME("blk.%d.attn_q.weight", i), H, 2 * q_dim, 1, ANY_TYPE, REQUIRED, &L->wq));
    MEMRA_TRY(bind(b, NAME("blk.%d.attn_k.weight", i), H, kv_dim, 1, ANY_TYPE, REQUIRED, &L->wk));
    MEMRA_TRY(bind(b, NAME("blk.%d.attn_v.weight", i), H, kv_dim, 1, ANY_TYPE, REQUIRED, &L->wv));
    MEMRA_TRY(bind(b, NAME("blk.%d.attn_output.weight", i), q_dim, H, 1, ANY_TYPE, REQUIRED, &L->wo));
    MEMRA_TRY(bind(b, NAME("blk.%d.attn_q_norm.weight", i), hd, 1, 1, F32_ONLY, REQUIRED, &L->q_norm));
    MEMRA_TRY(bind(b, NAME("blk.%d.attn_k_norm.weight", i), hd, 1, 1, F32_ONLY, REQUIRED, &L->k_norm));
    return MEMRA_OK;
}

static memra_status bind_ffn(binder *b, int i, memra_layer *L) {
    const memra_model_config *c = &b->m->cfg;
    int64_t H = c->n_embd;
    char nm[96];
    if (!c->is_moe) {
        MEMRA_TRY(bind(b, NAME("blk.%d.ffn_gate.weight", i), H, c->n_ff, 1, ANY_TYPE, REQUIRED, &L->ffn_gate));
        MEMRA_TRY(bind(b, NAME("blk.%d.ffn_up.weight", i), H, c->n_ff, 1, ANY_TYPE, REQUIRED, &L->ffn_up));
        MEMRA_TRY(bind(b, NAME("blk.%d.ffn_down.weight", i), c->n_ff, H, 1, ANY_TYPE, REQUIRED, &L->ffn_down));
        return MEMRA_OK;
    }
    int64_t E = c->n_expert, F = c->n_ff_exp;
    if (has_tensor(b->m, NAME("blk.%d.ffn_gate_up_exps.weight", i)))
        return memra_errorf(b->err, MEMRA_ERR_UNSUPPORTED, "tensor '%s': fused gate+up expert weights are not supported "
                            "(their row order is unverified); expected ffn_gate_exps and ffn_up_exps", nm);
    MEMRA_TRY(bind(b, NAME("blk.%d.ffn_gate_inp.weight", i), H, E, 1, ANY_TYPE, REQUIRED, &L->ffn_router));
    MEMRA_TRY(bind(b, NAME("blk.%d.ffn_gate_exps.weight", i), H, F, E, ANY_TYPE, REQUIRED, &L->gate_exps));
    MEMRA_TRY(bind(b, NAME("blk.%d.ffn_up_exps.weight", i), H, F, E, ANY_TYPE, REQUIRED, &L->up_exps));
    MEMRA_TRY(bind(b, NAME("blk.%d.ffn_down_exps.weight", i), F, H, E, ANY_TYPE, REQUIRED, &L->down_exps));
    /* The shared expert: required when the metadata gives its width; when the
     * key is absent, the tensors decide (all four or none). */
    int want = c->n_ff_shexp > 0;
    int64_t FS = c->n_ff_shexp;
    if (!want && has_tensor(b->m, NAME("blk.%d.ffn_gate_shexp.weight", i)))
        return memra_errorf(b->err, MEMRA_ERR_NOT_FOUND, "tensor '%s' is present but metadata key "
                            "'%s.expert_shared_feed_forward_length' is missing", nm, c->arch_name);
    if (!want) return MEMRA_OK;
    MEMRA_TRY(bind(b, NAME("blk.%d.ffn_gate_inp_shexp.weight", i), H, 1, 1, ANY_TYPE, REQUIRED, &L->shexp_gate_inp));
    MEMRA_TRY(bind(b, NAME("blk.%d.ffn_gate_shexp.weight", i), H, FS, 1, ANY_TYPE, REQUIRED, &L->shexp_gate));
    MEMRA_TRY(bind(b, NAME("blk.%d.ffn_up_shexp.weight", i), H, FS, 1, ANY_TYPE, REQUIRED, &L->shexp_up));
    MEMRA_TRY(bind(b, NAME("blk.%d.ffn_down_shexp.weight", i), FS, H, 1, ANY_TYPE, REQUIRED, &L->shexp_down));
    return MEMRA_OK;
}

memra_status memra_weights_bind(memra_model *m, memra_error *err) {
    const memra_model_config *c = &m->cfg;
    /* file tensors + up to 4 row copies per layer */
    binder b = {m, memra_gguf_n_tensors(m->gguf) + 4 * (int64_t)c->n_layer + 4, err};
    m->weights = calloc((size_t)b.cap, sizeof *m->weights);
    m->layers = calloc((size_t)c->n_layer, sizeof *m->layers);
    if (!m->weights || !m->layers) return memra_errorf(err, MEMRA_ERR_NOMEM, "out of memory");
    int64_t H = c->n_embd;
    MEMRA_TRY(bind(&b, "token_embd.weight", H, c->n_vocab, 1, ANY_TYPE, REQUIRED, &m->tok_embd));
    MEMRA_TRY(bind(&b, "output_norm.weight", H, 1, 1, F32_ONLY, REQUIRED, &m->output_norm));
    MEMRA_TRY(bind(&b, "output.weight", H, c->n_vocab, 1, ANY_TYPE, OPTIONAL, &m->output));
    if (!m->output) m->output = m->tok_embd; /* tied embeddings (spec §7) */
    char nm[96];
    for (int i = 0; i < c->n_layer; i++) {
        memra_layer *L = &m->layers[i];
        L->kind = (memra_layer_kind)c->kind[i];
        MEMRA_TRY(bind(&b, NAME("blk.%d.attn_norm.weight", i), H, 1, 1, F32_ONLY, REQUIRED, &L->attn_norm));
        MEMRA_TRY(bind(&b, NAME("blk.%d.post_attention_norm.weight", i), H, 1, 1, F32_ONLY, REQUIRED, &L->post_norm));
        if (L->kind == MEMRA_LAYER_GDN) MEMRA_TRY(bind_gdn(&b, i, L));
        else MEMRA_TRY(bind_attn(&b, i, L));
        MEMRA_TRY(bind_ffn(&b, i, L));
        if (i >= c->n_trunk) { /* MTP block (spec §8.2) */
            MEMRA_TRY(bind(&b, NAME("blk.%d.nextn.eh_proj.weight", i), 2 * H, H, 1, ANY_TYPE, REQUIRED,
                           &L->nextn_eh_proj));
            MEMRA_TRY(bind(&b, NAME("blk.%d.nextn.enorm.weight", i), H, 1, 1, F32_ONLY, REQUIRED, &L->nextn_enorm));
            MEMRA_TRY(bind(&b, NAME("blk.%d.nextn.hnorm.weight", i), H, 1, 1, F32_ONLY, REQUIRED, &L->nextn_hnorm));
            MEMRA_TRY(bind(&b, NAME("blk.%d.nextn.shared_head_norm.weight", i), H, 1, 1, F32_ONLY, OPTIONAL,
                           &L->nextn_shared_head_norm));
        }
    }
    return MEMRA_OK;
}
