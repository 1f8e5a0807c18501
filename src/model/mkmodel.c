/* mkmodel: full-size random-weight Qwen3.5 GGUF files (see mkmodel.h).
 *
 * Three parts: the tensor plan (names, shapes, order and F32/BF16 split of
 * the converter's output, then llama-quantize's per-tensor type rules), the
 * metadata (keys in the converter's order, tokenizer copied from a real GGUF),
 * and the data stream (random blocks generated in parallel into two buffers
 * while a writer thread streams the other one to the file). */
#include "model/mkmodel.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/threads.h"
#include "gguf/gguf.h"
#include "gguf/gguf_write.h"
#include "gguf/quant.h"

#define TRY(expr)                        \
    do {                                 \
        memra_status try_st_ = (expr);   \
        if (try_st_) return try_st_;     \
    } while (0)

/* ---- presets ------------------------------------------------------------ */

/* Spec §10. Common to every size: hd 256, n_rot 64, IMROPE sections
 * [11,11,10,0], d_k = d_v = 128, n_k = 16, vocab 248320, context 262144.
 * 9B is taken as untied (the parameter count points that way; spec §14).
 * The test-* presets have exactly the shapes of the fixtures in
 * ../shared/fixtures (written by the real converter and quantizer), so the
 * tests can compare memra's plan with the real tools' output tensor by tensor. */
#define R35 {11, 11, 10, 0}
#define RTEST {3, 3, 2, 0}
static const memra_mkmodel_preset presets[] = {
    /* name, label, moe, tied, H, trunk, heads, kv, hd, rot, sections, d_k, n_k, n_v,
     * n_ff, experts, used, ff_exp, ff_shexp, vocab, ctx */
    {"0.8b", "0.8B", 0, 1, 1024, 24, 8, 2, 256, 64, R35, 128, 16, 16, 3584, 0, 0, 0, 0, 248320, 262144},
    {"9b", "9B", 0, 0, 4096, 32, 16, 4, 256, 64, R35, 128, 16, 32, 12288, 0, 0, 0, 0, 248320, 262144},
    {"27b", "27B", 0, 0, 5120, 64, 24, 4, 256, 64, R35, 128, 16, 48, 17408, 0, 0, 0, 0, 248320, 262144},
    {"35b-a3b", "35B-A3B", 1, 0, 2048, 40, 16, 2, 256, 64, R35, 128, 16, 32, 0, 256, 8, 512, 512, 248320, 262144},
    {"122b-a10b", "122B-A10B", 1, 0, 3072, 48, 32, 2, 256, 64, R35, 128, 16, 64, 0, 256, 8, 1024, 1024, 248320,
     262144},
    /* hidden presets for the tests: fixture shapes */
    {"test-tiny-dense", "2.4M", 0, 0, 128, 8, 4, 2, 64, 16, RTEST, 32, 2, 4, 384, 0, 0, 0, 0, 1024, 4096},
    {"test-small-dense", "small", 0, 0, 256, 4, 4, 1, 64, 16, RTEST, 64, 2, 4, 512, 0, 0, 0, 0, 1024, 4096},
    {"test-tiny-moe", "16x1.5M", 1, 1, 128, 8, 4, 2, 64, 16, RTEST, 32, 2, 4, 0, 16, 4, 64, 96, 1024, 4096},
};

const memra_mkmodel_preset *memra_mkmodel_preset_at(int i) {
    return i >= 0 && i < (int)MEMRA_ARRAY_LEN(presets) ? &presets[i] : NULL;
}

const memra_mkmodel_preset *memra_mkmodel_preset_find(const char *name) {
    for (size_t i = 0; name && i < MEMRA_ARRAY_LEN(presets); i++)
        if (!strcmp(presets[i].name, name)) return &presets[i];
    return NULL;
}

/* ---- mixes -------------------------------------------------------------- */

static const struct {
    const char *name;
    uint32_t def_type;  /* llama_ftype_get_default_type */
    uint32_t file_type; /* llama_ftype value written as general.file_type */
} mixes[MEMRA_MKMODEL_MIX_COUNT] = {
    [MEMRA_MKMODEL_BF16] = {"bf16", MEMRA_TYPE_BF16, 32},
    [MEMRA_MKMODEL_Q8_0] = {"q8_0", MEMRA_TYPE_Q8_0, 7},
    [MEMRA_MKMODEL_Q4_K_M] = {"q4_k_m", MEMRA_TYPE_Q4_K, 15},
    [MEMRA_MKMODEL_IQ4_XS] = {"iq4_xs", MEMRA_TYPE_IQ4_XS, 30},
    [MEMRA_MKMODEL_NVFP4] = {"nvfp4", MEMRA_TYPE_NVFP4, 39},
};

int memra_mkmodel_mix_parse(const char *s) {
    for (int i = 0; s && i < MEMRA_MKMODEL_MIX_COUNT; i++)
        if (!strcasecmp(s, mixes[i].name)) return i;
    return -1;
}

const char *memra_mkmodel_mix_name(memra_mkmodel_mix mix) {
    return (unsigned)mix < MEMRA_MKMODEL_MIX_COUNT ? mixes[mix].name : "?";
}

/* ---- llama-quantize's type choice --------------------------------------- */

/* Learned from llama.cpp src/llama-quant.cpp (mid-2026: tensor_allows_quantization,
 * llama_tensor_get_type_impl, tensor_type_fallback, init_quantize_state_counters)
 * and checked against the fixtures qwen35-small-dense.{Q4_K_M,IQ4_XS,Q8_0}.gguf
 * and qwen35-tiny-moe.Q8_0.gguf. Only the branches reachable for the mixes
 * here, without an imatrix and without user overrides, are implemented:
 *
 * - Quantized at all: 2-D+ tensors (after dropping trailing 1-dims) whose
 *   name ends in "weight", except *_norm.weight, ffn_gate_inp.weight (router)
 *   and ssm_conv1d; the rest keep the converter's type (F32).
 * - output.weight, and token_embd.weight when the model is tied: Q8_0 if the
 *   row length is not a multiple of the default type's block, else Q6_K unless
 *   the default is Q8_0 (so NVFP4 files get a Q6_K head too).
 * - token_embd.weight (untied): the default type.
 * - attn_v and attn_qkv (one per layer, counted in file order, so the counter
 *   equals the layer index): IQ4_XS -> Q5_K when n_head/n_kv >= 4; Q4_K_M ->
 *   Q6_K when use_more_bits(i, n). The separate attn_qkv branch of the source
 *   (Q5_K for Q4_K_M) is unreachable because attn_qkv is "attn_v-like" first;
 *   the fixture confirms Q6_K/Q4_K.
 * - ffn_down*, layer i of n = block_count (MTP included; MoE parses blk.N from
 *   the name, so ffn_down_exps and ffn_down_shexp of a layer agree): Q4_K_M ->
 *   Q6_K when use_more_bits(i, n); IQ4_XS -> Q5_K when i < n/8.
 * - use_more_bits(i, n) = i < n/8 || i >= 7n/8 || (i - n/8) % 3 == 2.
 * - Branches for n_expert == 8 or the 70B model type never apply here.
 * - Row length not a multiple of the block: IQ4_XS -> IQ4_NL, Q4_K -> Q5_0,
 *   Q5_K -> Q5_1, Q6_K -> Q8_0, then F16 if still not divisible. llama-quantize
 *   has no fallback for Q8_0/NVFP4 (it stops); memra picks Q8_0, then F16. */
static int use_more_bits(int i, int n) { return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2; }

static int ends_with(const char *s, const char *suf) {
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && !memcmp(s + a - b, suf, b);
}

static int layer_of(const char *name) {
    int l = -1;
    if (sscanf(name, "blk.%d.", &l) != 1) return -1;
    return l;
}

static int divisible(int64_t n, uint32_t type) {
    const memra_type_info *ti = memra_type_get(type);
    return ti && n % ti->block_elems == 0;
}

uint32_t memra_mkmodel_pick_type(const memra_mkmodel_plan *plan, const char *name, uint32_t n_dims, const int64_t *ne,
                                 uint32_t src_type) {
    if (plan->mix == MEMRA_MKMODEL_BF16) return src_type;
    uint32_t nd = n_dims;
    while (nd > 1 && ne[nd - 1] == 1) nd--;
    if (nd < 2 || !ends_with(name, "weight") || strstr(name, "_norm.weight") || strstr(name, "ffn_gate_inp.weight") ||
        strstr(name, "ssm_conv1d"))
        return src_type;

    const memra_mkmodel_mix mix = plan->mix;
    const uint32_t def = mixes[mix].def_type;
    const int n_layer = plan->n_layer;
    const int il = layer_of(name);
    const int n_gqa = plan->p.n_kv > 0 ? plan->p.n_head / plan->p.n_kv : 0;
    uint32_t t = def;

    if (!strcmp(name, "output.weight") || (plan->p.tied && !strcmp(name, "token_embd.weight"))) {
        if (!divisible(ne[0], def)) t = MEMRA_TYPE_Q8_0;
        else if (def != MEMRA_TYPE_Q8_0) t = MEMRA_TYPE_Q6_K;
    } else if (!strcmp(name, "token_embd.weight")) {
        t = def;
    } else if (strstr(name, "attn_qkv.weight") || strstr(name, "attn_v.weight")) {
        if (mix == MEMRA_MKMODEL_IQ4_XS && n_gqa >= 4) t = MEMRA_TYPE_Q5_K;
        else if (mix == MEMRA_MKMODEL_Q4_K_M && use_more_bits(il, n_layer)) t = MEMRA_TYPE_Q6_K;
    } else if (strstr(name, "ffn_down")) {
        if (mix == MEMRA_MKMODEL_Q4_K_M && use_more_bits(il, n_layer)) t = MEMRA_TYPE_Q6_K;
        else if (mix == MEMRA_MKMODEL_IQ4_XS && il < n_layer / 8) t = MEMRA_TYPE_Q5_K;
    }

    if (!divisible(ne[0], t)) {
        switch (t) {
        case MEMRA_TYPE_IQ4_XS: t = MEMRA_TYPE_IQ4_NL; break;
        case MEMRA_TYPE_Q4_K: t = MEMRA_TYPE_Q5_0; break;
        case MEMRA_TYPE_Q5_K: t = MEMRA_TYPE_Q5_1; break;
        case MEMRA_TYPE_Q6_K: t = MEMRA_TYPE_Q8_0; break;
        default: t = MEMRA_TYPE_Q8_0; break; /* memra's choice, see above */
        }
        if (!divisible(ne[0], t)) t = MEMRA_TYPE_F16;
    }
    return t;
}

/* ---- the plan ------------------------------------------------------------ */

typedef struct plan_builder {
    memra_mkmodel_plan *plan;
    int64_t cap;
    memra_status st;
    memra_error *err;
} plan_builder;

/* Adds a tensor in the converter's layout: src is F32 or BF16 (what
 * convert_hf_to_gguf.py --outtype bf16 writes). */
static void add(plan_builder *b, int layer, const char *suffix, uint32_t src, memra_mkmodel_role role, uint32_t n_dims,
                int64_t ne0, int64_t ne1, int64_t ne2) {
    if (b->st) return;
    memra_mkmodel_plan *pl = b->plan;
    if (pl->n_tensors == b->cap) {
        int64_t cap = b->cap ? 2 * b->cap : 256;
        void *p = realloc(pl->tensors, (size_t)cap * sizeof *pl->tensors);
        if (!p) {
            b->st = memra_errorf(b->err, MEMRA_ERR_NOMEM, "mkmodel: out of memory for the tensor plan");
            return;
        }
        pl->tensors = p;
        b->cap = cap;
    }
    memra_mkmodel_tensor *t = &pl->tensors[pl->n_tensors++];
    memset(t, 0, sizeof *t);
    if (layer >= 0) snprintf(t->name, sizeof t->name, "blk.%d.%s", layer, suffix);
    else snprintf(t->name, sizeof t->name, "%s", suffix);
    t->n_dims = n_dims;
    t->ne[0] = ne0;
    t->ne[1] = n_dims > 1 ? ne1 : 1;
    t->ne[2] = n_dims > 2 ? ne2 : 1;
    t->ne[3] = 1;
    t->type = src;
    t->role = role;
    t->layer = layer;
}

#define F32_ MEMRA_TYPE_F32
#define BF16_ MEMRA_TYPE_BF16
#define MAT MEMRA_MKMODEL_ROLE_MATRIX
#define NORM MEMRA_MKMODEL_ROLE_NORM

/* The FFN of one layer, in the converter's order (HF names sorted). */
static void add_ffn(plan_builder *b, int l) {
    const memra_mkmodel_preset *p = &b->plan->p;
    const int64_t H = p->n_embd;
    if (!p->is_moe) {
        add(b, l, "ffn_down.weight", BF16_, MAT, 2, p->n_ff, H, 1);
        add(b, l, "ffn_gate.weight", BF16_, MAT, 2, H, p->n_ff, 1);
        add(b, l, "ffn_up.weight", BF16_, MAT, 2, H, p->n_ff, 1);
        return;
    }
    add(b, l, "ffn_down_exps.weight", BF16_, MAT, 3, p->n_ff_exp, H, p->n_expert);
    add(b, l, "ffn_gate_exps.weight", BF16_, MAT, 3, H, p->n_ff_exp, p->n_expert);
    add(b, l, "ffn_up_exps.weight", BF16_, MAT, 3, H, p->n_ff_exp, p->n_expert);
    add(b, l, "ffn_gate_inp.weight", F32_, MAT, 2, H, p->n_expert, 1);
    add(b, l, "ffn_down_shexp.weight", BF16_, MAT, 2, p->n_ff_shexp, H, 1);
    add(b, l, "ffn_gate_shexp.weight", BF16_, MAT, 2, H, p->n_ff_shexp, 1);
    add(b, l, "ffn_up_shexp.weight", BF16_, MAT, 2, H, p->n_ff_shexp, 1);
    /* the converter writes the shared-expert gate as {H, 1}; llama-quantize
     * rewrites it with trailing 1-dims dropped, i.e. {H} */
    add(b, l, "ffn_gate_inp_shexp.weight", F32_, MAT, 2, H, 1, 1);
}

/* Attention tensors of a full-attention layer (after its FFN and post norm). */
static void add_attn(plan_builder *b, int l) {
    const memra_mkmodel_preset *p = &b->plan->p;
    const int64_t H = p->n_embd, hd = p->head_dim;
    add(b, l, "attn_k_norm.weight", F32_, NORM, 1, hd, 1, 1);
    add(b, l, "attn_k.weight", BF16_, MAT, 2, H, p->n_kv * hd, 1);
    add(b, l, "attn_output.weight", BF16_, MAT, 2, p->n_head * hd, H, 1);
    add(b, l, "attn_q_norm.weight", F32_, NORM, 1, hd, 1, 1);
    add(b, l, "attn_q.weight", BF16_, MAT, 2, H, 2 * p->n_head * hd, 1); /* per head [q | gate] */
    add(b, l, "attn_v.weight", BF16_, MAT, 2, H, p->n_kv * hd, 1);
}

static int cmp_quantize_order(const void *a, const void *b) {
    /* llama-model-loader's weight_name_comparer: by blk number (-1 for
     * non-layer tensors), then by name; llama-quantize writes in that order */
    const memra_mkmodel_tensor *x = a, *y = b;
    if (x->layer != y->layer) return x->layer < y->layer ? -1 : 1;
    return strcmp(x->name, y->name);
}

memra_status memra_mkmodel_plan_init(const memra_mkmodel_opts *opts, memra_mkmodel_plan *plan, memra_error *err) {
    memset(plan, 0, sizeof *plan);
    const memra_mkmodel_preset *p = memra_mkmodel_preset_find(opts->preset);
    if (!p) return memra_errorf(err, MEMRA_ERR_INVALID, "mkmodel: unknown preset '%s'", opts->preset ? opts->preset : "");
    if ((unsigned)opts->mix >= MEMRA_MKMODEL_MIX_COUNT)
        return memra_errorf(err, MEMRA_ERR_INVALID, "mkmodel: unknown type id %d", (int)opts->mix);
    if (opts->n_vocab > ((int64_t)1 << 24))
        return memra_errorf(err, MEMRA_ERR_INVALID, "mkmodel: n_vocab %" PRId64 " is too large", opts->n_vocab);
    plan->p = *p;
    if (opts->n_vocab > 0) plan->p.n_vocab = opts->n_vocab;
    p = &plan->p;
    plan->mix = opts->mix;
    plan->arch = p->is_moe ? "qwen35moe" : "qwen35";
    plan->n_nextn = opts->no_mtp ? 0 : 1;
    plan->n_layer = p->n_trunk + plan->n_nextn;
    plan->file_type = mixes[opts->mix].file_type;

    plan_builder b = {plan, 0, MEMRA_OK, err};
    const int64_t H = p->n_embd, d_v = p->d_k;
    const int64_t key_dim = (int64_t)p->n_k * p->d_k, value_dim = (int64_t)p->n_v * d_v;
    const int64_t conv_dim = 2 * key_dim + value_dim;

    /* Converter order (see the fixtures' bf16 files): lm_head, embeddings,
     * each layer's tensors sorted by HF name, the final norm, then the MTP
     * block (mtp.fc, its layer, mtp.norm, pre_fc_norm_embedding/hidden). */
    if (!p->tied) add(&b, -1, "output.weight", BF16_, MAT, 2, H, p->n_vocab, 1);
    add(&b, -1, "token_embd.weight", BF16_, MAT, 2, H, p->n_vocab, 1);
    for (int l = 0; l < p->n_trunk; l++) {
        add(&b, l, "attn_norm.weight", F32_, NORM, 1, H, 1, 1);
        if ((l + 1) % 4 != 0) { /* Gated DeltaNet layer */
            add(&b, l, "ssm_a", F32_, MEMRA_MKMODEL_ROLE_SSM_A, 1, p->n_v, 1, 1);
            add(&b, l, "ssm_conv1d.weight", F32_, MEMRA_MKMODEL_ROLE_CONV, 2, 4, conv_dim, 1);
            add(&b, l, "ssm_dt.bias", F32_, MEMRA_MKMODEL_ROLE_DT_BIAS, 1, p->n_v, 1, 1);
            add(&b, l, "ssm_alpha.weight", BF16_, MAT, 2, H, p->n_v, 1);
            add(&b, l, "ssm_beta.weight", BF16_, MAT, 2, H, p->n_v, 1);
            add(&b, l, "attn_qkv.weight", BF16_, MAT, 2, H, conv_dim, 1);
            add(&b, l, "attn_gate.weight", BF16_, MAT, 2, H, value_dim, 1);
            add(&b, l, "ssm_norm.weight", F32_, NORM, 1, d_v, 1, 1);
            add(&b, l, "ssm_out.weight", BF16_, MAT, 2, value_dim, H, 1);
            add_ffn(&b, l);
            add(&b, l, "post_attention_norm.weight", F32_, NORM, 1, H, 1, 1);
        } else {
            add_ffn(&b, l);
            add(&b, l, "post_attention_norm.weight", F32_, NORM, 1, H, 1, 1);
            add_attn(&b, l);
        }
    }
    add(&b, -1, "output_norm.weight", F32_, NORM, 1, H, 1, 1);
    if (plan->n_nextn) {
        const int l = p->n_trunk;
        add(&b, l, "nextn.eh_proj.weight", BF16_, MAT, 2, 2 * H, H, 1);
        add(&b, l, "attn_norm.weight", F32_, NORM, 1, H, 1, 1);
        add_ffn(&b, l);
        add(&b, l, "post_attention_norm.weight", F32_, NORM, 1, H, 1, 1);
        add_attn(&b, l);
        add(&b, l, "nextn.shared_head_norm.weight", F32_, NORM, 1, H, 1, 1);
        add(&b, l, "nextn.enorm.weight", F32_, NORM, 1, H, 1, 1);
        add(&b, l, "nextn.hnorm.weight", F32_, NORM, 1, H, 1, 1);
    }
    if (b.st) {
        memra_mkmodel_plan_free(plan);
        return b.st;
    }

    if (plan->mix != MEMRA_MKMODEL_BF16) {
        for (int64_t i = 0; i < plan->n_tensors; i++) {
            memra_mkmodel_tensor *t = &plan->tensors[i];
            t->type = memra_mkmodel_pick_type(plan, t->name, t->n_dims, t->ne, t->type);
            while (t->n_dims > 1 && t->ne[t->n_dims - 1] == 1) t->n_dims--; /* ggml_n_dims */
        }
        qsort(plan->tensors, (size_t)plan->n_tensors, sizeof *plan->tensors, cmp_quantize_order);
    }
    for (int64_t i = 0; i < plan->n_tensors; i++) {
        memra_mkmodel_tensor *t = &plan->tensors[i];
        uint64_t n = (uint64_t)t->ne[0] * (uint64_t)t->ne[1] * (uint64_t)t->ne[2] * (uint64_t)t->ne[3];
        size_t row = memra_type_row_bytes(t->type, t->ne[0]);
        if (!row) {
            memra_status s = memra_errorf(err, MEMRA_ERR_INVALID, "mkmodel: tensor '%s': row of %" PRId64
                                          " elements does not fit type %s", t->name, t->ne[0], memra_type_name(t->type));
            memra_mkmodel_plan_free(plan);
            return s;
        }
        t->nbytes = (uint64_t)row * (uint64_t)(n / (uint64_t)t->ne[0]);
        plan->n_params += n;
        if (t->layer < p->n_trunk) plan->n_params_trunk += n;
        plan->data_bytes += t->nbytes;
    }
    return MEMRA_OK;
}

void memra_mkmodel_plan_free(memra_mkmodel_plan *plan) {
    if (!plan) return;
    free(plan->tensors);
    plan->tensors = NULL;
    plan->n_tensors = 0;
}

/* ---- metadata --------------------------------------------------------------- */

/* Copies one metadata entry of the vocabulary file as it is (same value type). */
static memra_status copy_kv(memra_gguf_writer *w, const char *key, const memra_gguf_kv *kv, memra_error *err) {
    switch (kv->type) {
    case MEMRA_GGUF_TYPE_UINT8: case MEMRA_GGUF_TYPE_BOOL: {
        uint8_t v = (uint8_t)kv->v.u64;
        return memra_gguf_writer_add_scalar(w, key, kv->type, &v);
    }
    case MEMRA_GGUF_TYPE_INT8: { int8_t v = (int8_t)kv->v.i64; return memra_gguf_writer_add_scalar(w, key, kv->type, &v); }
    case MEMRA_GGUF_TYPE_UINT16: { uint16_t v = (uint16_t)kv->v.u64; return memra_gguf_writer_add_scalar(w, key, kv->type, &v); }
    case MEMRA_GGUF_TYPE_INT16: { int16_t v = (int16_t)kv->v.i64; return memra_gguf_writer_add_scalar(w, key, kv->type, &v); }
    case MEMRA_GGUF_TYPE_UINT32: { uint32_t v = (uint32_t)kv->v.u64; return memra_gguf_writer_add_scalar(w, key, kv->type, &v); }
    case MEMRA_GGUF_TYPE_INT32: { int32_t v = (int32_t)kv->v.i64; return memra_gguf_writer_add_scalar(w, key, kv->type, &v); }
    case MEMRA_GGUF_TYPE_UINT64: return memra_gguf_writer_add_scalar(w, key, kv->type, &kv->v.u64);
    case MEMRA_GGUF_TYPE_INT64: return memra_gguf_writer_add_scalar(w, key, kv->type, &kv->v.i64);
    case MEMRA_GGUF_TYPE_FLOAT32: { float v = (float)kv->v.f64; return memra_gguf_writer_add_scalar(w, key, kv->type, &v); }
    case MEMRA_GGUF_TYPE_FLOAT64: return memra_gguf_writer_add_scalar(w, key, kv->type, &kv->v.f64);
    case MEMRA_GGUF_TYPE_STRING: return memra_gguf_writer_add_strn(w, key, kv->v.str.ptr, kv->v.str.len);
    case MEMRA_GGUF_TYPE_ARRAY: break;
    default: return memra_errorf(err, MEMRA_ERR_FORMAT, "vocabulary key '%s' has unknown type %d", key, (int)kv->type);
    }
    if (kv->v.arr.type != MEMRA_GGUF_TYPE_STRING)
        return memra_gguf_writer_add_array(w, key, kv->v.arr.type, kv->v.arr.data, kv->v.arr.n);
    memra_gguf_str *s = NULL;
    TRY(memra_gguf_arr_strings(kv, &s, err));
    const char **ptrs = malloc((size_t)kv->v.arr.n * sizeof *ptrs + 1);
    uint64_t *lens = malloc((size_t)kv->v.arr.n * sizeof *lens + 1);
    memra_status st;
    if (!ptrs || !lens) {
        st = memra_errorf(err, MEMRA_ERR_NOMEM, "out of memory copying '%s'", key);
    } else {
        for (uint64_t i = 0; i < kv->v.arr.n; i++) ptrs[i] = s[i].ptr, lens[i] = s[i].len;
        st = memra_gguf_writer_add_str_array(w, key, ptrs, lens, kv->v.arr.n);
    }
    free(ptrs);
    free(lens);
    free(s);
    return st;
}

/* tokenizer.ggml.tokens padded to n_vocab with "[PADn]" (the converter's
 * names for rows past the tokenizer's vocabulary), token_type with UNUSED (5). */
#define TOKEN_TYPE_UNUSED 5
static memra_status add_padded_tokens(memra_gguf_writer *w, const memra_gguf_kv *kv, int64_t n_vocab, memra_error *err) {
    memra_gguf_str *s = NULL;
    TRY(memra_gguf_arr_strings(kv, &s, err));
    const uint64_t n = kv->v.arr.n;
    const char **ptrs = malloc((size_t)n_vocab * sizeof *ptrs);
    uint64_t *lens = malloc((size_t)n_vocab * sizeof *lens);
    char *pads = malloc((size_t)(n_vocab - (int64_t)n) * 24 + 1);
    memra_status st = MEMRA_OK;
    if (!ptrs || !lens || !pads) {
        st = memra_errorf(err, MEMRA_ERR_NOMEM, "out of memory padding the vocabulary");
    } else {
        for (uint64_t i = 0; i < n; i++) ptrs[i] = s[i].ptr, lens[i] = s[i].len;
        for (int64_t i = (int64_t)n; i < n_vocab; i++) {
            char *q = pads + (size_t)(i - (int64_t)n) * 24;
            lens[i] = (uint64_t)snprintf(q, 24, "[PAD%" PRId64 "]", i);
            ptrs[i] = q;
        }
        st = memra_gguf_writer_add_str_array(w, "tokenizer.ggml.tokens", ptrs, lens, (uint64_t)n_vocab);
    }
    free(ptrs);
    free(lens);
    free(pads);
    free(s);
    return st;
}

static memra_status add_padded_types(memra_gguf_writer *w, const memra_gguf_kv *kv, int64_t n_vocab, memra_error *err) {
    int32_t *v = malloc((size_t)n_vocab * sizeof *v);
    if (!v) return memra_errorf(err, MEMRA_ERR_NOMEM, "out of memory padding the token types");
    for (uint64_t i = 0; i < kv->v.arr.n; i++) {
        int64_t x = 0;
        if (memra_gguf_arr_i64(kv, i, &x) != MEMRA_OK) {
            free(v);
            return memra_errorf(err, MEMRA_ERR_FORMAT, "vocabulary: tokenizer.ggml.token_type[%" PRIu64 "] is not an integer", i);
        }
        v[i] = (int32_t)x;
    }
    for (int64_t i = (int64_t)kv->v.arr.n; i < n_vocab; i++) v[i] = TOKEN_TYPE_UNUSED;
    memra_status st = memra_gguf_writer_add_array(w, "tokenizer.ggml.token_type", MEMRA_GGUF_TYPE_INT32, v, (uint64_t)n_vocab);
    free(v);
    return st;
}

static memra_status add_tokenizer(memra_gguf_writer *w, const memra_gguf *voc, const char *vpath, int64_t n_vocab,
                                  memra_error *err) {
    const memra_gguf_kv *tok = memra_gguf_find_kv(voc, "tokenizer.ggml.tokens");
    if (!tok || tok->type != MEMRA_GGUF_TYPE_ARRAY || tok->v.arr.type != MEMRA_GGUF_TYPE_STRING)
        return memra_errorf(err, MEMRA_ERR_FORMAT, "mkmodel: vocabulary file '%s' has no tokenizer.ggml.tokens string array", vpath);
    if ((int64_t)tok->v.arr.n > n_vocab)
        return memra_errorf(err, MEMRA_ERR_INVALID, "mkmodel: vocabulary file '%s' has %" PRIu64 " tokens, more than the model's %"
                            PRId64 " embedding rows", vpath, tok->v.arr.n, n_vocab);
    const memra_gguf_kv *tt = memra_gguf_find_kv(voc, "tokenizer.ggml.token_type");
    if (tt && (tt->type != MEMRA_GGUF_TYPE_ARRAY || tt->v.arr.n != tok->v.arr.n))
        return memra_errorf(err, MEMRA_ERR_FORMAT, "mkmodel: vocabulary file '%s': tokenizer.ggml.token_type does not have one "
                            "entry per token", vpath);
    for (int64_t i = 0; i < memra_gguf_n_kv(voc); i++) {
        const memra_gguf_kv *kv = memra_gguf_kv_at(voc, i);
        char key[256];
        if (kv->key.len >= sizeof key || kv->key.len < 10 || memcmp(kv->key.ptr, "tokenizer.", 10)) continue;
        memcpy(key, kv->key.ptr, kv->key.len);
        key[kv->key.len] = 0;
        memra_status st;
        if (kv == tok) st = add_padded_tokens(w, kv, n_vocab, err);
        else if (kv == tt) st = add_padded_types(w, kv, n_vocab, err);
        else st = copy_kv(w, key, kv, err);
        if (st) {
            if (memra_gguf_writer_status(w, NULL)) memra_gguf_writer_status(w, err); /* the writer's message */
            memra_error_prefix(err, "mkmodel: copying '%s' from '%s'", key, vpath);
            return st;
        }
    }
    return MEMRA_OK;
}

static void add_metadata(memra_gguf_writer *w, const memra_mkmodel_plan *pl) {
    const memra_mkmodel_preset *p = &pl->p;
    char key[128], name[128];
#define K(suffix) (snprintf(key, sizeof key, "%s.%s", pl->arch, suffix), key)
    const int quantized = pl->mix != MEMRA_MKMODEL_BF16;
    snprintf(name, sizeof name, "Qwen3.5 %s (memra mkmodel, random weights)", p->label);
    memra_gguf_writer_add_str(w, "general.architecture", pl->arch);
    memra_gguf_writer_add_str(w, "general.type", "model");
    memra_gguf_writer_add_str(w, "general.name", name);
    memra_gguf_writer_add_str(w, "general.size_label", p->label);
    /* the order below is the converter's (see the fixtures' bf16 files) */
    memra_gguf_writer_add_u32(w, K("block_count"), (uint32_t)pl->n_layer);
    memra_gguf_writer_add_u32(w, K("context_length"), p->n_ctx_train);
    memra_gguf_writer_add_u32(w, K("embedding_length"), (uint32_t)p->n_embd);
    if (!p->is_moe) memra_gguf_writer_add_u32(w, K("feed_forward_length"), (uint32_t)p->n_ff);
    memra_gguf_writer_add_u32(w, K("attention.head_count"), (uint32_t)p->n_head);
    memra_gguf_writer_add_u32(w, K("attention.head_count_kv"), (uint32_t)p->n_kv);
    memra_gguf_writer_add_array(w, K("rope.dimension_sections"), MEMRA_GGUF_TYPE_INT32, p->sections, 4);
    memra_gguf_writer_add_f32(w, K("rope.freq_base"), 10000000.0f);
    memra_gguf_writer_add_f32(w, K("attention.layer_norm_rms_epsilon"), 1e-6f);
    if (p->is_moe) {
        memra_gguf_writer_add_u32(w, K("expert_count"), (uint32_t)p->n_expert);
        memra_gguf_writer_add_u32(w, K("expert_used_count"), (uint32_t)p->n_expert_used);
    }
    memra_gguf_writer_add_u32(w, K("attention.key_length"), (uint32_t)p->head_dim);
    memra_gguf_writer_add_u32(w, K("attention.value_length"), (uint32_t)p->head_dim);
    if (!quantized) memra_gguf_writer_add_u32(w, "general.file_type", pl->file_type);
    if (p->is_moe) {
        memra_gguf_writer_add_u32(w, K("expert_feed_forward_length"), (uint32_t)p->n_ff_exp);
        memra_gguf_writer_add_u32(w, K("expert_shared_feed_forward_length"), (uint32_t)p->n_ff_shexp);
    }
    if (pl->n_nextn) memra_gguf_writer_add_u32(w, K("nextn_predict_layers"), (uint32_t)pl->n_nextn);
    memra_gguf_writer_add_u32(w, K("ssm.conv_kernel"), 4);
    memra_gguf_writer_add_u32(w, K("ssm.state_size"), (uint32_t)p->d_k);
    memra_gguf_writer_add_u32(w, K("ssm.group_count"), (uint32_t)p->n_k);
    memra_gguf_writer_add_u32(w, K("ssm.time_step_rank"), (uint32_t)p->n_v);
    memra_gguf_writer_add_u32(w, K("ssm.inner_size"), (uint32_t)(p->n_v * p->d_k));
    memra_gguf_writer_add_u32(w, K("full_attention_interval"), 4);
    memra_gguf_writer_add_u32(w, K("rope.dimension_count"), (uint32_t)p->n_rot);
    if (!quantized) memra_gguf_writer_add_u32(w, "general.quantization_version", 2);
#undef K
}

/* llama-quantize copies every key, then sets these two, which moves them last. */
static void add_quant_keys(memra_gguf_writer *w, const memra_mkmodel_plan *pl) {
    if (pl->mix == MEMRA_MKMODEL_BF16) return;
    memra_gguf_writer_add_u32(w, "general.quantization_version", 2);
    memra_gguf_writer_add_u32(w, "general.file_type", pl->file_type);
}

/* ---- random data -------------------------------------------------------- */

static inline uint64_t mix64(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* splitmix64: a counter-based stream; one per generation unit. */
typedef struct rng {
    uint64_t s;
} rng;
static inline uint64_t rng_next(rng *r) { return mix64(r->s += 0x9e3779b97f4a7c15ULL); }
static inline float rng_unit(rng *r) { return (float)(rng_next(r) >> 40) * (1.0f / 16777216.0f); } /* [0, 1) */

/* N(0, 1) by table: gauss_tab[k] is the normal quantile at (k + 0.5) / 65536,
 * so each 16 random bits give one exactly-distributed sample (|z| <= 4.3).
 * bf16_tab/f16_tab hold 0.02 * gauss_tab rounded, the bulk of BF16/F16 files:
 * four elements per 64-bit random number and no float math per element. */
#define GAUSS_N 65536
static float gauss_tab[GAUSS_N];
static uint16_t bf16_tab[GAUSS_N], f16_tab[GAUSS_N];
static pthread_once_t gauss_once = PTHREAD_ONCE_INIT;

static uint16_t bf16_rne(float f);

static void gauss_init(void) {
    for (int k = 0; k < GAUSS_N; k++) {
        double p = ((double)k + 0.5) / GAUSS_N, lo = -8.0, hi = 8.0;
        for (int it = 0; it < 60; it++) { /* bisection on the normal CDF */
            double mid = 0.5 * (lo + hi);
            if (0.5 * erfc(-mid / sqrt(2.0)) < p) lo = mid;
            else hi = mid;
        }
        gauss_tab[k] = (float)(0.5 * (lo + hi));
        bf16_tab[k] = bf16_rne(0.02f * gauss_tab[k]);
        f16_tab[k] = memra_fp32_to_fp16(0.02f * gauss_tab[k]);
    }
}

static inline float gauss(uint64_t r) { return gauss_tab[r & 0xffff]; }

static void rng_bytes(rng *r, uint8_t *dst, size_t n) {
    while (n >= 8) {
        uint64_t v = rng_next(r);
        memcpy(dst, &v, 8);
        dst += 8, n -= 8;
    }
    if (n) {
        uint64_t v = rng_next(r);
        memcpy(dst, &v, n);
    }
}

static inline float role_value(memra_mkmodel_role role, rng *r) {
    switch (role) {
    case MEMRA_MKMODEL_ROLE_NORM: return 1.0f + 0.02f * gauss(rng_next(r));
    case MEMRA_MKMODEL_ROLE_SSM_A: return -expf(2.0f * rng_unit(r) - 1.0f);
    case MEMRA_MKMODEL_ROLE_DT_BIAS: return rng_unit(r) - 0.5f;
    case MEMRA_MKMODEL_ROLE_CONV: return 0.1f * gauss(rng_next(r));
    default: return 0.02f * gauss(rng_next(r));
    }
}

static uint16_t bf16_rne(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16); /* finite inputs only */
}

/* n 16-bit values looked up by 16 random bits each. */
static void fill_tab16(uint16_t *d, const uint16_t *tab, rng *r, int64_t n) {
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) {
        uint64_t v = rng_next(r);
        d[i] = tab[v & 0xffff];
        d[i + 1] = tab[(v >> 16) & 0xffff];
        d[i + 2] = tab[(v >> 32) & 0xffff];
        d[i + 3] = tab[v >> 48];
    }
    for (uint64_t v = rng_next(r); i < n; i++, v >>= 16) d[i] = tab[v & 0xffff];
}

/* A scale around base, jittered by +-25% so blocks differ. */
static inline uint16_t fp16_scale(rng *r, float base) {
    return memra_fp32_to_fp16(base * (0.75f + 0.5f * rng_unit(r)));
}

/* Q4_K/Q5_K 6-bit scales and mins, packed as quant_blocks.h describes. */
static void pack_k_scales(uint8_t *dst, const int *sc, const int *mn) {
    for (int s = 0; s < 4; s++) {
        dst[s] = (uint8_t)((sc[s] & 63) | ((sc[s + 4] >> 4) << 6));
        dst[s + 4] = (uint8_t)((mn[s] & 63) | ((mn[s + 4] >> 4) << 6));
        dst[s + 8] = (uint8_t)((sc[s + 4] & 15) | ((mn[s + 4] & 15) << 4));
    }
}

/* K-quant block with zero-mean values: x = d*sc*q - dmin*mn with dmin = 8d
 * and mn = sc*qmid/8, so x ~ d*sc*(q - qmid). */
static void gen_k_block(rng *r, uint16_t *d, uint16_t *dmin, uint8_t *scales, int sc_lo, int sc_n, float base, float qmid) {
    *d = fp16_scale(r, base);
    float df = memra_fp16_to_fp32(*d);
    *dmin = memra_fp32_to_fp16(8.0f * df);
    float mf = memra_fp16_to_fp32(*dmin);
    int sc[8], mn[8];
    for (int s = 0; s < 8; s++) {
        sc[s] = sc_lo + (int)(rng_next(r) % (uint64_t)sc_n);
        int m = (int)lrintf((float)sc[s] * qmid * df / mf);
        mn[s] = m < 0 ? 0 : m > 63 ? 63 : m;
    }
    pack_k_scales(scales, sc, mn);
}

/* Fills one generation unit: a quant block, or up to 256 float elements.
 * Scales give a per-element std near 0.02 for every matrix type. */
static void gen_unit(uint32_t type, memra_mkmodel_role role, rng *r, uint8_t *dst, int64_t n_elems) {
    switch (type) {
    case MEMRA_TYPE_F32:
        for (int64_t i = 0; i < n_elems; i++) {
            float v = role_value(role, r);
            memcpy(dst + 4 * i, &v, 4);
        }
        return;
    case MEMRA_TYPE_F16:
        if (role == MEMRA_MKMODEL_ROLE_MATRIX) {
            fill_tab16((uint16_t *)dst, f16_tab, r, n_elems);
            return;
        }
        for (int64_t i = 0; i < n_elems; i++) {
            uint16_t h = memra_fp32_to_fp16(role_value(role, r));
            memcpy(dst + 2 * i, &h, 2);
        }
        return;
    case MEMRA_TYPE_BF16:
        if (role == MEMRA_MKMODEL_ROLE_MATRIX) { /* the bulk of a BF16 file: keep it tight */
            fill_tab16((uint16_t *)dst, bf16_tab, r, n_elems);
            return;
        }
        for (int64_t i = 0; i < n_elems; i++) {
            uint16_t h = bf16_rne(role_value(role, r));
            memcpy(dst + 2 * i, &h, 2);
        }
        return;
    case MEMRA_TYPE_Q8_0: { /* q int8 uniform: std 74 */
        memra_block_q8_0 *b = (memra_block_q8_0 *)dst;
        rng_bytes(r, (uint8_t *)b->qs, sizeof b->qs);
        b->d = fp16_scale(r, 2.7e-4f);
        return;
    }
    case MEMRA_TYPE_Q4_0: { /* q - 8: std 4.6 */
        memra_block_q4_0 *b = (memra_block_q4_0 *)dst;
        rng_bytes(r, b->qs, sizeof b->qs);
        b->d = fp16_scale(r, 4.3e-3f);
        return;
    }
    case MEMRA_TYPE_Q5_0: { /* q - 16: std 9.2 */
        memra_block_q5_0 *b = (memra_block_q5_0 *)dst;
        rng_bytes(r, b->qh, sizeof b->qh);
        rng_bytes(r, b->qs, sizeof b->qs);
        b->d = fp16_scale(r, 2.2e-3f);
        return;
    }
    case MEMRA_TYPE_Q5_1: { /* q*d + m with m = -15.5 d */
        memra_block_q5_1 *b = (memra_block_q5_1 *)dst;
        rng_bytes(r, b->qh, sizeof b->qh);
        rng_bytes(r, b->qs, sizeof b->qs);
        b->d = fp16_scale(r, 2.2e-3f);
        b->m = memra_fp32_to_fp16(-15.5f * memra_fp16_to_fp32(b->d));
        return;
    }
    case MEMRA_TYPE_Q4_K: { /* sc 32..63, q 0..15 */
        memra_block_q4_k *b = (memra_block_q4_k *)dst;
        rng_bytes(r, b->qs, sizeof b->qs);
        gen_k_block(r, &b->d, &b->dmin, b->scales, 32, 32, 9.2e-5f, 7.5f);
        return;
    }
    case MEMRA_TYPE_Q5_K: { /* sc 16..31, q 0..31 */
        memra_block_q5_k *b = (memra_block_q5_k *)dst;
        rng_bytes(r, b->qh, sizeof b->qh);
        rng_bytes(r, b->qs, sizeof b->qs);
        gen_k_block(r, &b->d, &b->dmin, b->scales, 16, 16, 9.2e-5f, 15.5f);
        return;
    }
    case MEMRA_TYPE_Q6_K: { /* sc 8..15, q - 32: std 18.5 */
        memra_block_q6_k *b = (memra_block_q6_k *)dst;
        rng_bytes(r, b->ql, sizeof b->ql);
        rng_bytes(r, b->qh, sizeof b->qh);
        for (int s = 0; s < 16; s++) b->scales[s] = (int8_t)(8 + (int)(rng_next(r) & 7));
        b->d = fp16_scale(r, 9.4e-5f);
        return;
    }
    case MEMRA_TYPE_IQ4_NL: { /* table values: std ~70 */
        memra_block_iq4_nl *b = (memra_block_iq4_nl *)dst;
        rng_bytes(r, b->qs, sizeof b->qs);
        b->d = fp16_scale(r, 2.9e-4f);
        return;
    }
    case MEMRA_TYPE_IQ4_XS: { /* sc - 32 in 1..8, table std ~70 */
        memra_block_iq4_xs *b = (memra_block_iq4_xs *)dst;
        rng_bytes(r, b->qs, sizeof b->qs);
        uint16_t h = 0;
        memset(b->scales_l, 0, sizeof b->scales_l);
        for (int s = 0; s < 8; s++) {
            int ls = 33 + (int)(rng_next(r) & 7);
            b->scales_l[s / 2] |= (uint8_t)((ls & 15) << (4 * (s & 1)));
            h |= (uint16_t)((ls >> 4) << (2 * s));
        }
        b->scales_h = h;
        b->d = fp16_scale(r, 7e-5f);
        return;
    }
    case MEMRA_TYPE_NVFP4: { /* UE4M3 scales 3..8 (0.0059..0.0156), doubled E2M1 std ~5.6 */
        memra_block_nvfp4 *b = (memra_block_nvfp4 *)dst;
        rng_bytes(r, b->qs, sizeof b->qs);
        for (int s = 0; s < 4; s++) b->d[s] = (uint8_t)(3 + rng_next(r) % 6);
        return;
    }
    default: return; /* not reached: the plan only produces the types above */
    }
}

#define FLOAT_UNIT 256 /* elements per generation unit of F32/F16/BF16 tensors */

typedef struct unit_shape {
    int64_t elems; /* per unit */
    uint64_t bytes; /* per full unit */
    int64_t n_units;
    int64_t n_elems;
    uint32_t esize; /* bytes per element of float types, 0 for blocks */
} unit_shape;

static unit_shape tensor_units(const memra_mkmodel_tensor *t) {
    unit_shape u;
    const memra_type_info *ti = memra_type_get(t->type);
    u.n_elems = t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3];
    if (ti->block_elems > 1) {
        u.elems = ti->block_elems;
        u.bytes = ti->block_bytes;
        u.esize = 0;
    } else {
        u.elems = FLOAT_UNIT;
        u.bytes = (uint64_t)FLOAT_UNIT * ti->block_bytes;
        u.esize = ti->block_bytes;
    }
    u.n_units = (u.n_elems + u.elems - 1) / u.elems;
    return u;
}

/* A run of units of one tensor, generated by one task into the buffer. */
typedef struct gen_job {
    int64_t tensor, u0, u1;
    size_t dst; /* byte offset in the buffer */
} gen_job;

typedef struct gen_ctx {
    const memra_mkmodel_plan *plan;
    uint64_t seed;
    uint8_t *buf;
    const gen_job *jobs;
} gen_ctx;

static void gen_jobs(void *vctx, int64_t begin, int64_t end) {
    const gen_ctx *c = vctx;
    for (int64_t j = begin; j < end; j++) {
        const gen_job *job = &c->jobs[j];
        const memra_mkmodel_tensor *t = &c->plan->tensors[job->tensor];
        const unit_shape us = tensor_units(t);
        const uint64_t tseed = mix64(c->seed ^ mix64(0x6d6b6d6f64656cULL + (uint64_t)job->tensor));
        uint8_t *dst = c->buf + job->dst;
        for (int64_t u = job->u0; u < job->u1; u++) {
            rng r = {mix64(tseed + (uint64_t)u * 0x9e3779b97f4a7c15ULL)};
            int64_t n = us.elems;
            if (us.esize && (u + 1) * us.elems > us.n_elems) n = us.n_elems - u * us.elems;
            gen_unit(t->type, t->role, &r, dst, n);
            dst += us.esize ? (uint64_t)n * us.esize : us.bytes;
        }
    }
}

/* ---- the writer thread --------------------------------------------------- */

#define BUF_BYTES ((size_t)64 << 20)
#define JOB_BYTES ((size_t)1 << 20)

typedef struct pipe_state {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    uint8_t *buf[2];
    size_t len[2];
    int full[2];
    int done;
    memra_status st; /* first write error */
    memra_error err;
    memra_gguf_writer *w;
    FILE *f;
} pipe_state;

static void *writer_main(void *arg) {
    pipe_state *ps = arg;
    for (int k = 0;; k ^= 1) {
        pthread_mutex_lock(&ps->mu);
        while (!ps->full[k] && !ps->done) pthread_cond_wait(&ps->cv, &ps->mu);
        if (!ps->full[k]) {
            pthread_mutex_unlock(&ps->mu);
            return NULL;
        }
        memra_status st = ps->st;
        pthread_mutex_unlock(&ps->mu);
        memra_error e;
        if (!st) st = memra_gguf_writer_write_data(ps->w, ps->f, ps->buf[k], ps->len[k], &e);
        pthread_mutex_lock(&ps->mu);
        if (st && !ps->st) {
            ps->st = st;
            ps->err = e;
        }
        ps->full[k] = 0;
        pthread_cond_broadcast(&ps->cv);
        pthread_mutex_unlock(&ps->mu);
    }
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Generates the whole data stream buffer by buffer and hands each to the writer thread. */
static memra_status stream_data(const memra_mkmodel_plan *pl, const memra_mkmodel_opts *opts, memra_gguf_writer *w,
                                FILE *f, memra_error *err) {
    memra_pool *pool = NULL;
    pthread_once(&gauss_once, gauss_init);
    pipe_state ps;
    memset(&ps, 0, sizeof ps);
    gen_job *jobs = malloc((BUF_BYTES / JOB_BYTES + (size_t)pl->n_tensors + 16) * sizeof *jobs);
    ps.buf[0] = malloc(BUF_BYTES);
    ps.buf[1] = malloc(BUF_BYTES);
    memra_status st = MEMRA_OK;
    if (!jobs || !ps.buf[0] || !ps.buf[1]) {
        st = memra_errorf(err, MEMRA_ERR_NOMEM, "mkmodel: cannot allocate 2 x %zu MiB of write buffers", BUF_BYTES >> 20);
        goto out;
    }
    if ((st = memra_pool_init(&pool, opts->n_threads)) != MEMRA_OK) {
        memra_errorf(err, st, "mkmodel: cannot start %d threads", opts->n_threads);
        goto out;
    }
    pthread_mutex_init(&ps.mu, NULL);
    pthread_cond_init(&ps.cv, NULL);
    ps.w = w;
    ps.f = f;
    pthread_t th;
    if (pthread_create(&th, NULL, writer_main, &ps) != 0) {
        st = memra_errorf(err, MEMRA_ERR_NOMEM, "mkmodel: cannot start the writer thread");
        goto out_sync;
    }

    const double t0 = now_s();
    double last = t0;
    uint64_t done = 0;
    int64_t ti = 0, ui = 0; /* next unit to generate */
    for (int k = 0; ti < pl->n_tensors; k ^= 1) {
        pthread_mutex_lock(&ps.mu);
        while (ps.full[k]) pthread_cond_wait(&ps.cv, &ps.mu);
        st = ps.st;
        pthread_mutex_unlock(&ps.mu);
        if (st) break;
        /* cut the next BUF_BYTES of the stream into jobs of about JOB_BYTES */
        size_t used = 0, n_jobs = 0;
        while (ti < pl->n_tensors) {
            const unit_shape us = tensor_units(&pl->tensors[ti]);
            if (ui >= us.n_units) {
                ti++, ui = 0;
                continue;
            }
            int64_t fit = (int64_t)((BUF_BYTES - used) / us.bytes);
            if (fit == 0) break;
            int64_t per_job = (int64_t)(JOB_BYTES / us.bytes);
            if (per_job < 1) per_job = 1;
            int64_t take = us.n_units - ui;
            if (take > fit) take = fit;
            if (take > per_job) take = per_job;
            jobs[n_jobs++] = (gen_job){ti, ui, ui + take, used};
            /* the last unit of a float tensor may be partial */
            uint64_t bytes = (uint64_t)take * us.bytes;
            if (us.esize && ui + take == us.n_units) bytes = (uint64_t)(us.n_elems - ui * us.elems) * us.esize;
            used += bytes;
            ui += take;
            if (n_jobs == BUF_BYTES / JOB_BYTES + 16) break;
        }
        if (!n_jobs) break;
        gen_ctx gc = {pl, opts->seed, ps.buf[k], jobs};
        memra_pool_for(pool, (int64_t)n_jobs, 1, gen_jobs, &gc);
        pthread_mutex_lock(&ps.mu);
        ps.len[k] = used;
        ps.full[k] = 1;
        pthread_cond_broadcast(&ps.cv);
        pthread_mutex_unlock(&ps.mu);
        done += used;
        double t = now_s();
        if (opts->progress && t - last >= 0.5) {
            last = t;
            fprintf(stderr, "\rmkmodel: %.2f / %.2f GB  %.0f MB/s   ", (double)done * 1e-9,
                    (double)pl->data_bytes * 1e-9, (double)done * 1e-6 / (t - t0));
            fflush(stderr);
        }
    }
    pthread_mutex_lock(&ps.mu);
    ps.done = 1;
    pthread_cond_broadcast(&ps.cv);
    pthread_mutex_unlock(&ps.mu);
    pthread_join(th, NULL);
    if (opts->progress) fprintf(stderr, "\n");
    if (!st && ps.st) st = ps.st;
    if (st && ps.st == st && err) *err = ps.err;
out_sync:
    pthread_mutex_destroy(&ps.mu);
    pthread_cond_destroy(&ps.cv);
out:
    memra_pool_free(pool);
    free(jobs);
    free(ps.buf[0]);
    free(ps.buf[1]);
    return st;
}

/* ---- writing ------------------------------------------------------------- */

memra_status memra_mkmodel_write(const memra_mkmodel_opts *opts, const char *path, memra_error *err) {
    if (!path || !*path) return memra_errorf(err, MEMRA_ERR_INVALID, "mkmodel: no output path");
    if (!opts->vocab_path || !*opts->vocab_path)
        return memra_errorf(err, MEMRA_ERR_INVALID, "mkmodel: no vocabulary file (a GGUF with tokenizer.* keys, e.g. "
                            "../shared/fixtures/qwen3-vocab.gguf)");
    memra_mkmodel_plan pl;
    TRY(memra_mkmodel_plan_init(opts, &pl, err));
    memra_gguf *voc = NULL;
    memra_gguf_writer *w = NULL;
    FILE *f = NULL;
    char tmp[4096];
    memra_status st = memra_gguf_open(opts->vocab_path, &voc, err);
    if (st) {
        memra_error_prefix(err, "mkmodel: cannot read the vocabulary file '%s'", opts->vocab_path);
        goto out;
    }
    if ((st = memra_gguf_writer_begin(3, 0, &w, err))) goto out;
    add_metadata(w, &pl);
    if ((st = add_tokenizer(w, voc, opts->vocab_path, pl.p.n_vocab, err))) goto out;
    add_quant_keys(w, &pl);
    for (int64_t i = 0; i < pl.n_tensors; i++) {
        const memra_mkmodel_tensor *t = &pl.tensors[i];
        memra_gguf_writer_add_tensor(w, t->name, t->type, t->n_dims, t->ne);
    }
    if ((st = memra_gguf_writer_status(w, err))) goto out;

    if ((size_t)snprintf(tmp, sizeof tmp, "%s.tmp", path) >= sizeof tmp) {
        st = memra_errorf(err, MEMRA_ERR_INVALID, "mkmodel: output path too long");
        goto out;
    }
    f = fopen(tmp, "wb");
    if (!f) {
        st = memra_errorf(err, MEMRA_ERR_IO, "mkmodel: cannot create '%s': %s", tmp, strerror(errno));
        goto out;
    }
    if ((st = memra_gguf_writer_write_header(w, f, err))) goto out_rm;
    if ((st = stream_data(&pl, opts, w, f, err))) goto out_rm;
    if ((st = memra_gguf_writer_finish(w, f, err))) goto out_rm;
    int rc = fclose(f);
    f = NULL;
    if (rc != 0) {
        st = memra_errorf(err, MEMRA_ERR_IO, "mkmodel: writing '%s' failed: %s", tmp, strerror(errno));
        goto out_rm;
    }
    if (rename(tmp, path) != 0) {
        st = memra_errorf(err, MEMRA_ERR_IO, "mkmodel: cannot rename '%s' to '%s': %s", tmp, path, strerror(errno));
        goto out_rm;
    }
    goto out;
out_rm:
    if (f) fclose(f);
    f = NULL;
    unlink(tmp);
out:
    if (f) fclose(f);
    memra_gguf_writer_free(w);
    memra_gguf_free(voc);
    memra_mkmodel_plan_free(&pl);
    return st;
}
