/* memra mkmodel: write a full-size Qwen3.5 GGUF with random weights (a tool:
 * it reaches into src/model/mkmodel.h). */
#include <errno.h>
#include <inttypes.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "commands.h"
#include "gguf/quant.h"
#include "model/mkmodel.h"

#define DEFAULT_VOCAB "../shared/fixtures/qwen3-vocab.gguf"

static void usage(FILE *f) {
    fprintf(f,
            "usage: memra mkmodel --preset SIZE --type TYPE -o FILE [options]\n"
            "\n"
            "Writes a GGUF with the tensor names, shapes, metadata and per-tensor types that\n"
            "llama.cpp's converter and llama-quantize produce for a Qwen3.5 model, filled with\n"
            "random weights (finite, sane magnitudes).\n"
            "\n"
            "  --preset SIZE   ");
    for (int i = 0;; i++) {
        const memra_mkmodel_preset *p = memra_mkmodel_preset_at(i);
        if (!p) break;
        if (strncmp(p->name, "test-", 5)) fprintf(f, "%s%s", i ? ", " : "", p->name);
    }
    fprintf(f,
            "\n"
            "  --type TYPE     bf16, q8_0, q4_k_m, iq4_xs, nvfp4\n"
            "  -o FILE         output path (written as FILE.tmp, renamed when complete)\n"
            "  --vocab FILE    GGUF to copy the tokenizer from (default " DEFAULT_VOCAB ",\n"
            "                  relative to the current directory, then to the repository of the binary)\n"
            "  --seed N        random seed (default 0); the output does not depend on --threads\n"
            "  --no-mtp        leave out the MTP layer (blk.N.nextn.*)\n"
            "  --threads N     generator threads (default: all CPUs)\n"
            "  --dry-run       print the tensor plan and sizes; write nothing\n");
}

/* DEFAULT_VOCAB relative to the CWD, else relative to the repository holding
 * the binary (build/memra -> <repo>/../shared/...). */
static const char *default_vocab(char *buf, size_t n) {
    if (access(DEFAULT_VOCAB, R_OK) == 0) return DEFAULT_VOCAB;
    char exe[PATH_MAX];
    ssize_t k = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (k > 0) {
        exe[k] = 0;
        char *d = dirname(exe); /* <repo>/build */
        char dir[PATH_MAX];
        snprintf(dir, sizeof dir, "%s", d);
        d = dirname(dir); /* <repo> */
        if ((size_t)snprintf(buf, n, "%s/%s", d, DEFAULT_VOCAB) < n && access(buf, R_OK) == 0) return buf;
    }
    return NULL;
}

static int parse_u64(const char *s, uint64_t *out) {
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 0);
    if (errno || end == s || *end || *s == '-') return -1;
    *out = v;
    return 0;
}

int memra_cmd_mkmodel(int argc, char **argv) {
    memra_mkmodel_opts o = {0};
    const char *out = NULL, *type = "bf16";
    int dry = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int has = i + 1 < argc;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(a, "--preset") && has) {
            o.preset = argv[++i];
        } else if (!strcmp(a, "--type") && has) {
            type = argv[++i];
        } else if (!strcmp(a, "-o") && has) {
            out = argv[++i];
        } else if (!strcmp(a, "--vocab") && has) {
            o.vocab_path = argv[++i];
        } else if (!strcmp(a, "--seed") && has) {
            if (parse_u64(argv[++i], &o.seed)) {
                fprintf(stderr, "memra mkmodel: bad --seed '%s'\n", argv[i]);
                return 2;
            }
        } else if (!strcmp(a, "--threads") && has) {
            uint64_t n;
            if (parse_u64(argv[++i], &n) || n > 4096) {
                fprintf(stderr, "memra mkmodel: bad --threads '%s'\n", argv[i]);
                return 2;
            }
            o.n_threads = (int)n;
        } else if (!strcmp(a, "--no-mtp")) {
            o.no_mtp = 1;
        } else if (!strcmp(a, "--dry-run")) {
            dry = 1;
        } else {
            fprintf(stderr, "memra mkmodel: unknown or incomplete option '%s'\n", a);
            usage(stderr);
            return 2;
        }
    }
    if (!o.preset || !memra_mkmodel_preset_find(o.preset)) {
        fprintf(stderr, "memra mkmodel: %s --preset%s%s\n", o.preset ? "unknown" : "missing", o.preset ? " " : "",
                o.preset ? o.preset : "");
        usage(stderr);
        return 2;
    }
    int mix = memra_mkmodel_mix_parse(type);
    if (mix < 0) {
        fprintf(stderr, "memra mkmodel: unknown --type '%s' (bf16, q8_0, q4_k_m, iq4_xs, nvfp4)\n", type);
        return 2;
    }
    o.mix = (memra_mkmodel_mix)mix;
    o.progress = isatty(2);

    memra_error err = {{0}};
    memra_mkmodel_plan pl;
    if (memra_mkmodel_plan_init(&o, &pl, &err)) {
        fprintf(stderr, "memra mkmodel: %s\n", err.msg);
        return 1;
    }
    if (dry) {
        for (int64_t i = 0; i < pl.n_tensors; i++) {
            const memra_mkmodel_tensor *t = &pl.tensors[i];
            char shape[96];
            int k = snprintf(shape, sizeof shape, "%" PRId64, t->ne[0]);
            for (uint32_t d = 1; d < t->n_dims; d++)
                k += snprintf(shape + k, sizeof shape - (size_t)k, ", %" PRId64, t->ne[d]);
            printf("%-36s %-22s %-7s %10.2f MiB\n", t->name, shape, memra_type_name(t->type),
                   (double)t->nbytes / 1048576.0);
        }
    }
    printf("%s %s: %s, %d layers (%d trunk + %d MTP), %" PRId64 " tensors, %.3fB parameters (%.3fB without MTP), "
           "%.2f GB of tensor data\n", pl.p.name, memra_mkmodel_mix_name(pl.mix), pl.arch, pl.n_layer, pl.p.n_trunk,
           pl.n_nextn, pl.n_tensors, (double)pl.n_params * 1e-9, (double)pl.n_params_trunk * 1e-9,
           (double)pl.data_bytes * 1e-9);
    uint64_t bytes = pl.data_bytes;
    memra_mkmodel_plan_free(&pl);
    if (dry) return 0;

    if (!out) {
        fprintf(stderr, "memra mkmodel: missing -o FILE\n");
        return 2;
    }
    char vbuf[PATH_MAX + 64];
    if (!o.vocab_path) {
        o.vocab_path = default_vocab(vbuf, sizeof vbuf);
        if (!o.vocab_path) {
            fprintf(stderr, "memra mkmodel: no vocabulary: %s not found (from the current directory or the "
                    "repository of the binary); pass --vocab FILE (a GGUF with tokenizer.* keys)\n", DEFAULT_VOCAB);
            return 1;
        }
    }
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    if (memra_mkmodel_write(&o, out, &err)) {
        fprintf(stderr, "memra %s%s\n", strncmp(err.msg, "mkmodel: ", 9) ? "mkmodel: " : "", err.msg);
        return 1;
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double s = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    printf("wrote %s: %.2f GB in %.1f s (%.0f MB/s)\n", out, (double)bytes * 1e-9, s, s > 0 ? (double)bytes * 1e-6 / s : 0.0);
    return 0;
}
