/* Bridge for the Python cross-checks (tests/py/test_quant_gguf.py): runs
 * memra's scalar conversions on raw bytes and writes the result to stdout.
 *
 *   dequant_tool TYPE [FILE OFFSET NBYTES]  blocks of ggml type TYPE (from
 *                                           FILE at OFFSET, else all of stdin)
 *                                           -> float32 via memra_dequant_row
 *   dequant_tool --to-f16 | --to-bf16       float32 on stdin -> 16-bit codes
 *                                           via memra_fp32_to_fp16 / _bf16
 *
 * Exit status: 0 on success, 1 on a usage or input error (message on stderr). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf/quant.h"

static int fail(const char *msg, const char *arg) {
    fprintf(stderr, "dequant_tool: %s%s%s\n", msg, arg ? ": " : "", arg ? arg : "");
    return 1;
}

/* Reads all of f into a malloc'd buffer (aligned for any block struct). */
static unsigned char *read_all(FILE *f, size_t *len) {
    size_t cap = 1 << 16, n = 0;
    unsigned char *buf = malloc(cap);
    while (buf) {
        n += fread(buf + n, 1, cap - n, f);
        if (n < cap) break;
        unsigned char *nb = realloc(buf, cap * 2);
        if (!nb) {
            free(buf);
            return NULL;
        }
        buf = nb;
        cap *= 2;
    }
    if (buf && ferror(f)) {
        free(buf);
        return NULL;
    }
    *len = n;
    return buf;
}

static unsigned char *read_range(const char *path, const char *off_s, const char *len_s, size_t *len) {
    char *end;
    errno = 0;
    unsigned long long off = strtoull(off_s, &end, 10);
    if (errno || *end) return NULL;
    unsigned long long n = strtoull(len_s, &end, 10);
    if (errno || *end) return NULL;
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    unsigned char *buf = malloc(n ? n : 1);
    if (!buf || fseeko(f, (off_t)off, SEEK_SET) != 0 || fread(buf, 1, n, f) != n) {
        free(buf);
        fclose(f);
        return NULL;
    }
    fclose(f);
    *len = n;
    return buf;
}

static int convert_to_16(int bf16) {
    size_t len;
    unsigned char *in = read_all(stdin, &len);
    if (!in) return fail("cannot read stdin", NULL);
    if (len % 4) {
        free(in);
        return fail("input is not whole float32 values", NULL);
    }
    size_t n = len / 4;
    uint16_t *out = malloc((n ? n : 1) * sizeof *out);
    if (!out) {
        free(in);
        return fail("out of memory", NULL);
    }
    for (size_t i = 0; i < n; i++) {
        float f;
        memcpy(&f, in + 4 * i, 4);
        out[i] = bf16 ? memra_fp32_to_bf16(f) : memra_fp32_to_fp16(f);
    }
    int rc = fwrite(out, sizeof *out, n, stdout) == n ? 0 : fail("write failed", NULL);
    free(in);
    free(out);
    return rc;
}

int main(int argc, char **argv) {
    if (argc == 2 && !strcmp(argv[1], "--to-f16")) return convert_to_16(0);
    if (argc == 2 && !strcmp(argv[1], "--to-bf16")) return convert_to_16(1);
    if (argc != 2 && argc != 5) return fail("usage: dequant_tool TYPE [FILE OFFSET NBYTES] | --to-f16 | --to-bf16", NULL);
    char *end;
    unsigned long type = strtoul(argv[1], &end, 10);
    if (*end || !*argv[1]) return fail("bad type id", argv[1]);
    const memra_type_info *t = memra_type_get((uint32_t)type);
    if (!t) return fail("unknown type id", argv[1]);
    if (!t->supported) return fail("type not supported", t->name);
    size_t len = 0;
    unsigned char *in = argc == 5 ? read_range(argv[2], argv[3], argv[4], &len) : read_all(stdin, &len);
    if (!in) return fail("cannot read input", argc == 5 ? argv[2] : "stdin");
    if (len % t->block_bytes) {
        free(in);
        return fail("input is not a whole number of blocks of", t->name);
    }
    int64_t n = (int64_t)(len / t->block_bytes) * t->block_elems;
    float *out = malloc((size_t)(n ? n : 1) * sizeof *out);
    if (!out) {
        free(in);
        return fail("out of memory", NULL);
    }
    memra_dequant_row((uint32_t)type, in, out, n);
    int rc = fwrite(out, sizeof *out, (size_t)n, stdout) == (size_t)n ? 0 : fail("write failed", NULL);
    free(in);
    free(out);
    return rc;
}
