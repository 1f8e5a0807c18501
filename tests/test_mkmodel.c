/* mkmodel: the tensor plan of the real sizes (parameter counts from spec §10,
 * llama-quantize's Q4_K_M / IQ4_XS rules), files of the fixture shapes
 * compared tensor by tensor and key by key with the fixtures the real
 * converter and quantizer wrote, the data (finite, sane magnitudes), the
 * vocabulary padding, determinism across thread counts, error paths, and one
 * forward pass through the model loader. */
#include <math.h>
#include <stdint.h>
#include <unistd.h>

#include "backend/backend.h"
#include "gguf/gguf.h"
#include "gguf/quant.h"
#include "model/mkmodel.h"
#include "model/model.h"
#include "test.h"

static char tmpdir[256];

static const memra_mkmodel_tensor *plan_find(const memra_mkmodel_plan *pl, const char *name) {
    for (int64_t i = 0; i < pl->n_tensors; i++)
        if (!strcmp(pl->tensors[i].name, name)) return &pl->tensors[i];
    return NULL;
}

static uint32_t plan_type(const memra_mkmodel_plan *pl, const char *fmt, int layer) {
    char name[96];
    snprintf(name, sizeof name, fmt, layer);
    const memra_mkmodel_tensor *t = plan_find(pl, name);
    return t ? t->type : UINT32_MAX;
}

static int in_list(int x, const int *list, int n) {
    for (int i = 0; i < n; i++)
        if (list[i] == x) return 1;
    return 0;
}

/* ---- plans of the real sizes ------------------------------------------ */

static void test_plan_sizes(void) {
    /* trunk parameters (spec §10's arithmetic: weights only, no MTP), within 3% */
    static const struct {
        const char *preset;
        double params_b;
        int tied, moe, trunk;
    } sizes[] = {
        {"0.8b", 0.75, 1, 0, 24}, {"9b", 8.9, 0, 0, 32}, {"27b", 26.8, 0, 0, 64},
        {"35b-a3b", 34.0, 0, 1, 40}, {"122b-a10b", 122.0, 0, 1, 48},
    };
    for (size_t i = 0; i < MEMRA_ARRAY_LEN(sizes); i++) {
        memra_mkmodel_opts o = {.preset = sizes[i].preset, .mix = MEMRA_MKMODEL_BF16};
        memra_mkmodel_plan pl;
        memra_error err = {{0}};
        if (memra_mkmodel_plan_init(&o, &pl, &err) != MEMRA_OK) {
            CHECK(0, "plan %s: %s", sizes[i].preset, err.msg);
            continue;
        }
        double b = (double)pl.n_params_trunk * 1e-9;
        CHECK(fabs(b - sizes[i].params_b) < 0.03 * sizes[i].params_b, "%s: %.3fB trunk parameters, expected ~%.2fB",
              sizes[i].preset, b, sizes[i].params_b);
        CHECK(pl.n_layer == sizes[i].trunk + 1 && pl.n_nextn == 1, "%s: block_count %d", sizes[i].preset, pl.n_layer);
        CHECK((plan_find(&pl, "output.weight") == NULL) == sizes[i].tied, "%s: output.weight presence", sizes[i].preset);
        const memra_mkmodel_tensor *emb = plan_find(&pl, "token_embd.weight");
        CHECK(emb && emb->ne[0] == pl.p.n_embd && emb->ne[1] == 248320, "%s: token_embd shape", sizes[i].preset);
        /* every trunk layer: GDN for (i+1) % 4 != 0, attention otherwise; MoE or dense FFN */
        int bad = 0;
        for (int l = 0; l <= sizes[i].trunk; l++) {
            int attn = (l + 1) % 4 == 0 || l == sizes[i].trunk;
            bad += (plan_type(&pl, "blk.%d.attn_qkv.weight", l) != UINT32_MAX) == attn;
            bad += (plan_type(&pl, "blk.%d.attn_q.weight", l) != UINT32_MAX) != attn;
            bad += (plan_type(&pl, "blk.%d.ffn_gate_exps.weight", l) != UINT32_MAX) != sizes[i].moe;
            bad += (plan_type(&pl, "blk.%d.ffn_gate.weight", l) != UINT32_MAX) == sizes[i].moe;
            bad += plan_type(&pl, "blk.%d.ssm_a", l) != (attn ? UINT32_MAX : MEMRA_TYPE_F32);
        }
        CHECK(bad == 0, "%s: %d layer-structure mismatches", sizes[i].preset, bad);
        CHECK(plan_type(&pl, "blk.%d.nextn.eh_proj.weight", sizes[i].trunk) == MEMRA_TYPE_BF16, "%s: MTP eh_proj",
              sizes[i].preset);
        const memra_mkmodel_tensor *q = plan_find(&pl, "blk.3.attn_q.weight");
        CHECK(q && q->ne[1] == 2 * pl.p.n_head * 256, "%s: attn_q holds q and gate", sizes[i].preset);
        memra_mkmodel_plan_free(&pl);

        memra_mkmodel_opts o2 = {.preset = sizes[i].preset, .mix = MEMRA_MKMODEL_Q8_0, .no_mtp = 1};
        if (memra_mkmodel_plan_init(&o2, &pl, &err) == MEMRA_OK) {
            CHECK(pl.n_layer == sizes[i].trunk && pl.n_params == pl.n_params_trunk, "%s --no-mtp", sizes[i].preset);
            char name[64];
            snprintf(name, sizeof name, "blk.%d.attn_norm.weight", sizes[i].trunk);
            CHECK(!plan_find(&pl, name), "%s --no-mtp still has layer %d", sizes[i].preset, sizes[i].trunk);
            memra_mkmodel_plan_free(&pl);
        }
    }
}

/* Q4_K_M: use_more_bits(i, n) worked out by hand for n = 25 (0.8B with MTP):
 * n/8 = 3, 7n/8 = 21, and (i - 3) % 3 == 2. */
static void test_plan_q4_k_m(void) {
    static const int more_25[] = {0, 1, 2, 5, 8, 11, 14, 17, 20, 21, 22, 23, 24};
    memra_mkmodel_opts o = {.preset = "0.8b", .mix = MEMRA_MKMODEL_Q4_K_M};
    memra_mkmodel_plan pl;
    memra_error err = {{0}};
    if (memra_mkmodel_plan_init(&o, &pl, &err) != MEMRA_OK) {
        CHECK(0, "plan: %s", err.msg);
        return;
    }
    int bad = 0;
    for (int l = 0; l < 25; l++) {
        uint32_t want = in_list(l, more_25, 13) ? MEMRA_TYPE_Q6_K : MEMRA_TYPE_Q4_K;
        int attn = (l + 1) % 4 == 0 || l == 24;
        uint32_t v = plan_type(&pl, attn ? "blk.%d.attn_v.weight" : "blk.%d.attn_qkv.weight", l);
        if (v != want || plan_type(&pl, "blk.%d.ffn_down.weight", l) != want) bad++;
        if (plan_type(&pl, "blk.%d.ffn_up.weight", l) != MEMRA_TYPE_Q4_K) bad++;
        if (!attn && (plan_type(&pl, "blk.%d.ssm_alpha.weight", l) != MEMRA_TYPE_Q4_K ||
                      plan_type(&pl, "blk.%d.ssm_conv1d.weight", l) != MEMRA_TYPE_F32 ||
                      plan_type(&pl, "blk.%d.ssm_norm.weight", l) != MEMRA_TYPE_F32))
            bad++;
        if (attn && plan_type(&pl, "blk.%d.attn_k.weight", l) != MEMRA_TYPE_Q4_K) bad++;
    }
    CHECK(bad == 0, "0.8b Q4_K_M: %d layers differ from the use_more_bits rule", bad);
    /* tied: token_embd doubles as the head and gets the head's Q6_K */
    CHECK(plan_type(&pl, "token_embd.weight", 0) == MEMRA_TYPE_Q6_K, "0.8b tied token_embd should be Q6_K");
    CHECK(pl.file_type == 15, "Q4_K_M file_type %u", pl.file_type);
    /* llama-quantize's order: non-layer tensors by name, then by layer number */
    CHECK(!strcmp(pl.tensors[0].name, "output_norm.weight") && !strcmp(pl.tensors[2].name, "blk.0.attn_gate.weight"),
          "quantized order starts %s, %s", pl.tensors[0].name, pl.tensors[2].name);
    int ordered = 1;
    for (int64_t i = 1; i < pl.n_tensors; i++) ordered &= pl.tensors[i].layer >= pl.tensors[i - 1].layer;
    CHECK(ordered, "layers are not in numeric order");
    memra_mkmodel_plan_free(&pl);

    /* 35B-A3B: n = 41, n/8 = 5, 7n/8 = 35: layers 0-4, 35-40 and 7, 10, ..., 34;
     * both down_exps and down_shexp follow the layer */
    o.preset = "35b-a3b";
    if (memra_mkmodel_plan_init(&o, &pl, &err) != MEMRA_OK) {
        CHECK(0, "plan: %s", err.msg);
        return;
    }
    bad = 0;
    for (int l = 0; l < 41; l++) {
        int more = l < 5 || l >= 35 || (l - 5) % 3 == 2;
        uint32_t want = more ? MEMRA_TYPE_Q6_K : MEMRA_TYPE_Q4_K;
        if (plan_type(&pl, "blk.%d.ffn_down_exps.weight", l) != want) bad++;
        if (plan_type(&pl, "blk.%d.ffn_down_shexp.weight", l) != want) bad++;
        if (plan_type(&pl, "blk.%d.ffn_gate_exps.weight", l) != MEMRA_TYPE_Q4_K) bad++;
        if (plan_type(&pl, "blk.%d.ffn_gate_inp.weight", l) != MEMRA_TYPE_F32) bad++;
        if (plan_type(&pl, "blk.%d.ffn_gate_inp_shexp.weight", l) != MEMRA_TYPE_F32) bad++;
    }
    CHECK(bad == 0, "35b-a3b Q4_K_M: %d mismatches", bad);
    const memra_mkmodel_tensor *g = plan_find(&pl, "blk.0.ffn_gate_inp_shexp.weight");
    CHECK(g && g->n_dims == 1, "quantized ffn_gate_inp_shexp should be 1-D");
    CHECK(plan_type(&pl, "output.weight", 0) == MEMRA_TYPE_Q6_K && plan_type(&pl, "token_embd.weight", 0) == MEMRA_TYPE_Q4_K,
          "35b-a3b head/embedding types");
    const memra_mkmodel_tensor *e = plan_find(&pl, "blk.0.ffn_down_exps.weight");
    CHECK(e && e->n_dims == 3 && e->ne[0] == 512 && e->ne[1] == 2048 && e->ne[2] == 256, "ffn_down_exps shape");
    memra_mkmodel_plan_free(&pl);

    /* IQ4_XS: n_head/n_kv >= 4 puts attn_v/attn_qkv at Q5_K; ffn_down of layers < n/8 at Q5_K */
    o.preset = "9b";
    o.mix = MEMRA_MKMODEL_IQ4_XS;
    if (memra_mkmodel_plan_init(&o, &pl, &err) == MEMRA_OK) {
        bad = 0;
        for (int l = 0; l < 33; l++) {
            int attn = (l + 1) % 4 == 0 || l == 32;
            if (plan_type(&pl, attn ? "blk.%d.attn_v.weight" : "blk.%d.attn_qkv.weight", l) != MEMRA_TYPE_Q5_K) bad++;
            if (plan_type(&pl, "blk.%d.ffn_down.weight", l) != (l < 4 ? MEMRA_TYPE_Q5_K : MEMRA_TYPE_IQ4_XS)) bad++;
        }
        CHECK(bad == 0, "9b IQ4_XS: %d mismatches", bad);
        CHECK(plan_type(&pl, "output.weight", 0) == MEMRA_TYPE_Q6_K && plan_type(&pl, "token_embd.weight", 0) ==
              MEMRA_TYPE_IQ4_XS, "9b IQ4_XS head/embedding");
        memra_mkmodel_plan_free(&pl);
    }
}

/* Shapes whose rows do not fit the block fall back like llama-quantize. */
static void test_fallbacks(void) {
    memra_mkmodel_opts o = {.preset = "test-tiny-moe", .mix = MEMRA_MKMODEL_Q4_K_M};
    memra_mkmodel_plan pl;
    memra_error err = {{0}};
    if (memra_mkmodel_plan_init(&o, &pl, &err) != MEMRA_OK) {
        CHECK(0, "plan: %s", err.msg);
        return;
    }
    int64_t ne[2] = {128, 64};
    CHECK(memra_mkmodel_pick_type(&pl, "blk.0.ffn_up_exps.weight", 2, ne, MEMRA_TYPE_BF16) == MEMRA_TYPE_Q5_0,
          "Q4_K on 128-wide rows should fall back to Q5_0");
    /* n = 9: use_more_bits holds for layer 0 (< n/8 = 1), not for layer 2 */
    CHECK(memra_mkmodel_pick_type(&pl, "blk.0.ffn_down_exps.weight", 2, ne, MEMRA_TYPE_BF16) == MEMRA_TYPE_Q8_0,
          "Q6_K on 128-wide rows should fall back to Q8_0");
    CHECK(memra_mkmodel_pick_type(&pl, "blk.2.ffn_down_exps.weight", 2, ne, MEMRA_TYPE_BF16) == MEMRA_TYPE_Q5_0,
          "layer 2 of 9 stays at the Q4_K fallback");
    CHECK(memra_mkmodel_pick_type(&pl, "token_embd.weight", 2, ne, MEMRA_TYPE_BF16) == MEMRA_TYPE_Q8_0,
          "tied head with 128-wide rows should be Q8_0");
    int64_t odd[2] = {100, 8};
    CHECK(memra_mkmodel_pick_type(&pl, "blk.0.ffn_up_exps.weight", 2, odd, MEMRA_TYPE_BF16) == MEMRA_TYPE_F16,
          "a 100-wide row fits no block: F16");
    CHECK(memra_mkmodel_pick_type(&pl, "blk.0.attn_norm.weight", 1, odd, MEMRA_TYPE_F32) == MEMRA_TYPE_F32, "norms stay");
    memra_mkmodel_plan_free(&pl);
    o.mix = MEMRA_MKMODEL_IQ4_XS;
    if (memra_mkmodel_plan_init(&o, &pl, &err) == MEMRA_OK) {
        CHECK(memra_mkmodel_pick_type(&pl, "blk.0.ffn_up_exps.weight", 2, ne, MEMRA_TYPE_BF16) == MEMRA_TYPE_IQ4_NL,
              "IQ4_XS on 128-wide rows should fall back to IQ4_NL");
        memra_mkmodel_plan_free(&pl);
    }
}

/* ---- written files ----------------------------------------------------- */

static int write_model(const char *preset, memra_mkmodel_mix mix, const char *vocab, const char *out, uint64_t seed,
                       int threads, int64_t n_vocab) {
    memra_mkmodel_opts o = {.preset = preset, .mix = mix, .vocab_path = vocab, .seed = seed, .n_threads = threads,
                            .n_vocab = n_vocab};
    memra_error err = {{0}};
    memra_status s = memra_mkmodel_write(&o, out, &err);
    CHECK(s == MEMRA_OK, "write %s %s: %s", preset, memra_mkmodel_mix_name(mix), err.msg);
    return s == MEMRA_OK ? 0 : -1;
}

static int kv_skipped(const memra_gguf_kv *kv) {
    /* names and labels are ours; everything else must match the real tools */
    static const char *skip[] = {"general.name", "general.size_label", "general.finetune", "general.basename"};
    for (size_t i = 0; i < MEMRA_ARRAY_LEN(skip); i++)
        if (memra_gguf_str_eq(kv->key, skip[i])) return 1;
    return 0;
}

static int kv_equal(const memra_gguf_kv *a, const memra_gguf_kv *b) {
    if (a->type != b->type) return 0;
    switch (a->type) {
    case MEMRA_GGUF_TYPE_STRING:
        return a->v.str.len == b->v.str.len && !memcmp(a->v.str.ptr, b->v.str.ptr, a->v.str.len);
    case MEMRA_GGUF_TYPE_ARRAY: {
        if (a->v.arr.type != b->v.arr.type || a->v.arr.n != b->v.arr.n) return 0;
        if (a->v.arr.type == MEMRA_GGUF_TYPE_STRING) {
            memra_gguf_str *sa = NULL, *sb = NULL;
            int eq = memra_gguf_arr_strings(a, &sa, NULL) == MEMRA_OK && memra_gguf_arr_strings(b, &sb, NULL) == MEMRA_OK;
            for (uint64_t i = 0; eq && i < a->v.arr.n; i++)
                eq = sa[i].len == sb[i].len && !memcmp(sa[i].ptr, sb[i].ptr, sa[i].len);
            free(sa);
            free(sb);
            return eq;
        }
        for (uint64_t i = 0; i < a->v.arr.n; i++) {
            double x, y;
            if (memra_gguf_arr_f64(a, i, &x) || memra_gguf_arr_f64(b, i, &y) || x != y) return 0;
        }
        return 1;
    }
    case MEMRA_GGUF_TYPE_FLOAT32: case MEMRA_GGUF_TYPE_FLOAT64: return a->v.f64 == b->v.f64;
    default: return a->v.u64 == b->v.u64;
    }
}

/* Same keys (in order, same value types and values, names excepted) and the
 * same tensor directory (names, order, shapes, types) as a real file. */
static void compare_with_fixture(const char *mine, const char *ref) {
    memra_gguf *a = NULL, *b = NULL;
    memra_error err = {{0}};
    if (memra_gguf_open(mine, &a, &err) != MEMRA_OK) {
        CHECK(0, "open %s: %s", mine, err.msg);
        return;
    }
    if (memra_gguf_open(ref, &b, &err) != MEMRA_OK) {
        CHECK(0, "open %s: %s", ref, err.msg);
        memra_gguf_free(a);
        return;
    }
    CHECK(memra_gguf_version(a) == 3 && memra_gguf_alignment(a) == 32, "%s: version/alignment", mine);
    int64_t ia = 0, ib = 0, kv_bad = 0;
    while (ia < memra_gguf_n_kv(a) || ib < memra_gguf_n_kv(b)) {
        const memra_gguf_kv *x = ia < memra_gguf_n_kv(a) ? memra_gguf_kv_at(a, ia) : NULL;
        const memra_gguf_kv *y = ib < memra_gguf_n_kv(b) ? memra_gguf_kv_at(b, ib) : NULL;
        if (x && kv_skipped(x)) { ia++; continue; }
        if (y && kv_skipped(y)) { ib++; continue; }
        if (!x || !y || x->key.len != y->key.len || memcmp(x->key.ptr, y->key.ptr, x->key.len) || !kv_equal(x, y)) {
            if (kv_bad++ < 3)
                fprintf(stderr, "  %s: key %lld '%.*s' vs fixture '%.*s'\n", mine, (long long)ia, x ? (int)x->key.len : 0,
                        x ? x->key.ptr : "", y ? (int)y->key.len : 0, y ? y->key.ptr : "");
        }
        ia++, ib++;
    }
    CHECK(kv_bad == 0, "%s: %lld metadata entries differ from %s", mine, (long long)kv_bad, ref);
    CHECK(memra_gguf_n_tensors(a) == memra_gguf_n_tensors(b), "%s: %lld tensors, fixture %lld", mine,
          (long long)memra_gguf_n_tensors(a), (long long)memra_gguf_n_tensors(b));
    int64_t t_bad = 0;
    for (int64_t i = 0; i < memra_gguf_n_tensors(a) && i < memra_gguf_n_tensors(b); i++) {
        const memra_gguf_tensor *x = memra_gguf_tensor_at(a, i), *y = memra_gguf_tensor_at(b, i);
        int same = x->name.len == y->name.len && !memcmp(x->name.ptr, y->name.ptr, x->name.len) &&
                   x->type == y->type && x->n_dims == y->n_dims && !memcmp(x->ne, y->ne, sizeof x->ne) &&
                   x->nbytes == y->nbytes;
        if (!same && t_bad++ < 3)
            fprintf(stderr, "  %s: tensor %lld %.*s %s vs fixture %.*s %s\n", mine, (long long)i, (int)x->name.len,
                    x->name.ptr, memra_type_name(x->type), (int)y->name.len, y->name.ptr, memra_type_name(y->type));
    }
    CHECK(t_bad == 0, "%s: %lld tensors differ from %s", mine, (long long)t_bad, ref);
    memra_gguf_free(a);
    memra_gguf_free(b);
}

/* Every value finite and of the expected size for its role. */
static void check_data(const char *path) {
    memra_gguf *g = NULL;
    memra_error err = {{0}};
    if (memra_gguf_open(path, &g, &err) != MEMRA_OK) {
        CHECK(0, "open %s: %s", path, err.msg);
        return;
    }
    int bad = 0;
    for (int64_t i = 0; i < memra_gguf_n_tensors(g); i++) {
        const memra_gguf_tensor *t = memra_gguf_tensor_at(g, i);
        char name[96];
        snprintf(name, sizeof name, "%.*s", (int)t->name.len, t->name.ptr);
        const int64_t n0 = t->ne[0], rows = t->ne[1] * t->ne[2] * t->ne[3];
        const size_t rb = memra_type_row_bytes(t->type, n0);
        float *row = malloc((size_t)n0 * sizeof *row);
        double sum = 0, sum2 = 0, mn = INFINITY, mx = -INFINITY;
        int finite = 1;
        for (int64_t r = 0; r < rows && row; r++) {
            memra_dequant_row(t->type, (const uint8_t *)t->data + (size_t)r * rb, row, n0);
            for (int64_t k = 0; k < n0; k++) {
                finite &= isfinite(row[k]);
                sum += row[k], sum2 += (double)row[k] * row[k];
                if (row[k] < mn) mn = row[k];
                if (row[k] > mx) mx = row[k];
            }
        }
        free(row);
        double n = (double)(n0 * rows), mean = sum / n, sd = sqrt(fmax(sum2 / n - mean * mean, 0));
        int ok = finite;
        if (strstr(name, "norm")) ok &= fabs(mean - 1) < 0.05 && mn > 0.8 && mx < 1.2;
        else if (n0 == t->ne[0] && strlen(name) > 6 && !strcmp(name + strlen(name) - 6, ".ssm_a")) ok &= mx < 0 && mn > -3;
        else if (strstr(name, "ssm_dt")) ok &= mn >= -0.5 && mx <= 0.5;
        else if (strstr(name, "ssm_conv1d")) ok &= sd > 0.05 && sd < 0.2;
        else ok &= sd > 0.01 && sd < 0.05 && fabs(mean) < 0.01 && mx < 0.2 && mn > -0.2;
        if (!ok && bad++ < 5)
            fprintf(stderr, "  %s %s (%s): mean %g sd %g min %g max %g finite %d\n", path, name,
                    memra_type_name(t->type), mean, sd, mn, mx, finite);
    }
    CHECK(bad == 0, "%s: %d tensors with unexpected values", path, bad);
    memra_gguf_free(g);
}

/* Loads the file with the model loader and runs one prefill on the CPU backend. */
static void check_forward(const char *path) {
    memra_backend *be = NULL;
    memra_model *m = NULL;
    memra_state *st = NULL;
    memra_batch b;
    memset(&b, 0, sizeof b);
    memra_error err = {{0}};
    memra_status s = memra_backend_cpu_init(&be, 2, &err);
    if (!s) s = memra_model_load(path, be, &m, &err);
    if (!s) s = memra_state_init(m, 1, 64, 8, 1, &st, &err);
    if (!s) s = memra_batch_init(be, 8, 1, &b, &err);
    float *logits = NULL;
    if (!s) {
        const int32_t tok[5] = {1, 17, 300, 5, 999};
        memra_batch_clear(&b);
        s = memra_batch_add(&b, 0, tok, 5, 0);
        logits = malloc((size_t)m->cfg.n_vocab * sizeof *logits);
        memra_forward_opts fo = {.all_logits = 0, .logits = logits};
        if (!s) s = memra_forward(m, st, &b, &fo, &err);
    }
    CHECK(s == MEMRA_OK, "load + forward %s: %s", path, err.msg);
    if (!s) {
        int finite = 1;
        double mx = 0;
        for (int64_t i = 0; i < m->cfg.n_vocab; i++) {
            finite &= isfinite(logits[i]);
            if (fabs(logits[i]) > mx) mx = fabs(logits[i]);
        }
        CHECK(finite && mx > 0 && mx < 1e3, "%s: logits finite %d, max |logit| %g", path, finite, mx);
    }
    free(logits);
    if (be) memra_batch_free(be, &b);
    if (m) memra_state_free(m, st);
    memra_model_free(m);
    memra_backend_free(be);
}

static int files_equal(const char *a, const char *b) {
    FILE *f = fopen(a, "rb"), *g = fopen(b, "rb");
    int eq = f && g;
    while (eq) {
        int x = fgetc(f), y = fgetc(g);
        if (x != y) eq = 0;
        if (x == EOF || y == EOF) break;
    }
    if (f) fclose(f);
    if (g) fclose(g);
    return eq;
}

static void test_fixture_shapes(const char *fx) {
    static const struct {
        const char *preset, *fixture, *suffix;
        memra_mkmodel_mix mix;
    } cases[] = {
        {"test-small-dense", "qwen35-small-dense", "bf16", MEMRA_MKMODEL_BF16},
        {"test-small-dense", "qwen35-small-dense", "Q8_0", MEMRA_MKMODEL_Q8_0},
        {"test-small-dense", "qwen35-small-dense", "Q4_K_M", MEMRA_MKMODEL_Q4_K_M},
        {"test-small-dense", "qwen35-small-dense", "IQ4_XS", MEMRA_MKMODEL_IQ4_XS},
        {"test-small-dense", NULL, "nvfp4", MEMRA_MKMODEL_NVFP4},
        {"test-tiny-dense", "qwen35-tiny-dense", "bf16", MEMRA_MKMODEL_BF16},
        {"test-tiny-moe", "qwen35-tiny-moe", "bf16", MEMRA_MKMODEL_BF16},
        {"test-tiny-moe", "qwen35-tiny-moe", "Q8_0", MEMRA_MKMODEL_Q8_0},
        {"test-tiny-moe", NULL, "q4_k_m", MEMRA_MKMODEL_Q4_K_M},
        {"test-tiny-moe", NULL, "iq4_xs", MEMRA_MKMODEL_IQ4_XS},
    };
    for (size_t i = 0; i < MEMRA_ARRAY_LEN(cases); i++) {
        char out[512], ref[512], vocab[512];
        const char *base = cases[i].fixture ? cases[i].fixture :
                           strstr(cases[i].preset, "moe") ? "qwen35-tiny-moe" : "qwen35-small-dense";
        snprintf(vocab, sizeof vocab, "%s/%s.bf16.gguf", fx, base); /* the fixtures' own 1024-token vocabulary */
        snprintf(out, sizeof out, "%s/%s.%s.gguf", tmpdir, cases[i].preset, cases[i].suffix);
        if (write_model(cases[i].preset, cases[i].mix, vocab, out, 7, 2, 0)) continue;
        if (cases[i].fixture) {
            snprintf(ref, sizeof ref, "%s/%s.%s.gguf", fx, cases[i].fixture, cases[i].suffix);
            compare_with_fixture(out, ref);
        }
        check_data(out);
        check_forward(out);
        unlink(out);
    }
}

static void test_vocab_and_determinism(const char *fx) {
    char vocab[512], a[512], b[512], c[512];
    snprintf(vocab, sizeof vocab, "%s/qwen35-tiny-moe.bf16.gguf", fx);
    snprintf(a, sizeof a, "%s/pad.gguf", tmpdir);
    /* 1024 tokens padded to 1280 rows */
    if (write_model("test-tiny-moe", MEMRA_MKMODEL_Q8_0, vocab, a, 1, 1, 1280) == 0) {
        memra_gguf *g = NULL;
        memra_error err = {{0}};
        if (memra_gguf_open(a, &g, &err) == MEMRA_OK) {
            const memra_gguf_kv *tok = memra_gguf_find_kv(g, "tokenizer.ggml.tokens");
            const memra_gguf_kv *tt = memra_gguf_find_kv(g, "tokenizer.ggml.token_type");
            memra_gguf_str *s = NULL;
            CHECK(tok && tok->v.arr.n == 1280 && memra_gguf_arr_strings(tok, &s, &err) == MEMRA_OK, "padded tokens");
            if (s) {
                CHECK(memra_gguf_str_eq(s[1024], "[PAD1024]") && memra_gguf_str_eq(s[1279], "[PAD1279]"),
                      "pad names '%.*s'", (int)s[1024].len, s[1024].ptr);
                free(s);
            }
            int64_t t0 = 0, t1 = 0;
            CHECK(tt && tt->v.arr.n == 1280 && !memra_gguf_arr_i64(tt, 1279, &t1) && !memra_gguf_arr_i64(tt, 5, &t0) &&
                  t1 == 5 && t0 == 1, "pad token type %lld (want 5 = UNUSED), normal %lld", (long long)t1, (long long)t0);
            const memra_gguf_tensor *e = memra_gguf_find_tensor(g, "token_embd.weight");
            CHECK(e && e->ne[1] == 1280, "token_embd rows");
            memra_gguf_free(g);
        } else {
            CHECK(0, "open %s: %s", a, err.msg);
        }
    }
    /* the bytes do not depend on the thread count; the seed changes them */
    snprintf(b, sizeof b, "%s/pad_t3.gguf", tmpdir);
    snprintf(c, sizeof c, "%s/pad_seed.gguf", tmpdir);
    if (write_model("test-tiny-moe", MEMRA_MKMODEL_Q8_0, vocab, b, 1, 3, 1280) == 0)
        CHECK(files_equal(a, b), "1 and 3 threads gave different files");
    if (write_model("test-tiny-moe", MEMRA_MKMODEL_Q8_0, vocab, c, 2, 1, 1280) == 0)
        CHECK(!files_equal(a, c), "seeds 1 and 2 gave the same file");
    unlink(a);
    unlink(b);
    unlink(c);

    /* more tokens than rows, a missing vocabulary, an unknown preset: clear errors, no file left */
    memra_error err = {{0}};
    snprintf(a, sizeof a, "%s/bad.gguf", tmpdir);
    memra_mkmodel_opts o = {.preset = "test-tiny-moe", .mix = MEMRA_MKMODEL_BF16, .vocab_path = vocab, .n_vocab = 1000};
    CHECK(memra_mkmodel_write(&o, a, &err) == MEMRA_ERR_INVALID && strstr(err.msg, "1024 tokens"), "small n_vocab: %s",
          err.msg);
    o.n_vocab = 0;
    o.vocab_path = "/nonexistent/vocab.gguf";
    CHECK(memra_mkmodel_write(&o, a, &err) != MEMRA_OK && strstr(err.msg, "/nonexistent/vocab.gguf"),
          "missing vocab: %s", err.msg);
    o.vocab_path = NULL;
    CHECK(memra_mkmodel_write(&o, a, &err) == MEMRA_ERR_INVALID, "no vocab path");
    o.preset = "7b";
    o.vocab_path = vocab;
    CHECK(memra_mkmodel_write(&o, a, &err) == MEMRA_ERR_INVALID && strstr(err.msg, "7b"), "unknown preset: %s", err.msg);
    snprintf(b, sizeof b, "%s.tmp", a);
    CHECK(access(a, F_OK) != 0 && access(b, F_OK) != 0, "a failed write left a file behind");
}

/* The real vocabulary padded to the full 248,320 rows (small model, full vocab). */
static void test_real_vocab(const char *fx) {
    char vocab[512], out[512];
    snprintf(vocab, sizeof vocab, "%s/qwen3-vocab.gguf", fx);
    snprintf(out, sizeof out, "%s/realvocab.gguf", tmpdir);
    if (write_model("test-small-dense", MEMRA_MKMODEL_Q4_K_M, vocab, out, 3, 2, 248320)) return;
    memra_gguf *g = NULL, *v = NULL;
    memra_error err = {{0}};
    if (memra_gguf_open(out, &g, &err) == MEMRA_OK && memra_gguf_open(vocab, &v, &err) == MEMRA_OK) {
        const memra_gguf_kv *tok = memra_gguf_find_kv(g, "tokenizer.ggml.tokens");
        CHECK(tok && tok->v.arr.n == 248320, "padded to 248320");
        int same = 1;
        for (int64_t i = 0; i < memra_gguf_n_kv(v); i++) {
            const memra_gguf_kv *x = memra_gguf_kv_at(v, i);
            char key[128];
            snprintf(key, sizeof key, "%.*s", (int)x->key.len, x->key.ptr);
            if (strncmp(key, "tokenizer.", 10) || !strcmp(key, "tokenizer.ggml.tokens") ||
                !strcmp(key, "tokenizer.ggml.token_type"))
                continue;
            const memra_gguf_kv *y = memra_gguf_find_kv(g, key);
            if (!y || !kv_equal(x, y)) {
                same = 0;
                fprintf(stderr, "  tokenizer key %s not copied\n", key);
            }
        }
        CHECK(same, "tokenizer keys copied");
        const memra_gguf_tensor *e = memra_gguf_find_tensor(g, "token_embd.weight");
        CHECK(e && e->ne[1] == 248320 && e->type == MEMRA_TYPE_Q4_K, "token_embd 248320 rows Q4_K");
    } else {
        CHECK(0, "open: %s", err.msg);
    }
    memra_gguf_free(g);
    memra_gguf_free(v);
    unlink(out);
}

int main(void) {
    const char *t = getenv("TMPDIR");
    snprintf(tmpdir, sizeof tmpdir, "%s/memra_mkmodel_%d", t && *t ? t : "/tmp", (int)getpid());
    mkdir(tmpdir, 0700);
    test_plan_sizes();
    test_plan_q4_k_m();
    test_fallbacks();
    const char *fx = test_fixtures_dir();
    if (fx) {
        test_fixture_shapes(fx);
        test_vocab_and_determinism(fx);
        test_real_vocab(fx);
    } else {
        fprintf(stderr, "test_mkmodel: no fixtures, file tests skipped\n");
    }
    rmdir(tmpdir);
    return test_finish("test_mkmodel");
}
