/* memra gate model: the whole forward pass of a backend against references.
 *
 *   memra gate model [--backend cuda|cpu] [--fixtures DIR]... [--tol X] [--tol-prefill X] [--only TEXT]
 *                    [--threads N] [--device N] [--chunk N]
 *
 * Every NAME.ref.json in the fixture folders (default ../shared/fixtures and
 * tests/data, those that exist) names the files its logits belong to (`gguf`:
 * F32/BF16) and holds cases: a prompt, the logits of every prompt position
 * (`prefill_logits`, offsets into NAME.ref.f32), and a greedy continuation
 * made through the cached decode path with the logits that chose each token.
 * For every NAME.*.gguf in the folder this gate runs on the chosen backend:
 *
 *   prefill  one forward over the prompt, logits of every position;
 *            max|out - ref| / max|ref| over the case, worst case reported,
 *            against its own bar (--tol-prefill, default the decode bar:
 *            the 3xFP16 tensor-core prefill (gemm.cu) lands near 1e-5; the
 *            fixtures' guide allows 5e-2 for a path that rounds activations
 *            to fp16, so a faster, rounder kernel can be gated with
 *            --tol-prefill 5e-2)
 *   decode   the greedy steps, teacher-forced with the reference tokens (so
 *            one near-tie does not derail the rest): the same ratio per step
 *   greedy   our argmax of each step equals the reference token; a step whose
 *            reference top-2 margin is under 2 x tol x max|ref row| (both
 *            logits may move by the tolerance) may pick the other one: it is
 *            counted as an allowed deviation, not a failure
 *
 * The reference of a listed file is the transformers run in the .ref.f32. A
 * quantized file of the same fixture (any NAME.*.gguf not listed) has no such
 * reference: it is checked against the CPU backend (the oracle) running the
 * same file on the same prompts, with the CPU's own greedy tokens forced.
 * When the backend under test is the CPU itself, that would compare a run
 * with itself, so the reference is then the CPU run of the file's weights
 * dequantized to F32 (memra_model_dequantize_f32): the quantized dot products
 * must equal plain F32 arithmetic on the dequantized values. NaN never
 * passes. On a backend with graph capture, every file also gets a `graph`
 * row: decode steps replayed from the state's captured graphs must give
 * logits memcmp-equal to the same steps run uncaptured (gate_graphs).
 * Prints a table and returns 1 on any failure.
 *
 * This is a debug subcommand: it reaches into src/ (model, backend). */
#include <dirent.h>
#include <jansson.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "backend/backend.h"
#include "gate_model.h"
#include "model/model.h"

#define MAX_DIRS 8
#define MAX_CASES 64
#define MAX_FILES 64
#define CHUNK 128 /* default prefill batch capacity (--chunk): longer prompts run in chunks */

/* ---------------------------------------------------------------- helpers */

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int file_exists(const char *path) {
    struct stat sb;
    return stat(path, &sb) == 0;
}

static double max_abs(const float *a, int64_t n) {
    double m = 0;
    for (int64_t i = 0; i < n; i++) {
        double v = fabs((double)a[i]);
        if (!(v <= m)) m = v; /* NaN sticks */
    }
    return m;
}

/* max|a - ref| / max|ref| over n values; NaN in either gives NaN. */
static double diff_ratio(const float *a, const float *ref, int64_t n) {
    double d = 0;
    for (int64_t i = 0; i < n; i++) {
        double e = fabs((double)a[i] - (double)ref[i]);
        if (!(e <= d)) d = e;
    }
    double m = max_abs(ref, n);
    return m > 0 ? d / m : d;
}

static int passes(double ratio, double tol) { return !isnan(ratio) && ratio <= tol; }

/* Lowest index among equal maxima; a NaN row gives -1 (never equal to a token). */
static int32_t argmax_row(const float *x, int64_t n) {
    int64_t b = 0;
    for (int64_t i = 0; i < n; i++)
        if (isnan(x[i])) return -1;
    for (int64_t i = 1; i < n; i++)
        if (x[i] > x[b]) b = i;
    return (int32_t)b;
}

/* top1 - top2 of a row (0 when n < 2). */
static double top2_margin(const float *x, int64_t n) {
    double a = -INFINITY, b = -INFINITY;
    for (int64_t i = 0; i < n; i++) {
        if (x[i] > a) {
            b = a;
            a = x[i];
        } else if (x[i] > b) {
            b = x[i];
        }
    }
    return n < 2 ? 0 : a - b;
}

/* ---------------------------------------------------------------- references */

typedef struct ref_case {
    int32_t *prompt; /* [n_prompt] */
    int32_t n_prompt;
    const float *prefill; /* [n_prompt][V] into ref.data */
    int32_t *greedy;      /* [n_greedy] */
    int32_t n_greedy;
    const float *greedy_logits; /* [n_greedy][V] into ref.data */
} ref_case;

typedef struct ref {
    char dir[512], prefix[256], name[256];
    json_t *root;
    float *data; /* the .ref.f32 */
    size_t n_data;
    int64_t V;
    ref_case cases[MAX_CASES];
    int n_cases;
} ref;

static float *read_f32(const char *path, size_t *n) {
    *n = 0;
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    float *p = NULL;
    if (fseek(f, 0, SEEK_END) == 0) {
        long sz = ftell(f);
        if (sz > 0 && sz % (long)sizeof(float) == 0 && fseek(f, 0, SEEK_SET) == 0 && (p = malloc((size_t)sz))) {
            if (fread(p, 1, (size_t)sz, f) == (size_t)sz) {
                *n = (size_t)sz / sizeof(float);
            } else {
                free(p);
                p = NULL;
            }
        }
    }
    fclose(f);
    return p;
}

/* A JSON array of integers in [0, 2^31); NULL (message in err) otherwise. */
static int32_t *int_array(const json_t *a, int32_t *n, const char *what, char *err, size_t errn) {
    *n = 0;
    if (!json_is_array(a) || json_array_size(a) == 0 || json_array_size(a) > (1u << 20)) {
        snprintf(err, errn, "%s: missing or not a non-empty array", what);
        return NULL;
    }
    size_t k = json_array_size(a);
    int32_t *v = malloc(k * sizeof *v);
    if (!v) {
        snprintf(err, errn, "out of memory");
        return NULL;
    }
    for (size_t i = 0; i < k; i++) {
        json_t *e = json_array_get(a, i);
        if (!json_is_integer(e) || json_integer_value(e) < 0 || json_integer_value(e) > INT32_MAX) {
            snprintf(err, errn, "%s[%zu]: not a token id", what, i);
            free(v);
            return NULL;
        }
        v[i] = (int32_t)json_integer_value(e);
    }
    *n = (int32_t)k;
    return v;
}

/* The block {offset, shape: [rows, V]} of the data, checked to lie inside it. */
static const float *data_view(const ref *r, const json_t *spec, int64_t rows, const char *what, char *err,
                              size_t errn) {
    const json_t *sh = json_object_get(spec, "shape"), *off = json_object_get(spec, "offset");
    if (!json_is_integer(off) || !json_is_array(sh) || json_array_size(sh) != 2 ||
        !json_is_integer(json_array_get(sh, 0)) || !json_is_integer(json_array_get(sh, 1))) {
        snprintf(err, errn, "%s: expected {offset, shape: [rows, vocab]}", what);
        return NULL;
    }
    json_int_t o = json_integer_value(off), s0 = json_integer_value(json_array_get(sh, 0)),
               s1 = json_integer_value(json_array_get(sh, 1));
    if (s0 != rows || s1 != r->V) {
        snprintf(err, errn, "%s: shape [%lld, %lld], expected [%lld, %lld]", what, (long long)s0, (long long)s1,
                 (long long)rows, (long long)r->V);
        return NULL;
    }
    if (o < 0 || (uint64_t)o > r->n_data || (uint64_t)(s0 * s1) > r->n_data - (uint64_t)o) {
        snprintf(err, errn, "%s: [%lld, +%lld) is outside the %zu floats of the data file", what, (long long)o,
                 (long long)(s0 * s1), r->n_data);
        return NULL;
    }
    return r->data + o;
}

static void ref_free(ref *r) {
    for (int i = 0; i < r->n_cases; i++) {
        free(r->cases[i].prompt);
        free(r->cases[i].greedy);
    }
    json_decref(r->root);
    free(r->data);
    memset(r, 0, sizeof *r);
}

/* Loads dir/json_name; 0 or -1 with a message in err. */
static int ref_load(ref *r, const char *dir, const char *json_name, char *err, size_t errn) {
    memset(r, 0, sizeof *r);
    snprintf(r->dir, sizeof r->dir, "%s", dir);
    snprintf(r->prefix, sizeof r->prefix, "%.*s", (int)(strlen(json_name) - strlen(".ref.json")), json_name);
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, json_name);
    json_error_t je;
    r->root = json_load_file(path, 0, &je);
    if (!r->root) {
        snprintf(err, errn, "%s: line %d: %s", path, je.line, je.text);
        return -1;
    }
    const char *fx = json_string_value(json_object_get(r->root, "fixture"));
    snprintf(r->name, sizeof r->name, "%s", fx ? fx : r->prefix);
    const char *data = json_string_value(json_object_get(r->root, "data"));
    if (!data || strchr(data, '/')) {
        snprintf(err, errn, "%s: 'data' must name a file beside it", path);
        return -1;
    }
    char dpath[1024];
    snprintf(dpath, sizeof dpath, "%s/%s", dir, data);
    r->data = read_f32(dpath, &r->n_data);
    if (!r->data) {
        snprintf(err, errn, "%s: cannot read the reference data", dpath);
        return -1;
    }
    json_t *vs = json_object_get(json_object_get(r->root, "hf_config"), "vocab_size");
    r->V = json_is_integer(vs) ? json_integer_value(vs) : 0;
    if (r->V < 2 || r->V > (1 << 22)) {
        snprintf(err, errn, "%s: hf_config.vocab_size missing or out of range", path);
        return -1;
    }
    json_t *cases = json_object_get(r->root, "cases");
    if (!json_is_array(cases) || json_array_size(cases) == 0 || json_array_size(cases) > MAX_CASES) {
        snprintf(err, errn, "%s: 'cases' must be an array of 1..%d cases", path, MAX_CASES);
        return -1;
    }
    for (size_t i = 0; i < json_array_size(cases); i++) {
        json_t *c = json_array_get(cases, i);
        ref_case *rc = &r->cases[r->n_cases];
        char what[64], e2[256] = "";
        snprintf(what, sizeof what, "cases[%zu].prompt", i);
        rc->prompt = int_array(json_object_get(c, "prompt"), &rc->n_prompt, what, e2, sizeof e2);
        if (rc->prompt) {
            snprintf(what, sizeof what, "cases[%zu].greedy", i);
            rc->greedy = int_array(json_object_get(c, "greedy"), &rc->n_greedy, what, e2, sizeof e2);
        }
        if (rc->greedy) {
            snprintf(what, sizeof what, "cases[%zu].prefill_logits", i);
            rc->prefill = data_view(r, json_object_get(c, "prefill_logits"), rc->n_prompt, what, e2, sizeof e2);
        }
        if (rc->prefill) {
            snprintf(what, sizeof what, "cases[%zu].greedy_logits", i);
            rc->greedy_logits = data_view(r, json_object_get(c, "greedy_logits"), rc->n_greedy, what, e2, sizeof e2);
        }
        r->n_cases++; /* counted now so ref_free frees its arrays */
        if (!rc->greedy_logits) {
            snprintf(err, errn, "%s: %s", path, e2);
            return -1;
        }
    }
    return 0;
}

/* Is file one of the files the reference logits belong to? */
static int ref_lists(const ref *r, const char *file) {
    json_t *g = json_object_get(r->root, "gguf");
    for (size_t i = 0; i < json_array_size(g); i++) {
        const char *s = json_string_value(json_array_get(g, i));
        if (s && !strcmp(s, file)) return 1;
    }
    return 0;
}

/* ---------------------------------------------------------------- runner */

/* One model on one backend with a single-slot state. */
typedef struct runner {
    memra_backend *be; /* borrowed */
    memra_model *m;
    memra_state *st;
    memra_batch b;
    int64_t V;
    int32_t chunk; /* prefill batch capacity */
} runner;

static void runner_close(runner *r) {
    if (r->m) {
        memra_batch_free(r->be, &r->b);
        memra_state_free(r->m, r->st);
        memra_model_free(r->m);
    }
    memset(r, 0, sizeof *r);
}

static memra_status runner_open(runner *r, memra_backend *be, const char *path, int dequant, int32_t n_ctx,
                                int32_t chunk, memra_error *err) {
    memset(r, 0, sizeof *r);
    r->be = be;
    r->chunk = chunk;
    memra_status s = memra_model_load(path, be, &r->m, err);
    if (s == MEMRA_OK && dequant) s = memra_model_dequantize_f32(r->m, err);
    if (s == MEMRA_OK) s = memra_state_init(r->m, 1, n_ctx, chunk, 1, &r->st, err);
    if (s == MEMRA_OK) s = memra_batch_init(be, chunk, 1, &r->b, err);
    if (s != MEMRA_OK) {
        if (r->m && r->st) memra_state_free(r->m, r->st);
        r->st = NULL;
        memra_model_free(r->m);
        r->m = NULL;
        return s;
    }
    r->V = r->m->cfg.n_vocab;
    return MEMRA_OK;
}

/* One forward of n tokens at pos0 on slot 0; logits of every token (all) or
 * of the last one into out (host). */
static memra_status run_tokens(runner *r, const int32_t *tok, int32_t n, int32_t pos0, int all, float *out,
                               memra_error *err) {
    memra_batch_clear(&r->b);
    memra_status s = memra_batch_add(&r->b, 0, tok, n, pos0);
    if (s != MEMRA_OK) return memra_errorf(err, s, "batch of %d tokens at %d does not fit", n, pos0);
    memra_forward_opts o = {.all_logits = all, .logits = out};
    return memra_forward(r->m, r->st, &r->b, &o, err);
}

/* The prompt (in chunks of r->chunk), then n_steps - 1 single-token steps.
 * prefill [n_prompt][V]: every prompt position. steps [n_steps][V]: row 0 is
 * the last prompt position, row i the logits after feeding token i-1 (forced[i-1],
 * or our own argmax when forced is NULL). tokens [n_steps]: argmax of each row. */
static memra_status run_sequence(runner *r, const int32_t *prompt, int32_t n_prompt, const int32_t *forced,
                                 int32_t n_steps, float *prefill, float *steps, int32_t *tokens, memra_error *err) {
    int64_t V = r->V;
    for (int32_t p0 = 0; p0 < n_prompt; p0 += r->chunk) {
        int32_t n = n_prompt - p0 < r->chunk ? n_prompt - p0 : r->chunk;
        MEMRA_TRY(run_tokens(r, prompt + p0, n, p0, 1, prefill + (int64_t)p0 * V, err));
    }
    memcpy(steps, prefill + (int64_t)(n_prompt - 1) * V, (size_t)V * sizeof(float));
    tokens[0] = argmax_row(steps, V);
    for (int32_t i = 1; i < n_steps; i++) {
        int32_t tok = forced ? forced[i - 1] : tokens[i - 1];
        if (tok < 0) return memra_errorf(err, MEMRA_ERR_INVALID, "step %d: no token to feed (NaN logits)", i);
        MEMRA_TRY(run_tokens(r, &tok, 1, n_prompt + i - 1, 0, steps + (int64_t)i * V, err));
        tokens[i] = argmax_row(steps + (int64_t)i * V, V);
    }
    return MEMRA_OK;
}

/* ---------------------------------------------------------------- the gate */

typedef struct gate_opts {
    const char *backend;
    const char *dirs[MAX_DIRS];
    int n_dirs;
    const char *only;
    double tol, tol_pf; /* decode bar; prefill bar (< 0: the decode bar) */
    int threads, device;
    int32_t chunk; /* prefill batch capacity (--chunk) */
} gate_opts;

typedef struct gate_ctx {
    gate_opts o;
    memra_backend *be;  /* under test */
    memra_backend *cpu; /* reference for quantized files (== be when testing the CPU) */
    int n_rows, n_fail;
} gate_ctx;

static void row_tol(gate_ctx *g, const char *model, const char *file, const char *metric, double worst,
                    int show_worst, double tol, int ok, const char *note) {
    char w[32];
    if (show_worst) snprintf(w, sizeof w, "%.3e", worst);
    else snprintf(w, sizeof w, "-");
    printf("%-20s %-32s %-8s %10s %7.0e  %-4s %s\n", model, file, metric, w, tol, ok ? "ok" : "FAIL",
           note ? note : "");
    fflush(stdout);
    g->n_rows++;
    if (!ok) g->n_fail++;
}

static void row(gate_ctx *g, const char *model, const char *file, const char *metric, double worst, int show_worst,
                int ok, const char *note) {
    row_tol(g, model, file, metric, worst, show_worst, g->o.tol, ok, note);
}

/* The reference of one file: per case, prefill logits, step logits and step tokens. */
typedef struct expect {
    const float *prefill[MAX_CASES]; /* [n_prompt][V] */
    const float *steps[MAX_CASES];   /* [n_greedy][V] */
    const int32_t *tokens[MAX_CASES];
    float *owned[MAX_CASES]; /* CPU-made references */
    int32_t *owned_tok[MAX_CASES];
} expect;

static void expect_free(expect *e) {
    for (int i = 0; i < MAX_CASES; i++) {
        free(e->owned[i]);
        free(e->owned_tok[i]);
    }
}

static int32_t ctx_needed(const ref *r) {
    int32_t n = 1;
    for (int i = 0; i < r->n_cases; i++) {
        int32_t k = r->cases[i].n_prompt + r->cases[i].n_greedy;
        if (k > n) n = k;
    }
    return n;
}

/* The reference of a quantized file: the CPU run of the same file (of its
 * weights dequantized to F32 when the CPU is the backend under test). */
static memra_status cpu_expect(gate_ctx *g, const ref *r, const char *path, expect *e, memra_error *err) {
    runner cr;
    MEMRA_TRY(runner_open(&cr, g->cpu, path, g->cpu == g->be, ctx_needed(r), g->o.chunk, err));
    memra_status s = MEMRA_OK;
    if (cr.V != r->V) s = memra_errorf(err, MEMRA_ERR_FORMAT, "vocabulary %lld, the reference has %lld",
                                       (long long)cr.V, (long long)r->V);
    for (int i = 0; s == MEMRA_OK && i < r->n_cases; i++) {
        const ref_case *c = &r->cases[i];
        size_t rows = (size_t)c->n_prompt + (size_t)c->n_greedy;
        e->owned[i] = malloc(rows * (size_t)r->V * sizeof(float));
        e->owned_tok[i] = malloc((size_t)c->n_greedy * sizeof(int32_t));
        if (!e->owned[i] || !e->owned_tok[i]) {
            s = memra_errorf(err, MEMRA_ERR_NOMEM, "out of memory");
            break;
        }
        float *pf = e->owned[i], *sp = pf + (size_t)c->n_prompt * (size_t)r->V;
        s = run_sequence(&cr, c->prompt, c->n_prompt, NULL, c->n_greedy, pf, sp, e->owned_tok[i], err);
        e->prefill[i] = pf;
        e->steps[i] = sp;
        e->tokens[i] = e->owned_tok[i];
    }
    runner_close(&cr);
    return s;
}

static void gate_graphs(gate_ctx *g, const ref *r, const char *file);

/* Runs one GGUF file of a fixture on the backend under test and prints its rows. */
static void gate_file(gate_ctx *g, const ref *r, const char *file) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", r->dir, file);
    int listed = ref_lists(r, file);
    memra_error err = {{0}};
    expect e;
    memset(&e, 0, sizeof e);
    double t0 = now_s();
    memra_status s = MEMRA_OK;
    if (listed) {
        for (int i = 0; i < r->n_cases; i++) {
            e.prefill[i] = r->cases[i].prefill;
            e.steps[i] = r->cases[i].greedy_logits;
            e.tokens[i] = r->cases[i].greedy;
        }
    } else {
        s = cpu_expect(g, r, path, &e, &err);
        if (s != MEMRA_OK) {
            char note[700];
            snprintf(note, sizeof note, "CPU reference run failed: %s", err.msg);
            row(g, r->name, file, "load", 0, 0, 0, note);
            expect_free(&e);
            return;
        }
    }
    double t_ref = now_s() - t0;

    runner ru;
    s = runner_open(&ru, g->be, path, 0, ctx_needed(r), g->o.chunk, &err);
    if (s == MEMRA_OK && ru.V != r->V)
        s = memra_errorf(&err, MEMRA_ERR_FORMAT, "vocabulary %lld, the reference has %lld", (long long)ru.V,
                         (long long)r->V);
    if (s != MEMRA_OK) {
        row(g, r->name, file, "load", 0, 0, 0, err.msg);
        runner_close(&ru);
        expect_free(&e);
        return;
    }
    int64_t V = r->V;
    double worst_pf = 0, worst_dec = 0;
    long n_steps = 0, n_tie = 0, n_bad = 0, n_pos = 0;
    char bad_note[160] = "";
    t0 = now_s();
    for (int i = 0; i < r->n_cases && s == MEMRA_OK; i++) {
        const ref_case *c = &r->cases[i];
        size_t rows = (size_t)c->n_prompt + (size_t)c->n_greedy;
        float *buf = malloc(rows * (size_t)V * sizeof(float));
        int32_t *tok = malloc((size_t)c->n_greedy * sizeof *tok);
        if (!buf || !tok) {
            s = memra_errorf(&err, MEMRA_ERR_NOMEM, "out of memory");
        } else {
            float *pf = buf, *sp = buf + (size_t)c->n_prompt * (size_t)V;
            s = run_sequence(&ru, c->prompt, c->n_prompt, e.tokens[i], c->n_greedy, pf, sp, tok, &err);
            if (s == MEMRA_OK) {
                double rp = diff_ratio(pf, e.prefill[i], (int64_t)c->n_prompt * V);
                if (!(rp <= worst_pf)) worst_pf = rp;
                n_pos += c->n_prompt;
                for (int32_t k = 0; k < c->n_greedy; k++) {
                    const float *want = e.steps[i] + (int64_t)k * V, *got = sp + (int64_t)k * V;
                    double rd = diff_ratio(got, want, V);
                    if (!(rd <= worst_dec)) worst_dec = rd;
                    n_steps++;
                    if (tok[k] == e.tokens[i][k]) continue;
                    /* both logits may move by tol x max|row|: a closer race may flip */
                    double margin = top2_margin(want, V), slack = 2 * g->o.tol * max_abs(want, V);
                    if (tok[k] >= 0 && margin < slack) {
                        n_tie++;
                    } else {
                        if (!n_bad)
                            snprintf(bad_note, sizeof bad_note, "; first: case %d step %d got %d want %d (margin %.3g)",
                                     i, k, tok[k], e.tokens[i][k], margin);
                        n_bad++;
                    }
                }
            }
        }
        free(buf);
        free(tok);
    }
    double t_run = now_s() - t0;
    runner_close(&ru);
    expect_free(&e);
    if (s != MEMRA_OK) {
        row(g, r->name, file, "run", 0, 0, 0, err.msg);
        return;
    }
    const char *vs = listed ? "vs reference" : g->cpu == g->be ? "vs CPU run of F32-dequantized weights"
                                                                 : "vs CPU run of the same file";
    char note[400];
    snprintf(note, sizeof note, "%d cases, %ld positions, %s (%.2fs%s)", r->n_cases, n_pos, vs, t_run,
             listed ? "" : " + CPU ref");
    (void)t_ref;
    row_tol(g, r->name, file, "prefill", worst_pf, 1, g->o.tol_pf, passes(worst_pf, g->o.tol_pf), note);
    snprintf(note, sizeof note, "%ld steps, teacher-forced", n_steps);
    row(g, r->name, file, "decode", worst_dec, 1, passes(worst_dec, g->o.tol), note);
    snprintf(note, sizeof note, "%ld/%ld tokens equal, %ld near-tie deviations allowed, %ld mismatches%s",
             n_steps - n_tie - n_bad, n_steps, n_tie, n_bad, bad_note);
    row(g, r->name, file, "greedy", 0, 0, n_bad == 0, note);
    if (g->be->ops->graph_begin) gate_graphs(g, r, file);
}

/* Decode through the state's graphs against the same steps uncaptured: one
 * model, two states (graphs on / off), two sequences (the first two cases'
 * prompts, at most GRAPH_PROMPT tokens each). GRAPH_STEPS steps of both
 * sequences (n_seqs 2), then GRAPH_STEPS of the first alone (n_seqs 1): each
 * shape runs uncaptured, is captured, and is replayed GRAPH_STEPS - 2 times.
 * Every step's logits must be memcmp-equal, and both graphs must exist. */
#define GRAPH_PROMPT 32
#define GRAPH_STEPS 5
static void gate_graphs(gate_ctx *g, const ref *r, const char *file) {
    char path[1024], note[700] = "";
    snprintf(path, sizeof path, "%s/%s", r->dir, file);
    memra_error err = {{0}};
    memra_model *m = NULL;
    memra_state *st[2] = {NULL, NULL};
    memra_batch b[2];
    int have_b[2] = {0, 0};
    float *lg[2] = {NULL, NULL};
    int n_bad = 0, first_bad = -2;
    if (r->n_cases < 1) return;
    const ref_case *cs[2] = {&r->cases[0], &r->cases[r->n_cases > 1 ? 1 : 0]};
    int32_t pos[2] = {0, 0}, next[2] = {0, 0};
    memra_status s = memra_model_load(path, g->be, &m, &err);
    int64_t V = m ? m->cfg.n_vocab : 0;
    for (int k = 0; k < 2 && s == MEMRA_OK; k++) {
        s = memra_state_init(m, 2, 2 * GRAPH_PROMPT + 2 * GRAPH_STEPS, 2 * GRAPH_PROMPT, 2, &st[k], &err);
        if (s == MEMRA_OK) s = memra_batch_init(g->be, 2 * GRAPH_PROMPT, 2, &b[k], &err);
        if (s == MEMRA_OK) have_b[k] = 1;
        if (s == MEMRA_OK) st[k]->use_graphs = k; /* state 0: uncaptured */
        lg[k] = malloc(2 * (size_t)V * sizeof(float));
        if (s == MEMRA_OK && !lg[k]) s = memra_errorf(&err, MEMRA_ERR_NOMEM, "out of memory");
    }
    /* both prompts in one batch, then the decode steps */
    for (int step = -1; step < 2 * GRAPH_STEPS && s == MEMRA_OK; step++) {
        int n_seqs = step < GRAPH_STEPS ? 2 : 1;
        for (int k = 0; k < 2 && s == MEMRA_OK; k++) {
            memra_batch_clear(&b[k]);
            for (int q = 0; q < n_seqs && s == MEMRA_OK; q++) {
                int32_t n = cs[q]->n_prompt < GRAPH_PROMPT ? cs[q]->n_prompt : GRAPH_PROMPT;
                if (step < 0) {
                    s = memra_batch_add(&b[k], q, cs[q]->prompt, n, 0);
                    pos[q] = n;
                } else {
                    s = memra_batch_add(&b[k], q, &next[q], 1, pos[q]);
                }
            }
            memra_forward_opts fo = {.all_logits = 0, .logits = lg[k]};
            if (s == MEMRA_OK) s = memra_forward(m, st[k], &b[k], &fo, &err);
        }
        if (s != MEMRA_OK) break;
        if (memcmp(lg[0], lg[1], (size_t)n_seqs * (size_t)V * sizeof(float))) {
            if (!n_bad) first_bad = step;
            n_bad++;
        }
        for (int q = 0; q < n_seqs; q++) {
            next[q] = argmax_row(lg[0] + q * V, V);
            if (next[q] < 0) s = memra_errorf(&err, MEMRA_ERR_INVALID, "step %d: NaN logits", step);
            if (step >= 0) pos[q]++;
        }
    }
    int made = s == MEMRA_OK && st[1]->graphs && st[1]->graphs[0] && st[1]->graphs[1];
    if (s != MEMRA_OK)
        snprintf(note, sizeof note, "%s", err.msg);
    else if (!made)
        snprintf(note, sizeof note, "no graph was captured for n_seqs 1 and 2");
    else {
        char first[48] = "";
        if (n_bad) snprintf(first, sizeof first, "; first at step %d (-1: prompt)", first_bad);
        snprintf(note, sizeof note, "%d decode steps (n_seqs 2, then 1): %d differ from the uncaptured run "
                 "(memcmp)%s", 2 * GRAPH_STEPS, n_bad, first);
    }
    row(g, r->name, file, "graph", 0, 0, s == MEMRA_OK && made && n_bad == 0, note);
    for (int k = 0; k < 2; k++) {
        if (have_b[k]) memra_batch_free(g->be, &b[k]);
        if (st[k]) memra_state_free(m, st[k]);
        free(lg[k]);
    }
    memra_model_free(m);
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static int ends_with(const char *s, const char *suf) {
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && !strcmp(s + a - b, suf);
}

/* Sorted names in dir that end with suffix and start with prefix (or any when NULL). */
static int list_dir(const char *dir, const char *prefix, const char *suffix, char **out, int max) {
    DIR *d = opendir(dir);
    if (!d) return 0;
    int n = 0;
    struct dirent *de;
    while ((de = readdir(d)) && n < max) {
        if (!ends_with(de->d_name, suffix)) continue;
        if (prefix && strncmp(de->d_name, prefix, strlen(prefix))) continue;
        out[n] = strdup(de->d_name);
        if (out[n]) n++;
    }
    closedir(d);
    qsort(out, (size_t)n, sizeof *out, cmp_str);
    return n;
}

static void gate_dir(gate_ctx *g, const char *dir) {
    char *jsons[MAX_FILES];
    int nj = list_dir(dir, NULL, ".ref.json", jsons, MAX_FILES);
    if (nj == 0) fprintf(stderr, "gate model: no *.ref.json in %s\n", dir);
    for (int j = 0; j < nj; j++) {
        ref *r = calloc(1, sizeof *r);
        char err[600] = "";
        if (!r) {
            free(jsons[j]);
            continue;
        }
        if (ref_load(r, dir, jsons[j], err, sizeof err) != 0) {
            row(g, jsons[j], "-", "load", 0, 0, 0, err);
        } else {
            char pre[300];
            snprintf(pre, sizeof pre, "%s.", r->prefix);
            char *files[MAX_FILES];
            int nf = list_dir(dir, pre, ".gguf", files, MAX_FILES);
            /* a listed file that is missing is a failure, not a skip */
            json_t *gl = json_object_get(r->root, "gguf");
            for (size_t k = 0; k < json_array_size(gl); k++) {
                const char *s = json_string_value(json_array_get(gl, k));
                char p[1024];
                snprintf(p, sizeof p, "%s/%s", dir, s ? s : "");
                if (!s || !file_exists(p)) row(g, r->name, s ? s : "?", "load", 0, 0, 0, "listed file is missing");
            }
            for (int f = 0; f < nf; f++) {
                if (!g->o.only || strstr(files[f], g->o.only)) gate_file(g, r, files[f]);
                free(files[f]);
            }
        }
        ref_free(r);
        free(r);
        free(jsons[j]);
    }
}

static void usage(FILE *f) {
    fprintf(f,
            "usage: memra gate model [--backend cuda|cpu] [--fixtures DIR]... [--tol X] [--tol-prefill X]\n"
            "                        [--only TEXT] [--threads N] [--device N] [--chunk N]\n"
            "\n"
            "Runs every NAME.*.gguf beside a NAME.ref.json on the backend: prefill logits, teacher-forced\n"
            "decode logits and greedy tokens against the reference (files the .ref.json lists) or against\n"
            "the CPU backend's run of the same file dequantized to F32 (the other, quantized files).\n"
            "\n"
            "  --backend B    cuda (default) or cpu\n"
            "  --fixtures DIR a folder of *.ref.json (repeatable; default ../shared/fixtures and tests/data)\n"
            "  --tol X        max|out - ref| / max|ref| bar of decode (default 1e-3)\n"
            "  --tol-prefill X  the same for prefill (default: --tol)\n"
            "  --only TEXT    only the files whose name contains TEXT\n"
            "  --threads N    CPU threads (default: all)\n"
            "  --device N     CUDA device (default 0)\n"
            "  --chunk N      prefill batch size (default %d; under 16 keeps CUDA matmuls off the tensor cores)\n",
            CHUNK);
}

int memra_gate_model(int argc, char **argv) {
    gate_ctx g;
    memset(&g, 0, sizeof g);
    g.o.backend = "cuda";
    g.o.tol = 1e-3;
    g.o.tol_pf = -1.0;
    g.o.chunk = CHUNK;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int has = i + 1 < argc;
        if (!strcmp(a, "--backend") && has) {
            g.o.backend = argv[++i];
        } else if (!strcmp(a, "--fixtures") && has) {
            if (g.o.n_dirs == MAX_DIRS) {
                fprintf(stderr, "gate model: at most %d --fixtures folders\n", MAX_DIRS);
                return 2;
            }
            g.o.dirs[g.o.n_dirs++] = argv[++i];
        } else if (!strcmp(a, "--tol") && has) {
            char *end;
            g.o.tol = strtod(argv[++i], &end);
            if (*end || !(g.o.tol > 0)) {
                fprintf(stderr, "gate model: --tol wants a positive number, got '%s'\n", argv[i]);
                return 2;
            }
        } else if (!strcmp(a, "--tol-prefill") && has) {
            char *end;
            g.o.tol_pf = strtod(argv[++i], &end);
            if (*end || !(g.o.tol_pf > 0)) {
                fprintf(stderr, "gate model: --tol-prefill wants a positive number, got '%s'\n", argv[i]);
                return 2;
            }
        } else if (!strcmp(a, "--only") && has) {
            g.o.only = argv[++i];
        } else if (!strcmp(a, "--threads") && has) {
            g.o.threads = atoi(argv[++i]);
        } else if (!strcmp(a, "--device") && has) {
            g.o.device = atoi(argv[++i]);
        } else if (!strcmp(a, "--chunk") && has) {
            g.o.chunk = atoi(argv[++i]);
            if (g.o.chunk < 1 || g.o.chunk > 4096) {
                fprintf(stderr, "gate model: --chunk wants 1..4096, got '%s'\n", argv[i]);
                return 2;
            }
        } else if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 0;
        } else {
            fprintf(stderr, "gate model: unknown or incomplete option '%s'\n", a);
            usage(stderr);
            return 2;
        }
    }
    if (g.o.n_dirs == 0) {
        static const char *defaults[] = {"../shared/fixtures", "tests/data"};
        for (size_t k = 0; k < 2; k++)
            if (file_exists(defaults[k])) g.o.dirs[g.o.n_dirs++] = defaults[k];
        if (g.o.n_dirs == 0) {
            fprintf(stderr, "gate model: neither ../shared/fixtures nor tests/data exists here; pass --fixtures DIR\n");
            return 2;
        }
    }
    memra_error err = {{0}};
    memra_status s;
    if (!strcmp(g.o.backend, "cpu")) {
        s = memra_backend_cpu_init(&g.be, g.o.threads, &err);
        g.cpu = g.be;
    } else if (!strcmp(g.o.backend, "cuda")) {
        s = memra_backend_cuda_init(&g.be, g.o.device, &err);
        if (s == MEMRA_OK) s = memra_backend_cpu_init(&g.cpu, g.o.threads, &err);
    } else {
        fprintf(stderr, "gate model: unknown backend '%s' (cuda or cpu)\n", g.o.backend);
        return 2;
    }
    if (s != MEMRA_OK) {
        fprintf(stderr, "gate model: backend %s: %s\n", g.o.backend, err.msg);
        if (g.be) memra_backend_free(g.be);
        return 1;
    }
    if (g.o.tol_pf < 0) g.o.tol_pf = g.o.tol;
    printf("memra gate model: backend %s, tolerance %.0e x max|ref| (prefill %.0e), prefill in batches of %d\n",
           g.be->name, g.o.tol, g.o.tol_pf, g.o.chunk);
    printf("%-20s %-32s %-8s %10s %7s  %-4s %s\n", "model", "file", "metric", "worst", "tol", "ok", "note");
    double t0 = now_s();
    for (int d = 0; d < g.o.n_dirs; d++) gate_dir(&g, g.o.dirs[d]);
    if (g.cpu != g.be) memra_backend_free(g.cpu);
    memra_backend_free(g.be);
    if (g.n_rows == 0) {
        printf("gate model: nothing was checked (no fixture files matched)\n");
        return 1;
    }
    printf("gate model: %d checks, %d passed, %d failed (%.1fs)\n", g.n_rows, g.n_rows - g.n_fail, g.n_fail,
           now_s() - t0);
    return g.n_fail ? 1 : 0;
}
