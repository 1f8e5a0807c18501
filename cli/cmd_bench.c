/* memra bench: prefill and decode speed of one model on one backend, as
 * fractions of the memory-bandwidth ceiling measured in the same run.
 *
 *   memra bench -m FILE [--backend cuda|cpu] [--threads N] [--device N]
 *               [--prefill 512,8192] [--depth 0,4096] [--decode-tokens 64]
 *               [--reps N] [--copy-mib N] [--chunk N] [--ctx N] [--seed N] [--csv]
 *
 * What it measures, all in one process on one backend:
 *
 *   copy_bw   the ceiling: a large device-to-device copy through be->ops->copy
 *             (2 GiB on CUDA, 256 MiB on the CPU), source filled with random
 *             bytes, timed after two warm-up copies with a sync before the
 *             clock stops; bytes read + bytes written; median of --reps x 3.
 *   prefill   tokens/s for each --prefill length T: a fresh sequence (position
 *             0, so the slot's recurrent state is cleared), T random tokens in
 *             batches of --chunk, clock stopped when the last batch's logits
 *             are ready (memra_forward syncs); median of --reps runs.
 *   decode    tokens/s at batch 1 for each --depth D: D random tokens are
 *             prefilled (not timed), then --decode-tokens single-token steps
 *             are timed one by one. A step is what a greedy decode does per
 *             token: upload the batch, the forward, argmax on the backend and
 *             the download of the chosen id, then sync. The fed tokens are
 *             random (fixed --seed) so routing and embedding rows vary like
 *             real text. Median step time.
 *   bytes     what one decode step must read from memory at least: every
 *             trunk weight once (token_embd: one row; MoE expert tensors:
 *             n_used / n_expert of them; MTP layers: not run, not counted),
 *             the KV cache of every attention layer up to the step's position
 *             (k + v rows, fp32) plus the new row written, and the GDN conv +
 *             recurrent state read and written. Averaged over the steps.
 *   fraction  (bytes per token / time per token) / copy_bw.
 *
 * Output: a human table (stdout, or stderr with --csv) and, with --csv, one
 * CSV line per measurement on stdout after a header line.
 *
 * This is a debug subcommand: it reaches into src/ (model, backend). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend/backend.h"
#include "commands.h"
#include "model/model.h"

#define MAX_LIST 16

typedef struct bench_opts {
    const char *model;
    const char *backend;
    int threads, device;
    int32_t prefill[MAX_LIST];
    int n_prefill;
    int32_t depth[MAX_LIST];
    int n_depth;
    int32_t decode_tokens;
    int reps;
    int64_t copy_mib; /* 0: by backend */
    int32_t chunk;
    int32_t ctx; /* --ctx: the context the state is sized for, at least the longest run (0: that) */
    uint64_t seed;
    int csv;
    int profile;
    const char *timeline; /* --timeline PREFIX: the kernel timeline of each depth's decode */
} bench_opts;

typedef struct bench {
    bench_opts o;
    memra_backend *be;
    memra_model *m;
    memra_state *st;
    memra_batch b;
    int32_t *d_tok; /* [1] backend memory: the argmax of a decode step */
    int32_t *toks;  /* [n_ctx + 32] host: random ids of one run (+ the warm-up's) */
    uint64_t rng;
    const char *name; /* basename of the model file */
    FILE *human;
    double copy_gbps;
    int n_bad; /* runs whose logits were not finite */
} bench;

/* ---------------------------------------------------------------- helpers */

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static uint64_t rnd_u64(uint64_t *s) {
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Median of n values (sorts them). */
static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* "512,8192" -> list; 0 on success. */
static int parse_list(const char *s, int32_t *out, int *n, int32_t min) {
    *n = 0;
    while (*s) {
        char *end;
        long v = strtol(s, &end, 10);
        if (end == s || v < min || v > (1L << 24) || *n == MAX_LIST) return -1;
        out[(*n)++] = (int32_t)v;
        s = end;
        if (*s == ',') s++;
        else if (*s) return -1;
    }
    return *n ? 0 : -1;
}

static int32_t max_of(const int32_t *v, int n) {
    int32_t m = 0;
    for (int i = 0; i < n; i++)
        if (v[i] > m) m = v[i];
    return m;
}

/* ---------------------------------------------------------------- CSV */

static void csv_header(bench *B) {
    if (B->o.csv)
        printf("model,backend,metric,value,unit,ceiling_gbps,fraction,n_tokens,depth,reps,bytes_per_token,"
               "weight_bytes,kv_bytes,state_bytes,ms_per_token\n");
}

/* One measurement. fraction < 0: not applicable (empty). */
static void csv_row(bench *B, const char *metric, double value, const char *unit, double fraction, long n_tokens,
                    long depth, int reps, double bytes, double wbytes, double kvbytes, double sbytes, double ms) {
    if (!B->o.csv) return;
    printf("%s,%s,%s,%.6g,%s,%.6g,", B->name, B->be->name, metric, value, unit, B->copy_gbps);
    if (fraction >= 0) printf("%.6g", fraction);
    printf(",%ld,%ld,%d,%.0f,%.0f,%.0f,%.0f,", n_tokens, depth, reps, bytes, wbytes, kvbytes, sbytes);
    if (ms >= 0) printf("%.6g", ms);
    printf("\n");
    fflush(stdout);
}

/* ---------------------------------------------------------------- (a) copy */

static memra_status bench_copy(bench *B, memra_error *err) {
    memra_backend *be = B->be;
    int64_t mib = B->o.copy_mib > 0 ? B->o.copy_mib : (!strcmp(be->name, "cpu") ? 256 : 2048);
    size_t n = (size_t)mib << 20;
    void *src = NULL, *dst = NULL;
    memra_status s = be->ops->alloc(be, n, &src);
    if (s == MEMRA_OK) s = be->ops->alloc(be, n, &dst);
    if (s != MEMRA_OK) {
        if (src) be->ops->free(be, src);
        return memra_errorf(err, s, "copy bandwidth: cannot allocate 2 x %lld MiB on backend %s", (long long)mib,
                            be->name);
    }
    /* random bytes, not zeros: zeros can hide real costs */
    size_t pat_n = n < ((size_t)64 << 20) ? n : ((size_t)64 << 20);
    uint64_t *pat = malloc(pat_n);
    if (!pat) s = memra_errorf(err, MEMRA_ERR_NOMEM, "out of memory");
    for (size_t i = 0; s == MEMRA_OK && i < pat_n / 8; i++) pat[i] = rnd_u64(&B->rng);
    for (size_t off = 0; s == MEMRA_OK && off < n; off += pat_n)
        s = be->ops->upload(be, (uint8_t *)src + off, pat, n - off < pat_n ? n - off : pat_n);
    free(pat);
    if (s == MEMRA_OK) s = be->ops->zero(be, dst, n); /* first touch (CPU pages) stays out of the timing */
    for (int w = 0; s == MEMRA_OK && w < 2; w++) {
        s = be->ops->copy(be, dst, src, n);
        if (s == MEMRA_OK) s = be->ops->sync(be);
    }
    int reps = 3 * B->o.reps;
    double *t = calloc((size_t)reps, sizeof *t);
    if (!t && s == MEMRA_OK) s = MEMRA_ERR_NOMEM;
    for (int r = 0; s == MEMRA_OK && r < reps; r++) {
        double t0 = now_s();
        s = be->ops->copy(be, dst, src, n);
        if (s == MEMRA_OK) s = be->ops->sync(be);
        t[r] = now_s() - t0;
    }
    /* the copy must be a copy: spot-check the last bytes */
    if (s == MEMRA_OK) {
        uint8_t a[256], b2[256];
        s = be->ops->download(be, a, (uint8_t *)src + n - sizeof a, sizeof a);
        if (s == MEMRA_OK) s = be->ops->download(be, b2, (uint8_t *)dst + n - sizeof b2, sizeof b2);
        if (s == MEMRA_OK && memcmp(a, b2, sizeof a))
            s = memra_errorf(err, MEMRA_ERR_DEVICE, "copy bandwidth: the copied bytes differ from the source");
    }
    be->ops->free(be, src);
    be->ops->free(be, dst);
    if (s != MEMRA_OK) {
        free(t);
        if (!err->msg[0]) memra_errorf(err, s, "copy bandwidth on backend %s failed", be->name);
        return s;
    }
    double sec = median(t, reps);
    free(t);
    B->copy_gbps = 2.0 * (double)n / sec / 1e9;
    fprintf(B->human, "copy bandwidth    %9.1f GB/s   (read + write of %lld MiB, median of %d)\n", B->copy_gbps,
            (long long)mib, reps);
    csv_row(B, "copy_bw", B->copy_gbps, "GB/s", 1.0, 0, 0, reps, 0, 0, 0, 0, -1);
    return MEMRA_OK;
}

/* ---------------------------------------------------------------- (d) bytes */

typedef struct step_bytes {
    double weights, kv, state;
} step_bytes;

static double wbytes(const memra_weight *w) { return w ? (double)w->nbytes : 0; }

/* Weight bytes one decode step reads (see the header comment). */
static double weight_bytes_per_token(const memra_model *m) {
    const memra_model_config *c = &m->cfg;
    double moe = c->is_moe && c->n_expert > 0 ? (double)c->n_expert_used / (double)c->n_expert : 0;
    double sum = (double)m->tok_embd->row_bytes + wbytes(m->output_norm) + wbytes(m->output);
    for (int32_t il = 0; il < c->n_trunk; il++) {
        const memra_layer *L = &m->layers[il];
        const memra_weight *all[] = {L->attn_norm, L->post_norm,   L->wq,        L->wk,         L->wv,
                                     L->wo,        L->q_norm,      L->k_norm,    L->ssm_qkv,    L->ssm_z,
                                     L->ssm_beta,  L->ssm_alpha,   L->ssm_conv,  L->ssm_dt,     L->ssm_a,
                                     L->ssm_norm,  L->ssm_out,     L->ffn_gate,  L->ffn_up,     L->ffn_down,
                                     L->ffn_router, L->shexp_gate_inp, L->shexp_gate, L->shexp_up, L->shexp_down};
        for (size_t k = 0; k < sizeof all / sizeof all[0]; k++) sum += wbytes(all[k]);
        sum += moe * (wbytes(L->gate_exps) + wbytes(L->up_exps) + wbytes(L->down_exps));
    }
    return sum;
}

/* Cache and state bytes of a decode step at position pos. */
static step_bytes state_bytes_at(const memra_model *m, int64_t pos) {
    const memra_model_config *c = &m->cfg;
    step_bytes sb = {0, 0, 0};
    double kv_row = (double)c->n_kv * (double)c->head_dim * sizeof(float);
    double ssm = (double)c->n_v * (double)c->d_v * (double)c->d_k * sizeof(float);
    double conv = (double)c->conv_dim * (double)(c->d_conv - 1) * sizeof(float);
    for (int32_t il = 0; il < c->n_trunk; il++) {
        if (c->kind[il] == MEMRA_LAYER_ATTN) sb.kv += 2 * kv_row * (double)(pos + 1) + 2 * kv_row; /* read + write */
        else sb.state += 2 * (ssm + conv);
    }
    return sb;
}

/* ---------------------------------------------------------------- runs */

static void fill_random(bench *B, int32_t n) {
    for (int32_t i = 0; i < n; i++) B->toks[i] = (int32_t)(rnd_u64(&B->rng) % (uint64_t)B->m->cfg.n_vocab);
}

/* Forward of n tokens at pos0 (slot 0), logits of the last one kept on the backend. */
static memra_status fwd(bench *B, const int32_t *tok, int32_t n, int32_t pos0, memra_error *err) {
    memra_batch_clear(&B->b);
    memra_status s = memra_batch_add(&B->b, 0, tok, n, pos0);
    if (s != MEMRA_OK) return memra_errorf(err, s, "batch of %d tokens does not fit", n);
    memra_forward_opts o = {0};
    return memra_forward(B->m, B->st, &B->b, &o, err);
}

/* One forward of n tokens at pos (one more decode step, or a prefill chunk), uncaptured, with every op on the
 * backend's timeline (--profile); the per-op table goes to the human output. */
static memra_status profile_step(bench *B, const int32_t *tok, int32_t n, int32_t pos, memra_error *err) {
    memra_backend *be = B->be;
    if (!be->ops->prof_begin)
        return memra_errorf(err, MEMRA_ERR_UNSUPPORTED, "--profile: backend %s has no op timeline", be->name);
    memra_batch_clear(&B->b);
    memra_status s = memra_batch_add(&B->b, 0, tok, n, pos);
    if (s != MEMRA_OK) return memra_errorf(err, s, "profile batch does not fit");
    s = be->ops->prof_begin(be);
    if (s != MEMRA_OK) return memra_errorf(err, s, "profile: %s", be->ops->last_error(be));
    memra_forward_opts o = {.profile = 1};
    s = memra_forward(B->m, B->st, &B->b, &o, err);
    if (s != MEMRA_OK) return s;
    if (n == 1)
        fprintf(B->human, "decode profile at depth %d (one uncaptured step; launch gaps included):\n", pos);
    else
        fprintf(B->human, "prefill profile of %d tokens at depth %d (one chunk; launch gaps included):\n", n, pos);
    s = be->ops->prof_end(be, B->human);
    if (s != MEMRA_OK) return memra_errorf(err, s, "profile: %s", be->ops->last_error(be));
    return MEMRA_OK;
}

/* T tokens from position 0 in batches of the chunk size. */
static memra_status prefill(bench *B, int32_t T, memra_error *err) {
    for (int32_t p0 = 0; p0 < T; p0 += B->o.chunk) {
        int32_t n = T - p0 < B->o.chunk ? T - p0 : B->o.chunk;
        MEMRA_TRY(fwd(B, B->toks + p0, n, p0, err));
    }
    return MEMRA_OK;
}

/* Counts a run whose last logits are not finite (the numbers of a broken
 * kernel are not a benchmark). */
static memra_status check_logits(bench *B, const char *what, memra_error *err) {
    int64_t V = B->m->cfg.n_vocab;
    float *h = malloc((size_t)V * sizeof *h);
    if (!h) return memra_errorf(err, MEMRA_ERR_NOMEM, "out of memory");
    memra_status s = B->be->ops->download(B->be, h, B->st->logits, (size_t)V * sizeof *h);
    int bad = 0;
    for (int64_t i = 0; s == MEMRA_OK && i < V; i++) bad |= !isfinite(h[i]);
    free(h);
    if (s != MEMRA_OK) return memra_errorf(err, s, "downloading logits failed");
    if (bad) {
        fprintf(stderr, "memra bench: WARNING: %s produced non-finite logits\n", what);
        B->n_bad++;
    }
    return MEMRA_OK;
}

static memra_status bench_prefill(bench *B, int32_t T, memra_error *err) {
    int reps = B->o.reps;
    double *t = calloc((size_t)reps, sizeof *t);
    if (!t) return memra_errorf(err, MEMRA_ERR_NOMEM, "out of memory");
    memra_status s = MEMRA_OK;
    for (int r = 0; s == MEMRA_OK && r < reps; r++) {
        fill_random(B, T); /* outside the clock: the tokens exist before a prompt is run */
        double t0 = now_s();
        s = prefill(B, T, err); /* memra_forward syncs before it returns */
        t[r] = now_s() - t0;
    }
    if (s == MEMRA_OK && B->o.profile) s = profile_step(B, B->toks, T < B->o.chunk ? T : B->o.chunk, 0, err);
    if (s == MEMRA_OK) s = check_logits(B, "prefill", err);
    if (s == MEMRA_OK) {
        double sec = median(t, reps), tps = (double)T / sec;
        fprintf(B->human, "prefill %6d    %9.1f tok/s  %9.2f ms total   (chunks of %d, median of %d)\n", T, tps,
                sec * 1e3, B->o.chunk, reps);
        csv_row(B, "prefill", tps, "tok/s", -1, T, 0, reps, 0, 0, 0, 0, sec * 1e3 / T);
    }
    free(t);
    return s;
}

/* One greedy decode step: the forward, argmax on the backend, the id downloaded. */
static memra_status decode_step(bench *B, int32_t tok, int32_t pos, memra_error *err) {
    MEMRA_TRY(fwd(B, &tok, 1, pos, err));
    memra_backend *be = B->be;
    int32_t next;
    memra_status s = be->ops->argmax(be, B->st->logits, B->m->cfg.n_vocab, 1, B->d_tok);
    if (s == MEMRA_OK) s = be->ops->download(be, &next, B->d_tok, sizeof next);
    if (s == MEMRA_OK) s = be->ops->sync(be);
    if (s == MEMRA_OK && (next < 0 || next >= B->m->cfg.n_vocab))
        s = memra_errorf(err, MEMRA_ERR_DEVICE, "argmax gave id %d outside the vocabulary", next);
    if (s != MEMRA_OK && !err->msg[0]) memra_errorf(err, s, "decode step at %d: argmax failed", pos);
    return s;
}

static memra_status bench_decode(bench *B, int32_t depth, memra_error *err) {
    int32_t N = B->o.decode_tokens;
    double *t = calloc((size_t)N, sizeof *t);
    if (!t) return memra_errorf(err, MEMRA_ERR_NOMEM, "out of memory");
    fill_random(B, depth + N);
    memra_status s = depth > 0 ? prefill(B, depth, err) : MEMRA_OK;
    memra_backend *be = B->be;
    /* the timeline takes the last 16 steps (at most 3/4 of them: the first ones capture and warm up), so that
     * a 64-layer step's ~150 K blocks stay within its record buffer */
    const int32_t tl_from = N - 16 > N / 4 ? N - 16 : N / 4;
    for (int32_t i = 0; s == MEMRA_OK && i < N; i++) {
        if (B->o.timeline && i == tl_from && (s = be->ops->timeline_begin(be)) != MEMRA_OK) {
            memra_errorf(err, s, "--timeline: %s", be->ops->last_error(be));
            break;
        }
        double t0 = now_s();
        s = decode_step(B, B->toks[depth + i], depth + i, err);
        t[i] = now_s() - t0;
    }
    if (s == MEMRA_OK && B->o.timeline) {
        char path[4096];
        snprintf(path, sizeof path, "%s-d%d.csv", B->o.timeline, depth);
        fprintf(B->human, "decode kernel timeline at depth %d, steps %d-%d (launches: %s):\n", depth, tl_from, N - 1,
                path);
        s = be->ops->timeline_end(be, B->human, path, N - tl_from);
        if (s != MEMRA_OK) memra_errorf(err, s, "--timeline: %s", be->ops->last_error(be));
    }
    if (s == MEMRA_OK && B->o.profile) s = profile_step(B, B->toks + depth + N - 1, 1, depth + N - 1, err);
    if (s == MEMRA_OK) s = check_logits(B, "decode", err);
    if (s == MEMRA_OK) {
        double sec = median(t, N), tps = 1.0 / sec;
        double w = weight_bytes_per_token(B->m), kv = 0, stb = 0;
        for (int32_t i = 0; i < N; i++) {
            step_bytes sb = state_bytes_at(B->m, depth + i);
            kv += sb.kv / N;
            stb += sb.state / N;
        }
        double bytes = w + kv + stb, gbps = bytes / sec / 1e9, frac = gbps / B->copy_gbps;
        fprintf(B->human, "decode  depth %-6d %7.1f tok/s  %9.3f ms/tok  %8.3f GB/tok  %8.1f GB/s  %5.1f%% of copy\n",
                depth, tps, sec * 1e3, bytes / 1e9, gbps, 100 * frac);
        csv_row(B, "decode", tps, "tok/s", frac, N, depth, N, bytes, w, kv, stb, sec * 1e3);
        csv_row(B, "decode_bytes", bytes, "B/tok", -1, N, depth, N, bytes, w, kv, stb, -1);
        csv_row(B, "decode_gbps", gbps, "GB/s", frac, N, depth, N, bytes, w, kv, stb, sec * 1e3);
    }
    free(t);
    return s;
}

/* ---------------------------------------------------------------- main */

static void usage(FILE *f) {
    fprintf(f,
            "usage: memra bench -m FILE [--backend cuda|cpu] [--threads N] [--device N]\n"
            "                   [--prefill 512,8192] [--depth 0,4096] [--decode-tokens 64] [--reps N]\n"
            "                   [--copy-mib N] [--chunk N] [--ctx N] [--seed N] [--csv] [--profile]\n"
            "                   [--timeline PREFIX]\n"
            "\n"
            "Measures the backend's copy bandwidth (the ceiling), prefill tok/s for each length and\n"
            "batch-1 decode tok/s at each depth, with the bytes a decode step must read and the\n"
            "fraction of the ceiling it reaches. Random token ids (fixed seed).\n"
            "\n"
            "  -m FILE           GGUF model\n"
            "  --backend B       cuda (default) or cpu\n"
            "  --prefill LIST    prompt lengths to time (default 512,8192)\n"
            "  --depth LIST      context depths for decode (default 0,4096)\n"
            "  --decode-tokens N decode steps timed per depth (default 64)\n"
            "  --reps N          prefill repetitions, median taken (default 3; the copy runs 3N)\n"
            "  --copy-mib N      copy size (default 2048 on CUDA, 256 on the CPU)\n"
            "  --chunk N         prefill batch size (default 512, capped by the longest run)\n"
            "  --ctx N           context the sequence state is sized for (default: the longest run);\n"
            "                    a server's is the model's, and attention's decode grid grows with it\n"
            "  --seed N          token id seed (default 1)\n"
            "  --threads N       CPU threads (default: all)\n"
            "  --device N        CUDA device (default 0)\n"
            "  --csv             CSV lines on stdout (the table moves to stderr)\n"
            "  --profile         after each depth's decode, time every op of one more (uncaptured)\n"
            "                    step and print the time per op; after each prefill, the same for\n"
            "                    its first chunk\n"
            "  --timeline PREFIX per depth, every kernel launch of the last 16 decode steps (at most 3/4)\n"
            "                    (captured, as timed): what each kernel takes after its wait and\n"
            "                    between launches, a table per kernel and PREFIX-dDEPTH.csv per\n"
            "                    launch (CUDA built with make TIMELINE=1)\n");
}

static int parse(bench_opts *o, int argc, char **argv) {
    memset(o, 0, sizeof *o);
    o->backend = "cuda";
    o->prefill[0] = 512;
    o->prefill[1] = 8192;
    o->n_prefill = 2;
    o->depth[0] = 0;
    o->depth[1] = 4096;
    o->n_depth = 2;
    o->decode_tokens = 64;
    o->reps = 3;
    o->chunk = 512;
    o->seed = 1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int has = i + 1 < argc;
        const char *v = has ? argv[i + 1] : NULL;
        if ((!strcmp(a, "-m") || !strcmp(a, "--model")) && has) {
            o->model = v;
        } else if (!strcmp(a, "--backend") && has) {
            o->backend = v;
        } else if (!strcmp(a, "--threads") && has) {
            o->threads = atoi(v);
        } else if (!strcmp(a, "--device") && has) {
            o->device = atoi(v);
        } else if (!strcmp(a, "--prefill") && has) {
            if (parse_list(v, o->prefill, &o->n_prefill, 1)) goto bad;
        } else if (!strcmp(a, "--depth") && has) {
            if (parse_list(v, o->depth, &o->n_depth, 0)) goto bad;
        } else if (!strcmp(a, "--decode-tokens") && has) {
            o->decode_tokens = atoi(v);
            if (o->decode_tokens < 1 || o->decode_tokens > (1 << 20)) goto bad;
        } else if (!strcmp(a, "--reps") && has) {
            o->reps = atoi(v);
            if (o->reps < 1 || o->reps > 1000) goto bad;
        } else if (!strcmp(a, "--copy-mib") && has) {
            o->copy_mib = atoll(v);
            if (o->copy_mib < 1 || o->copy_mib > (1 << 20)) goto bad;
        } else if (!strcmp(a, "--chunk") && has) {
            o->chunk = atoi(v);
            if (o->chunk < 1 || o->chunk > (1 << 16)) goto bad;
        } else if (!strcmp(a, "--ctx") && has) {
            o->ctx = atoi(v);
            if (o->ctx < 1 || o->ctx > (1 << 24)) goto bad;
        } else if (!strcmp(a, "--seed") && has) {
            o->seed = strtoull(v, NULL, 10);
        } else if (!strcmp(a, "--timeline") && has) {
            o->timeline = v;
        } else if (!strcmp(a, "--profile")) {
            o->profile = 1;
            continue;
        } else if (!strcmp(a, "--csv")) {
            o->csv = 1;
            continue;
        } else if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 1;
        } else {
            fprintf(stderr, "memra bench: unknown or incomplete option '%s'\n", a);
            usage(stderr);
            return 2;
        }
        i++;
        continue;
    bad:
        fprintf(stderr, "memra bench: bad value '%s' for %s\n", v, a);
        return 2;
    }
    if (!o->model) {
        fprintf(stderr, "memra bench: -m FILE is required\n");
        usage(stderr);
        return 2;
    }
    return 0;
}

static void bench_free(bench *B) {
    if (B->d_tok) B->be->ops->free(B->be, B->d_tok);
    if (B->m) {
        memra_batch_free(B->be, &B->b);
        memra_state_free(B->m, B->st);
        memra_model_free(B->m);
    }
    if (B->be) memra_backend_free(B->be);
    free(B->toks);
}

int memra_cmd_bench(int argc, char **argv) {
    bench B;
    memset(&B, 0, sizeof B);
    int pr = parse(&B.o, argc, argv);
    if (pr) return pr == 1 ? 0 : pr;
    bench_opts *o = &B.o;
    B.human = o->csv ? stderr : stdout;
    B.rng = o->seed;
    const char *slash = strrchr(o->model, '/');
    B.name = slash ? slash + 1 : o->model;

    memra_error err = {{0}};
    memra_status s;
    if (!strcmp(o->backend, "cpu")) {
        s = memra_backend_cpu_init(&B.be, o->threads, &err);
    } else if (!strcmp(o->backend, "cuda")) {
        s = memra_backend_cuda_init(&B.be, o->device, &err);
    } else {
        fprintf(stderr, "memra bench: unknown backend '%s' (cuda or cpu)\n", o->backend);
        return 2;
    }
    if (s == MEMRA_OK && o->timeline && !B.be->ops->timeline_begin)
        s = memra_errorf(&err, MEMRA_ERR_UNSUPPORTED, "--timeline: backend %s has no kernel timeline%s", B.be->name,
                         strcmp(B.be->name, "cuda") ? "" : " (build with make TIMELINE=1)");
    double t_load = now_s();
    if (s == MEMRA_OK) s = memra_model_load(o->model, B.be, &B.m, &err);
    t_load = now_s() - t_load;
    int32_t max_pf = max_of(o->prefill, o->n_prefill), max_dp = max_of(o->depth, o->n_depth);
    int32_t n_ctx = max_pf > max_dp + o->decode_tokens ? max_pf : max_dp + o->decode_tokens;
    if (o->ctx > n_ctx) n_ctx = o->ctx;
    int32_t longest = max_pf > max_dp ? max_pf : max_dp;
    if (o->chunk > longest) o->chunk = longest > 0 ? longest : 1;
    if (s == MEMRA_OK) s = memra_state_init(B.m, 1, n_ctx, o->chunk, 1, &B.st, &err);
    if (s == MEMRA_OK) s = memra_batch_init(B.be, o->chunk, 1, &B.b, &err);
    if (s == MEMRA_OK) s = B.be->ops->alloc(B.be, sizeof(int32_t), (void **)&B.d_tok);
    if (s == MEMRA_OK && !(B.toks = malloc((size_t)(n_ctx + 32) * sizeof *B.toks)))
        s = memra_errorf(&err, MEMRA_ERR_NOMEM, "out of memory");
    if (s != MEMRA_OK) {
        fprintf(stderr, "memra bench: %s\n", err.msg[0] ? err.msg : memra_status_str(s));
        bench_free(&B);
        return 1;
    }
    const memra_model_config *c = &B.m->cfg;
    fprintf(B.human, "memra bench: %s on %s: %s, %d layers, H=%lld, vocab %lld%s; load %.1fs\n", B.name, B.be->name,
            c->arch_name, c->n_trunk, (long long)c->n_embd, (long long)c->n_vocab,
            c->is_moe ? ", MoE" : "", t_load);
    csv_header(&B);

    s = bench_copy(&B, &err);
    /* warm-up: one short prefill and a few decode steps (kernel loading, first-touch pages) */
    if (s == MEMRA_OK) {
        int32_t w = o->chunk < 16 ? o->chunk : 16;
        fill_random(&B, w + 4);
        s = prefill(&B, w, &err);
        for (int32_t i = 0; s == MEMRA_OK && i < 4 && w + i < n_ctx; i++) s = decode_step(&B, B.toks[w + i], w + i, &err);
    }
    /* decode first: it is the roofline measurement, and each CSV row is
     * flushed, so a run cut short by a time limit still has it */
    for (int i = 0; s == MEMRA_OK && i < o->n_depth; i++) s = bench_decode(&B, o->depth[i], &err);
    for (int i = 0; s == MEMRA_OK && i < o->n_prefill; i++) s = bench_prefill(&B, o->prefill[i], &err);
    if (s != MEMRA_OK) fprintf(stderr, "memra bench: %s\n", err.msg[0] ? err.msg : memra_status_str(s));
    int bad = B.n_bad;
    bench_free(&B);
    return s != MEMRA_OK || bad ? 1 : 0;
}
