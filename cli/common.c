#include "common.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void cli_gen_opts_init(cli_gen_opts *o) {
    memset(o, 0, sizeof *o);
    o->engine = memra_engine_options_default();
    o->gen = memra_generate_params_default();
}

static int parse_int(const char *s, long lo, long hi, long *out) {
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi) return -1;
    *out = v;
    return 0;
}

static int parse_float(const char *s, double *out) {
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end) return -1;
    *out = v;
    return 0;
}

int cli_gen_parse(cli_gen_opts *o, int argc, char **argv, int *i, const char *cmd) {
    const char *a = argv[*i];
    static const char *with_value[] = {"-m", "--model", "-n", "--n-predict", "--temp", "--top-k", "--top-p",
                                       "--min-p", "--repeat-penalty", "--presence-penalty", "--frequency-penalty",
                                       "--repeat-last-n", "--seed", "--backend", "--threads", "-t", "--ctx",
                                       "-c"};
    int takes_value = 0;
    for (size_t k = 0; k < sizeof with_value / sizeof with_value[0]; k++)
        if (!strcmp(a, with_value[k])) takes_value = 1;
    if (!takes_value) {
        if (!strcmp(a, "--no-think")) return o->no_think = 1;
        if (!strcmp(a, "-v") || !strcmp(a, "--verbose")) return o->verbose = 1;
        return 0;
    }
    if (*i + 1 >= argc) {
        fprintf(stderr, "memra %s: %s needs a value\n", cmd, a);
        return -1;
    }
    const char *v = argv[++*i];
    long l;
    double d;
    memra_sampling *sp = &o->gen.sampling;
    if (!strcmp(a, "-m") || !strcmp(a, "--model")) {
        o->model = v;
    } else if (!strcmp(a, "--backend")) {
        o->engine.backend = v;
    } else if (!strcmp(a, "--seed")) {
        char *end;
        errno = 0;
        unsigned long long s = strtoull(v, &end, 10);
        if (errno || end == v || *end) goto bad;
        sp->seed = s;
    } else if (!strcmp(a, "-n") || !strcmp(a, "--n-predict")) {
        if (parse_int(v, 0, 1L << 30, &l)) goto bad;
        o->gen.max_tokens = (int32_t)l;
    } else if (!strcmp(a, "--top-k")) {
        if (parse_int(v, 0, 1L << 30, &l)) goto bad;
        sp->top_k = (int32_t)l;
    } else if (!strcmp(a, "--repeat-last-n")) {
        if (parse_int(v, -1, 1L << 30, &l)) goto bad;
        sp->penalty_last_n = (int32_t)l;
    } else if (!strcmp(a, "--threads") || !strcmp(a, "-t")) {
        if (parse_int(v, 0, 4096, &l)) goto bad;
        o->engine.n_threads = (int)l;
    } else if (!strcmp(a, "--ctx") || !strcmp(a, "-c")) {
        if (parse_int(v, 16, 1L << 24, &l)) goto bad;
        o->engine.n_ctx = (int32_t)l;
    } else {
        if (parse_float(v, &d)) goto bad;
        if (!strcmp(a, "--temp")) {
            if (d < 0) goto bad;
            sp->temperature = (float)d;
        } else if (!strcmp(a, "--top-p")) {
            if (d < 0 || d > 1) goto bad;
            sp->top_p = (float)d;
        } else if (!strcmp(a, "--min-p")) {
            if (d < 0 || d > 1) goto bad;
            sp->min_p = (float)d;
        } else if (!strcmp(a, "--repeat-penalty")) {
            if (d <= 0) goto bad;
            sp->repeat_penalty = (float)d;
        } else if (!strcmp(a, "--presence-penalty")) {
            sp->presence_penalty = (float)d;
        } else if (!strcmp(a, "--frequency-penalty")) {
            sp->frequency_penalty = (float)d;
        }
    }
    return 1;
bad:
    fprintf(stderr, "memra %s: bad value '%s' for %s\n", cmd, v, a);
    return -1;
}

void cli_gen_usage(FILE *f) {
    fprintf(f,
            "  -m, --model FILE        GGUF model (required)\n"
            "  -n, --n-predict N       tokens to generate at most (default 256)\n"
            "  --temp T                temperature; 0 = greedy (default 0)\n"
            "  --top-k K               keep the K most likely tokens (default off)\n"
            "  --top-p P               nucleus sampling (default 1 = off)\n"
            "  --min-p P               drop tokens below P x the top probability (default off)\n"
            "  --repeat-penalty R      penalise recent tokens (default 1 = off)\n"
            "  --presence-penalty X    subtract X from seen tokens' logits (default 0)\n"
            "  --frequency-penalty X   subtract X per occurrence (default 0)\n"
            "  --repeat-last-n N       window of the penalties; -1 = all (default 64)\n"
            "  --seed S                seed of the sampler (default 0)\n"
            "  --no-think              turn the model's thinking off (chat template)\n"
            "  --backend B             auto, cpu or cuda (default auto)\n"
            "  -t, --threads N         CPU threads (default: all)\n"
            "  -c, --ctx N             context length (default min(4096, model))\n"
            "  -v, --verbose           log what happens\n");
}

static int bar_on;

static void progress_bar(void *user, float f) {
    (void)user;
    if (!bar_on) return;
    int w = 30, n = (int)(f * (float)w + 0.5f);
    fprintf(stderr, "\rloading [");
    for (int i = 0; i < w; i++) fputc(i < n ? '#' : ' ', stderr);
    fprintf(stderr, "] %3d%%", (int)(f * 100.0f + 0.5f));
    if (f >= 1.0f) fprintf(stderr, "\r\033[K");
    fflush(stderr);
}

memra_engine *cli_open_engine(const cli_gen_opts *o, const char *cmd) {
    if (!o->model) {
        fprintf(stderr, "memra %s: no model given (-m FILE)\n", cmd);
        return NULL;
    }
    memra_engine_options eo = o->engine;
    bar_on = isatty(2);
    eo.progress = progress_bar;
    memra_engine *e = NULL;
    memra_error err;
    memra_status st = memra_engine_open(o->model, &eo, &e, &err);
    if (st != MEMRA_OK) {
        if (bar_on) fprintf(stderr, "\r\033[K");
        fprintf(stderr, "memra %s: %s\n", cmd, err.msg);
        return NULL;
    }
    if (o->verbose) {
        memra_engine_info info;
        memra_engine_get_info(e, &info);
        fprintf(stderr, "memra: %s, %.2fB parameters, %d layers, vocab %lld, context %d, backend %s, template %s%s\n",
                info.arch, (double)info.n_params / 1e9, info.n_layer, (long long)info.n_vocab, info.n_ctx,
                info.backend, info.chat_template, info.chat_template_exact ? "" : " (fallback)");
    }
    return e;
}

void cli_print_summary(const memra_generate_stats *st) {
    double pp = st->prefill_seconds > 0 ? (double)st->n_prefilled / st->prefill_seconds : 0.0;
    double tg = st->generate_seconds > 0 ? (double)st->n_generated / st->generate_seconds : 0.0;
    fprintf(stderr, "[prompt %lld tok, %.1f tok/s | generation %lld tok, %.1f tok/s]\n", (long long)st->n_prefilled,
            pp, (long long)st->n_generated, tg);
}

char *cli_read_file(const char *path, size_t *len) {
    FILE *f = strcmp(path, "-") ? fopen(path, "rb") : stdin;
    if (!f) return NULL;
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    while (buf) {
        n += fread(buf + n, 1, cap - n, f);
        if (n < cap) break;
        char *nb = cap > SIZE_MAX / 2 ? NULL : realloc(buf, cap * 2);
        if (!nb) {
            free(buf);
            buf = NULL;
            errno = ENOMEM;
            break;
        }
        buf = nb;
        cap *= 2;
    }
    int bad = buf && ferror(f);
    if (f != stdin) fclose(f);
    if (bad) {
        free(buf);
        errno = EIO;
        return NULL;
    }
    *len = n;
    return buf;
}
