/* memra eval: runs token ids through the model and writes raw float32 logits.
 *
 *   memra eval -m FILE --tokens ID,ID,... [--all] [-o OUT.f32] [--threads N] [--ctx N] [--chunk N]
 *              [--backend cpu|cuda]
 *
 * Writes the logits of the last position (or of every position with --all)
 * as little-endian float32, row after row, to OUT (stdout without -o). The
 * prompt runs as one sequence in chunks of up to 512 tokens (64 with --all),
 * so a long prompt also exercises the state carried between chunks. --chunk N
 * caps the chunk at N tokens: --chunk 1 runs every token as a decode step (the
 * CUDA backend's T = 1 kernels and its decode graph), so `--chunk 1 --all`
 * dumps the logits a decode kernel change must keep bit for bit. Exit 0 ok, 1 runtime
 * error (missing file, token out of vocabulary, prompt longer than the
 * context), 2 usage. This is a debug command: it reaches into src/. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "commands.h"
#include "model/model.h"

#define EVAL_CHUNK 512
#define EVAL_CHUNK_ALL 64

static void usage(FILE *f) {
    fprintf(f, "usage: memra eval -m FILE --tokens ID,ID,... [--all] [-o OUT.f32] [--threads N] [--ctx N]\n"
               "                  [--chunk N] [--backend cpu|cuda]\n"
               "  -m, --model FILE   GGUF model\n"
               "  --tokens LIST      comma-separated token ids (the prompt)\n"
               "  --all              write the logits of every position (default: the last one)\n"
               "  -o, --output FILE  where to write float32 logits (default: stdout)\n"
               "  --threads N        CPU threads (default: all)\n"
               "  --ctx N            context length (default: the model's context_length)\n"
               "  --chunk N          tokens per forward call, at most (default: 512, 64 with --all;\n"
               "                     1: one decode step per token)\n"
               "  --backend NAME     cpu (default, the reference) or cuda (device 0)\n");
}

/* Parses "1,2,3"; returns the count or -1 with a message. */
static int64_t parse_tokens(const char *s, int32_t **out) {
    int64_t n = 1;
    for (const char *p = s; *p; p++) n += *p == ',';
    int32_t *v = malloc((size_t)n * sizeof *v);
    if (!v) return -1;
    const char *p = s;
    for (int64_t i = 0; i < n; i++) {
        char *end;
        errno = 0;
        long long x = strtoll(p, &end, 10);
        if (end == p || errno || x < INT32_MIN || x > INT32_MAX || (*end != ',' && *end != '\0')) {
            fprintf(stderr, "memra eval: --tokens: '%.*s' is not a token id\n", (int)strcspn(p, ","), p);
            free(v);
            return -1;
        }
        v[i] = (int32_t)x;
        p = end + (*end == ',');
    }
    *out = v;
    return n;
}

static int parse_int(const char *flag, const char *s, long lo, long hi, long *out) {
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (end == s || *end || errno || v < lo || v > hi) {
        fprintf(stderr, "memra eval: %s wants an integer in [%ld, %ld], got '%s'\n", flag, lo, hi, s);
        return -1;
    }
    *out = v;
    return 0;
}

int memra_cmd_eval(int argc, char **argv) {
    const char *model_path = NULL, *tokens_arg = NULL, *out_path = NULL, *backend = "cpu";
    int all = 0;
    long threads = 0, ctx = 0, chunk_cap = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int has_val = i + 1 < argc;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 0;
        } else if ((!strcmp(a, "-m") || !strcmp(a, "--model")) && has_val) {
            model_path = argv[++i];
        } else if (!strcmp(a, "--tokens") && has_val) {
            tokens_arg = argv[++i];
        } else if ((!strcmp(a, "-o") || !strcmp(a, "--output")) && has_val) {
            out_path = argv[++i];
        } else if (!strcmp(a, "--backend") && has_val) {
            backend = argv[++i];
            if (strcmp(backend, "cpu") && strcmp(backend, "cuda")) {
                fprintf(stderr, "memra eval: --backend wants cpu or cuda, got '%s'\n", backend);
                return 2;
            }
        } else if (!strcmp(a, "--all")) {
            all = 1;
        } else if (!strcmp(a, "--threads") && has_val) {
            if (parse_int(a, argv[++i], 1, 1024, &threads)) return 2;
        } else if (!strcmp(a, "--ctx") && has_val) {
            if (parse_int(a, argv[++i], 1, INT32_MAX, &ctx)) return 2;
        } else if (!strcmp(a, "--chunk") && has_val) {
            if (parse_int(a, argv[++i], 1, EVAL_CHUNK, &chunk_cap)) return 2;
        } else {
            fprintf(stderr, "memra eval: unknown or incomplete option '%s'\n", a);
            usage(stderr);
            return 2;
        }
    }
    if (!model_path || !tokens_arg) {
        fprintf(stderr, "memra eval: -m FILE and --tokens are required\n");
        usage(stderr);
        return 2;
    }
    int32_t *tokens = NULL;
    int64_t n = parse_tokens(tokens_arg, &tokens);
    if (n < 0) return 2;

    int rc = 1;
    memra_error err = {{0}};
    memra_backend *be = NULL;
    memra_model *m = NULL;
    memra_state *st = NULL;
    memra_batch batch = {0};
    float *logits = NULL;
    FILE *out = NULL;
    memra_status bst = !strcmp(backend, "cuda") ? memra_backend_cuda_init(&be, 0, &err)
                                                 : memra_backend_cpu_init(&be, (int)threads, &err);
    if (bst != MEMRA_OK || memra_model_load(model_path, be, &m, &err) != MEMRA_OK) {
        fprintf(stderr, "memra eval: %s\n", err.msg);
        goto done;
    }
    int64_t V = m->cfg.n_vocab, n_ctx = ctx ? ctx : m->cfg.n_ctx_train;
    for (int64_t i = 0; i < n; i++)
        if (tokens[i] < 0 || tokens[i] >= V) {
            fprintf(stderr, "memra eval: token %lld (position %lld) is outside the vocabulary [0, %lld)\n",
                    (long long)tokens[i], (long long)i, (long long)V);
            goto done;
        }
    if (n > n_ctx) {
        fprintf(stderr, "memra eval: the prompt has %lld tokens, longer than the context of %lld\n", (long long)n,
                (long long)n_ctx);
        goto done;
    }
    /* with --all every row of a chunk comes back to the host: smaller chunks
     * keep that buffer small for a large vocabulary */
    int32_t max_chunk = chunk_cap ? (int32_t)chunk_cap : all ? EVAL_CHUNK_ALL : EVAL_CHUNK;
    int32_t chunk = n < max_chunk ? (int32_t)n : max_chunk;
    if (memra_state_init(m, 1, (int32_t)n, chunk, 1, &st, &err) != MEMRA_OK ||
        memra_batch_init(be, chunk, 1, &batch, &err) != MEMRA_OK) {
        fprintf(stderr, "memra eval: %s\n", err.msg);
        goto done;
    }
    logits = malloc((size_t)(all ? chunk : 1) * (size_t)V * sizeof(float));
    out = out_path ? fopen(out_path, "wb") : stdout;
    if (!logits || !out) {
        fprintf(stderr, "memra eval: %s: %s\n", out_path ? out_path : "logits", strerror(errno));
        goto done;
    }
    for (int64_t p0 = 0; p0 < n; p0 += chunk) {
        int32_t nt = (int32_t)(n - p0 < chunk ? n - p0 : chunk);
        memra_batch_clear(&batch);
        memra_batch_add(&batch, 0, tokens + p0, nt, (int32_t)p0);
        memra_forward_opts fo = {.all_logits = all, .logits = logits};
        if (memra_forward(m, st, &batch, &fo, &err) != MEMRA_OK) {
            fprintf(stderr, "memra eval: %s\n", err.msg);
            goto done;
        }
        size_t rows = all ? (size_t)nt : (p0 + nt == n ? 1 : 0);
        if (rows && fwrite(logits, sizeof(float) * (size_t)V, rows, out) != rows) {
            fprintf(stderr, "memra eval: writing %s: %s\n", out_path ? out_path : "stdout", strerror(errno));
            goto done;
        }
    }
    if (fflush(out) != 0) {
        fprintf(stderr, "memra eval: writing %s: %s\n", out_path ? out_path : "stdout", strerror(errno));
        goto done;
    }
    rc = 0;
done:
    if (out && out != stdout && fclose(out) != 0 && rc == 0) {
        fprintf(stderr, "memra eval: closing %s: %s\n", out_path, strerror(errno));
        rc = 1;
    }
    free(logits);
    memra_batch_free(be, &batch);
    if (m) memra_state_free(m, st);
    memra_model_free(m);
    memra_backend_free(be);
    free(tokens);
    return rc;
}
