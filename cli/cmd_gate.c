/* memra gate: exactness gates.
 *
 *   memra gate kernels [--model 0.8b|9b|27b|35b-a3b|122b-a10b|all] [--quick] [--seed N]
 *                      [--log FILE] [--bench] [--device N]
 *
 * `kernels` runs every CUDA op against the CPU reference backend on fresh
 * random inputs at the real shapes of Qwen3.5 0.8B, 9B, 27B and 35B-A3B
 * (spec §10), plus GDN at the head sizes of the fixture models (d_k, d_v
 * 32 and 64) and the kernel's other instances. The metric is
 * max|gpu - cpu| / max|cpu| over the compared
 * elements; NaN/Inf in a GPU output never passes, and every GPU output is
 * poisoned with 0xFF bytes (NaN) before the op so an unwritten element fails.
 * Matmul also checks batch invariance: row t of a T-token product must be
 * memcmp-equal to the same row computed with T = 1; so do the fused ops of
 * the forward pass (matmul_multi and matmul_swiglu on its projection groups,
 * qk_norm_rope_store, gdn) and rmsnorm. Prints a summary table
 * (full rows go to --log) and exits 1 on any failure.
 *
 *   memra gate model ...   (cli/gate_model.c)
 *
 * This is a debug subcommand: it reaches into src/ (backend interface). */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend/backend.h"
#include "commands.h"
#include "gate_model.h"
#include "gguf/quant.h"

/* ------------------------------------------------------------ context */

typedef struct gate_model {
    const char *name;
    int H, n_head, n_kv, n_k, n_v, n_ff; /* n_ff 0: MoE */
    int n_expert, n_used, n_ff_exp;
} gate_model;

static const gate_model gate_models[] = {
    {"0.8b", 1024, 8, 2, 16, 16, 3584, 0, 0, 0},
    {"9b", 4096, 16, 4, 16, 32, 12288, 0, 0, 0},
    {"27b", 5120, 24, 4, 16, 48, 17408, 0, 0, 0},
    {"35b-a3b", 2048, 16, 2, 16, 32, 0, 256, 8, 512},
    /* the MoE kernels' other row lengths: H / 256 = 12 super-blocks (k_moe_tc_gu, not gu2; k_rmsnorm_mv<12>),
     * F = 1024; 64 v-heads on 16 key heads (GDN blocks of 4 v-heads a key head) */
    {"122b-a10b", 3072, 32, 2, 16, 64, 0, 256, 8, 1024},
};

#define GATE_VOCAB 248320 /* the Qwen3.5 vocabulary as the files pad it */

static const uint32_t gate_types[] = {
    MEMRA_TYPE_F32,  MEMRA_TYPE_F16,  MEMRA_TYPE_BF16,   MEMRA_TYPE_Q8_0,   MEMRA_TYPE_Q4_0, MEMRA_TYPE_Q4_1,
    MEMRA_TYPE_Q5_0, MEMRA_TYPE_Q5_1, MEMRA_TYPE_Q2_K,   MEMRA_TYPE_Q3_K,   MEMRA_TYPE_Q4_K, MEMRA_TYPE_Q5_K,
    MEMRA_TYPE_Q6_K, MEMRA_TYPE_IQ4_NL, MEMRA_TYPE_IQ4_XS, MEMRA_TYPE_MXFP4, MEMRA_TYPE_NVFP4,
};

typedef struct gate {
    memra_backend *cpu, *gpu;
    uint64_t rng;
    int quick;
    int n_pass, n_fail;
    FILE *log;
    /* random pools the weights are cut from (fast: memcpy, not an RNG call per byte) */
    uint8_t *pool_b;
    float *pool_f;
    uint16_t *pool_h, *pool_bf;
    size_t pool_n;
} gate;

#define POOL_N ((size_t)1 << 24)

/* Mirrors MM_TC_MIN_T in src/backend/cuda/matmul.cu: from this T on, matmul
 * runs on the tensor cores (3xFP16 operands; other summation order, and its batch
 * invariance is checked against other batches of that path). */
#define GATE_TC_MIN_T 16
/* The bar of that path. 3xFP16 (gemm.cu: operands split into fp16 hi + lo,
 * fp32 MMA accumulation): measured worst 1.1e-4 (27b, in 17408, seed 11) on
 * the H200; the MMA units keep fewer accumulator bits than an fp32 FMA. */
#define GATE_TC_TOL 3e-4

static uint64_t rnd_u64(gate *g) {
    uint64_t z = (g->rng += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
/* uniform in [lo, hi) */
static float rnd_f(gate *g, float lo, float hi) {
    return lo + (hi - lo) * (float)((double)(rnd_u64(g) >> 11) * (1.0 / 9007199254740992.0));
}

static void rnd_fill(gate *g, float *x, size_t n, float lo, float hi) {
    for (size_t i = 0; i < n; i++) x[i] = rnd_f(g, lo, hi);
}

/* One result row: to the log always, to stdout when `show`. */
static void gate_row(gate *g, int show, const char *op, const char *model, const char *shape, const char *type,
                     long T, double metric, double tol, int ok, const char *note) {
    char line[320];
    snprintf(line, sizeof line, "%-14s %-8s %-20s %-7s %5ld  %10.3e  %7.0e  %-4s %s\n", op, model, shape, type, T,
             metric, tol, ok ? "ok" : "FAIL", note ? note : "");
    if (show || !ok) fputs(line, stdout);
    if (g->log) fputs(line, g->log);
    if (ok)
        g->n_pass++;
    else
        g->n_fail++;
}

/* max|got - ref| / max|ref|; a non-finite value in got (or ref) gives NaN. */
static double rel_err(const float *ref, const float *got, size_t n) {
    double mr = 0.0, md = 0.0;
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(got[i]) || !isfinite(ref[i])) return NAN;
        double d = fabs((double)got[i] - (double)ref[i]), r = fabs((double)ref[i]);
        if (d > md) md = d;
        if (r > mr) mr = r;
    }
    return mr > 0.0 ? md / mr : md;
}

static int all_finite(const float *x, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (!isfinite(x[i])) return 0;
    return 1;
}

static int passes(double metric, double tol) { return !isnan(metric) && metric <= tol; }

/* The first row of the Tw-row window of a T-row batch that a batch-invariance check runs row r in: the window
 * ends at r (so r sits among Tw - 1 other tokens) unless that would start before row 0, and never runs past
 * row T - 1. Tw = 1: r alone. */
static int64_t inv_window_first(int64_t r, int64_t Tw, int64_t T) {
    int64_t first = r >= Tw - 1 ? r - (Tw - 1) : 0;
    return first + Tw > T ? T - Tw : first;
}

/* ------------------------------------------------- device buffer helpers */

static const char *gpu_msg(gate *g) {
    return g->gpu->ops->last_error ? g->gpu->ops->last_error(g->gpu) : "(no message)";
}

#define GTRY(g, expr)                                                                     \
    do {                                                                                  \
        memra_status st_ = (expr);                                                        \
        if (st_ != MEMRA_OK) {                                                            \
            fprintf(stderr, "gate: %s failed: %s (%s)\n", #expr, memra_status_str(st_), gpu_msg(g)); \
            return -1;                                                                    \
        }                                                                                 \
    } while (0)

static void *galloc(gate *g, size_t bytes) {
    void *p = NULL;
    if (g->gpu->ops->alloc(g->gpu, bytes, &p) != MEMRA_OK) return NULL;
    return p;
}

static memra_status gpoison(gate *g, void *d, size_t bytes) {
    void *h = malloc(bytes);
    if (!h) return MEMRA_ERR_NOMEM;
    memset(h, 0xFF, bytes);
    memra_status st = g->gpu->ops->upload(g->gpu, d, h, bytes);
    free(h);
    return st;
}

static memra_status gdown(gate *g, void *h, const void *d, size_t bytes) {
    memra_status st = g->gpu->ops->sync(g->gpu);
    if (st) return st;
    return g->gpu->ops->download(g->gpu, h, d, bytes);
}

/* ------------------------------------------------------- random weights */

/* Writes a finite fp16 in [lo, hi). */
static void put_h(gate *g, uint8_t *p, float lo, float hi) {
    uint16_t h = memra_fp32_to_fp16(rnd_f(g, lo, hi));
    p[0] = (uint8_t)h;
    p[1] = (uint8_t)(h >> 8);
}

/* Random valid blocks: random payload bytes, then every scale field set to a
 * small finite value so that dequantized weights are O(0.01 .. 1). */
static void fill_weight(gate *g, uint32_t type, uint8_t *dst, size_t nbytes) {
    size_t off = 0;
    const uint8_t *src = g->pool_b;
    size_t esz = 1;
    if (type == MEMRA_TYPE_F32) src = (const uint8_t *)g->pool_f, esz = 4;
    if (type == MEMRA_TYPE_F16) src = (const uint8_t *)g->pool_h, esz = 2;
    if (type == MEMRA_TYPE_BF16) src = (const uint8_t *)g->pool_bf, esz = 2;
    size_t pool_bytes = g->pool_n * esz;
    while (off < nbytes) {
        size_t start = (size_t)(rnd_u64(g) % (g->pool_n / 2)) * esz;
        size_t n = pool_bytes - start;
        if (n > nbytes - off) n = nbytes - off;
        memcpy(dst + off, src + start, n);
        off += n;
    }
    const memra_type_info *ti = memra_type_get(type);
    size_t bb = ti->block_bytes, nb = nbytes / bb;
    for (size_t i = 0; i < nb; i++) {
        uint8_t *b = dst + i * bb;
        switch (type) {
        case MEMRA_TYPE_Q4_0:
        case MEMRA_TYPE_Q5_0:
        case MEMRA_TYPE_Q8_0:
        case MEMRA_TYPE_IQ4_NL:
        case MEMRA_TYPE_IQ4_XS: put_h(g, b, -0.02f, 0.02f); break;
        case MEMRA_TYPE_Q4_1:
        case MEMRA_TYPE_Q5_1:
            put_h(g, b, -0.02f, 0.02f);
            put_h(g, b + 2, -0.1f, 0.1f);
            break;
        case MEMRA_TYPE_Q2_K:
            put_h(g, b + 80, -0.02f, 0.02f);
            put_h(g, b + 82, -0.01f, 0.01f);
            break;
        case MEMRA_TYPE_Q3_K: put_h(g, b + 108, -0.01f, 0.01f); break;
        case MEMRA_TYPE_Q4_K:
        case MEMRA_TYPE_Q5_K:
            put_h(g, b, -0.002f, 0.002f);
            put_h(g, b + 2, -0.002f, 0.002f);
            break;
        case MEMRA_TYPE_Q6_K: put_h(g, b + 208, -0.0005f, 0.0005f); break;
        case MEMRA_TYPE_MXFP4: b[0] = (uint8_t)(118 + rnd_u64(g) % 8); break;
        case MEMRA_TYPE_NVFP4:
            for (int k = 0; k < 4; k++) b[k] = (uint8_t)(0x18 + rnd_u64(g) % 0x20);
            break;
        default: break;
        }
    }
}

/* The same tensor bound twice: for the CPU (data = host) and the GPU. */
typedef struct wpair {
    memra_weight c, g;
    uint8_t *host;
} wpair;

static void wpair_free(gate *g, wpair *w) {
    if (w->g.data) g->gpu->ops->weight_release(g->gpu, &w->g);
    free(w->host);
    memset(w, 0, sizeof *w);
}

/* type F32 with fill_f32 = 1 gives plain random vectors (norm weights etc.) */
static int wpair_make(gate *g, wpair *w, const char *name, uint32_t type, int64_t ne0, int64_t ne1, int64_t ne2) {
    memset(w, 0, sizeof *w);
    size_t rb = memra_type_row_bytes(type, ne0);
    if (!rb) {
        fprintf(stderr, "gate: %s: type %s cannot hold rows of %lld\n", name, memra_type_name(type), (long long)ne0);
        return -1;
    }
    size_t nbytes = rb * (size_t)ne1 * (size_t)ne2;
    w->host = malloc(nbytes);
    if (!w->host) return -1;
    fill_weight(g, type, w->host, nbytes);
    memra_weight t = {0};
    t.name = name;
    t.type = type;
    t.ne[0] = ne0, t.ne[1] = ne1, t.ne[2] = ne2, t.ne[3] = 1;
    t.nbytes = nbytes;
    t.row_bytes = rb;
    t.host = w->host;
    w->c = t;
    w->g = t;
    GTRY(g, g->cpu->ops->weight_load(g->cpu, &w->c));
    GTRY(g, g->gpu->ops->weight_load(g->gpu, &w->g));
    return 0;
}

/* An F32 vector weight with values in [lo, hi). */
static int wvec_make(gate *g, wpair *w, const char *name, int64_t n, int64_t rows, float lo, float hi) {
    if (wpair_make(g, w, name, MEMRA_TYPE_F32, n, rows, 1)) return -1;
    rnd_fill(g, (float *)w->host, (size_t)(n * rows), lo, hi);
    g->gpu->ops->weight_release(g->gpu, &w->g);
    GTRY(g, g->gpu->ops->weight_load(g->gpu, &w->g));
    return 0;
}

/* ---------------------------------------------------------------- matmul */

typedef struct mm_shape {
    const char *name;
    int64_t in, out;
} mm_shape;

/* Checks rows [r0, r0 + R) of y (all T tokens) against the CPU on a row
 * view of the weight. Returns the metric. */
static double mm_check_rows(gate *g, const wpair *w, const float *x, const float *y, int64_t T, int64_t r0,
                            int64_t R, float *ref) {
    memra_weight v = w->c;
    v.ne[1] = R;
    v.host = v.data = (uint8_t *)w->host + (size_t)r0 * w->c.row_bytes;
    v.nbytes = (uint64_t)R * w->c.row_bytes;
    if (g->cpu->ops->matmul(g->cpu, &v, x, ref, T, 0) != MEMRA_OK) return NAN;
    double worst = 0.0;
    for (int64_t t = 0; t < T; t++) {
        double e = rel_err(ref + t * R, y + t * w->c.ne[1] + r0, (size_t)R);
        if (isnan(e)) return NAN;
        if (e > worst) worst = e;
    }
    return worst;
}

/* worst_out[0]: worst metric of the matvec path (T < GATE_TC_MIN_T and the
 * accumulate case), worst_out[1]: of the tensor-core path. */
static int gate_matmul_shape(gate *g, const gate_model *m, const mm_shape *s, uint32_t type, double *worst_out,
                             int *inv_ok_out) {
    static const int64_t Ts[] = {1, 2, 7, 37, 64};
    const int64_t Tmax = 64;
    char shape[64];
    snprintf(shape, sizeof shape, "%s{%lld,%lld}", s->name, (long long)s->in, (long long)s->out);
    wpair w;
    if (wpair_make(g, &w, s->name, type, s->in, s->out, 1)) {
        wpair_free(g, &w);
        return -1;
    }
    size_t xn = (size_t)(Tmax * s->in), yn = (size_t)(Tmax * s->out);
    float *x = malloc(xn * 4), *y = malloc(yn * 4), *y1 = malloc((size_t)s->out * 20 * 4), *ref = malloc((size_t)Tmax * 48 * 4);
    float *dx = galloc(g, xn * 4), *dy = galloc(g, yn * 4), *dy1 = galloc(g, (size_t)s->out * 20 * 4);
    int rc = -1;
    double worst = 0.0, worst_tc = 0.0;
    int inv_ok = 1;
    if (!x || !y || !y1 || !ref || !dx || !dy || !dy1) goto done;
    rnd_fill(g, x, xn, -1.0f, 1.0f);
    if (g->gpu->ops->upload(g->gpu, dx, x, xn * 4)) goto done;
    for (size_t ti = 0; ti < sizeof Ts / sizeof Ts[0]; ti++) {
        int64_t T = Ts[ti];
        if (g->quick && T != 1 && T != 7) continue;
        if (gpoison(g, dy, (size_t)T * s->out * 4)) goto done;
        if (g->gpu->ops->matmul(g->gpu, &w.g, dx, dy, T, 0) != MEMRA_OK) {
            gate_row(g, 1, "matmul", m->name, shape, memra_type_name(type), (long)T, NAN, 0, 0, gpu_msg(g));
            continue;
        }
        if (gdown(g, y, dy, (size_t)T * s->out * 4)) goto done;
        double e = all_finite(y, (size_t)T * s->out) ? 0.0 : NAN;
        int64_t R = s->out < 16 ? s->out : 16;
        int64_t starts[3] = {0, (int64_t)(rnd_u64(g) % (uint64_t)(s->out - R + 1)), s->out - R};
        for (int k = 0; k < 3 && !isnan(e); k++) {
            double ek = mm_check_rows(g, &w, x, y, T, starts[k], R, ref);
            if (isnan(ek) || ek > e) e = ek;
        }
        /* batch invariance: rows 0, T/2, T-1 against T = 1 runs (matvec
         * path), or, on the tensor-core path, against a 20-token batch that
         * holds the same token at another position among other tokens */
        const char *note = "";
        const int tc = T >= GATE_TC_MIN_T;
        /* Q6_K rows of an even number of super-blocks whose prefill path is
         * the fp16 matvec's arithmetic (mmvg; the backend says which shapes:
         * the others take the wgmma GEMM) must equal T = 1's, unless the
         * int8 matvec takes T < 16 (MEMRA_MMVQ6=1, or a tile-major weight).
         * (Q4_K's mmvg is mmv's fp16 arithmetic, its T < 16 path the int8
         * matvec: not the same bits.) */
        const char *q6 = getenv("MEMRA_MMVQ6");
        const int same = tc && type == MEMRA_TYPE_Q6_K && s->in % 512 == 0 && !(q6 && !strcmp(q6, "1")) &&
                         !memra_backend_cuda_weight_tm(g->gpu, &w.g) &&
                         memra_backend_cuda_prefill_matvec(g->gpu, type, s->in, s->out);
        if (T > 1) {
            int64_t rows[3] = {0, T / 2, T - 1};
            for (int k = 0; k < 3; k++) {
                const int64_t T2 = tc && !same ? 20 : 1, first = inv_window_first(rows[k], T2, T);
                if (gpoison(g, dy1, (size_t)(T2 * s->out) * 4)) goto done;
                if (g->gpu->ops->matmul(g->gpu, &w.g, dx + first * s->in, dy1, T2, 0)) goto done;
                if (gdown(g, y1, dy1, (size_t)(T2 * s->out) * 4)) goto done;
                if (memcmp(y1 + (rows[k] - first) * s->out, y + rows[k] * s->out, (size_t)s->out * 4)) {
                    inv_ok = 0;
                    note = "batch-variant";
                }
            }
        }
        if (tc && !*note) note = same ? "prefill path, rows == T=1 (memcmp)" : "prefill GEMM";
        double tol = tc && !same ? GATE_TC_TOL : 1e-5; /* mmvg: the matvec's arithmetic, the matvec's bar */
        int ok = passes(e, tol) && strcmp(note, "batch-variant");
        gate_row(g, 0, "matmul", m->name, shape, memra_type_name(type), (long)T, e, tol, ok, note);
        double *wp = tc ? &worst_tc : &worst;
        if (isnan(e) || e > *wp) *wp = e;
    }
    /* the prefill path on activations far outside fp16's range: token t's
     * row scaled by 2^(7t mod 41 - 20), up to ~1e6 (real models have
     * activations in the tens of thousands) and down to ~1e-6 */
    if (!g->quick) {
        const int64_t T = 37;
        float *xw = malloc((size_t)(T * s->in) * 4);
        if (!xw) goto done;
        for (int64_t t = 0; t < T; t++)
            for (int64_t i = 0; i < s->in; i++) xw[t * s->in + i] = ldexpf(x[t * s->in + i], (int)((7 * t) % 41) - 20);
        memra_status st = g->gpu->ops->upload(g->gpu, dx, xw, (size_t)(T * s->in) * 4);
        if (!st) st = gpoison(g, dy, (size_t)T * s->out * 4);
        if (!st) st = g->gpu->ops->matmul(g->gpu, &w.g, dx, dy, T, 0);
        if (!st) st = gdown(g, y, dy, (size_t)T * s->out * 4);
        double e = st || !all_finite(y, (size_t)T * s->out) ? NAN : 0.0;
        int64_t R = s->out < 16 ? s->out : 16;
        int64_t starts[2] = {0, s->out - R};
        for (int k = 0; k < 2 && !isnan(e); k++) {
            double ek = mm_check_rows(g, &w, xw, y, T, starts[k], R, ref);
            if (isnan(ek) || ek > e) e = ek;
        }
        free(xw);
        if (g->gpu->ops->upload(g->gpu, dx, x, xn * 4)) goto done; /* the plain rows back for the cases below */
        gate_row(g, 0, "matmul", m->name, shape, memra_type_name(type), (long)T, e, GATE_TC_TOL,
                 passes(e, GATE_TC_TOL), "rows scaled 2^-20..2^20");
        if (isnan(e) || e > worst_tc) worst_tc = e;
    }
    /* accumulate = 1 (the residual form), T = 2 */
    {
        int64_t T = 2;
        float *y0 = malloc((size_t)T * s->out * 4);
        if (!y0) goto done;
        rnd_fill(g, y0, (size_t)T * s->out, -1.0f, 1.0f);
        memra_status st = g->gpu->ops->upload(g->gpu, dy, y0, (size_t)T * s->out * 4);
        if (!st) st = g->gpu->ops->matmul(g->gpu, &w.g, dx, dy, T, 1);
        if (!st) st = gdown(g, y, dy, (size_t)T * s->out * 4);
        double e = NAN;
        if (!st) {
            int64_t R = s->out < 16 ? s->out : 16;
            memra_weight v = w.c;
            v.ne[1] = R;
            float *r = malloc((size_t)(T * R) * 4);
            if (r) {
                for (int64_t t = 0; t < T; t++) memcpy(r + t * R, y0 + t * s->out, (size_t)R * 4);
                if (g->cpu->ops->matmul(g->cpu, &v, x, r, T, 1) == MEMRA_OK) {
                    e = 0.0;
                    for (int64_t t = 0; t < T; t++) {
                        double et = rel_err(r + t * R, y + t * s->out, (size_t)R);
                        if (isnan(et) || et > e) e = et;
                    }
                }
                free(r);
            }
        }
        free(y0);
        gate_row(g, 0, "matmul+acc", m->name, shape, memra_type_name(type), (long)T, e, 1e-5, passes(e, 1e-5), "");
        if (isnan(e) || e > worst) worst = e;
    }
    rc = 0;
done:
    worst_out[0] = worst;
    worst_out[1] = worst_tc;
    *inv_ok_out = inv_ok;
    free(x), free(y), free(y1), free(ref);
    g->gpu->ops->free(g->gpu, dx), g->gpu->ops->free(g->gpu, dy), g->gpu->ops->free(g->gpu, dy1);
    wpair_free(g, &w);
    return rc;
}

static void gate_matmul(gate *g, const gate_model *m) {
    int64_t H = m->H, qkv = 2 * (int64_t)m->n_k * 128 + (int64_t)m->n_v * 128;
    mm_shape shapes[8];
    int ns = 0;
    /* not a model shape: rows of an odd number of 256-element super-blocks,
     * whose 210-byte Q6_K rows start 2 bytes past a word every other row */
    shapes[ns++] = (mm_shape){"odd_rows", 1280, 200};
    shapes[ns++] = (mm_shape){"attn_qkv", H, qkv};
    shapes[ns++] = (mm_shape){"attn_q", H, 2 * (int64_t)m->n_head * 256};
    shapes[ns++] = (mm_shape){"ssm_out", (int64_t)m->n_v * 128, H};
    if (m->n_ff) {
        shapes[ns++] = (mm_shape){"ffn_up", H, m->n_ff};
        shapes[ns++] = (mm_shape){"ffn_down", m->n_ff, H};
    } else {
        shapes[ns++] = (mm_shape){"ffn_gate_inp", H, m->n_expert};
        shapes[ns++] = (mm_shape){"ffn_up_shexp", H, m->n_ff_exp};
        shapes[ns++] = (mm_shape){"ffn_down_shexp", m->n_ff_exp, H};
    }
    /* the output head (Q6_K in the Q4_K_M, IQ4_XS and NVFP4 mixes): its
     * 15,520 tiles take mmv6.cuh's k_mmv6b (bulk copies; k_mmv6p under
     * MEMRA_MMV6B=0) at T <= 4, and the batch invariance rows below hold
     * it to k_mmv6's and mmvg's bits */
    const int head = ns;
    shapes[ns++] = (mm_shape){"output", H, GATE_VOCAB};
    for (size_t ti = 0; ti < sizeof gate_types / sizeof gate_types[0]; ti++) {
        uint32_t type = gate_types[ti];
        if (g->quick && type != MEMRA_TYPE_Q4_K && type != MEMRA_TYPE_Q8_0 && type != MEMRA_TYPE_F32) continue;
        double worst = 0.0, worst_tc = 0.0;
        int inv = 1, failed = 0;
        int f0 = g->n_fail;
        for (int i = 0; i < ns; i++) {
            if (g->quick && (i == 0 || i > 2)) continue;
            if (i == head && type != MEMRA_TYPE_Q6_K) continue;
            double wv[2] = {0.0, 0.0};
            int iv = 1;
            if (gate_matmul_shape(g, m, &shapes[i], type, wv, &iv)) failed = 1;
            if (isnan(wv[0]) || wv[0] > worst) worst = wv[0];
            if (isnan(wv[1]) || wv[1] > worst_tc) worst_tc = wv[1];
            if (!iv) inv = 0;
        }
        if (failed) g->n_fail++;
        /* summary row (not counted again): worst over shapes and T */
        printf("%-14s %-8s %-20s %-7s %5s  %10.3e  %7.0e  %-4s %s; T>=16 (prefill GEMM): %.3e (tol %.0e)\n", "matmul*",
               m->name, "all shapes", memra_type_name(type), "<16", worst, 1e-5, (g->n_fail == f0) ? "ok" : "FAIL",
               inv ? "batch-invariant" : "BATCH-VARIANT", worst_tc, GATE_TC_TOL);
    }
}

/* ---------------------------------------------------------- batches */

typedef struct bpair {
    memra_batch c, g;
} bpair;

/* Sequences: n_seqs runs, run s has len[s] tokens at positions pos0[s].., slot slots[s]. */
static int bpair_make(gate *g, bpair *b, int n_seqs, const int32_t *len, const int32_t *pos0, const int32_t *slots,
                      int32_t n_vocab) {
    memra_error err;
    int32_t T = 0;
    for (int s = 0; s < n_seqs; s++) T += len[s];
    if (memra_batch_init(g->cpu, T, n_seqs, &b->c, &err) || memra_batch_init(g->gpu, T, n_seqs, &b->g, &err)) {
        fprintf(stderr, "gate: batch: %s\n", err.msg);
        return -1;
    }
    for (int s = 0; s < n_seqs; s++) {
        int32_t *tok = malloc((size_t)len[s] * 4);
        if (!tok) return -1;
        for (int i = 0; i < len[s]; i++) tok[i] = (int32_t)(rnd_u64(g) % (uint64_t)n_vocab);
        if (memra_batch_add(&b->c, slots[s], tok, len[s], pos0[s]) ||
            memra_batch_add(&b->g, slots[s], tok, len[s], pos0[s])) {
            free(tok);
            return -1;
        }
        free(tok);
    }
    GTRY(g, g->cpu->ops->batch_upload(g->cpu, &b->c));
    GTRY(g, g->gpu->ops->batch_upload(g->gpu, &b->g));
    return 0;
}

static void bpair_free(gate *g, bpair *b) {
    memra_batch_free(g->cpu, &b->c);
    memra_batch_free(g->gpu, &b->g);
}

/* A host array and its GPU copy. */
typedef struct buf {
    float *h, *d;
    size_t n;
} buf;

static int buf_make(gate *g, buf *b, size_t n, float lo, float hi) {
    b->n = n;
    b->h = malloc(n * 4);
    b->d = galloc(g, n * 4);
    if (!b->h || !b->d) return -1;
    rnd_fill(g, b->h, n, lo, hi);
    GTRY(g, g->gpu->ops->upload(g->gpu, b->d, b->h, n * 4));
    return 0;
}

static void buf_free(gate *g, buf *b) {
    free(b->h);
    if (b->d) g->gpu->ops->free(g->gpu, b->d);
    memset(b, 0, sizeof *b);
}

/* Downloads d (n floats) into a fresh host array and compares it with ref. */
static double cmp_dev(gate *g, const float *ref, const float *d, size_t n) {
    float *h = malloc(n * 4);
    if (!h) return NAN;
    double e = NAN;
    if (gdown(g, h, d, n * 4) == MEMRA_OK) e = rel_err(ref, h, n);
    free(h);
    return e;
}

/* --------------------------------------------------------- small ops */

static int gate_small_ops(gate *g, const gate_model *m) {
    int64_t H = m->H, T = 7;
    char shape[64];
    /* embed: every type, vocab 1024 */
    for (size_t ti = 0; ti < sizeof gate_types / sizeof gate_types[0]; ti++) {
        uint32_t type = gate_types[ti];
        wpair w;
        if (wpair_make(g, &w, "token_embd", type, H, 1024, 1)) return -1;
        bpair b;
        int32_t len[2] = {3, 4}, pos0[2] = {0, 10}, slots[2] = {0, 1};
        if (bpair_make(g, &b, 2, len, pos0, slots, 1024)) return -1;
        buf out;
        if (buf_make(g, &out, (size_t)(T * H), 0, 0)) return -1;
        GTRY(g, gpoison(g, out.d, out.n * 4));
        GTRY(g, g->cpu->ops->embed(g->cpu, &w.c, &b.c, out.h));
        GTRY(g, g->gpu->ops->embed(g->gpu, &w.g, &b.g, out.d));
        double e = cmp_dev(g, out.h, out.d, out.n);
        snprintf(shape, sizeof shape, "{%lld,1024} T=7", (long long)H);
        gate_row(g, 0, "embed", m->name, shape, memra_type_name(type), (long)T, e, 1e-6, passes(e, 1e-6), "");
        buf_free(g, &out);
        bpair_free(g, &b);
        wpair_free(g, &w);
    }
    /* rmsnorm: strided rows (stride H + 64), and per-head in place (256-wide heads) */
    {
        wpair w;
        if (wvec_make(g, &w, "attn_norm", H, 1, 0.5f, 1.5f)) return -1;
        int64_t stride = H + 64;
        buf x, y;
        if (buf_make(g, &x, (size_t)(T * stride), -2.0f, 2.0f) || buf_make(g, &y, (size_t)(T * stride), 0, 0))
            return -1;
        memcpy(y.h, x.h, y.n * 4);
        GTRY(g, g->gpu->ops->upload(g->gpu, y.d, y.h, y.n * 4));
        GTRY(g, g->cpu->ops->rmsnorm(g->cpu, x.h, stride, &w.c, y.h, stride, H, T, 1e-6f));
        GTRY(g, g->gpu->ops->rmsnorm(g->gpu, x.d, stride, &w.g, y.d, stride, H, T, 1e-6f));
        double e = cmp_dev(g, y.h, y.d, y.n);
        gate_row(g, 1, "rmsnorm", m->name, "rows, stride H+64", "F32", (long)T, e, 1e-5, passes(e, 1e-5), "");
        wpair hn;
        if (wvec_make(g, &hn, "attn_q_norm", 256, 1, 0.5f, 1.5f)) return -1;
        /* in place over the q halves of [T][n_head][512] */
        int64_t rows = T * m->n_head;
        buf q;
        if (buf_make(g, &q, (size_t)(rows * 512), -2.0f, 2.0f)) return -1;
        GTRY(g, g->cpu->ops->rmsnorm(g->cpu, q.h, 512, &hn.c, q.h, 512, 256, rows, 1e-6f));
        GTRY(g, g->gpu->ops->rmsnorm(g->gpu, q.d, 512, &hn.g, q.d, 512, 256, rows, 1e-6f));
        e = cmp_dev(g, q.h, q.d, q.n);
        gate_row(g, 1, "rmsnorm", m->name, "heads in place", "F32", (long)T, e, 1e-5, passes(e, 1e-5), "");
        /* batch invariance: row 3 alone gets the bits it got among 7 rows */
        {
            float *yr = malloc(y.n * 4), *r1 = malloc((size_t)H * 4), *d1 = galloc(g, (size_t)H * 4);
            if (!yr || !r1 || !d1) return -1;
            GTRY(g, gdown(g, yr, y.d, y.n * 4));
            GTRY(g, gpoison(g, d1, (size_t)H * 4));
            GTRY(g, g->gpu->ops->rmsnorm(g->gpu, x.d + 3 * stride, stride, &w.g, d1, H, H, 1, 1e-6f));
            GTRY(g, gdown(g, r1, d1, (size_t)H * 4));
            int ok = all_finite(r1, (size_t)H) && !memcmp(r1, yr + 3 * stride, (size_t)H * 4);
            gate_row(g, 1, "rmsnorm-inv", m->name, "1 row vs row 3 of 7", "F32", 1, ok ? 0.0 : 1.0, 0, ok, "memcmp");
            free(yr), free(r1);
            g->gpu->ops->free(g->gpu, d1);
        }
        /* input rows at an odd stride: the scalar (not 16-byte aligned) path */
        {
            int64_t os = H + 1;
            buf xo, yo;
            if (buf_make(g, &xo, (size_t)(T * os), -2.0f, 2.0f) || buf_make(g, &yo, (size_t)(T * H), 0, 0)) return -1;
            GTRY(g, gpoison(g, yo.d, yo.n * 4));
            GTRY(g, g->cpu->ops->rmsnorm(g->cpu, xo.h, os, &w.c, yo.h, H, H, T, 1e-6f));
            GTRY(g, g->gpu->ops->rmsnorm(g->gpu, xo.d, os, &w.g, yo.d, H, H, T, 1e-6f));
            e = cmp_dev(g, yo.h, yo.d, yo.n);
            gate_row(g, 1, "rmsnorm", m->name, "rows, stride H+1", "F32", (long)T, e, 1e-5, passes(e, 1e-5), "");
            buf_free(g, &xo), buf_free(g, &yo);
        }
        buf_free(g, &q);
        buf_free(g, &x);
        buf_free(g, &y);
        wpair_free(g, &w);
        wpair_free(g, &hn);
    }
    /* add, add_sigmoid_scaled, swiglu */
    {
        int64_t n = m->n_ff ? m->n_ff : m->n_ff_exp;
        buf a, b2, c, o;
        if (buf_make(g, &a, (size_t)(T * n), -3, 3) || buf_make(g, &b2, (size_t)(T * n), -3, 3) ||
            buf_make(g, &c, (size_t)(T * n), -3, 3) || buf_make(g, &o, (size_t)(T * n), 0, 0))
            return -1;
        GTRY(g, gpoison(g, o.d, o.n * 4));
        GTRY(g, g->cpu->ops->swiglu(g->cpu, a.h, b2.h, o.h, n, T));
        GTRY(g, g->gpu->ops->swiglu(g->gpu, a.d, b2.d, o.d, n, T));
        double e = cmp_dev(g, o.h, o.d, o.n);
        gate_row(g, 1, "swiglu", m->name, "[T][n_ff]", "F32", (long)T, e, 1e-6, passes(e, 1e-6), "");
        GTRY(g, g->cpu->ops->add(g->cpu, c.h, a.h, (int64_t)c.n));
        GTRY(g, g->gpu->ops->add(g->gpu, c.d, a.d, (int64_t)c.n));
        e = cmp_dev(g, c.h, c.d, c.n);
        gate_row(g, 1, "add", m->name, "[T][n_ff]", "F32", (long)T, e, 0, passes(e, 0), "");
        /* gate scalar per token at stride 3 */
        GTRY(g, g->cpu->ops->add_sigmoid_scaled(g->cpu, c.h, b2.h, a.h, 3, n, T));
        GTRY(g, g->gpu->ops->add_sigmoid_scaled(g->gpu, c.d, b2.d, a.d, 3, n, T));
        e = cmp_dev(g, c.h, c.d, c.n);
        gate_row(g, 1, "add_sigmoid", m->name, "[T][n_ff]", "F32", (long)T, e, 1e-6, passes(e, 1e-6), "");
        buf_free(g, &a), buf_free(g, &b2), buf_free(g, &c), buf_free(g, &o);
    }
    /* rope on q heads of [T][n_head][512], positions up to ~250k */
    {
        bpair b;
        int32_t len[2] = {3, 4}, pos0[2] = {5, 250000}, slots[2] = {0, 1};
        if (bpair_make(g, &b, 2, len, pos0, slots, 100)) return -1;
        buf q;
        if (buf_make(g, &q, (size_t)(T * m->n_head * 512), -2, 2)) return -1;
        GTRY(g, g->cpu->ops->rope_neox(g->cpu, q.h, &b.c, m->n_head, 512, m->n_head * 512, 64, 1e7f));
        GTRY(g, g->gpu->ops->rope_neox(g->gpu, q.d, &b.g, m->n_head, 512, m->n_head * 512, 64, 1e7f));
        double e = cmp_dev(g, q.h, q.d, q.n);
        gate_row(g, 1, "rope_neox", m->name, "n_rot 64, pos<=250k", "F32", (long)T, e, 1e-6, passes(e, 1e-6), "");
        buf_free(g, &q);
        bpair_free(g, &b);
    }
    /* argmax over the vocabulary, with a planted tie; then rows of an odd
     * length (so the rows after the first start unaligned) holding NaNs and
     * -inf: row 0 all NaN (id 0), row 1 -inf but for NaNs (the first
     * non-NaN), the others a tie between two random entries; then 70 short
     * rows (more than one launch's 64, one block a row) */
    for (int odd = 0; odd < 3; odd++) {
        const int64_t n = odd == 2 ? 1001 : GATE_VOCAB - 3 * odd, R = odd == 2 ? 70 : T;
        buf l;
        if (buf_make(g, &l, (size_t)(R * n), -10, 10)) return -1;
        for (int64_t t = 0; t < R; t++) {
            float *r = l.h + t * n;
            if (odd && t < 2) {
                for (int64_t i = 0; i < n; i++) r[i] = t == 0 ? NAN : -INFINITY;
                for (int k = 0; k < 3; k++) r[rnd_u64(g) % 64] = NAN;
                continue;
            }
            int64_t a = (int64_t)(rnd_u64(g) % (uint64_t)n), b = (int64_t)(rnd_u64(g) % (uint64_t)n);
            r[a] = r[b] = 11.0f;
            if (odd)
                for (int k = 0; k < 8; k++) r[rnd_u64(g) % (uint64_t)n] = NAN;
        }
        GTRY(g, g->gpu->ops->upload(g->gpu, l.d, l.h, l.n * 4));
        int32_t ic[70], ig[70];
        int32_t *di = galloc(g, sizeof ig);
        if (!di) return -1;
        GTRY(g, gpoison(g, di, sizeof ig));
        GTRY(g, g->cpu->ops->argmax(g->cpu, l.h, n, R, ic));
        GTRY(g, g->gpu->ops->argmax(g->gpu, l.d, n, R, di));
        GTRY(g, gdown(g, ig, di, (size_t)R * 4));
        int ok = !memcmp(ic, ig, (size_t)R * 4);
        gate_row(g, 1, "argmax", m->name, odd == 2 ? "1001, 70 rows" : odd ? "vocab-3, NaN, -inf" : "vocab 248320, tie",
                 "F32", (long)R, ok ? 0.0 : 1.0, 0, ok, "exact ids");
        g->gpu->ops->free(g->gpu, di);
        buf_free(g, &l);
    }
    return 0;
}

/* ------------------------------------------------------------ attention */

/* The buffers of an attention check (3 cache slots of 4096 positions, hd
 * 256): random caches, T tokens of random k, v and q (with its gate: a
 * token's row is n_head x 512, q then gate per head), and out; the batch's k
 * and v stored into both backends' caches. */
#define GATE_ATT_CTX 4096
#define GATE_ATT_HD 256
typedef struct att_bufs {
    buf kc, vc, k, v, qg, out;
} att_bufs;

static int att_bufs_make(gate *g, const gate_model *m, const bpair *b, int64_t T, att_bufs *a) {
    const int64_t kv_dim = (int64_t)m->n_kv * GATE_ATT_HD;
    const size_t cn = (size_t)3 * GATE_ATT_CTX * kv_dim;
    if (buf_make(g, &a->kc, cn, -1, 1) || buf_make(g, &a->vc, cn, -1, 1) ||
        buf_make(g, &a->k, (size_t)(T * kv_dim), -1, 1) || buf_make(g, &a->v, (size_t)(T * kv_dim), -1, 1) ||
        buf_make(g, &a->qg, (size_t)(T * m->n_head * 512), -1, 1) ||
        buf_make(g, &a->out, (size_t)(T * m->n_head * GATE_ATT_HD), 0, 0))
        return -1;
    GTRY(g, g->cpu->ops->kv_store(g->cpu, &b->c, a->kc.h, a->vc.h, GATE_ATT_CTX, kv_dim, a->k.h, a->v.h));
    GTRY(g, g->gpu->ops->kv_store(g->gpu, &b->g, a->kc.d, a->vc.d, GATE_ATT_CTX, kv_dim, a->k.d, a->v.d));
    return 0;
}

static void att_bufs_free(gate *g, att_bufs *a) {
    buf_free(g, &a->kc), buf_free(g, &a->vc), buf_free(g, &a->k), buf_free(g, &a->v), buf_free(g, &a->qg);
    buf_free(g, &a->out);
}

/* Both backends' attention over a's buffers for batch b (scale 1 / 16);
 * *got: the GPU output, downloaded (malloc'd), *e: its error against the
 * CPU's. */
static int att_run_both(gate *g, const gate_model *m, bpair *b, att_bufs *a, float **got, double *e) {
    const int64_t ts = (int64_t)m->n_head * 512;
    GTRY(g, gpoison(g, a->out.d, a->out.n * 4));
    GTRY(g, g->cpu->ops->attention(g->cpu, &b->c, a->kc.h, a->vc.h, GATE_ATT_CTX, a->qg.h, a->qg.h + 256, ts, 512,
                                   m->n_head, m->n_kv, GATE_ATT_HD, 1.0f / 16.0f, a->out.h));
    GTRY(g, g->gpu->ops->attention(g->gpu, &b->g, a->kc.d, a->vc.d, GATE_ATT_CTX, a->qg.d, a->qg.d + 256, ts, 512,
                                   m->n_head, m->n_kv, GATE_ATT_HD, 1.0f / 16.0f, a->out.d));
    if (!(*got = malloc(a->out.n * 4))) return -1;
    GTRY(g, gdown(g, *got, a->out.d, a->out.n * 4));
    *e = rel_err(a->out.h, *got, a->out.n);
    return 0;
}

static int gate_attention(gate *g, const gate_model *m) {
    const int32_t n_ctx = GATE_ATT_CTX, hd = GATE_ATT_HD;
    /* a decode token at 0, a 3-token run ending at 299 (two splits), a 2-token run at 3998 */
    int32_t len[3] = {1, 3, 2}, pos0[3] = {0, 297, 3998}, slots[3] = {1, 0, 2};
    bpair b;
    if (bpair_make(g, &b, 3, len, pos0, slots, 100)) return -1;
    int64_t T = 6;
    att_bufs a;
    if (att_bufs_make(g, m, &b, T, &a)) return -1;
    buf kc = a.kc, vc = a.vc, qg = a.qg;
    double e = cmp_dev(g, kc.h, kc.d, kc.n), e2 = cmp_dev(g, vc.h, vc.d, vc.n);
    if (isnan(e2) || e2 > e) e = e2;
    char shape[64];
    snprintf(shape, sizeof shape, "n_kv %d, ctx %d", m->n_kv, n_ctx);
    gate_row(g, 1, "kv_store", m->name, shape, "F32", (long)T, e, 0, passes(e, 0), "");
    int64_t ts = (int64_t)m->n_head * 512;
    float *got;
    if (att_run_both(g, m, &b, &a, &got, &e)) return -1;
    snprintf(shape, sizeof shape, "h %d/%d, pos<=3999", m->n_head, m->n_kv);
    gate_row(g, 1, "attention", m->name, shape, "F32", (long)T, e, 2e-5, passes(e, 2e-5), "gated");
    /* batch invariance: the last token alone gives the same bits */
    {
        bpair b1;
        int32_t l1 = 1, p1 = 3999, s1 = 2;
        if (bpair_make(g, &b1, 1, &l1, &p1, &s1, 100)) return -1;
        buf o1;
        if (buf_make(g, &o1, (size_t)(m->n_head * hd), 0, 0)) return -1;
        GTRY(g, gpoison(g, o1.d, o1.n * 4));
        GTRY(g, g->gpu->ops->attention(g->gpu, &b1.g, kc.d, vc.d, n_ctx, qg.d + 5 * ts, qg.d + 5 * ts + 256, ts, 512,
                                       m->n_head, m->n_kv, hd, 1.0f / 16.0f, o1.d));
        GTRY(g, gdown(g, o1.h, o1.d, o1.n * 4));
        int ok = !memcmp(o1.h, got + 5 * (int64_t)m->n_head * hd, o1.n * 4);
        gate_row(g, 1, "attention-inv", m->name, "T=1 vs T=6 row", "F32", 1, ok ? 0.0 : 1.0, 0, ok, "memcmp");
        buf_free(g, &o1);
        bpair_free(g, &b1);
    }
    free(got);
    att_bufs_free(g, &a);
    bpair_free(g, &b);
    return 0;
}

/* Prefill attention (T >= 16 takes the CUDA backend's query-tiled kernel):
 * two sequences whose tokens share a tile, against the CPU; then each
 * sequence's rows recomputed in other chunks (the 30-token run alone, its
 * last 17 tokens alone: other tiles, other T) must give the same bits. */
static int gate_attention_pf(gate *g, const gate_model *m) {
    const int32_t n_ctx = GATE_ATT_CTX, hd = GATE_ATT_HD;
    const int64_t ts = (int64_t)m->n_head * 512, orow = (int64_t)m->n_head * hd;
    int32_t len[2] = {21, 30}, pos0[2] = {100, 3970}, slots[2] = {0, 2};
    bpair b;
    if (bpair_make(g, &b, 2, len, pos0, slots, 100)) return -1;
    const int64_t T = 51;
    att_bufs a;
    if (att_bufs_make(g, m, &b, T, &a)) return -1;
    buf kc = a.kc, vc = a.vc, qg = a.qg;
    float *got;
    double e;
    if (att_run_both(g, m, &b, &a, &got, &e)) return -1;
    char shape[64];
    snprintf(shape, sizeof shape, "h %d/%d, 21+30 tok", m->n_head, m->n_kv);
    gate_row(g, 1, "attention-pf", m->name, shape, "F32", (long)T, e, 2e-5, passes(e, 2e-5), "gated");
    /* other chunks: {first token, count, position} */
    const int32_t cases[2][3] = {{21, 30, 3970}, {34, 17, 3983}};
    int ok = 1;
    for (int c = 0; c < 2 && ok; c++) {
        bpair b1;
        int32_t l1 = cases[c][1], p1 = cases[c][2], s1 = 2;
        if (bpair_make(g, &b1, 1, &l1, &p1, &s1, 100)) return -1;
        buf o1;
        if (buf_make(g, &o1, (size_t)(l1 * orow), 0, 0)) return -1;
        GTRY(g, gpoison(g, o1.d, o1.n * 4));
        const float *q1 = qg.d + cases[c][0] * ts;
        GTRY(g, g->gpu->ops->attention(g->gpu, &b1.g, kc.d, vc.d, n_ctx, q1, q1 + 256, ts, 512, m->n_head, m->n_kv, hd,
                                       1.0f / 16.0f, o1.d));
        GTRY(g, gdown(g, o1.h, o1.d, o1.n * 4));
        ok = !memcmp(o1.h, got + cases[c][0] * orow, o1.n * 4);
        buf_free(g, &o1);
        bpair_free(g, &b1);
    }
    gate_row(g, 1, "attention-pf-inv", m->name, "30 / 17 tok alone", "F32", 30, ok ? 0.0 : 1.0, 0, ok, "memcmp");
    free(got);
    att_bufs_free(g, &a);
    bpair_free(g, &b);
    return 0;
}

/* ------------------------------------------------- qk_norm_rope_store */

/* The head work of an attention layer (q/k norms, RoPE, KV store) at the
 * model's head counts, hd 256, n_rot 64, on the batch of gate_attention. */
static int gate_qk_norm_rope(gate *g, const gate_model *m) {
    const int32_t n_ctx = 4096, hd = 256, n_rot = 64;
    const float theta = 1e7f, eps = 1e-6f;
    int64_t kv_dim = (int64_t)m->n_kv * hd, qs = 2 * hd, qt = (int64_t)m->n_head * qs, T = 6;
    int32_t len[3] = {1, 3, 2}, pos0[3] = {0, 297, 3998}, slots[3] = {1, 0, 2};
    bpair b;
    if (bpair_make(g, &b, 3, len, pos0, slots, 100)) return -1;
    wpair qn, kn;
    if (wvec_make(g, &qn, "attn_q_norm", hd, 1, 0.5f, 1.5f) || wvec_make(g, &kn, "attn_k_norm", hd, 1, 0.5f, 1.5f))
        return -1;
    buf q, k, v, kc, vc;
    size_t cn = (size_t)3 * n_ctx * kv_dim;
    if (buf_make(g, &q, (size_t)(T * qt), -2, 2) || buf_make(g, &k, (size_t)(T * kv_dim), -2, 2) ||
        buf_make(g, &v, (size_t)(T * kv_dim), -1, 1) || buf_make(g, &kc, cn, 0, 0) || buf_make(g, &vc, cn, 0, 0))
        return -1;
    float *q0 = malloc(q.n * 4), *k0 = malloc(k.n * 4), *gk = malloc(cn * 4), *gv = malloc(cn * 4);
    if (!q0 || !k0 || !gk || !gv) return -1;
    memcpy(q0, q.h, q.n * 4), memcpy(k0, k.h, k.n * 4);
    /* the caches are outputs: poisoned; only the stored rows are compared */
    GTRY(g, gpoison(g, kc.d, cn * 4));
    GTRY(g, gpoison(g, vc.d, cn * 4));
    GTRY(g, g->cpu->ops->qk_norm_rope_store(g->cpu, &b.c, q.h, qt, qs, m->n_head, k.h, v.h, m->n_kv, hd, &qn.c, &kn.c,
                                            eps, n_rot, theta, kc.h, vc.h, n_ctx));
    GTRY(g, g->gpu->ops->qk_norm_rope_store(g->gpu, &b.g, q.d, qt, qs, m->n_head, k.d, v.d, m->n_kv, hd, &qn.g, &kn.g,
                                            eps, n_rot, theta, kc.d, vc.d, n_ctx));
    float *gq = malloc(q.n * 4), *gkk = malloc(k.n * 4);
    if (!gq || !gkk) return -1;
    GTRY(g, gdown(g, gq, q.d, q.n * 4));
    GTRY(g, gdown(g, gkk, k.d, k.n * 4));
    GTRY(g, gdown(g, gk, kc.d, cn * 4));
    GTRY(g, gdown(g, gv, vc.d, cn * 4));
    double eq = rel_err(q.h, gq, q.n), ek = rel_err(k.h, gkk, k.n), ekc = 0.0, evc = 0.0;
    for (int64_t t = 0; t < T; t++) {
        int s = b.c.tok_seq[t];
        size_t row = ((size_t)b.c.slot[s] * n_ctx + (size_t)b.c.pos[t]) * (size_t)kv_dim;
        double e1 = rel_err(kc.h + row, gk + row, (size_t)kv_dim), e2 = rel_err(vc.h + row, gv + row, (size_t)kv_dim);
        if (isnan(e1) || e1 > ekc) ekc = e1;
        if (isnan(e2) || e2 > evc) evc = e2;
    }
    char shape[64];
    snprintf(shape, sizeof shape, "h %d/%d hd 256 rot 64", m->n_head, m->n_kv);
    gate_row(g, 1, "qk_norm_rope q", m->name, shape, "F32", (long)T, eq, 1e-5, passes(eq, 1e-5), "q + gate rows");
    gate_row(g, 1, "qk_norm_rope k", m->name, shape, "F32", (long)T, ek, 1e-5, passes(ek, 1e-5), "");
    gate_row(g, 1, "qk_norm_rope kc", m->name, shape, "F32", (long)T, ekc, 1e-5, passes(ekc, 1e-5), "stored rows");
    gate_row(g, 1, "qk_norm_rope vc", m->name, shape, "F32", (long)T, evc, 0, passes(evc, 0), "stored rows");
    /* batch invariance: the last token (slot 2, pos 3999) alone */
    {
        bpair b1;
        int32_t l1 = 1, p1 = 3999, s1 = 2;
        if (bpair_make(g, &b1, 1, &l1, &p1, &s1, 100)) return -1;
        buf q1, k1;
        if (buf_make(g, &q1, (size_t)qt, 0, 0) || buf_make(g, &k1, (size_t)kv_dim, 0, 0)) return -1;
        GTRY(g, g->gpu->ops->upload(g->gpu, q1.d, q0 + 5 * qt, (size_t)qt * 4));
        GTRY(g, g->gpu->ops->upload(g->gpu, k1.d, k0 + 5 * kv_dim, (size_t)kv_dim * 4));
        GTRY(g, g->gpu->ops->qk_norm_rope_store(g->gpu, &b1.g, q1.d, qt, qs, m->n_head, k1.d, v.d + 5 * kv_dim,
                                                m->n_kv, hd, &qn.g, &kn.g, eps, n_rot, theta, kc.d, vc.d, n_ctx));
        GTRY(g, gdown(g, q1.h, q1.d, (size_t)qt * 4));
        GTRY(g, gdown(g, k1.h, k1.d, (size_t)kv_dim * 4));
        int ok = !memcmp(q1.h, gq + 5 * qt, (size_t)qt * 4) && !memcmp(k1.h, gkk + 5 * kv_dim, (size_t)kv_dim * 4);
        gate_row(g, 1, "qk_norm_rope-inv", m->name, "T=1 vs T=6 row", "F32", 1, ok ? 0.0 : 1.0, 0, ok, "memcmp q, k");
        buf_free(g, &q1), buf_free(g, &k1);
        bpair_free(g, &b1);
    }
    free(q0), free(k0), free(gk), free(gv), free(gq), free(gkk);
    buf_free(g, &q), buf_free(g, &k), buf_free(g, &v), buf_free(g, &kc), buf_free(g, &vc);
    wpair_free(g, &qn), wpair_free(g, &kn);
    bpair_free(g, &b);
    return 0;
}

/* ------------------------------------------- matmul_multi, matmul_swiglu */

/* Rows [r0, r0 + R) of a weight, as the CPU sees it. */
static memra_weight wrows(const wpair *w, int64_t r0, int64_t R) {
    memra_weight v = w->c;
    v.ne[1] = R;
    v.host = v.data = w->host + (size_t)r0 * w->c.row_bytes;
    v.nbytes = (uint64_t)R * w->c.row_bytes;
    return v;
}

#define FUSED_TMAX 37
#define FUSED_T2 20 /* the prefill path's invariance run: the last 20 tokens alone */

/* One fused matvec case: n weights sharing x (matmul_multi), or gate and up
 * (swiglu = 1: matmul_swiglu, one output). T = 1 and 7 on the matvec path
 * (tol 1e-5), T = 37 on the prefill path (GATE_TC_TOL, as matmul); every output
 * poisoned before the op; 3 slices of 16 rows per output checked against
 * the CPU op on row views (per token: max error over the 48 outputs / their
 * max |cpu|); the last row must equal a T = 1 run at T = 7 and a run of the
 * last 20 tokens at T = 37 (memcmp). */
static int gate_fused_case(gate *g, const gate_model *m, const char *op, const char *label, int n,
                           const mm_shape *s, uint32_t type, int swiglu, int with_norm, unsigned q6_mask) {
    wpair w[4], nw = {0};
    /* q6_mask: weight i is Q6_K where bit i is set (the Q4_K_M mix: the CUDA backend runs such a group on
     * its side branch, matmul.cu) */
    const char *tname = q6_mask ? "q4_k+q6_k" : memra_type_name(type);
    const memra_weight *wg[4];
    int n_out = swiglu ? 1 : n;
    float *hy[4] = {0}, *dy[4] = {0}, *dy1[4] = {0}, *y1 = NULL, *ref = NULL, *x = NULL, *xr = NULL, *dx = NULL;
    int rc = -1;
    for (int i = 0; i < n; i++) {
        if (wpair_make(g, &w[i], s[i].name, (q6_mask >> i) & 1 ? MEMRA_TYPE_Q6_K : type, s[i].in, s[i].out, 1))
            return -1;
        wg[i] = &w[i].g;
    }
    int64_t in = s[0].in;
    /* with_norm: the op's input is rmsnorm(x) (memra_norm), fused on the GPU;
     * the CPU reference runs the rmsnorm op, then the matmuls on its rows */
    if (with_norm && wvec_make(g, &nw, "input_norm", in, 1, 0.5f, 1.5f)) return -1;
    /* with_norm == 2: the normalised rows are also wanted (memra_norm.out) and checked against the CPU's */
    float *dxn = with_norm == 2 ? galloc(g, (size_t)(FUSED_TMAX * in) * 4) : NULL, *hxn = NULL;
    const memra_norm gnorm = {&nw.g, 1e-6f, dxn}, cnorm = {&nw.c, 1e-6f, NULL}, *gn = with_norm ? &gnorm : NULL;
    x = malloc((size_t)(FUSED_TMAX * in) * 4);
    xr = with_norm ? malloc((size_t)(FUSED_TMAX * in) * 4) : x;
    ref = malloc((size_t)(FUSED_TMAX * 16) * 4);
    dx = galloc(g, (size_t)(FUSED_TMAX * in) * 4);
    if (with_norm == 2 && (!dxn || !(hxn = malloc((size_t)(FUSED_TMAX * in) * 4)))) goto done;
    if (!x || !xr || !ref || !dx) goto done;
    for (int i = 0; i < n_out; i++) {
        hy[i] = malloc((size_t)(FUSED_TMAX * s[i].out) * 4);
        dy[i] = galloc(g, (size_t)(FUSED_TMAX * s[i].out) * 4);
        dy1[i] = galloc(g, (size_t)(FUSED_T2 * s[i].out) * 4);
        if (!hy[i] || !dy[i] || !dy1[i]) goto done;
    }
    int64_t max_out = 0;
    for (int i = 0; i < n_out; i++) max_out = s[i].out > max_out ? s[i].out : max_out;
    y1 = malloc((size_t)max_out * 4);
    if (!y1) goto done;
    rnd_fill(g, x, (size_t)(FUSED_TMAX * in), with_norm ? -4.0f : -1.0f, with_norm ? 4.0f : 1.0f);
    if (g->gpu->ops->upload(g->gpu, dx, x, (size_t)(FUSED_TMAX * in) * 4)) goto done;
    if (with_norm && g->cpu->ops->rmsnorm(g->cpu, x, in, cnorm.w, xr, in, in, FUSED_TMAX, cnorm.eps)) goto done;
    static const int64_t Ts[] = {1, 7, FUSED_TMAX};
    for (size_t ti = 0; ti < sizeof Ts / sizeof Ts[0]; ti++) {
        int64_t T = Ts[ti];
        if (T == FUSED_TMAX && (g->quick || type != MEMRA_TYPE_Q4_K)) continue;
        for (int i = 0; i < n_out; i++)
            if (gpoison(g, dy[i], (size_t)(T * s[i].out) * 4)) goto done;
        if (dxn && gpoison(g, dxn, (size_t)(T * in) * 4)) goto done;
        memra_status st = swiglu ? g->gpu->ops->matmul_swiglu(g->gpu, wg[0], wg[1], dx, dy[0], T, gn)
                                 : g->gpu->ops->matmul_multi(g->gpu, n, wg, dy, dx, T, gn);
        if (st) {
            gate_row(g, 1, op, m->name, label, tname, (long)T, NAN, 0, 0, gpu_msg(g));
            continue;
        }
        double e = 0.0;
        if (dxn) { /* the rows written out: each token's against the CPU's rmsnorm */
            if (gdown(g, hxn, dxn, (size_t)(T * in) * 4)) goto done;
            for (int64_t t = 0; t < T; t++) {
                double et = rel_err(xr + t * in, hxn + t * in, (size_t)in);
                if (isnan(et) || et > e) e = et;
            }
        }
        for (int i = 0; i < n_out; i++) {
            if (gdown(g, hy[i], dy[i], (size_t)(T * s[i].out) * 4)) goto done;
            if (!all_finite(hy[i], (size_t)(T * s[i].out))) e = NAN;
            /* per token: the largest |gpu - cpu| over the 3 windows of R rows
             * against the largest |cpu| over them (48 outputs, not 16: a
             * SwiGLU output window can be all near zero while its error
             * follows the size of gate and up) */
            int64_t out = s[i].out, R = out < 16 ? out : 16;
            int64_t starts[3] = {0, (int64_t)(rnd_u64(g) % (uint64_t)(out - R + 1)), out - R};
            double md[FUSED_TMAX] = {0}, mr[FUSED_TMAX] = {0};
            for (int k = 0; k < 3 && !isnan(e); k++) {
                memra_weight a = wrows(&w[i], starts[k], R), b2;
                memra_status cs;
                if (swiglu) {
                    b2 = wrows(&w[1], starts[k], R);
                    cs = g->cpu->ops->matmul_swiglu(g->cpu, &a, &b2, xr, ref, T, NULL);
                } else {
                    cs = g->cpu->ops->matmul(g->cpu, &a, xr, ref, T, 0);
                }
                if (cs) goto done;
                for (int64_t t = 0; t < T; t++)
                    for (int64_t r = 0; r < R; r++) {
                        double c = ref[t * R + r], d = fabs((double)hy[i][t * out + starts[k] + r] - c);
                        if (isnan(d) || isnan(c)) e = NAN;
                        md[t] = d > md[t] ? d : md[t];
                        mr[t] = fabs(c) > mr[t] ? fabs(c) : mr[t];
                        /* F32 rows: no smaller than the typical size of a sum of `in` such terms, sum |w x| /
                         * sqrt(in). A window of one row (the shared-expert gate) is otherwise a single dot
                         * product, whose relative error has no bound where its terms cancel (35b-a3b, seed
                         * 172: 1.48e-5 against 1e-5, the T = 1 run bit-identical to row 6). */
                        if (type == MEMRA_TYPE_F32 && !swiglu) {
                            const float *wr = (const float *)a.host + r * in, *xt = xr + t * in;
                            double sa = 0.0;
                            for (int64_t j = 0; j < in; j++) sa += fabs((double)wr[j] * xt[j]);
                            sa /= sqrt((double)in);
                            mr[t] = sa > mr[t] ? sa : mr[t];
                        }
                    }
            }
            for (int64_t t = 0; t < T && !isnan(e); t++) {
                double et = mr[t] > 0 ? md[t] / mr[t] : md[t] > 0 ? INFINITY : 0.0;
                if (et > e) e = et;
            }
        }
        const char *note = T >= GATE_TC_MIN_T ? "prefill path" : "";
        int inv_ok = 1;
        /* the rows written out: the same bits as the unfused ops (the rmsnorm op, then matmul_multi on its rows) */
        if (dxn && !swiglu && T <= FUSED_T2) {
            float *dxn2 = galloc(g, (size_t)(T * in) * 4);
            float *h2 = malloc((size_t)(T * (in > max_out ? in : max_out)) * 4);
            int same = dxn2 && h2;
            if (same) {
                st = g->gpu->ops->rmsnorm(g->gpu, dx, in, &nw.g, dxn2, in, in, T, 1e-6f);
                if (!st) st = g->gpu->ops->matmul_multi(g->gpu, n, wg, dy1, dxn2, T, NULL);
                same = !st && !gdown(g, h2, dxn2, (size_t)(T * in) * 4) && !memcmp(h2, hxn, (size_t)(T * in) * 4);
                for (int i = 0; i < n_out && same; i++)
                    same = !gdown(g, h2, dy1[i], (size_t)(T * s[i].out) * 4) &&
                           !memcmp(h2, hy[i], (size_t)(T * s[i].out) * 4);
            }
            if (dxn2) g->gpu->ops->free(g->gpu, dxn2);
            free(h2);
            gate_row(g, 1, op, m->name, label, tname, (long)T, same ? 0.0 : 1.0, 0, same,
                     "== rmsnorm, then matmul_multi (memcmp)");
        }
        /* the last row alone (T = 7: a T = 1 run) or among other tokens
         * (the prefill path: the last 20 tokens as one batch) */
        if (T > 1) {
            const int64_t T2 = T >= GATE_TC_MIN_T ? FUSED_T2 : 1;
            for (int i = 0; i < n_out; i++)
                if (gpoison(g, dy1[i], (size_t)(T2 * s[i].out) * 4)) goto done;
            st = swiglu ? g->gpu->ops->matmul_swiglu(g->gpu, wg[0], wg[1], dx + (T - T2) * in, dy1[0], T2, gn)
                        : g->gpu->ops->matmul_multi(g->gpu, n, wg, dy1, dx + (T - T2) * in, T2, gn);
            if (st) goto done;
            for (int i = 0; i < n_out; i++) {
                if (gdown(g, y1, dy1[i] + (T2 - 1) * s[i].out, (size_t)s[i].out * 4)) goto done;
                if (memcmp(y1, hy[i] + (T - 1) * s[i].out, (size_t)s[i].out * 4)) inv_ok = 0;
            }
            note = !inv_ok ? "batch-variant" : T == 7 ? "T=1 == row 6 (memcmp)" : "prefill path, rows 17-36 alone: row 36 (memcmp)";
        }
        double tol = T >= GATE_TC_MIN_T ? GATE_TC_TOL : 1e-5;
        gate_row(g, T == 1 || !inv_ok, op, m->name, label, tname, (long)T, e, tol,
                 passes(e, tol) && inv_ok, note);
    }
    rc = 0;
done:
    for (int i = 0; i < n_out; i++) {
        free(hy[i]);
        if (dy[i]) g->gpu->ops->free(g->gpu, dy[i]);
        if (dy1[i]) g->gpu->ops->free(g->gpu, dy1[i]);
    }
    if (xr != x) free(xr);
    free(x), free(ref), free(y1), free(hxn);
    if (dxn) g->gpu->ops->free(g->gpu, dxn);
    if (dx) g->gpu->ops->free(g->gpu, dx);
    for (int i = 0; i < n; i++) wpair_free(g, &w[i]);
    if (with_norm) wpair_free(g, &nw);
    return rc;
}

/* The projection groups of the forward pass: GDN in (qkv, z, beta, alpha),
 * attention q (with gate), k, v at hd 256, the FFN's gate and up (the
 * shared expert's on MoE) through matmul_multi, and gate/up through
 * matmul_swiglu. */
static int gate_fused_matmul(gate *g, const gate_model *m) {
    int64_t H = m->H, n_ff = m->n_ff ? m->n_ff : m->n_ff_exp;
    const mm_shape gdn[4] = {{"attn_qkv", H, 2 * (int64_t)m->n_k * 128 + (int64_t)m->n_v * 128},
                             {"attn_gate", H, (int64_t)m->n_v * 128},
                             {"ssm_beta", H, m->n_v},
                             {"ssm_alpha", H, m->n_v}};
    const mm_shape att[3] = {{"attn_q", H, 2 * (int64_t)m->n_head * 256},
                             {"attn_k", H, (int64_t)m->n_kv * 256},
                             {"attn_v", H, (int64_t)m->n_kv * 256}};
    const mm_shape ffn[2] = {{"ffn_gate", H, n_ff}, {"ffn_up", H, n_ff}};
    static const uint32_t types[] = {MEMRA_TYPE_Q4_K, MEMRA_TYPE_Q6_K, MEMRA_TYPE_Q8_0, MEMRA_TYPE_BF16};
    for (size_t k = 0; k < sizeof types / sizeof types[0]; k++) {
        if (g->quick && k > 0) break;
        if (gate_fused_case(g, m, "matmul_multi", "gdn qkv,z,beta,alpha", 4, gdn, types[k], 0, 0, 0) ||
            gate_fused_case(g, m, "matmul_multi", "attn q,k,v", 3, att, types[k], 0, 0, 0) ||
            gate_fused_case(g, m, "matmul_multi", "ffn gate,up", 2, ffn, types[k], 0, 0, 0) ||
            gate_fused_case(g, m, "matmul_swiglu", "ffn gate,up", 2, ffn, types[k], 1, 0, 0) ||
            gate_fused_case(g, m, "matmul_multi", "norm+gdn qkv,z,beta,alpha", 4, gdn, types[k], 0, 1, 0) ||
            gate_fused_case(g, m, "matmul_multi", "norm+attn q,k,v", 3, att, types[k], 0, 1, 0) ||
            gate_fused_case(g, m, "matmul_swiglu", "norm+ffn gate,up", 2, ffn, types[k], 1, 1, 0))
            return -1;
    }
    /* the Q4_K_M mix: qkv of the GDN projections (half the layers) and v of attention are Q6_K */
    if (gate_fused_case(g, m, "matmul_multi", "gdn qkv(q6_k),z,beta,alpha", 4, gdn, MEMRA_TYPE_Q4_K, 0, 0, 0x1) ||
        gate_fused_case(g, m, "matmul_multi", "attn q,k,v(q6_k)", 3, att, MEMRA_TYPE_Q4_K, 0, 0, 0x4) ||
        gate_fused_case(g, m, "matmul_multi", "norm+gdn qkv(q6_k),z,beta,alpha", 4, gdn, MEMRA_TYPE_Q4_K, 0, 1,
                        0x1) ||
        gate_fused_case(g, m, "matmul_multi", "norm+attn q,k,v(q6_k)", 3, att, MEMRA_TYPE_Q4_K, 0, 1, 0x4))
        return -1;
    /* a MoE layer's post-attention norm with the router and the shared
     * expert's gate (F32), the normalised rows written out for the experts */
    const mm_shape router[2] = {{"ffn_gate_inp", H, m->n_expert}, {"ffn_gate_inp_shexp", H, 1}};
    if (m->n_expert &&
        gate_fused_case(g, m, "matmul_multi", "norm(out)+router,shexp gate", 2, router, MEMRA_TYPE_F32, 0, 2, 0))
        return -1;
    return 0;
}

/* ------------------------------------------------------------------ gdn */

/* One GDN layer of model m with head sizes dk x dv (128 x 128 in the real
 * models; the fixture models have 32 and 64). Two sequences of long[0..1]
 * tokens: {1, 5} (T = 6) takes the CUDA backend's token-at-a-time kernel,
 * {5, 35} (T = 40) its prefill kernels (prep, scan, finish). */
static int gate_gdn(gate *g, const gate_model *m, int dk, int dv, int longer) {
    const int n_slots = 3, dc = 4;
    int64_t key_dim = (int64_t)m->n_k * dk, conv_dim = 2 * key_dim + (int64_t)m->n_v * dv, vdim = (int64_t)m->n_v * dv;
    int32_t len[2] = {longer ? 5 : 1, longer ? 35 : 5}, pos0[2] = {40, 0}, slots[2] = {2, 0};
    bpair b;
    if (bpair_make(g, &b, 2, len, pos0, slots, 100)) return -1;
    int64_t T = len[0] + len[1];
    wpair conv, dt, a, nw;
    if (wvec_make(g, &conv, "ssm_conv1d", dc, conv_dim, -0.5f, 0.5f) ||
        wvec_make(g, &dt, "ssm_dt.bias", m->n_v, 1, -1.0f, 1.0f) ||
        wvec_make(g, &a, "ssm_a", m->n_v, 1, -2.0f, -0.05f) || wvec_make(g, &nw, "ssm_norm", dv, 1, 0.5f, 1.5f))
        return -1;
    memra_gdn_params pc = {&conv.c, &dt.c, &a.c, &nw.c, dc, m->n_k, m->n_v, dk, dv, 1, 1e-6f, 1e-6f};
    memra_gdn_params pg = {&conv.g, &dt.g, &a.g, &nw.g, dc, m->n_k, m->n_v, dk, dv, 1, 1e-6f, 1e-6f};
    buf cs, ss, mixed, z, br, ar, out;
    if (buf_make(g, &cs, (size_t)(n_slots * conv_dim * (dc - 1)), -1, 1) ||
        buf_make(g, &ss, (size_t)n_slots * m->n_v * dv * dk, -0.05f, 0.05f) ||
        buf_make(g, &mixed, (size_t)(T * conv_dim), -1, 1) || buf_make(g, &z, (size_t)(T * vdim), -2, 2) ||
        buf_make(g, &br, (size_t)(T * m->n_v), -2, 2) || buf_make(g, &ar, (size_t)(T * m->n_v), -2, 2) ||
        buf_make(g, &out, (size_t)(T * vdim), 0, 0))
        return -1;
    /* the GPU states before each pass (for the replay one token at a time) and after it */
    float *c0 = malloc(cs.n * 4), *s0 = malloc(ss.n * 4), *c1 = malloc(cs.n * 4), *s1 = malloc(ss.n * 4);
    float *o1 = malloc((size_t)vdim * 4), *ob = malloc(out.n * 4);
    if (!c0 || !s0 || !c1 || !s1 || !o1 || !ob) return -1;
    for (int tiled = 1; tiled >= 0; tiled--) {
        pc.kv_tiled = pg.kv_tiled = tiled;
        GTRY(g, gdown(g, c0, cs.d, cs.n * 4));
        GTRY(g, gdown(g, s0, ss.d, ss.n * 4));
        GTRY(g, gpoison(g, out.d, out.n * 4));
        GTRY(g, g->cpu->ops->gdn(g->cpu, &b.c, &pc, cs.h, ss.h, mixed.h, z.h, br.h, ar.h, out.h));
        GTRY(g, g->gpu->ops->gdn(g->gpu, &b.g, &pg, cs.d, ss.d, mixed.d, z.d, br.d, ar.d, out.d));
        /* batch invariance: every token replayed alone (T = 1, in its sequence's order, from the old states)
         * gives its output row, and the replay ends in the same states (memcmp) */
        {
            GTRY(g, gdown(g, ob, out.d, out.n * 4));
            GTRY(g, gdown(g, c1, cs.d, cs.n * 4));
            GTRY(g, gdown(g, s1, ss.d, ss.n * 4));
            GTRY(g, g->gpu->ops->upload(g->gpu, cs.d, c0, cs.n * 4));
            GTRY(g, g->gpu->ops->upload(g->gpu, ss.d, s0, ss.n * 4));
            buf o;
            if (buf_make(g, &o, (size_t)vdim, 0, 0)) return -1;
            int ok = 1;
            for (int sq = 0, t = 0; sq < 2; sq++)
                for (int i = 0; i < len[sq]; i++, t++) {
                    bpair b1;
                    int32_t l1 = 1, p1 = pos0[sq] + i, sl1 = slots[sq];
                    if (bpair_make(g, &b1, 1, &l1, &p1, &sl1, 100)) return -1;
                    GTRY(g, gpoison(g, o.d, o.n * 4));
                    GTRY(g, g->gpu->ops->gdn(g->gpu, &b1.g, &pg, cs.d, ss.d, mixed.d + t * conv_dim, z.d + t * vdim,
                                             br.d + t * m->n_v, ar.d + t * m->n_v, o.d));
                    GTRY(g, gdown(g, o1, o.d, o.n * 4));
                    ok = ok && all_finite(o1, (size_t)vdim) && !memcmp(o1, ob + t * vdim, (size_t)vdim * 4);
                    bpair_free(g, &b1);
                }
            GTRY(g, gdown(g, c0, cs.d, cs.n * 4));
            GTRY(g, gdown(g, s0, ss.d, ss.n * 4));
            ok = ok && !memcmp(c0, c1, cs.n * 4) && !memcmp(s0, s1, ss.n * 4);
            char sh[64];
            snprintf(sh, sizeof sh, "d %d/%d %s", dk, dv, tiled ? "tiled" : "grouped");
            gate_row(g, 1, longer ? "gdn-scan-inv" : "gdn-inv", m->name, sh, "F32", (long)T, ok ? 0.0 : 1.0, 0, ok,
                     "each token alone (T=1) vs its row, states: memcmp");
            buf_free(g, &o);
        }
        double e = cmp_dev(g, out.h, out.d, out.n);
        double ec = cmp_dev(g, cs.h, cs.d, cs.n), es = cmp_dev(g, ss.h, ss.d, ss.n);
        char shape[64];
        if (dk == 128 && dv == 128)
            snprintf(shape, sizeof shape, "n_k %d n_v %d %s", m->n_k, m->n_v, tiled ? "tiled" : "grouped");
        else
            snprintf(shape, sizeof shape, "%d/%d d %d/%d %s", m->n_k, m->n_v, dk, dv, tiled ? "tiled" : "grouped");
        gate_row(g, 1, "gdn out", m->name, shape, "F32", (long)T, e, 1e-4, passes(e, 1e-4), "");
        gate_row(g, 1, "gdn conv_state", m->name, shape, "F32", (long)T, ec, 0, passes(ec, 0), "");
        gate_row(g, 1, "gdn ssm_state", m->name, shape, "F32", (long)T, es, 1e-5, passes(es, 1e-5), "");
        /* the second pass continues from the states the first left (both sides) */
    }
    free(c0), free(s0), free(c1), free(s1), free(o1), free(ob);
    buf_free(g, &cs), buf_free(g, &ss), buf_free(g, &mixed), buf_free(g, &z), buf_free(g, &br), buf_free(g, &ar);
    buf_free(g, &out);
    wpair_free(g, &conv), wpair_free(g, &dt), wpair_free(g, &a), wpair_free(g, &nw);
    bpair_free(g, &b);
    return 0;
}

/* ------------------------------------------------------------------ moe */

/* moe_block on both backends. The update is compared from a zero residual
 * (a residual of 1 would hide its last bits in the sum); a second GPU run
 * from a random residual must give residual + update within rounding, and
 * with T > 1 a token must give its row's bits (memcmp) in another batch of
 * the same regime: alone below GATE_TC_MIN_T tokens, else in a batch of 20
 * that holds it among other tokens (the CUDA backend's grouped path), and
 * also alone where the decode path shares the grouped path's arithmetic
 * (memra_backend_cuda_moe_regimes_equal: by default Q4_K's decode gate/up
 * runs on the int8 core, which does not; MEMRA_MOE_Q8=0 puts it back on
 * the fp16 core). */
static int gate_moe_block(gate *g, const gate_model *m, const memra_moe_params *pc, const memra_moe_params *pg,
                          int64_t T, const char *type, const char *note, const buf *lg, const buf *x, const buf *w,
                          buf *out, int32_t *dids, void *sc, void *sd, size_t sb) {
    int64_t H = m->H, E = m->n_expert, K = m->n_used, n = T * H;
    buf res, sg, one;
    const int64_t T2 = T >= GATE_TC_MIN_T ? 20 : 1; /* the batch a row is checked in */
    if (buf_make(g, &res, (size_t)n, -1, 1) || buf_make(g, &sg, (size_t)T, -3, 3) ||
        buf_make(g, &one, (size_t)(T2 * H), 0, 0))
        return -1;
    int32_t *ids_c = malloc((size_t)(T * K) * 4), *ids_g = malloc((size_t)(T * K) * 4);
    float *uc = calloc((size_t)n, 4), *ug = malloc((size_t)n * 4), *og = malloc((size_t)n * 4);
    float *o1 = malloc((size_t)H * 4);
    if (!ids_c || !ids_g || !uc || !ug || !og || !o1) return -1;
    GTRY(g, g->gpu->ops->zero(g->gpu, out->d, (size_t)n * 4));
    GTRY(g, gpoison(g, dids, (size_t)(T * K) * 4));
    GTRY(g, gpoison(g, w->d, (size_t)(T * K) * 4));
    GTRY(g, gpoison(g, sd, sb));
    GTRY(g, g->cpu->ops->moe_block(g->cpu, pc, lg->h, x->h, sg.h, 1, uc, T, ids_c, w->h, sc));
    GTRY(g, g->gpu->ops->moe_block(g->gpu, pg, lg->d, x->d, sg.d, 1, out->d, T, dids, w->d, sd));
    GTRY(g, gdown(g, ug, out->d, (size_t)n * 4));
    GTRY(g, gdown(g, ids_g, dids, (size_t)(T * K) * 4));
    int ids_ok = !memcmp(ids_c, ids_g, (size_t)(T * K) * 4);
    double ew = cmp_dev(g, w->h, w->d, (size_t)(T * K)), e = rel_err(uc, ug, (size_t)n);
    char nt[96];
    snprintf(nt, sizeof nt, "w %.1e%s%s%s", ew, ids_ok ? "" : "; ids differ", *note ? "; " : "", note);
    char shape[48];
    snprintf(shape, sizeof shape, "E %lld K %lld F %d", (long long)E, (long long)K, m->n_ff_exp);
    gate_row(g, 1, "moe_block", m->name, shape, type, (long)T, e, 1e-5,
             ids_ok && passes(ew, 1e-6) && passes(e, 1e-5), nt);
    /* from a random residual: residual + update, up to the rounding of the two additions */
    GTRY(g, g->gpu->ops->upload(g->gpu, out->d, res.h, (size_t)n * 4));
    GTRY(g, gpoison(g, sd, sb));
    GTRY(g, g->gpu->ops->moe_block(g->gpu, pg, lg->d, x->d, sg.d, 1, out->d, T, dids, w->d, sd));
    GTRY(g, gdown(g, og, out->d, (size_t)n * 4));
    double md = 0.0, mm = 0.0;
    for (int64_t i = 0; i < n; i++) {
        double d = isfinite(og[i]) ? fabs((double)og[i] - (double)res.h[i] - (double)ug[i]) : INFINITY;
        if (d > md) md = d;
        mm = fmax(mm, fabs((double)res.h[i]) + fabs((double)ug[i]));
    }
    double er = md / mm;
    gate_row(g, 1, "moe_block-res", m->name, "x + update", type, (long)T, er, 1e-6, passes(er, 1e-6), "");
    /* where the decode path shares the grouped path's bits (the backend says), a grouped row must also equal
     * the row alone (T2 = 1) */
    const int cross = T2 > 1 && memra_backend_cuda_moe_regimes_equal(g->gpu, pg);
    for (int pass = 0; T > 1 && pass < 1 + cross; pass++) {
        const int64_t Tw = pass ? 1 : T2;
        int inv = 1;
        for (int64_t t = 0; t < T && inv; t++) {
            const int64_t first = inv_window_first(t, Tw, T);
            GTRY(g, g->gpu->ops->upload(g->gpu, one.d, res.h + first * H, (size_t)(Tw * H) * 4));
            GTRY(g, g->gpu->ops->moe_block(g->gpu, pg, lg->d + first * E, x->d + first * H, sg.d + first, 1, one.d,
                                           Tw, dids, w->d, sd));
            GTRY(g, gdown(g, o1, one.d + (t - first) * H, (size_t)H * 4));
            inv = all_finite(o1, (size_t)H) && !memcmp(o1, og + t * H, (size_t)H * 4);
        }
        gate_row(g, 1, "moe_block-inv", m->name, Tw == 1 ? "T=1 vs each row" : "T=20 window vs each row", type,
                 (long)T, inv ? 0.0 : 1.0, 0, inv, "memcmp");
    }
    free(ids_c), free(ids_g), free(uc), free(ug), free(og), free(o1);
    buf_free(g, &res), buf_free(g, &sg), buf_free(g, &one);
    return 0;
}

static int gate_moe(gate *g, const gate_model *m) {
    if (!m->n_expert) return 0;
    /* the shared expert of 35B-A3B is as wide as one routed expert */
    int64_t H = m->H, F = m->n_ff_exp, Fs = m->n_ff_exp, E = m->n_expert, K = m->n_used;
    /* T = 40 takes the CUDA backend's grouped path (tokens sorted by
     * expert), with the router logits tilted towards a few experts so that
     * several tiles of one expert and partial tiles both occur */
    static const int64_t Ts[] = {1, 7, 40};
    /* {gate/up type, down type}: Q4_K_M files pair Q4_K with Q6_K downs in some layers */
    static const uint32_t mt[][2] = {{MEMRA_TYPE_Q4_K, MEMRA_TYPE_Q4_K},  {MEMRA_TYPE_Q4_K, MEMRA_TYPE_Q6_K},
                                     {MEMRA_TYPE_Q8_0, MEMRA_TYPE_Q8_0},  {MEMRA_TYPE_MXFP4, MEMRA_TYPE_MXFP4},
                                     {MEMRA_TYPE_IQ4_XS, MEMRA_TYPE_IQ4_XS}, {MEMRA_TYPE_Q6_K, MEMRA_TYPE_Q6_K}};
    const int64_t Tmax = 40;
    buf lg, x, w, out;
    if (buf_make(g, &lg, (size_t)(Tmax * E), -4, 4) || buf_make(g, &x, (size_t)(Tmax * H), -1, 1) ||
        buf_make(g, &w, (size_t)(Tmax * K), 0, 0) || buf_make(g, &out, (size_t)(Tmax * H), 0, 0))
        return -1;
    int32_t *ids_c = malloc((size_t)(Tmax * K) * 4), *ids_g = malloc((size_t)(Tmax * K) * 4);
    int32_t *dids = galloc(g, (size_t)(Tmax * K) * 4);
    size_t sb = memra_moe_scratch_bytes(F, (int32_t)K, Tmax);
    size_t sbb = memra_moe_block_scratch_bytes(F, (int32_t)K, Fs, H, (int32_t)E, Tmax);
    if (sbb > sb) sb = sbb;
    void *sc = malloc(sb), *sd = galloc(g, sb);
    if (!ids_c || !ids_g || !dids || !sc || !sd) return -1;
    for (size_t k = 0; k < sizeof mt / sizeof mt[0]; k++) {
        if (g->quick && k > 0) break;
        uint32_t tgu = mt[k][0], td = mt[k][1];
        wpair gw, uw, dw, sgw, suw, sdw;
        if (wpair_make(g, &gw, "ffn_gate_exps", tgu, H, F, E) || wpair_make(g, &uw, "ffn_up_exps", tgu, H, F, E) ||
            wpair_make(g, &dw, "ffn_down_exps", td, F, H, E) || wpair_make(g, &sgw, "ffn_gate_shexp", tgu, H, Fs, 1) ||
            wpair_make(g, &suw, "ffn_up_shexp", tgu, H, Fs, 1) || wpair_make(g, &sdw, "ffn_down_shexp", td, Fs, H, 1))
            return -1;
        memra_moe_params pc = {&gw.c, &uw.c, &dw.c, (int32_t)E, (int32_t)K, &sgw.c, &suw.c, &sdw.c};
        memra_moe_params pg = {&gw.g, &uw.g, &dw.g, (int32_t)E, (int32_t)K, &sgw.g, &suw.g, &sdw.g};
        char note[32] = "";
        if (td != tgu) snprintf(note, sizeof note, "down %s", memra_type_name(td));
        for (size_t ti = 0; ti < sizeof Ts / sizeof Ts[0]; ti++) {
            int64_t T = Ts[ti];
            if (g->quick && T > 7) break;
            /* fresh router logits and activations for every case */
            rnd_fill(g, lg.h, lg.n, -4, 4);
            if (T >= 16)
                for (int64_t t = 0; t < T; t++)
                    for (int64_t e = 0; e < 12; e++) lg.h[t * E + 3 * e] += 5.0f;
            rnd_fill(g, x.h, x.n, -1, 1);
            GTRY(g, g->gpu->ops->upload(g->gpu, lg.d, lg.h, lg.n * 4));
            GTRY(g, g->gpu->ops->upload(g->gpu, x.d, x.h, x.n * 4));
            GTRY(g, gpoison(g, w.d, w.n * 4));
            GTRY(g, gpoison(g, dids, (size_t)(T * K) * 4));
            GTRY(g, g->cpu->ops->moe_route(g->cpu, lg.h, T, (int32_t)E, (int32_t)K, ids_c, w.h));
            GTRY(g, g->gpu->ops->moe_route(g->gpu, lg.d, T, (int32_t)E, (int32_t)K, dids, w.d));
            GTRY(g, gdown(g, ids_g, dids, (size_t)(T * K) * 4));
            int ids_ok = !memcmp(ids_c, ids_g, (size_t)(T * K) * 4);
            double e = cmp_dev(g, w.h, w.d, (size_t)(T * K));
            char shape[48];
            snprintf(shape, sizeof shape, "%lld experts top-%lld", (long long)E, (long long)K);
            gate_row(g, k == 0, "moe_route", m->name, shape, "F32", (long)T, e, 1e-6,
                     ids_ok && passes(e, 1e-6), ids_ok ? "ids equal" : "ids differ");
            GTRY(g, gpoison(g, out.d, out.n * 4));
            /* both sides use the CPU's routing so the FFN is compared alone */
            GTRY(g, g->gpu->ops->upload(g->gpu, dids, ids_c, (size_t)(T * K) * 4));
            GTRY(g, g->gpu->ops->upload(g->gpu, w.d, w.h, (size_t)(T * K) * 4));
            GTRY(g, g->cpu->ops->moe_ffn(g->cpu, &pc, x.h, ids_c, w.h, out.h, T, sc));
            GTRY(g, g->gpu->ops->moe_ffn(g->gpu, &pg, x.d, dids, w.d, out.d, T, sd));
            double ef = cmp_dev(g, out.h, out.d, (size_t)(T * H));
            snprintf(shape, sizeof shape, "H %lld F %lld E %lld", (long long)H, (long long)F, (long long)E);
            gate_row(g, 1, "moe_ffn", m->name, shape, memra_type_name(tgu), (long)T, ef, 1e-5,
                     passes(ef, 1e-5), note);
            if (gate_moe_block(g, m, &pc, &pg, T, memra_type_name(tgu), note, &lg, &x, &w, &out, dids, sc, sd, sb))
                return -1;
        }
        wpair_free(g, &gw), wpair_free(g, &uw), wpair_free(g, &dw);
        wpair_free(g, &sgw), wpair_free(g, &suw), wpair_free(g, &sdw);
    }
    free(sc), free(ids_c), free(ids_g);
    g->gpu->ops->free(g->gpu, sd);
    g->gpu->ops->free(g->gpu, dids);
    buf_free(g, &lg), buf_free(g, &x), buf_free(g, &w), buf_free(g, &out);
    return 0;
}

/* ------------------------------------------------------- graph capture */

/* rmsnorm -> matmul -> add captured once, replayed on new input written in
 * place; the replay must equal an uncaptured run bit for bit. */
static int gate_graph(gate *g) {
    const memra_backend_ops *o = g->gpu->ops;
    if (!o->graph_begin) {
        gate_row(g, 1, "graph", "-", "capture/replay", "-", 1, NAN, 0, 0, "no graph ops");
        return 0;
    }
    int64_t H = 2048, N = 4096;
    wpair nw, w;
    if (wvec_make(g, &nw, "norm", H, 1, 0.5f, 1.5f) || wpair_make(g, &w, "w", MEMRA_TYPE_Q4_K, H, N, 1)) return -1;
    buf x, xn, y, r;
    if (buf_make(g, &x, (size_t)H, -1, 1) || buf_make(g, &xn, (size_t)H, 0, 0) || buf_make(g, &y, (size_t)N, 0, 0) ||
        buf_make(g, &r, (size_t)N, -1, 1))
        return -1;
    memra_graph *gr = NULL;
    GTRY(g, o->graph_begin(g->gpu));
    memra_status st = o->rmsnorm(g->gpu, x.d, H, &nw.g, xn.d, H, H, 1, 1e-6f);
    if (!st) st = o->matmul(g->gpu, &w.g, xn.d, y.d, 1, 0);
    if (!st) st = o->add(g->gpu, y.d, r.d, N);
    memra_status st2 = o->graph_end(g->gpu, &gr);
    if (st || st2) {
        gate_row(g, 1, "graph", "-", "capture", "-", 1, NAN, 0, 0, gpu_msg(g));
        return 0;
    }
    float *a = malloc((size_t)N * 4), *b = malloc((size_t)N * 4);
    if (!a || !b) return -1;
    rnd_fill(g, x.h, (size_t)H, -1, 1);
    GTRY(g, o->upload(g->gpu, x.d, x.h, (size_t)H * 4));
    GTRY(g, gpoison(g, y.d, (size_t)N * 4));
    GTRY(g, o->graph_launch(g->gpu, gr));
    GTRY(g, gdown(g, a, y.d, (size_t)N * 4));
    GTRY(g, gpoison(g, y.d, (size_t)N * 4));
    GTRY(g, o->rmsnorm(g->gpu, x.d, H, &nw.g, xn.d, H, H, 1, 1e-6f));
    GTRY(g, o->matmul(g->gpu, &w.g, xn.d, y.d, 1, 0));
    GTRY(g, o->add(g->gpu, y.d, r.d, N));
    GTRY(g, gdown(g, b, y.d, (size_t)N * 4));
    int ok = all_finite(a, (size_t)N) && !memcmp(a, b, (size_t)N * 4);
    gate_row(g, 1, "graph", "-", "norm+matmul+add", "Q4_K", 1, ok ? 0.0 : 1.0, 0, ok, "replay == eager (memcmp)");
    o->graph_free(g->gpu, gr);
    free(a), free(b);
    buf_free(g, &x), buf_free(g, &xn), buf_free(g, &y), buf_free(g, &r);
    wpair_free(g, &nw), wpair_free(g, &w);
    return 0;
}

/* ---------------------------------------------------------------- bench */

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Decode matvec bandwidth per type against a device-to-device copy, both
 * timed here with host clocks around synchronised batches of launches.
 * Weights rotate among 4 copies (> L2) so the cache does not serve them. */
static int gate_bench(gate *g) {
    const memra_backend_ops *o = g->gpu->ops;
    size_t cb = (size_t)1 << 30;
    void *a = galloc(g, cb), *b = galloc(g, cb);
    if (!a || !b) return -1;
    GTRY(g, o->zero(g->gpu, a, cb));
    GTRY(g, o->copy(g->gpu, b, a, cb));
    GTRY(g, o->sync(g->gpu));
    double t0 = now_s();
    for (int i = 0; i < 10; i++) GTRY(g, o->copy(g->gpu, b, a, cb));
    GTRY(g, o->sync(g->gpu));
    double copy_bw = 2.0 * (double)cb * 10 / (now_s() - t0) / 1e9;
    o->free(g->gpu, a), o->free(g->gpu, b);
    printf("\nbench: device-to-device copy %.0f GB/s (read + write)\n", copy_bw);
    printf("%-7s %-16s %5s %10s %9s %8s %8s\n", "type", "shape", "T", "us/call", "GB/s", "%copy", "TFLOP/s");
    int64_t in = 5120, n_out = 17408; /* 27B ffn_up */
    buf x, y;
    if (buf_make(g, &x, (size_t)(512 * in), -1, 1) || buf_make(g, &y, (size_t)(512 * n_out), 0, 0)) return -1;
    for (size_t ti = 0; ti < sizeof gate_types / sizeof gate_types[0]; ti++) {
        uint32_t type = gate_types[ti];
        wpair w[4];
        int nw = 0;
        for (; nw < 4; nw++)
            if (wpair_make(g, &w[nw], "bench", type, in, n_out, 1)) return -1;
        static const int64_t Ts[] = {1, 8, 64, 512};
        for (int k = 0; k < 4; k++) {
            int64_t T = Ts[k];
            int iters = T >= 64 ? 8 : 40;
            for (int i = 0; i < 4; i++) GTRY(g, o->matmul(g->gpu, &w[i].g, x.d, y.d, T, 0));
            GTRY(g, o->sync(g->gpu));
            t0 = now_s();
            for (int i = 0; i < iters; i++) GTRY(g, o->matmul(g->gpu, &w[i % 4].g, x.d, y.d, T, 0));
            GTRY(g, o->sync(g->gpu));
            double dt = (now_s() - t0) / iters;
            double gbs = (double)w[0].g.nbytes / dt / 1e9;
            printf("%-7s {%lld,%lld} %5lld %10.1f %9.0f %7.0f%% %8.2f\n", memra_type_name(type), (long long)in,
                   (long long)n_out, (long long)T, dt * 1e6, gbs, 100.0 * gbs / copy_bw,
                   2.0 * (double)in * (double)n_out * (double)T / dt / 1e12);
            if (g->log)
                fprintf(g->log, "bench %s T=%lld %.1f us %.0f GB/s %.0f%% of copy\n", memra_type_name(type),
                        (long long)T, dt * 1e6, gbs, 100.0 * gbs / copy_bw);
        }
        for (int i = 0; i < nw; i++) wpair_free(g, &w[i]);
    }
    buf_free(g, &x), buf_free(g, &y);

    /* decode attention (27B heads, one token at the end of a 32k context) and
     * a decode GDN layer (27B: n_v 48): time per call and bytes of state read */
    {
        const int32_t n_ctx = 32768, hd = 256, n_head = 24, n_kv = 4;
        int64_t kv_dim = (int64_t)n_kv * hd;
        bpair bb;
        int32_t len = 1, p0 = n_ctx - 1, sl = 0;
        if (bpair_make(g, &bb, 1, &len, &p0, &sl, 100)) return -1;
        buf kc, vc, qg, out;
        if (buf_make(g, &kc, (size_t)n_ctx * kv_dim, -1, 1) || buf_make(g, &vc, (size_t)n_ctx * kv_dim, -1, 1) ||
            buf_make(g, &qg, (size_t)n_head * 512, -1, 1) || buf_make(g, &out, (size_t)n_head * hd, 0, 0))
            return -1;
        for (int i = 0; i < 3; i++)
            GTRY(g, o->attention(g->gpu, &bb.g, kc.d, vc.d, n_ctx, qg.d, qg.d + 256, n_head * 512, 512, n_head, n_kv,
                                 hd, 1.0f / 16.0f, out.d));
        GTRY(g, o->sync(g->gpu));
        t0 = now_s();
        for (int i = 0; i < 50; i++)
            GTRY(g, o->attention(g->gpu, &bb.g, kc.d, vc.d, n_ctx, qg.d, qg.d + 256, n_head * 512, 512, n_head, n_kv,
                                 hd, 1.0f / 16.0f, out.d));
        GTRY(g, o->sync(g->gpu));
        double dt = (now_s() - t0) / 50;
        double bytes = 2.0 * n_ctx * kv_dim * 4;
        printf("attention decode 27B heads, ctx 32768: %.1f us, %.0f GB/s of K+V (%.0f%% of copy)\n", dt * 1e6,
               bytes / dt / 1e9, 100.0 * bytes / dt / 1e9 / copy_bw);
        buf_free(g, &kc), buf_free(g, &vc), buf_free(g, &qg), buf_free(g, &out);
        bpair_free(g, &bb);
    }
    {
        const int n_k = 16, n_v = 48, dk = 128, dc = 4;
        int64_t conv_dim = 2 * (int64_t)n_k * dk + (int64_t)n_v * dk, vdim = (int64_t)n_v * dk;
        bpair bb;
        int32_t len = 1, p0 = 10, sl = 0;
        if (bpair_make(g, &bb, 1, &len, &p0, &sl, 100)) return -1;
        wpair conv, dtb, aw, nw;
        if (wvec_make(g, &conv, "c", dc, conv_dim, -0.5f, 0.5f) || wvec_make(g, &dtb, "dt", n_v, 1, -1, 1) ||
            wvec_make(g, &aw, "a", n_v, 1, -2, -0.05f) || wvec_make(g, &nw, "n", dk, 1, 0.5f, 1.5f))
            return -1;
        memra_gdn_params pg = {&conv.g, &dtb.g, &aw.g, &nw.g, dc, n_k, n_v, dk, dk, 1, 1e-6f, 1e-6f};
        buf cs, ss, mixed, z, br, ar, out;
        if (buf_make(g, &cs, (size_t)(conv_dim * (dc - 1)), -1, 1) ||
            buf_make(g, &ss, (size_t)n_v * dk * dk, -0.05f, 0.05f) || buf_make(g, &mixed, (size_t)conv_dim, -1, 1) ||
            buf_make(g, &z, (size_t)vdim, -2, 2) || buf_make(g, &br, (size_t)n_v, -2, 2) ||
            buf_make(g, &ar, (size_t)n_v, -2, 2) || buf_make(g, &out, (size_t)vdim, 0, 0))
            return -1;
        for (int i = 0; i < 3; i++)
            GTRY(g, o->gdn(g->gpu, &bb.g, &pg, cs.d, ss.d, mixed.d, z.d, br.d, ar.d, out.d));
        GTRY(g, o->sync(g->gpu));
        t0 = now_s();
        for (int i = 0; i < 200; i++)
            GTRY(g, o->gdn(g->gpu, &bb.g, &pg, cs.d, ss.d, mixed.d, z.d, br.d, ar.d, out.d));
        GTRY(g, o->sync(g->gpu));
        double dt = (now_s() - t0) / 200;
        double bytes = 2.0 * (double)n_v * dk * dk * 4;
        printf("gdn decode 27B (n_v 48): %.1f us per layer, state read+write %.0f GB/s (%.0f%% of copy)\n", dt * 1e6,
               bytes / dt / 1e9, 100.0 * bytes / dt / 1e9 / copy_bw);
        buf_free(g, &cs), buf_free(g, &ss), buf_free(g, &mixed), buf_free(g, &z), buf_free(g, &br);
        buf_free(g, &ar), buf_free(g, &out);
        wpair_free(g, &conv), wpair_free(g, &dtb), wpair_free(g, &aw), wpair_free(g, &nw);
        bpair_free(g, &bb);
    }
    return 0;
}

/* ---------------------------------------------------------------- main */

static int gate_kernels(int argc, char **argv) {
    const char *model = "all", *log_path = NULL;
    int quick = 0, bench = 0, device = 0;
    uint64_t seed = (uint64_t)time(NULL);
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--model") && i + 1 < argc)
            model = argv[++i];
        else if (!strcmp(argv[i], "--quick"))
            quick = 1;
        else if (!strcmp(argv[i], "--bench"))
            bench = 1;
        else if (!strcmp(argv[i], "--seed") && i + 1 < argc)
            seed = strtoull(argv[++i], NULL, 0);
        else if (!strcmp(argv[i], "--log") && i + 1 < argc)
            log_path = argv[++i];
        else if (!strcmp(argv[i], "--device") && i + 1 < argc)
            device = atoi(argv[++i]);
        else {
            fprintf(stderr,
                    "usage: memra gate kernels [--model 0.8b|9b|27b|35b-a3b|122b-a10b|all] [--quick] [--bench] "
                    "[--seed N] [--log FILE] [--device N]\n");
            return 2;
        }
    }
    gate g;
    memset(&g, 0, sizeof g);
    g.rng = seed;
    g.quick = quick;
    memra_error err;
    if (memra_backend_cpu_init(&g.cpu, 0, &err)) {
        fprintf(stderr, "gate: cpu backend: %s\n", err.msg);
        return 1;
    }
    if (memra_backend_cuda_init(&g.gpu, device, &err)) {
        fprintf(stderr, "gate: cuda backend: %s\n", err.msg);
        memra_backend_free(g.cpu);
        return 1;
    }
    if (log_path && !(g.log = fopen(log_path, "w"))) {
        fprintf(stderr, "gate: cannot write %s\n", log_path);
        return 1;
    }
    g.pool_n = POOL_N;
    g.pool_b = malloc(g.pool_n);
    g.pool_f = malloc(g.pool_n * 4);
    g.pool_h = malloc(g.pool_n * 2);
    g.pool_bf = malloc(g.pool_n * 2);
    if (!g.pool_b || !g.pool_f || !g.pool_h || !g.pool_bf) return 1;
    for (size_t i = 0; i < g.pool_n; i++) {
        uint64_t r = rnd_u64(&g);
        g.pool_b[i] = (uint8_t)r;
        float f = (float)((double)(r >> 11) * (2.0 / 9007199254740992.0) - 1.0);
        g.pool_f[i] = f;
        g.pool_h[i] = memra_fp32_to_fp16(f);
        g.pool_bf[i] = memra_fp32_to_bf16(f);
    }
    printf("memra gate kernels: seed %llu; metric max|gpu-cpu|/max|cpu|, NaN fails, outputs poisoned\n",
           (unsigned long long)seed);
    printf("%-14s %-8s %-20s %-7s %5s  %10s  %7s  %-4s %s\n", "op", "model", "shape", "type", "T", "metric", "tol",
           "res", "note");
    int any = 0;
    for (size_t mi = 0; mi < sizeof gate_models / sizeof gate_models[0]; mi++) {
        const gate_model *m = &gate_models[mi];
        if (strcmp(model, "all") && strcmp(model, m->name)) continue;
        any = 1;
        if (gate_small_ops(&g, m)) g.n_fail++;
        if (gate_attention(&g, m) || gate_attention_pf(&g, m)) g.n_fail++;
        if (gate_qk_norm_rope(&g, m)) g.n_fail++;
        if (gate_fused_matmul(&g, m)) g.n_fail++;
        if (gate_gdn(&g, m, 128, 128, 0) || gate_gdn(&g, m, 128, 128, 1)) g.n_fail++;
        if (gate_moe(&g, m)) g.n_fail++;
        gate_matmul(&g, m);
        fflush(stdout);
    }
    if (!any) {
        fprintf(stderr, "gate: unknown model '%s'\n", model);
        return 2;
    }
    /* the head sizes of the fixture models (tiny: 32, small: 64) and the
     * other instances of the kernel, at fixture-sized head counts */
    {
        static const gate_model fixture = {"fixture", 256, 4, 2, 2, 4, 512, 0, 0, 0};
        static const int dkv[][2] = {{32, 32}, {64, 64}, {32, 64}, {64, 32}, {96, 128}, {128, 96}};
        for (size_t i = 0; i < sizeof dkv / sizeof dkv[0]; i++)
            if (gate_gdn(&g, &fixture, dkv[i][0], dkv[i][1], 0) || gate_gdn(&g, &fixture, dkv[i][0], dkv[i][1], 1))
                g.n_fail++;
    }
    if (gate_graph(&g)) g.n_fail++;
    if (bench && gate_bench(&g)) g.n_fail++;
    printf("\ngate kernels: %d passed, %d failed\n", g.n_pass, g.n_fail);
    if (g.log) {
        fprintf(g.log, "gate kernels: %d passed, %d failed\n", g.n_pass, g.n_fail);
        fclose(g.log);
    }
    free(g.pool_b), free(g.pool_f), free(g.pool_h), free(g.pool_bf);
    memra_backend_free(g.gpu);
    memra_backend_free(g.cpu);
    return g.n_fail ? 1 : 0;
}

static const struct {
    const char *name;
    int (*fn)(int, char **);
    const char *help;
} gate_cmds[] = {
    {"kernels", gate_kernels, "every CUDA op against the CPU reference backend"},
    {"model", memra_gate_model, "the forward pass of a backend against the fixture references"},
};

int memra_cmd_gate(int argc, char **argv) {
    if (argc >= 2)
        for (size_t i = 0; i < sizeof gate_cmds / sizeof gate_cmds[0]; i++)
            if (!strcmp(argv[1], gate_cmds[i].name)) return gate_cmds[i].fn(argc - 1, argv + 1);
    fprintf(stderr, "usage: memra gate SUBCOMMAND [options]\n");
    for (size_t i = 0; i < sizeof gate_cmds / sizeof gate_cmds[0]; i++)
        fprintf(stderr, "  %-9s %s\n", gate_cmds[i].name, gate_cmds[i].help);
    return 2;
}
