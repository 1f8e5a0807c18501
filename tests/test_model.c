/* The forward pass against references computed by transformers (fixtures in
 * ../shared/fixtures, and the project's own tiny models in tests/data):
 *   - prefill logits of every position, within 1e-3 x max|ref|;
 *   - greedy continuations through the decode path (a step whose reference
 *     top-2 margin is under the tolerance may pick the other token: counted);
 *   - per-layer hidden states;
 *   - state carry: a prompt prefilled in pieces, then decoded, matches one prefill;
 *   - batch invariance: a sequence's logits are bit-identical alone, batched
 *     with others, and with another thread count;
 *   - quantized files: logits equal memra's own run of the same weights
 *     dequantized to F32, within 1e-3 x max. */
#include <dirent.h>
#include <jansson.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend/backend.h"
#include "gguf/gguf_write.h"
#include "gguf/quant.h"
#include "model/model.h"
#include "test.h"

#define TOL 1e-3
#define N_CTX 256

/* Under a sanitizer (~10x slower) a reduced set of cases runs: the plain
 * build checks the numbers in full, the sanitized one the memory safety of
 * the same code paths (prefill across the GDN chunk size, decode, splits,
 * batching, every file type). */
#if defined(__SANITIZE_ADDRESS__)
#define SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SANITIZED 1
#endif
#endif
#ifndef SANITIZED
#define SANITIZED 0
#endif

typedef struct ref_case {
    int32_t *prompt;
    int32_t n_prompt;
    const float *prefill; /* [n_prompt][V] */
    int32_t *greedy;
    int32_t n_greedy;
    const float *greedy_logits; /* [n_greedy][V] */
    const float *hidden;        /* [hid_l][n_prompt][hid_h] or NULL */
    int64_t hid_l, hid_h;
} ref_case;

typedef struct ref {
    char dir[512], name[128];
    json_t *root;
    float *data;
    size_t n_data;
    int64_t V;
    ref_case cases[16];
    int n_cases;
} ref;

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static float *read_f32(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long sz = ftell(f);
    fseek(f, 0, SEEK_SET);
    float *p = sz > 0 ? malloc((size_t)sz) : NULL;
    if (p && fread(p, 1, (size_t)sz, f) != (size_t)sz) {
        free(p);
        p = NULL;
    }
    fclose(f);
    *n = p ? (size_t)sz / sizeof(float) : 0;
    return p;
}

static int32_t *int_array(json_t *a, int32_t *n) {
    *n = (int32_t)json_array_size(a);
    int32_t *v = malloc((size_t)(*n ? *n : 1) * sizeof *v);
    for (int32_t i = 0; i < *n; i++) v[i] = (int32_t)json_integer_value(json_array_get(a, (size_t)i));
    return v;
}

/* A view [offset, offset + prod(shape)) into the data, or NULL when out of range. */
static const float *data_view(ref *r, json_t *spec, int64_t *shape, int n_shape) {
    if (!spec) return NULL;
    json_t *sh = json_object_get(spec, "shape");
    int64_t off = json_integer_value(json_object_get(spec, "offset")), n = 1;
    if ((int)json_array_size(sh) != n_shape) return NULL;
    for (int i = 0; i < n_shape; i++) {
        shape[i] = json_integer_value(json_array_get(sh, (size_t)i));
        n *= shape[i];
    }
    if (off < 0 || n < 0 || (size_t)(off + n) > r->n_data) return NULL;
    return r->data + off;
}

static int ref_load(ref *r, const char *dir, const char *json_name) {
    memset(r, 0, sizeof *r);
    snprintf(r->dir, sizeof r->dir, "%s", dir);
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, json_name);
    json_error_t je;
    r->root = json_load_file(path, 0, &je);
    CHECK(r->root != NULL, "%s: %s", path, je.text);
    if (!r->root) return -1;
    const char *fx = json_string_value(json_object_get(r->root, "fixture"));
    snprintf(r->name, sizeof r->name, "%s", fx ? fx : json_name);
    const char *data = json_string_value(json_object_get(r->root, "data"));
    snprintf(path, sizeof path, "%s/%s", dir, data ? data : "");
    r->data = read_f32(path, &r->n_data);
    CHECK(r->data != NULL, "%s: cannot read the reference data", path);
    if (!r->data) return -1;
    r->V = json_integer_value(json_object_get(json_object_get(r->root, "hf_config"), "vocab_size"));
    json_t *cases = json_object_get(r->root, "cases");
    for (size_t i = 0; i < json_array_size(cases) && r->n_cases < 16; i++) {
        json_t *c = json_array_get(cases, i);
        ref_case *rc = &r->cases[r->n_cases];
        int64_t sh[3];
        rc->prompt = int_array(json_object_get(c, "prompt"), &rc->n_prompt);
        rc->greedy = int_array(json_object_get(c, "greedy"), &rc->n_greedy);
        rc->prefill = data_view(r, json_object_get(c, "prefill_logits"), sh, 2);
        int ok = rc->prefill && sh[0] == rc->n_prompt && sh[1] == r->V;
        rc->greedy_logits = data_view(r, json_object_get(c, "greedy_logits"), sh, 2);
        ok = ok && rc->greedy_logits && sh[0] == rc->n_greedy && sh[1] == r->V;
        rc->hidden = data_view(r, json_object_get(c, "hidden_states"), sh, 3);
        if (rc->hidden) {
            rc->hid_l = sh[0];
            rc->hid_h = sh[2];
            if (sh[1] != rc->n_prompt) rc->hidden = NULL;
        }
        CHECK(ok && rc->n_prompt > 0, "%s: case %zu: malformed reference", r->name, i);
        if (ok && rc->n_prompt > 0) r->n_cases++;
    }
    return 0;
}

static void ref_free(ref *r) {
    for (int i = 0; i < r->n_cases; i++) {
        free(r->cases[i].prompt);
        free(r->cases[i].greedy);
    }
    json_decref(r->root);
    free(r->data);
}

static double max_abs(const float *a, int64_t n) {
    double m = 0;
    for (int64_t i = 0; i < n; i++) m = fmax(m, fabs(a[i]));
    return m;
}

/* max|a - ref| / max|ref| */
static double diff_ratio(const float *a, const float *r, int64_t n) {
    double d = 0;
    for (int64_t i = 0; i < n; i++) {
        double e = fabs((double)a[i] - r[i]);
        if (!(e <= d)) d = e; /* NaN propagates */
    }
    double m = max_abs(r, n);
    return m > 0 ? d / m : d;
}

static int32_t argmax_row(const float *x, int64_t n) {
    int64_t b = 0;
    for (int64_t i = 1; i < n; i++)
        if (x[i] > x[b]) b = i;
    return (int32_t)b;
}

/* ------------------------------------------------------------------ runner */

typedef struct runner {
    memra_backend *be;
    memra_model *m;
    memra_state *st;
    memra_batch b;
    int64_t V;
} runner;

static int runner_open(runner *r, const char *path, int n_threads, int dequant) {
    memset(r, 0, sizeof *r);
    memra_error err = {{0}};
    memra_status s = memra_backend_cpu_init(&r->be, n_threads, &err);
    if (s == MEMRA_OK) s = memra_model_load(path, r->be, &r->m, &err);
    if (s == MEMRA_OK && dequant) s = memra_model_dequantize_f32(r->m, &err);
    if (s == MEMRA_OK) s = memra_state_init(r->m, 2, N_CTX, 128, 2, &r->st, &err);
    if (s == MEMRA_OK) s = memra_batch_init(r->be, 128, 2, &r->b, &err);
    CHECK(s == MEMRA_OK, "%s: %s", path, err.msg);
    if (s == MEMRA_OK) r->V = r->m->cfg.n_vocab;
    return s == MEMRA_OK ? 0 : -1;
}

static void runner_close(runner *r) {
    memra_batch_free(r->be, &r->b);
    if (r->m) memra_state_free(r->m, r->st);
    memra_model_free(r->m);
    memra_backend_free(r->be);
}

/* One sequence: n tokens at pos0 on slot; logits of every token (all) or the last. */
static int run1(runner *r, int32_t slot, const int32_t *tok, int32_t n, int32_t pos0, int all, float *out,
                float *hidden) {
    memra_error err = {{0}};
    memra_batch_clear(&r->b);
    memra_status s = memra_batch_add(&r->b, slot, tok, n, pos0);
    memra_forward_opts o = {.all_logits = all, .logits = out, .hidden = hidden};
    if (s == MEMRA_OK) s = memra_forward(r->m, r->st, &r->b, &o, &err);
    CHECK(s == MEMRA_OK, "forward (slot %d, %d tokens at %d): %s", slot, n, pos0, err.msg);
    return s == MEMRA_OK ? 0 : -1;
}

/* ------------------------------------------------------------- the checks */

static void check_prefill(runner *r, const ref *R, const char *file) {
    double worst = 0;
    for (int ci = 0; ci < R->n_cases; ci++) {
        const ref_case *c = &R->cases[ci];
        if (SANITIZED && c->n_prompt > 17) continue;
        float *out = malloc((size_t)c->n_prompt * (size_t)r->V * sizeof(float));
        if (run1(r, 0, c->prompt, c->n_prompt, 0, 1, out, NULL) == 0) {
            double q = diff_ratio(out, c->prefill, (int64_t)c->n_prompt * r->V);
            CHECK(q <= TOL, "%s: case %d (%d tokens): prefill max|diff|/max|ref| = %.3g", file, ci, c->n_prompt, q);
            if (!(q <= worst)) worst = q;
        }
        free(out);
    }
    printf("  %-34s prefill worst ratio %.2e over %d cases\n", file, worst, R->n_cases);
}

/* Decodes the reference's greedy tokens one at a time after the prompt
 * (prefilled in pieces of `split` tokens, 0 = at once), comparing each step's
 * logits and argmax. Returns the number of near-tie argmax differences. */
static int check_greedy(runner *r, const ref_case *c, const char *what, int32_t split, int n_steps, double *worst) {
    int64_t V = r->V;
    float *cur = malloc((size_t)V * sizeof(float));
    int near = 0;
    int32_t p0 = 0;
    if (split <= 0) split = c->n_prompt;
    while (p0 < c->n_prompt) {
        int32_t n = c->n_prompt - p0 < split ? c->n_prompt - p0 : split;
        if (run1(r, 0, c->prompt + p0, n, p0, 0, cur, NULL)) goto out;
        p0 += n;
    }
    if (n_steps > c->n_greedy) n_steps = c->n_greedy;
    for (int i = 0; i < n_steps; i++) {
        const float *ref_row = c->greedy_logits + (size_t)i * V;
        double q = diff_ratio(cur, ref_row, V);
        CHECK(q <= TOL, "%s: decode step %d: max|diff|/max|ref| = %.3g", what, i, q);
        if (!(q <= *worst)) *worst = q;
        int32_t mine = argmax_row(cur, V);
        if (mine != c->greedy[i]) {
            /* allowed only when the reference's top two are within tolerance */
            float top = ref_row[c->greedy[i]], second = ref_row[mine];
            double margin = (double)top - second, tol = TOL * max_abs(ref_row, V);
            CHECK(margin <= tol, "%s: step %d: greedy %d, reference %d (margin %.3g > %.3g)", what, i, mine,
                  c->greedy[i], margin, tol);
            near++;
        }
        if (i + 1 < n_steps && run1(r, 0, &c->greedy[i], 1, c->n_prompt + i, 0, cur, NULL)) break;
    }
out:
    free(cur);
    return near;
}

static void check_decode(runner *r, const ref *R, const char *file) {
    double worst = 0;
    int near = 0, steps = 0;
    char what[256];
    for (int ci = 0; ci < R->n_cases; ci++) {
        int n = R->cases[ci].n_greedy;
        if (SANITIZED && R->cases[ci].n_prompt > 5) continue;
        if (SANITIZED && n > 8) n = 8;
        snprintf(what, sizeof what, "%s case %d", file, ci);
        near += check_greedy(r, &R->cases[ci], what, 0, n, &worst);
        steps += n;
    }
    printf("  %-34s decode worst ratio %.2e over %d steps, %d near-tie argmax differences\n", file, worst, steps,
           near);
}

/* Hidden states: [L+1][T][H] = embedding, then each layer's output; the last
 * entry may have the final norm applied (transformers does this for some
 * models): report which. */
static void check_hidden(runner *r, const ref *R, const char *file) {
    const memra_model_config *cfg = &r->m->cfg;
    for (int ci = 0; ci < R->n_cases; ci++) {
        const ref_case *c = &R->cases[ci];
        if (!c->hidden) continue;
        int64_t T = c->n_prompt, H = cfg->n_embd, L = cfg->n_trunk;
        CHECK(c->hid_l == L + 1 && c->hid_h == H, "%s: hidden_states shape [%lld, ., %lld], model has %lld layers, "
              "H=%lld", file, (long long)c->hid_l, (long long)c->hid_h, (long long)L, (long long)H);
        if (c->hid_l != L + 1 || c->hid_h != H) continue;
        float *hid = malloc((size_t)((L + 1) * T * H) * sizeof(float));
        if (run1(r, 0, c->prompt, (int32_t)T, 0, 0, NULL, hid) == 0) {
            double worst = 0;
            for (int64_t l = 0; l < L; l++) {
                double q = diff_ratio(hid + l * T * H, c->hidden + l * T * H, T * H);
                CHECK(q <= TOL, "%s: hidden state %lld: ratio %.3g", file, (long long)l, q);
                if (!(q <= worst)) worst = q;
            }
            /* the last entry: compare against our raw output and our final-normed output */
            const float *last = hid + L * T * H, *rl = c->hidden + L * T * H;
            const float *w = r->m->output_norm->data;
            float *normed = malloc((size_t)(T * H) * sizeof(float));
            for (int64_t t = 0; t < T; t++) {
                double ss = 0;
                for (int64_t i = 0; i < H; i++) ss += (double)last[t * H + i] * last[t * H + i];
                double inv = 1.0 / sqrt(ss / H + cfg->rms_eps);
                for (int64_t i = 0; i < H; i++) normed[t * H + i] = (float)(last[t * H + i] * inv * w[i]);
            }
            double q_raw = diff_ratio(last, rl, T * H), q_norm = diff_ratio(normed, rl, T * H);
            CHECK(fmin(q_raw, q_norm) <= TOL, "%s: last hidden state matches neither raw (%.3g) nor normed (%.3g)",
                  file, q_raw, q_norm);
            printf("  %-34s hidden states: layers 0..%lld worst ratio %.2e; last entry %s (ratio %.2e)\n", file,
                   (long long)L - 1, worst, q_norm < q_raw ? "HAS the final norm applied" : "is the raw layer output",
                   fmin(q_raw, q_norm));
            free(normed);
        }
        free(hid);
    }
}

/* Prompts prefilled in pieces give the one-prefill logits at every position,
 * then a few decode steps follow. Each split (its pieces, then the rest of
 * the prompt) runs on the shortest prompt longer than its pieces, so the
 * boundaries fall at 1, 5, 63, 64 (the GDN chunk size), ... */
static void check_state_carry(runner *r, const ref *R, const char *file) {
    static const int32_t splits[][4] = {{1}, {5}, {64}, {63}, {16, 1}, {17, 17, 17}, {37}};
    double worst = 0;
    int runs = 0;
    int64_t V = r->V;
    for (size_t si = 0; si < (SANITIZED ? 2 : MEMRA_ARRAY_LEN(splits)); si++) {
        int32_t sum = 0, k = 0;
        while (k < 4 && splits[si][k]) sum += splits[si][k++];
        const ref_case *c = NULL;
        for (int ci = 0; ci < R->n_cases; ci++)
            if (R->cases[ci].n_prompt > sum && (!c || R->cases[ci].n_prompt < c->n_prompt)) c = &R->cases[ci];
        if (!c) continue;
        float *out = malloc((size_t)c->n_prompt * (size_t)V * sizeof(float));
        int32_t p0 = 0, ok = 1;
        for (k = 0; ok && p0 < c->n_prompt; k++) {
            int32_t n = k < 4 && splits[si][k] ? splits[si][k] : c->n_prompt - p0;
            ok = run1(r, 0, c->prompt + p0, n, p0, 1, out + (size_t)p0 * V, NULL) == 0;
            p0 += n;
        }
        if (ok) {
            double q = diff_ratio(out, c->prefill, (int64_t)c->n_prompt * V);
            CHECK(q <= TOL, "%s: %d-token prompt, split %zu: ratio %.3g", file, c->n_prompt, si, q);
            if (!(q <= worst)) worst = q;
            runs++;
        }
        free(out);
    }
    /* decode after a prefill in pieces (the recurrent state crossed batch boundaries) */
    for (int ci = 0; ci < R->n_cases; ci++) {
        const ref_case *c = &R->cases[ci];
        if (c->n_prompt < 17 || (SANITIZED && c->n_prompt > 17)) continue;
        char what[256];
        snprintf(what, sizeof what, "%s case %d split 5+..", file, ci);
        check_greedy(r, c, what, 5, 4, &worst);
        runs++;
    }
    printf("  %-34s state carry: %d split prefills (+ decode), worst ratio %.2e\n", file, runs, worst);
}

/* Bit-exact batch invariance: sequences alone vs together in one batch
 * (prefill + prefill, then decode + decode, then decode + prefill), and
 * against a backend with another thread count. */
static void check_batch_invariance(runner *r, const ref *R, const char *path, const char *file) {
    if (R->n_cases < 3) return;
    const ref_case *A = &R->cases[2], *B = &R->cases[1], *C = &R->cases[0];
    int64_t V = r->V;
    int32_t nA = A->n_prompt, nB = B->n_prompt, nC = C->n_prompt;
    if (nA + nB > r->b.max_tokens || nA + nC + 1 > r->b.max_tokens) return;
    float *alone = malloc((size_t)(nA + nB + 2) * (size_t)V * sizeof(float));
    float *both = malloc((size_t)(nA + nB + 2) * (size_t)V * sizeof(float));
    memra_error err = {{0}};
    int32_t dA = A->greedy[0], dB = B->greedy[0];
    /* alone: A in slot 0, then B in slot 1, then one decode step each */
    int ok = run1(r, 0, A->prompt, nA, 0, 1, alone, NULL) == 0 &&
             run1(r, 1, B->prompt, nB, 0, 1, alone + (size_t)nA * V, NULL) == 0 &&
             run1(r, 0, &dA, 1, nA, 0, alone + (size_t)(nA + nB) * V, NULL) == 0 &&
             run1(r, 1, &dB, 1, nB, 0, alone + (size_t)(nA + nB + 1) * V, NULL) == 0;
    /* together: both prompts in one batch, then both decode steps in one batch */
    memra_forward_opts all = {.all_logits = 1, .logits = both};
    memra_batch_clear(&r->b);
    memra_batch_add(&r->b, 0, A->prompt, nA, 0);
    memra_batch_add(&r->b, 1, B->prompt, nB, 0);
    ok = ok && memra_forward(r->m, r->st, &r->b, &all, &err) == MEMRA_OK;
    memra_forward_opts last = {.all_logits = 0, .logits = both + (size_t)(nA + nB) * V};
    memra_batch_clear(&r->b);
    memra_batch_add(&r->b, 0, &dA, 1, nA);
    memra_batch_add(&r->b, 1, &dB, 1, nB);
    ok = ok && memra_forward(r->m, r->st, &r->b, &last, &err) == MEMRA_OK;
    CHECK(ok, "%s: batch invariance run failed: %s", file, err.msg);
    if (ok) {
        CHECK(!memcmp(alone, both, (size_t)nA * V * sizeof(float)), "%s: prefill of A differs when batched with B",
              file);
        CHECK(!memcmp(alone + (size_t)nA * V, both + (size_t)nA * V, (size_t)nB * V * sizeof(float)),
              "%s: prefill of B differs when batched with A", file);
        CHECK(!memcmp(alone + (size_t)(nA + nB) * V, both + (size_t)(nA + nB) * V, 2 * (size_t)V * sizeof(float)),
              "%s: decode steps differ when batched", file);
    }
    /* a decode of A (slot 0) next to a fresh prefill of C (slot 1) */
    int32_t dA2 = A->greedy[1];
    float *mixed = malloc((size_t)(1 + nC) * (size_t)V * sizeof(float));
    float *solo = malloc((size_t)(1 + nC) * (size_t)V * sizeof(float));
    memra_batch_clear(&r->b);
    memra_batch_add(&r->b, 0, &dA2, 1, nA + 1);
    memra_batch_add(&r->b, 1, C->prompt, nC, 0);
    all.logits = mixed;
    ok = memra_forward(r->m, r->st, &r->b, &all, &err) == MEMRA_OK;
    /* the same alone, replaying A's history on slot 0 */
    ok = ok && run1(r, 0, A->prompt, nA, 0, 0, solo, NULL) == 0 && run1(r, 0, &dA, 1, nA, 0, solo, NULL) == 0 &&
         run1(r, 0, &dA2, 1, nA + 1, 0, solo, NULL) == 0 && run1(r, 1, C->prompt, nC, 0, 1, solo + V, NULL) == 0;
    CHECK(ok, "%s: mixed batch run failed: %s", file, err.msg);
    if (ok)
        CHECK(!memcmp(mixed, solo, (size_t)(1 + nC) * V * sizeof(float)),
              "%s: decode + prefill in one batch differs from the runs alone", file);
    /* thread count: 1 thread vs this runner's pool */
    runner r1;
    if (runner_open(&r1, path, 1, 0) == 0) {
        float *one = malloc((size_t)nA * (size_t)V * sizeof(float));
        if (run1(&r1, 0, A->prompt, nA, 0, 1, one, NULL) == 0)
            CHECK(!memcmp(one, alone, (size_t)nA * V * sizeof(float)), "%s: 1 thread differs from %d threads", file,
                  2);
        free(one);
    }
    runner_close(&r1);
    /* memra_forward_prepare + memra_forward_run (the capturable half) leave
     * the same logits in st->logits: a prefill, then a two-sequence decode */
    {
        float *ref_l = malloc(2 * (size_t)V * sizeof(float)), *got = malloc(2 * (size_t)V * sizeof(float));
        int32_t d2[2] = {dA, dB};
        ok = run1(r, 0, A->prompt, nA, 0, 0, ref_l, NULL) == 0 && run1(r, 1, B->prompt, nB, 0, 0, NULL, NULL) == 0;
        memra_batch_clear(&r->b);
        memra_batch_add(&r->b, 0, &d2[0], 1, nA);
        memra_batch_add(&r->b, 1, &d2[1], 1, nB);
        memra_forward_opts lo = {.logits = ref_l};
        ok = ok && memra_forward(r->m, r->st, &r->b, &lo, &err) == MEMRA_OK;
        ok = ok && run1(r, 0, A->prompt, nA, 0, 0, NULL, NULL) == 0 && run1(r, 1, B->prompt, nB, 0, 0, NULL, NULL) == 0;
        memra_batch_clear(&r->b);
        memra_batch_add(&r->b, 0, &d2[0], 1, nA);
        memra_batch_add(&r->b, 1, &d2[1], 1, nB);
        ok = ok && memra_forward_prepare(r->m, r->st, &r->b, &err) == MEMRA_OK &&
             memra_forward_run(r->m, r->st, &r->b, 0, &err) == MEMRA_OK &&
             r->be->ops->download(r->be, got, r->st->logits, 2 * (size_t)V * sizeof(float)) == MEMRA_OK;
        CHECK(ok, "%s: prepare/run: %s", file, err.msg);
        if (ok) CHECK(!memcmp(got, ref_l, 2 * (size_t)V * sizeof(float)), "%s: prepare+run differs from memra_forward",
                      file);
        free(ref_l);
        free(got);
    }
    printf("  %-34s batch invariance: alone == batched == 1 thread (memcmp)\n", file);
    free(alone);
    free(both);
    free(mixed);
    free(solo);
}

/* A quantized file against the same weights dequantized to F32 by memra. */
static void check_quantized(const ref *R, const char *path, const char *file) {
    runner q, d;
    if (runner_open(&q, path, 0, 0) || runner_open(&d, path, 0, 1)) {
        runner_close(&q);
        return;
    }
    double worst = 0, vs_ref = 0;
    int64_t V = q.V;
    for (int ci = 0; ci < R->n_cases; ci++) {
        const ref_case *c = &R->cases[ci];
        /* the 17- and 65-token prompts (one inside, one across the GDN chunk size) keep this quick */
        if (SANITIZED ? c->n_prompt != 5 : (c->n_prompt != 17 && c->n_prompt != 65)) continue;
        size_t n = (size_t)c->n_prompt * (size_t)V;
        float *a = malloc(n * sizeof(float)), *b = malloc(n * sizeof(float));
        if (run1(&q, 0, c->prompt, c->n_prompt, 0, 1, a, NULL) == 0 &&
            run1(&d, 0, c->prompt, c->n_prompt, 0, 1, b, NULL) == 0) {
            double r = diff_ratio(a, b, (int64_t)n);
            CHECK(r <= TOL, "%s: case %d: quantized vs dequantized-F32 ratio %.3g", file, ci, r);
            if (!(r <= worst)) worst = r;
            double rr = diff_ratio(a, c->prefill, (int64_t)n);
            if (!(rr <= vs_ref)) vs_ref = rr;
            /* two decode steps on both */
            for (int i = 0; i < 2 && i < c->n_greedy; i++) {
                if (run1(&q, 0, &c->greedy[i], 1, c->n_prompt + i, 0, a, NULL) ||
                    run1(&d, 0, &c->greedy[i], 1, c->n_prompt + i, 0, b, NULL))
                    break;
                r = diff_ratio(a, b, V);
                CHECK(r <= TOL, "%s: case %d decode %d: quantized vs F32 ratio %.3g", file, ci, i, r);
                if (!(r <= worst)) worst = r;
            }
        }
        free(a);
        free(b);
    }
    printf("  %-34s quantized vs own F32 worst ratio %.2e (vs the unquantized reference: %.2e, for scale)\n", file,
           worst, vs_ref);
    runner_close(&q);
    runner_close(&d);
}

static int in_list(json_t *list, const char *s) {
    for (size_t i = 0; i < json_array_size(list); i++) {
        const char *e = json_string_value(json_array_get(list, i));
        if (e && !strcmp(e, s)) return 1;
    }
    return 0;
}


/* ------------------------------------------------ edited copies of a GGUF */

/* A tensor to put in the copy: replaces the source tensor of the same name,
 * or is appended when the source has none. */
typedef struct new_tensor {
    char name[96];
    uint32_t type;
    uint32_t n_dims;
    int64_t ne[4];
    const void *data;
} new_tensor;

typedef struct gguf_edit {
    const char *key_from, *key_to; /* rename keys starting with key_from */
    const char *set_key;           /* add or replace one key */
    memra_gguf_type set_type;      /* scalar type, or ARRAY of set_elem */
    memra_gguf_type set_elem;
    const void *set_val;
    uint64_t set_n;
    const char *set_str;           /* value when set_type is STRING */
    const char *drop[8];           /* tensors to leave out */
    new_tensor *add;
    int n_add;
} gguf_edit;

static void add_kv_copy(memra_gguf_writer *w, const char *key, const memra_gguf_kv *kv) {
    switch (kv->type) {
    case MEMRA_GGUF_TYPE_STRING: memra_gguf_writer_add_strn(w, key, kv->v.str.ptr, kv->v.str.len); break;
    case MEMRA_GGUF_TYPE_ARRAY:
        if (kv->v.arr.type == MEMRA_GGUF_TYPE_STRING) {
            memra_gguf_str *ss = NULL;
            if (memra_gguf_arr_strings(kv, &ss, NULL) != MEMRA_OK) break;
            const char **p = malloc(sizeof *p * (kv->v.arr.n + 1));
            uint64_t *l = malloc(sizeof *l * (kv->v.arr.n + 1));
            for (uint64_t i = 0; i < kv->v.arr.n; i++) {
                p[i] = ss[i].ptr;
                l[i] = ss[i].len;
            }
            memra_gguf_writer_add_str_array(w, key, p, l, kv->v.arr.n);
            free(p);
            free(l);
            free(ss);
        } else {
            memra_gguf_writer_add_array(w, key, kv->v.arr.type, kv->v.arr.data, kv->v.arr.n);
        }
        break;
    case MEMRA_GGUF_TYPE_FLOAT32: memra_gguf_writer_add_f32(w, key, (float)kv->v.f64); break;
    case MEMRA_GGUF_TYPE_FLOAT64: memra_gguf_writer_add_f64(w, key, kv->v.f64); break;
    case MEMRA_GGUF_TYPE_BOOL: memra_gguf_writer_add_bool(w, key, (int)kv->v.u64); break;
    case MEMRA_GGUF_TYPE_UINT8: memra_gguf_writer_add_u8(w, key, (uint8_t)kv->v.u64); break;
    case MEMRA_GGUF_TYPE_UINT16: memra_gguf_writer_add_u16(w, key, (uint16_t)kv->v.u64); break;
    case MEMRA_GGUF_TYPE_UINT32: memra_gguf_writer_add_u32(w, key, (uint32_t)kv->v.u64); break;
    case MEMRA_GGUF_TYPE_UINT64: memra_gguf_writer_add_u64(w, key, kv->v.u64); break;
    case MEMRA_GGUF_TYPE_INT8: memra_gguf_writer_add_i8(w, key, (int8_t)kv->v.i64); break;
    case MEMRA_GGUF_TYPE_INT16: memra_gguf_writer_add_i16(w, key, (int16_t)kv->v.i64); break;
    case MEMRA_GGUF_TYPE_INT32: memra_gguf_writer_add_i32(w, key, (int32_t)kv->v.i64); break;
    case MEMRA_GGUF_TYPE_INT64: memra_gguf_writer_add_i64(w, key, kv->v.i64); break;
    default: break;
    }
}

static void add_set_kv(memra_gguf_writer *w, const gguf_edit *e) {
    if (e->set_type == MEMRA_GGUF_TYPE_STRING) memra_gguf_writer_add_str(w, e->set_key, e->set_str);
    else if (e->set_type == MEMRA_GGUF_TYPE_ARRAY)
        memra_gguf_writer_add_array(w, e->set_key, e->set_elem, e->set_val, e->set_n);
    else memra_gguf_writer_add_scalar(w, e->set_key, e->set_type, e->set_val);
}

/* Writes an edited copy of src into memory; returns the buffer (free it after
 * the model that reads it) or NULL. */
static void *gguf_copy(const memra_gguf *src, const gguf_edit *e, size_t *size) {
    memra_gguf_writer *w = NULL;
    memra_error err = {{0}};
    if (memra_gguf_writer_begin(3, 0, &w, &err) != MEMRA_OK) return NULL;
    int set_done = 0;
    for (int64_t i = 0; i < memra_gguf_n_kv(src); i++) {
        const memra_gguf_kv *kv = memra_gguf_kv_at(src, i);
        char key[256];
        snprintf(key, sizeof key, "%.*s", (int)kv->key.len, kv->key.ptr);
        if (!strcmp(key, "general.alignment")) continue;
        if (e->key_from && !strncmp(key, e->key_from, strlen(e->key_from))) {
            char k2[256];
            snprintf(k2, sizeof k2, "%s%s", e->key_to, key + strlen(e->key_from));
            snprintf(key, sizeof key, "%s", k2);
        }
        if (e->set_key && !strcmp(key, e->set_key)) {
            add_set_kv(w, e);
            set_done = 1;
            continue;
        }
        add_kv_copy(w, key, kv);
    }
    if (e->set_key && !set_done) add_set_kv(w, e);
    /* the tensor list: source order with replacements, then additions */
    int64_t n_src = memra_gguf_n_tensors(src);
    const void **data = malloc(sizeof *data * (size_t)(n_src + e->n_add + 1));
    int64_t n = 0;
    char *used = calloc((size_t)e->n_add + 1, 1);
    for (int64_t i = 0; i < n_src; i++) {
        const memra_gguf_tensor *t = memra_gguf_tensor_at(src, i);
        char name[256];
        snprintf(name, sizeof name, "%.*s", (int)t->name.len, t->name.ptr);
        int skip = 0;
        for (int k = 0; k < 8 && e->drop[k]; k++) skip |= !strcmp(name, e->drop[k]);
        if (skip) continue;
        int r = -1;
        for (int k = 0; k < e->n_add; k++)
            if (!strcmp(e->add[k].name, name)) r = k;
        if (r >= 0) {
            used[r] = 1;
            memra_gguf_writer_add_tensor(w, name, e->add[r].type, e->add[r].n_dims, e->add[r].ne);
            data[n++] = e->add[r].data;
        } else {
            memra_gguf_writer_add_tensor(w, name, t->type, t->n_dims, t->ne);
            data[n++] = t->data;
        }
    }
    for (int k = 0; k < e->n_add; k++)
        if (!used[k]) {
            memra_gguf_writer_add_tensor(w, e->add[k].name, e->add[k].type, e->add[k].n_dims, e->add[k].ne);
            data[n++] = e->add[k].data;
        }
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    memra_status st = f ? memra_gguf_writer_write_header(w, f, &err) : MEMRA_ERR_IO;
    for (int64_t i = 0; st == MEMRA_OK && i < n; i++)
        st = memra_gguf_writer_write_data(w, f, data[i], memra_gguf_writer_tensor_nbytes(w, i), &err);
    if (st == MEMRA_OK) st = memra_gguf_writer_finish(w, f, &err);
    if (f) fclose(f);
    CHECK(st == MEMRA_OK, "writing an edited GGUF: %s", err.msg);
    memra_gguf_writer_free(w);
    free(data);
    free(used);
    if (st != MEMRA_OK) {
        free(buf);
        return NULL;
    }
    *size = len;
    return buf;
}

/* Loads an edited copy; returns the load status and fills err. */
static memra_status load_edit(const memra_gguf *src, const gguf_edit *e, memra_backend *be, memra_model **m,
                              void **buf, memra_error *err) {
    size_t size = 0;
    *m = NULL;
    *buf = gguf_copy(src, e, &size);
    if (!*buf) return MEMRA_ERR_IO;
    memra_gguf *g = NULL;
    memra_status st = memra_gguf_open_buffer(*buf, size, &g, err);
    if (st == MEMRA_OK) st = memra_model_load_gguf(g, be, m, err);
    return st;
}

/* Expects the edit to fail with status want and a message containing needle. */
static void expect_load_error(const memra_gguf *src, const gguf_edit *e, memra_backend *be, memra_status want,
                              const char *needle, const char *what) {
    memra_model *m;
    void *buf;
    memra_error err = {{0}};
    memra_status st = load_edit(src, e, be, &m, &buf, &err);
    CHECK(st == want && strstr(err.msg, needle), "%s: got %s '%s', want %s with '%s'", what, memra_status_str(st),
          err.msg, memra_status_str(want), needle);
    memra_model_free(m);
    free(buf);
}

static void check_load_errors(const char *path) {
    memra_gguf *src = NULL;
    memra_error err = {{0}};
    memra_backend *be = NULL;
    if (memra_gguf_open(path, &src, &err) != MEMRA_OK || memra_backend_cpu_init(&be, 1, &err) != MEMRA_OK) {
        CHECK(0, "%s: %s", path, err.msg);
        memra_gguf_free(src);
        return;
    }
    memra_model_config cfg;
    CHECK(memra_config_from_gguf(src, &cfg, &err) == MEMRA_OK, "%s: %s", path, err.msg);
    const char *a = cfg.arch_name;
    char key[128];
    int64_t H = cfg.n_embd;
    {
        gguf_edit e = {.drop = {"blk.1.ssm_a"}};
        expect_load_error(src, &e, be, MEMRA_ERR_NOT_FOUND, "'blk.1.ssm_a'", "missing tensor");
    }
    {
        static float zeros[64 * 1024];
        new_tensor t = {"blk.0.attn_qkv.weight", MEMRA_TYPE_F32, 2, {H, 8, 1, 1}, zeros};
        gguf_edit e = {.add = &t, .n_add = 1};
        char want[96];
        snprintf(want, sizeof want, "has shape {%lld, 8}, expected {%lld, %lld}", (long long)H, (long long)H,
                 (long long)cfg.conv_dim);
        expect_load_error(src, &e, be, MEMRA_ERR_FORMAT, want, "mis-shaped tensor");
        /* a norm that is not F32 */
        new_tensor t2 = {"blk.0.attn_norm.weight", MEMRA_TYPE_F16, 1, {H, 1, 1, 1}, zeros};
        gguf_edit e2 = {.add = &t2, .n_add = 1};
        expect_load_error(src, &e2, be, MEMRA_ERR_UNSUPPORTED, "memra expects F32", "F16 norm");
        /* a type memra cannot compute with (IQ2_XXS: 256-element blocks of 66 bytes) */
        int64_t q_dim = (int64_t)cfg.n_head * cfg.head_dim;
        if (q_dim % 256 == 0) {
            snprintf(t2.name, sizeof t2.name, "blk.3.attn_output.weight");
            t2.type = MEMRA_TYPE_IQ2_XXS;
            t2.n_dims = 2;
            t2.ne[0] = q_dim;
            t2.ne[1] = H;
            expect_load_error(src, &e2, be, MEMRA_ERR_UNSUPPORTED, "IQ2_XXS", "unsupported type");
        }
    }
    {
        uint32_t v = 3;
        snprintf(key, sizeof key, "%s.attention.head_count_kv", a);
        gguf_edit e = {.set_key = key, .set_type = MEMRA_GGUF_TYPE_UINT32, .set_val = &v};
        expect_load_error(src, &e, be, MEMRA_ERR_FORMAT, "head_count_kv", "head_count % head_count_kv");
        v = 0;
        expect_load_error(src, &e, be, MEMRA_ERR_FORMAT, "head_count_kv' = 0", "zero kv heads");
        v = (uint32_t)cfg.n_layer;
        snprintf(key, sizeof key, "%s.nextn_predict_layers", a);
        expect_load_error(src, &e, be, MEMRA_ERR_FORMAT, "nextn_predict_layers", "no trunk layers");
        v = 7;
        snprintf(key, sizeof key, "%s.ssm.time_step_rank", a);
        expect_load_error(src, &e, be, MEMRA_ERR_FORMAT, "ssm.inner_size", "inner_size % time_step_rank");
        snprintf(key, sizeof key, "%s.embedding_length", a);
        gguf_edit d = {.key_from = key, .key_to = "x.unused"};
        expect_load_error(src, &d, be, MEMRA_ERR_NOT_FOUND, key, "missing key");
    }
    {
        gguf_edit e = {.set_key = "general.architecture", .set_type = MEMRA_GGUF_TYPE_STRING, .set_str = "llama"};
        expect_load_error(src, &e, be, MEMRA_ERR_UNSUPPORTED, "'llama'", "architecture");
    }
    {
        /* recurrent_layers overrides the interval rule: all-recurrent makes
         * layer 3 a GDN layer, which has no GDN tensors */
        uint8_t flags[MEMRA_MAX_LAYERS];
        memset(flags, 1, sizeof flags);
        snprintf(key, sizeof key, "%s.attention.recurrent_layers", a);
        gguf_edit e = {.set_key = key, .set_type = MEMRA_GGUF_TYPE_ARRAY, .set_elem = MEMRA_GGUF_TYPE_BOOL,
                       .set_val = flags, .set_n = (uint64_t)cfg.n_layer};
        expect_load_error(src, &e, be, MEMRA_ERR_NOT_FOUND, "'blk.3.attn_qkv.weight'", "recurrent_layers");
        /* the array that restates the interval rule loads */
        for (int i = 0; i < cfg.n_layer; i++) flags[i] = i < cfg.n_trunk && cfg.kind[i] == MEMRA_LAYER_GDN;
        memra_model *m;
        void *buf;
        CHECK(load_edit(src, &e, be, &m, &buf, &err) == MEMRA_OK, "recurrent_layers as the rule: %s", err.msg);
        if (m) CHECK(m->cfg.full_attn_interval == 0 && !memcmp(m->cfg.kind, cfg.kind, (size_t)cfg.n_layer),
                     "recurrent_layers: kinds differ from the interval rule");
        memra_model_free(m);
        free(buf);
    }
    {
        /* no output.weight: tied to token_embd */
        gguf_edit e = {.drop = {"output.weight"}};
        memra_model *m;
        void *buf;
        CHECK(load_edit(src, &e, be, &m, &buf, &err) == MEMRA_OK, "without output.weight: %s", err.msg);
        if (m) CHECK(m->output == m->tok_embd, "output is not tied to token_embd");
        memra_model_free(m);
        free(buf);
    }
    printf("  %-34s load errors name the key/tensor; recurrent_layers and tied output honoured\n", path);
    memra_backend_free(be);
    memra_gguf_free(src);
}

/* ------------------------------------------- a synthetic qwen3next model */

/* F32 copy of a tensor's rows. */
static float *f32_of(const memra_gguf_tensor *t) {
    int64_t rows = t->ne[1] * t->ne[2] * t->ne[3];
    size_t rb = memra_type_row_bytes(t->type, t->ne[0]);
    float *o = malloc((size_t)(rows * t->ne[0]) * sizeof(float));
    for (int64_t r = 0; r < rows; r++) memra_dequant_row(t->type, (const uint8_t *)t->data + r * rb, o + r * t->ne[0], t->ne[0]);
    return o;
}

/* Rewrites a qwen35moe file as qwen3next: v heads from the tiled to the
 * grouped order (tiled head j*n_k + kh = grouped head kh*r + j) in every
 * V-indexed tensor, and (fused = 1) q/k/v/z into ssm_in and b/a into ssm_ba
 * in the per-k-head layout of spec §5.7. The logits must not change. */
static void check_qwen3next(const ref *R, const char *path, int fused) {
    memra_gguf *src = NULL;
    memra_error err = {{0}};
    if (memra_gguf_open(path, &src, &err) != MEMRA_OK) {
        CHECK(0, "%s: %s", path, err.msg);
        return;
    }
    memra_model_config c;
    CHECK(memra_config_from_gguf(src, &c, &err) == MEMRA_OK, "%s", err.msg);
    int64_t H = c.n_embd, nk = c.n_k, nv = c.n_v, r = nv / nk, dk = c.d_k, dv = c.d_v, KD = c.key_dim,
            VD = c.value_dim, CD = c.conv_dim;
    int64_t n_t = memra_gguf_n_tensors(src);
    new_tensor *nt = calloc((size_t)(n_t + 4 * c.n_layer), sizeof *nt);
    float **bufs = calloc((size_t)(n_t + 4 * c.n_layer), sizeof *bufs);
    const char *drop[8] = {0};
    int n = 0;
    /* grouped head m <- tiled head g2t[m] */
    int64_t g2t[256];
    for (int64_t kh = 0; kh < nk; kh++)
        for (int64_t j = 0; j < r; j++) g2t[kh * r + j] = j * nk + kh;
    for (int64_t i = 0; i < n_t; i++) {
        const memra_gguf_tensor *t = memra_gguf_tensor_at(src, i);
        char name[96];
        snprintf(name, sizeof name, "%.*s", (int)t->name.len, t->name.ptr);
        int L = -1;
        char what[64] = "";
        if (sscanf(name, "blk.%d.%63s", &L, what) != 2 || L >= c.n_trunk || c.kind[L] != MEMRA_LAYER_GDN) continue;
        float *x = f32_of(t), *y = NULL;
        int64_t rows = t->ne[1], cols = t->ne[0];
        if (!strcmp(what, "attn_qkv.weight") || !strcmp(what, "ssm_conv1d.weight")) {
            y = malloc((size_t)(rows * cols) * sizeof(float));
            memcpy(y, x, (size_t)(2 * KD * cols) * sizeof(float));
            for (int64_t m = 0; m < nv; m++)
                memcpy(y + (2 * KD + m * dv) * cols, x + (2 * KD + g2t[m] * dv) * cols, (size_t)(dv * cols) * 4);
        } else if (!strcmp(what, "attn_gate.weight")) {
            y = malloc((size_t)(rows * cols) * sizeof(float));
            for (int64_t m = 0; m < nv; m++)
                memcpy(y + m * dv * cols, x + g2t[m] * dv * cols, (size_t)(dv * cols) * 4);
        } else if (!strcmp(what, "ssm_beta.weight") || !strcmp(what, "ssm_alpha.weight") ||
                   !strcmp(what, "ssm_a") || !strcmp(what, "ssm_dt.bias")) {
            int64_t w = t->ne[1] == 1 ? 1 : cols; /* vectors {n_v}, matrices {H, n_v} */
            y = malloc((size_t)(nv * w) * sizeof(float));
            for (int64_t m = 0; m < nv; m++) memcpy(y + m * w, x + g2t[m] * w, (size_t)w * 4);
        } else if (!strcmp(what, "ssm_out.weight")) {
            y = malloc((size_t)(rows * cols) * sizeof(float));
            for (int64_t o = 0; o < rows; o++)
                for (int64_t m = 0; m < nv; m++) memcpy(y + o * cols + m * dv, x + o * cols + g2t[m] * dv, (size_t)dv * 4);
        }
        free(x);
        if (!y) continue;
        bufs[n] = y;
        nt[n] = (new_tensor){"", MEMRA_TYPE_F32, t->n_dims, {t->ne[0], t->ne[1], t->ne[2], t->ne[3]}, y};
        snprintf(nt[n].name, sizeof nt[n].name, "%s", name);
        n++;
    }
    int n_split = n;
    char (*dnames)[96] = calloc(8, 96);
    if (fused) {
        /* fuse the first GDN layer only: the other layers keep the split form
         * (qwen3next.cpp accepts both), so both loader paths run */
        int L = 0;
        while (L < c.n_trunk && c.kind[L] != MEMRA_LAYER_GDN) L++;
        char nm[96];
        const float *qkv = NULL, *z = NULL, *b = NULL, *al = NULL;
        for (int k = 0; k < n_split; k++) {
            snprintf(nm, sizeof nm, "blk.%d.attn_qkv.weight", L);
            if (!strcmp(nt[k].name, nm)) qkv = nt[k].data;
            snprintf(nm, sizeof nm, "blk.%d.attn_gate.weight", L);
            if (!strcmp(nt[k].name, nm)) z = nt[k].data;
            snprintf(nm, sizeof nm, "blk.%d.ssm_beta.weight", L);
            if (!strcmp(nt[k].name, nm)) b = nt[k].data;
            snprintf(nm, sizeof nm, "blk.%d.ssm_alpha.weight", L);
            if (!strcmp(nt[k].name, nm)) al = nt[k].data;
        }
        int64_t grp = 2 * dk + 2 * r * dv;
        float *in = malloc((size_t)((CD + VD) * H) * sizeof(float)), *ba = malloc((size_t)(2 * nv * H) * sizeof(float));
        for (int64_t kh = 0; kh < nk; kh++) {
            float *g = in + kh * grp * H;
            memcpy(g, qkv + kh * dk * H, (size_t)(dk * H) * 4);
            memcpy(g + dk * H, qkv + (KD + kh * dk) * H, (size_t)(dk * H) * 4);
            memcpy(g + 2 * dk * H, qkv + (2 * KD + kh * r * dv) * H, (size_t)(r * dv * H) * 4);
            memcpy(g + (2 * dk + r * dv) * H, z + kh * r * dv * H, (size_t)(r * dv * H) * 4);
            memcpy(ba + kh * 2 * r * H, b + kh * r * H, (size_t)(r * H) * 4);
            memcpy(ba + (kh * 2 * r + r) * H, al + kh * r * H, (size_t)(r * H) * 4);
        }
        bufs[n] = in;
        nt[n] = (new_tensor){"", MEMRA_TYPE_F32, 2, {H, CD + VD, 1, 1}, in};
        snprintf(nt[n++].name, 96, "blk.%d.ssm_in.weight", L);
        bufs[n] = ba;
        nt[n] = (new_tensor){"", MEMRA_TYPE_F32, 2, {H, 2 * nv, 1, 1}, ba};
        snprintf(nt[n++].name, 96, "blk.%d.ssm_ba.weight", L);
        static const char *parts[4] = {"attn_qkv.weight", "attn_gate.weight", "ssm_beta.weight", "ssm_alpha.weight"};
        for (int k = 0; k < 4; k++) {
            snprintf(dnames[k], 96, "blk.%d.%s", L, parts[k]);
            drop[k] = dnames[k];
        }
    }
    char from[40];
    snprintf(from, sizeof from, "%s.", c.arch_name);
    gguf_edit e = {.key_from = from, .key_to = "qwen3next.", .set_key = "general.architecture",
                   .set_type = MEMRA_GGUF_TYPE_STRING, .set_str = "qwen3next", .add = nt, .n_add = n};
    memcpy(e.drop, drop, sizeof drop);
    runner rn;
    memset(&rn, 0, sizeof rn);
    void *buf = NULL;
    memra_status st = memra_backend_cpu_init(&rn.be, 0, &err);
    if (st == MEMRA_OK) st = load_edit(src, &e, rn.be, &rn.m, &buf, &err);
    if (st == MEMRA_OK) st = memra_state_init(rn.m, 2, N_CTX, 128, 2, &rn.st, &err);
    if (st == MEMRA_OK) st = memra_batch_init(rn.be, 128, 2, &rn.b, &err);
    CHECK(st == MEMRA_OK, "qwen3next copy of %s: %s", path, err.msg);
    double worst = 0;
    if (st == MEMRA_OK) {
        rn.V = rn.m->cfg.n_vocab;
        CHECK(rn.m->cfg.arch == MEMRA_ARCH_QWEN3NEXT && !rn.m->cfg.kv_tiled && !rn.m->cfg.rope_imrope,
              "qwen3next config");
        for (int ci = 0; ci < R->n_cases; ci++) {
            const ref_case *rc = &R->cases[ci];
            if (rc->n_prompt != 17 && rc->n_prompt != 5) continue;
            float *out = malloc((size_t)rc->n_prompt * (size_t)rn.V * sizeof(float));
            if (run1(&rn, 0, rc->prompt, rc->n_prompt, 0, 1, out, NULL) == 0) {
                double q = diff_ratio(out, rc->prefill, (int64_t)rc->n_prompt * rn.V);
                CHECK(q <= TOL, "qwen3next copy (fused %d), %d tokens: ratio %.3g", fused, rc->n_prompt, q);
                if (!(q <= worst)) worst = q;
            }
            free(out);
            char what[128];
            snprintf(what, sizeof what, "qwen3next copy (fused %d)", fused);
            check_greedy(&rn, rc, what, 0, 3, &worst);
        }
    }
    printf("  %-34s as qwen3next (grouped v heads%s): worst ratio %.2e\n", path, fused ? ", fused ssm_in/ssm_ba" : "",
           worst);
    runner_close(&rn);
    free(buf);
    for (int k = 0; k < n; k++) free(bufs[k]);
    free(bufs);
    free(nt);
    free(dnames);
    memra_gguf_free(src);
}

static int cmp_name(const void *a, const void *b) { return strcmp(a, b); }

/* Every NAME.ref.json in dir: its reference files get every check, the other
 * NAME.*.gguf files of the same fixture the quantized check. */
static int check_dir(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return 0;
    char names[64][256];
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) && n < 64) snprintf(names[n++], sizeof names[0], "%s", e->d_name);
    closedir(d);
    qsort(names, (size_t)n, sizeof names[0], cmp_name);
    int n_refs = 0;
    for (int i = 0; i < n; i++) {
        size_t len = strlen(names[i]);
        if (len < 10 || strcmp(names[i] + len - 9, ".ref.json")) continue;
        ref R;
        if (ref_load(&R, dir, names[i])) {
            ref_free(&R);
            continue;
        }
        n_refs++;
        printf("%s/%s (%d cases)\n", dir, R.name, R.n_cases);
        json_t *list = json_object_get(R.root, "gguf");
        char path[1024];
        for (size_t k = 0; k < json_array_size(list); k++) {
            const char *file = json_string_value(json_array_get(list, k));
            snprintf(path, sizeof path, "%s/%s", dir, file ? file : "");
            runner r;
            if (runner_open(&r, path, 0, 0) == 0) {
                CHECK(r.V == R.V, "%s: vocab %lld, reference %lld", file, (long long)r.V, (long long)R.V);
                if (r.V == R.V) {
                    double t0 = now_s();
                    check_prefill(&r, &R, file);
                    double t1 = now_s();
                    check_decode(&r, &R, file);
                    double t2 = now_s();
                    check_hidden(&r, &R, file);
                    /* the slower checks once per fixture: the files hold the same weights */
                    if (k == 0) {
                        check_state_carry(&r, &R, file);
                        double t3 = now_s();
                        check_batch_invariance(&r, &R, path, file);
                        printf("  (time: prefill %.2fs decode %.2fs carry %.2fs batch %.2fs)\n", t1 - t0, t2 - t1,
                               t3 - t2, now_s() - t3);
                    }
                }
            }
            runner_close(&r);
        }
        /* quantized siblings: NAME.<anything>.gguf not in the reference list */
        size_t nl = strlen(R.name);
        for (int j = 0; j < n; j++) {
            size_t lj = strlen(names[j]);
            if (strncmp(names[j], R.name, nl) || names[j][nl] != '.' || lj < 5 || strcmp(names[j] + lj - 5, ".gguf") ||
                in_list(list, names[j]))
                continue;
            snprintf(path, sizeof path, "%s/%s", dir, names[j]);
            double t0 = now_s();
            check_quantized(&R, path, names[j]);
            printf("  (time: %.2fs)\n", now_s() - t0);
        }
        ref_free(&R);
    }
    return n_refs;
}

int main(void) {
    if (SANITIZED) printf("sanitizer build: reduced case set (the plain build runs them all)\n");
    /* the project's own tiny models run everywhere */
    int n = check_dir("tests/data");
    printf("tests/data: %d reference models\n", n);
    check_load_errors("tests/data/tiny-dense.f32.gguf");
    ref R;
    if (ref_load(&R, "tests/data", "tiny-moe.ref.json") == 0) {
        check_qwen3next(&R, "tests/data/tiny-moe.bf16.gguf", 0);
        check_qwen3next(&R, "tests/data/tiny-moe.bf16.gguf", 1);
    }
    ref_free(&R);
    const char *fx = test_fixtures_dir();
    if (fx) {
        int nf = check_dir(fx);
        CHECK(nf >= 3, "%s: expected the 3 fixture models, found %d", fx, nf);
    } else {
        printf("fixtures: not found (../shared/fixtures or $MEMRA_FIXTURES), skipped\n");
    }
    return test_finish("test_model");
}
