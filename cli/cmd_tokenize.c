/* memra tokenize: show the tokens of a text.
 *
 *   memra tokenize -m MODEL [--ids] [--no-special] [-f FILE | TEXT]
 *
 * Default output: one token per line, its id and its piece in double quotes
 * with control characters, quotes, backslashes and bytes that are not valid
 * UTF-8 escaped. --ids: exactly one line of space-separated ids (for outside
 * checkers). Hidden options for the test and benchmark scripts:
 *   --ids-lines   the input is NUL-separated documents; one line of ids per
 *                 document, each encoded on its own
 *   --bench N     encode the documents N times, print encode-only MB/s to stdout
 * A debug subcommand: it reaches into src/tokenizer directly. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "commands.h"
#include "common.h"
#include "gguf/gguf.h"
#include "tokenizer/tokenizer.h"

static void usage(FILE *f) {
    fprintf(f, "usage: memra tokenize -m MODEL [--ids] [--no-special] [-f FILE | TEXT]\n"
               "  -m MODEL        GGUF file with a tokenizer (a vocab-only GGUF works)\n"
               "  -f FILE         read the text from FILE ('-' for stdin) instead of TEXT\n"
               "  --ids           print only the ids, space-separated, on one line\n"
               "  --no-special    treat control tokens such as <|im_start|> in the text as plain text\n");
}

/* Prints a piece readably: printable ASCII and valid UTF-8 as is, the rest escaped. */
static void print_piece(const char *p, size_t n) {
    putchar('"');
    for (size_t i = 0; i < n;) {
        unsigned char c = (unsigned char)p[i];
        if (c == '\n') fputs("\\n", stdout);
        else if (c == '\t') fputs("\\t", stdout);
        else if (c == '\r') fputs("\\r", stdout);
        else if (c == '"' || c == '\\') printf("\\%c", c);
        else if (c < 0x20 || c == 0x7f) printf("\\x%02x", c);
        else if (c < 0x80) putchar(c);
        else {
            size_t k = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : 2; /* length the lead byte announces */
            if (i + k <= n && memra_utf8_valid(p + i, k)) {
                fwrite(p + i, 1, k, stdout);
                i += k;
                continue;
            }
            printf("\\x%02x", c);
        }
        i++;
    }
    putchar('"');
}

static void print_ids(const memra_tokens *v) {
    for (size_t i = 0; i < v->n; i++) printf(i ? " %d" : "%d", (int)v->ids[i]);
    putchar('\n');
}

int memra_cmd_tokenize(int argc, char **argv) {
    const char *model = NULL, *file = NULL, *text = NULL;
    int ids_only = 0, lines = 0, special = 1, bench = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 0;
        } else if ((!strcmp(a, "-m") || !strcmp(a, "--model")) && i + 1 < argc) {
            model = argv[++i];
        } else if ((!strcmp(a, "-f") || !strcmp(a, "--file")) && i + 1 < argc) {
            file = argv[++i];
        } else if (!strcmp(a, "--ids")) {
            ids_only = 1;
        } else if (!strcmp(a, "--ids-lines")) {
            lines = 1;
        } else if (!strcmp(a, "--bench") && i + 1 < argc) {
            bench = atoi(argv[++i]);
            if (bench < 1) bench = 1;
        } else if (!strcmp(a, "--no-special")) {
            special = 0;
        } else if (a[0] == '-' && a[1]) {
            fprintf(stderr, "memra tokenize: unknown or incomplete option '%s'\n", a);
            usage(stderr);
            return 2;
        } else if (!text) {
            text = a;
        } else {
            fprintf(stderr, "memra tokenize: more than one TEXT (quote it)\n");
            return 2;
        }
    }
    if (!model || (!file && !text) || (file && text)) {
        usage(stderr);
        return 2;
    }

    size_t len = 0;
    char *data = NULL;
    if (file) {
        data = cli_read_file(file, &len);
        if (!data) {
            fprintf(stderr, "memra tokenize: cannot read '%s': %s\n", file, strerror(errno));
            return 1;
        }
    }
    memra_error err = {{0}};
    memra_gguf *g = NULL;
    memra_tokenizer *tok = NULL;
    /* the reader's messages name the file already; the tokenizer's do not */
    if (memra_gguf_open(model, &g, &err) ||
        (memra_tokenizer_from_gguf(g, &tok, &err) && (memra_error_prefix(&err, "%s", model), 1))) {
        fprintf(stderr, "memra tokenize: %s\n", err.msg);
        memra_gguf_free(g);
        free(data);
        return 1;
    }
    memra_gguf_free(g); /* the tokenizer keeps its own copy */

    const char *src = file ? data : text;
    if (!file) len = strlen(text);
    int rc = 0;
    memra_tokens v = {0};
    if (bench) {
        /* time encoding only: documents one by one, as the HF benchmark does */
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        size_t n_ids = 0;
        for (int r = 0; r < bench && !rc; r++) {
            for (size_t s = 0; s < len && !rc;) {
                const char *e = memchr(src + s, 0, len - s);
                size_t n = e ? (size_t)(e - src) - s : len - s;
                v.n = 0;
                if (memra_tokenizer_encode(tok, src + s, n, special, &v, &err)) rc = 1;
                n_ids += v.n;
                s += n + 1;
            }
        }
        clock_gettime(CLOCK_MONOTONIC, &t1);
        double sec = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
        if (!rc)
            printf("bytes %zu repeats %d ids %zu seconds %.6f MB/s %.3f\n", len, bench, n_ids / (size_t)bench, sec,
                   (double)len * bench / sec / 1e6);
    } else if (lines) {
        for (size_t s = 0; s < len && !rc;) {
            const char *e = memchr(src + s, 0, len - s);
            size_t n = e ? (size_t)(e - src) - s : len - s;
            v.n = 0;
            if (memra_tokenizer_encode(tok, src + s, n, special, &v, &err)) rc = 1;
            else print_ids(&v);
            s += n + 1;
        }
    } else if (memra_tokenizer_encode(tok, src, len, special, &v, &err)) {
        rc = 1;
    } else if (ids_only) {
        print_ids(&v);
    } else {
        for (size_t i = 0; i < v.n; i++) {
            size_t n;
            const char *p = memra_tokenizer_piece(tok, v.ids[i], &n);
            printf("%6d ", (int)v.ids[i]);
            print_piece(p, n);
            putchar('\n');
        }
    }
    if (rc) fprintf(stderr, "memra tokenize: %s\n", err.msg);
    if (fflush(stdout)) rc = 1;
    memra_tokens_free(&v);
    memra_tokenizer_free(tok);
    free(data);
    return rc;
}
