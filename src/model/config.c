/* Hyperparameters from GGUF metadata; see config.h and spec §1-2. */
#include "model/config.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#define MEMRA_TRY(expr)                          \
    do {                                         \
        memra_status try_st_ = (expr);           \
        if (try_st_ != MEMRA_OK) return try_st_; \
    } while (0)

/* Dimensions above this are rejected as corrupt (the largest real one, the
 * vocabulary, is ~250k; 2^24 leaves room while keeping products in range). */
#define DIM_MAX ((int64_t)1 << 24)

typedef struct reader {
    const memra_gguf *g;
    const char *arch;
    memra_error *err;
} reader;

static void key_name(const reader *r, const char *suffix, char *buf, size_t n) {
    snprintf(buf, n, "%s.%s", r->arch, suffix);
}

/* Reads an integer key; a per-layer array is accepted when every entry equals
 * the first (the Qwen3.5 layers are uniform). present = NULL makes it required. */
static memra_status get_int(const reader *r, const char *suffix, int64_t lo, int64_t hi, int64_t *out, int *present) {
    char key[160];
    key_name(r, suffix, key, sizeof key);
    const memra_gguf_kv *kv = memra_gguf_find_kv(r->g, key);
    if (!kv) {
        if (present) {
            *present = 0;
            return MEMRA_OK;
        }
        return memra_errorf(r->err, MEMRA_ERR_NOT_FOUND, "missing metadata key '%s'", key);
    }
    if (present) *present = 1;
    int64_t v = 0;
    if (kv->type == MEMRA_GGUF_TYPE_ARRAY) {
        if (kv->v.arr.n == 0) return memra_errorf(r->err, MEMRA_ERR_FORMAT, "metadata key '%s' is an empty array", key);
        for (uint64_t i = 0; i < kv->v.arr.n; i++) {
            int64_t e;
            if (memra_gguf_arr_i64(kv, i, &e) != MEMRA_OK)
                return memra_errorf(r->err, MEMRA_ERR_FORMAT, "metadata key '%s': element %llu is not an integer",
                                    key, (unsigned long long)i);
            if (i == 0) v = e;
            else if (e != v)
                return memra_errorf(r->err, MEMRA_ERR_UNSUPPORTED,
                                    "metadata key '%s': per-layer values differ (%lld at 0, %lld at %llu); memra "
                                    "needs uniform layers", key, (long long)v, (long long)e, (unsigned long long)i);
        }
    } else {
        MEMRA_TRY(memra_gguf_get_i64(r->g, key, &v, r->err));
    }
    if (v < lo || v > hi)
        return memra_errorf(r->err, MEMRA_ERR_FORMAT, "metadata key '%s' = %lld is out of range [%lld, %lld]", key,
                            (long long)v, (long long)lo, (long long)hi);
    *out = v;
    return MEMRA_OK;
}

static memra_status get_float(const reader *r, const char *suffix, double lo, double hi, double def, double *out) {
    char key[160];
    key_name(r, suffix, key, sizeof key);
    if (!memra_gguf_find_kv(r->g, key)) {
        *out = def;
        return MEMRA_OK;
    }
    double v;
    MEMRA_TRY(memra_gguf_get_f64(r->g, key, &v, r->err));
    if (!(v >= lo && v <= hi)) /* also rejects NaN */
        return memra_errorf(r->err, MEMRA_ERR_FORMAT, "metadata key '%s' = %g is out of range [%g, %g]", key, v, lo, hi);
    *out = v;
    return MEMRA_OK;
}

int32_t memra_config_count(const memra_model_config *cfg, memra_layer_kind kind) {
    int32_t n = 0;
    for (int32_t i = 0; i < cfg->n_trunk; i++) n += cfg->kind[i] == kind;
    return n;
}

static memra_status read_layer_kinds(const reader *r, memra_model_config *c) {
    char key[160];
    key_name(r, "attention.recurrent_layers", key, sizeof key);
    const memra_gguf_kv *kv = memra_gguf_find_kv(r->g, key);
    if (kv) {
        /* Explicit per-layer flags override the interval rule (llama.cpp does the same). */
        if (kv->type != MEMRA_GGUF_TYPE_ARRAY)
            return memra_errorf(r->err, MEMRA_ERR_FORMAT, "metadata key '%s' must be an array, got %s", key,
                                memra_gguf_type_name(kv->type));
        if (kv->v.arr.n != (uint64_t)c->n_layer && kv->v.arr.n != (uint64_t)c->n_trunk)
            return memra_errorf(r->err, MEMRA_ERR_FORMAT,
                                "metadata key '%s' has %llu entries, expected %d (block_count) or %d (trunk layers)",
                                key, (unsigned long long)kv->v.arr.n, c->n_layer, c->n_trunk);
        for (int32_t i = 0; i < c->n_trunk; i++) {
            uint64_t f;
            if (memra_gguf_arr_u64(kv, (uint64_t)i, &f) != MEMRA_OK || f > 1)
                return memra_errorf(r->err, MEMRA_ERR_FORMAT, "metadata key '%s': entry %d is not a bool", key, i);
            c->kind[i] = f ? MEMRA_LAYER_GDN : MEMRA_LAYER_ATTN;
        }
        c->full_attn_interval = 0;
    } else {
        int64_t interval = 4;
        int present;
        MEMRA_TRY(get_int(r, "full_attention_interval", 1, MEMRA_MAX_LAYERS, &interval, &present));
        if (!present) interval = 4; /* llama.cpp's default */
        c->full_attn_interval = (int32_t)interval;
        for (int32_t i = 0; i < c->n_trunk; i++)
            c->kind[i] = (i + 1) % interval != 0 ? MEMRA_LAYER_GDN : MEMRA_LAYER_ATTN;
    }
    for (int32_t i = c->n_trunk; i < c->n_layer; i++) c->kind[i] = MEMRA_LAYER_ATTN; /* MTP blocks */
    return MEMRA_OK;
}

memra_status memra_config_from_gguf(const memra_gguf *g, memra_model_config *c, memra_error *err) {
    memset(c, 0, sizeof *c);
    memra_gguf_str arch;
    memra_status st = memra_gguf_get_str(g, "general.architecture", &arch, err);
    if (st != MEMRA_OK) return st;
    if (memra_gguf_str_eq(arch, "qwen35")) c->arch = MEMRA_ARCH_QWEN35;
    else if (memra_gguf_str_eq(arch, "qwen35moe")) c->arch = MEMRA_ARCH_QWEN35MOE;
    else if (memra_gguf_str_eq(arch, "qwen3next")) c->arch = MEMRA_ARCH_QWEN3NEXT;
    else
        return memra_errorf(err, MEMRA_ERR_UNSUPPORTED,
                            "general.architecture '%.*s' is not supported (memra runs qwen35, qwen35moe, qwen3next)",
                            (int)(arch.len > 64 ? 64 : arch.len), arch.ptr);
    snprintf(c->arch_name, sizeof c->arch_name, "%.*s", (int)arch.len, arch.ptr);
    reader r = {g, c->arch_name, err};
    int64_t v;
    int present;

    MEMRA_TRY(get_int(&r, "embedding_length", 1, DIM_MAX, &c->n_embd, NULL));
    MEMRA_TRY(get_int(&r, "block_count", 1, MEMRA_MAX_LAYERS, &v, NULL));
    c->n_layer = (int32_t)v;
    MEMRA_TRY(get_int(&r, "nextn_predict_layers", 0, MEMRA_MAX_LAYERS, &v, &present));
    c->n_nextn = present ? (int32_t)v : 0;
    if (c->n_nextn >= c->n_layer)
        return memra_errorf(err, MEMRA_ERR_FORMAT,
                            "metadata: %s.nextn_predict_layers = %d leaves no trunk layers (block_count = %d)",
                            c->arch_name, c->n_nextn, c->n_layer);
    c->n_trunk = c->n_layer - c->n_nextn;
    MEMRA_TRY(get_int(&r, "context_length", 1, (int64_t)1 << 32, &c->n_ctx_train, &present));
    if (!present) c->n_ctx_train = 4096;
    double d;
    MEMRA_TRY(get_float(&r, "attention.layer_norm_rms_epsilon", 1e-12, 1e-1, 1e-6, &d));
    c->rms_eps = (float)d;
    MEMRA_TRY(read_layer_kinds(&r, c));

    /* attention */
    MEMRA_TRY(get_int(&r, "attention.head_count", 1, 4096, &v, NULL));
    c->n_head = (int32_t)v;
    MEMRA_TRY(get_int(&r, "attention.head_count_kv", 1, 4096, &v, &present));
    c->n_kv = present ? (int32_t)v : c->n_head;
    if (c->n_head % c->n_kv != 0)
        return memra_errorf(err, MEMRA_ERR_FORMAT, "metadata: %s.attention.head_count (%d) is not a multiple of "
                            "%s.attention.head_count_kv (%d)", c->arch_name, c->n_head, c->arch_name, c->n_kv);
    MEMRA_TRY(get_int(&r, "attention.key_length", 2, 4096, &v, &present));
    if (!present) {
        if (c->n_embd % c->n_head != 0)
            return memra_errorf(err, MEMRA_ERR_FORMAT, "metadata: %s.attention.key_length is absent and "
                                "embedding_length %% head_count != 0", c->arch_name);
        v = c->n_embd / c->n_head;
    }
    c->head_dim = (int32_t)v;
    int64_t vlen;
    MEMRA_TRY(get_int(&r, "attention.value_length", 1, 4096, &vlen, &present));
    if (present && vlen != c->head_dim)
        return memra_errorf(err, MEMRA_ERR_UNSUPPORTED, "metadata: %s.attention.value_length (%lld) differs from "
                            "key_length (%d)", c->arch_name, (long long)vlen, c->head_dim);
    MEMRA_TRY(get_int(&r, "rope.dimension_count", 2, 4096, &v, &present));
    c->n_rot = present ? (int32_t)v : c->head_dim;
    if (c->n_rot % 2 != 0 || c->n_rot > c->head_dim)
        return memra_errorf(err, MEMRA_ERR_FORMAT, "metadata: %s.rope.dimension_count = %d must be even and <= "
                            "key_length %d", c->arch_name, c->n_rot, c->head_dim);
    MEMRA_TRY(get_float(&r, "rope.freq_base", 1.0, 1e12, 10000.0, &d));
    c->rope_theta = (float)d;
    c->rope_imrope = c->arch != MEMRA_ARCH_QWEN3NEXT;
    if (c->rope_imrope) {
        char key[160];
        key_name(&r, "rope.dimension_sections", key, sizeof key);
        const memra_gguf_kv *kv = memra_gguf_find_kv(g, key);
        if (!kv) return memra_errorf(err, MEMRA_ERR_NOT_FOUND, "missing metadata key '%s' (required for %s)", key,
                                     c->arch_name);
        if (kv->type != MEMRA_GGUF_TYPE_ARRAY || kv->v.arr.n < 1 || kv->v.arr.n > 4)
            return memra_errorf(err, MEMRA_ERR_FORMAT, "metadata key '%s' must be an array of 1 to 4 integers", key);
        int64_t sum = 0;
        for (uint64_t i = 0; i < kv->v.arr.n; i++) {
            int64_t e;
            if (memra_gguf_arr_i64(kv, i, &e) != MEMRA_OK || e < 0 || e > 4096)
                return memra_errorf(err, MEMRA_ERR_FORMAT, "metadata key '%s': entry %llu is not an integer in "
                                    "[0, 4096]", key, (unsigned long long)i);
            c->rope_sections[i] = (int32_t)e;
            sum += e;
        }
        /* Text tokens get the same position in every section, so the split
         * does not change the result; it must still be usable (non-empty). */
        if (sum == 0) return memra_errorf(err, MEMRA_ERR_FORMAT, "metadata key '%s' sums to 0", key);
    }

    /* Gated DeltaNet */
    MEMRA_TRY(get_int(&r, "ssm.conv_kernel", 1, 64, &v, NULL));
    c->d_conv = (int32_t)v;
    MEMRA_TRY(get_int(&r, "ssm.state_size", 1, 4096, &v, NULL));
    c->d_k = (int32_t)v;
    MEMRA_TRY(get_int(&r, "ssm.group_count", 1, 4096, &v, NULL));
    c->n_k = (int32_t)v;
    MEMRA_TRY(get_int(&r, "ssm.time_step_rank", 1, 4096, &v, NULL));
    c->n_v = (int32_t)v;
    MEMRA_TRY(get_int(&r, "ssm.inner_size", 1, DIM_MAX, &c->value_dim, NULL));
    if (c->value_dim % c->n_v != 0)
        return memra_errorf(err, MEMRA_ERR_FORMAT, "metadata: %s.ssm.inner_size (%lld) is not a multiple of "
                            "%s.ssm.time_step_rank (%d)", c->arch_name, (long long)c->value_dim, c->arch_name, c->n_v);
    c->d_v = (int32_t)(c->value_dim / c->n_v);
    if (c->d_v > 4096)
        return memra_errorf(err, MEMRA_ERR_FORMAT, "metadata: %s.ssm.inner_size / time_step_rank = %d is too large",
                            c->arch_name, c->d_v);
    if (c->n_v % c->n_k != 0)
        return memra_errorf(err, MEMRA_ERR_FORMAT, "metadata: %s.ssm.time_step_rank (%d) is not a multiple of "
                            "%s.ssm.group_count (%d)", c->arch_name, c->n_v, c->arch_name, c->n_k);
    c->key_dim = (int64_t)c->n_k * c->d_k;
    c->conv_dim = 2 * c->key_dim + c->value_dim;
    if (c->key_dim > DIM_MAX || c->conv_dim > DIM_MAX)
        return memra_errorf(err, MEMRA_ERR_FORMAT, "metadata: %s.ssm.group_count x state_size is too large",
                            c->arch_name);
    c->kv_tiled = c->arch != MEMRA_ARCH_QWEN3NEXT;
    if ((int64_t)c->n_head * c->head_dim > DIM_MAX)
        return memra_errorf(err, MEMRA_ERR_FORMAT, "metadata: %s.attention.head_count x key_length is too large",
                            c->arch_name);

    /* FFN */
    c->is_moe = c->arch != MEMRA_ARCH_QWEN35;
    if (!c->is_moe) {
        MEMRA_TRY(get_int(&r, "feed_forward_length", 1, DIM_MAX, &c->n_ff, NULL));
    } else {
        MEMRA_TRY(get_int(&r, "expert_count", 1, 4096, &v, NULL));
        c->n_expert = (int32_t)v;
        MEMRA_TRY(get_int(&r, "expert_used_count", 1, 4096, &v, NULL));
        c->n_expert_used = (int32_t)v;
        if (c->n_expert_used > c->n_expert)
            return memra_errorf(err, MEMRA_ERR_FORMAT, "metadata: %s.expert_used_count (%d) exceeds expert_count (%d)",
                                c->arch_name, c->n_expert_used, c->n_expert);
        MEMRA_TRY(get_int(&r, "expert_feed_forward_length", 1, DIM_MAX, &c->n_ff_exp, NULL));
        MEMRA_TRY(get_int(&r, "expert_shared_feed_forward_length", 0, DIM_MAX, &c->n_ff_shexp, &present));
        if (!present) c->n_ff_shexp = 0; /* the weights decide: shared expert tensors absent = none */
    }
    /* n_vocab: the embedding's row count (the vocab may be padded). */
    const memra_gguf_tensor *te = memra_gguf_find_tensor(g, "token_embd.weight");
    if (!te) return memra_errorf(err, MEMRA_ERR_NOT_FOUND, "missing tensor 'token_embd.weight'");
    if (te->n_dims != 2 || te->ne[1] < 1 || te->ne[1] > DIM_MAX)
        return memra_errorf(err, MEMRA_ERR_FORMAT, "tensor 'token_embd.weight' must be 2-D {n_embd, n_vocab}");
    c->n_vocab = te->ne[1];
    return MEMRA_OK;
}
