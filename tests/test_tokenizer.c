/* Tokenizer exactness tests.
 *
 * Against outside references: every case of ../shared/fixtures/tokenizer-*.cases.json
 * (ids from HF tokenizers; the mini cases against the vocab inside every
 * qwen35-*.gguf fixture, the qwen3 cases against qwen3-vocab.gguf), the text
 * cases of the model references (*.ref.json: prompt ids and the lossy-decoded
 * greedy text), and tests/data/tokenizer-bundled.cases.json with the bundled
 * GGUF when present. Properties: decode(encode(x)) == NFC(repair(x)); the
 * streaming detokenizer never splits a character and equals the lossy decode;
 * long words (heap merge path) equal a naive string BPE written here; special
 * token matching (longest, leftmost, control vs user-defined); invalid UTF-8
 * handled as Python's decode("utf-8", "replace"). */
#include <dirent.h>
#include <jansson.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "gguf/gguf.h"
#include "test.h"
#include "tokenizer/tokenizer.h"

/* ---- helpers ---- */

static memra_tokenizer *load(const char *path) {
    memra_error err = {{0}};
    memra_gguf *g = NULL;
    memra_tokenizer *t = NULL;
    if (memra_gguf_open(path, &g, &err) || memra_tokenizer_from_gguf(g, &t, &err)) {
        CHECK(0, "loading %s: %s", path, err.msg);
        t = NULL;
    }
    memra_gguf_free(g);
    return t;
}

static int enc(const memra_tokenizer *t, const char *s, size_t n, int special, memra_tokens *v) {
    memra_error err = {{0}};
    v->n = 0;
    memra_status st = memra_tokenizer_encode(t, s, n, special, v, &err);
    CHECK(st == MEMRA_OK, "encode failed: %s", err.msg);
    return st == MEMRA_OK;
}

/* decode into a malloc'd buffer (NUL-terminated for convenience) */
static char *dec(const memra_tokenizer *t, const int32_t *ids, size_t n, size_t *len) {
    memra_error err = {{0}};
    size_t need;
    if (memra_tokenizer_decode(t, ids, n, NULL, 0, &need, &err)) {
        CHECK(0, "decode: %s", err.msg);
        return NULL;
    }
    char *b = malloc(need + 1);
    memra_tokenizer_decode(t, ids, n, b, need, len, &err);
    b[*len] = 0;
    return b;
}

static char *lossy(const char *s, size_t n, size_t *out_n) {
    char *o = malloc(3 * n + 1);
    *out_n = memra_utf8_sanitize(s, n, o);
    o[*out_n] = 0;
    return o;
}

static char *nfc(const char *s, size_t n, size_t *out_n) {
    utf8proc_uint8_t *o = NULL;
    utf8proc_ssize_t m = utf8proc_map((const utf8proc_uint8_t *)s, (utf8proc_ssize_t)n, &o,
                                      (utf8proc_option_t)(UTF8PROC_STABLE | UTF8PROC_COMPOSE));
    *out_n = m < 0 ? 0 : (size_t)m;
    return (char *)o;
}

static void print_ids(const char *label, const int32_t *ids, size_t n) {
    fprintf(stderr, "  %s:", label);
    for (size_t i = 0; i < n && i < 60; i++) fprintf(stderr, " %d", (int)ids[i]);
    fprintf(stderr, "%s\n", n > 60 ? " ..." : "");
}

/* Streams ids through the detokenizer: every chunk must be valid UTF-8 and
 * the concatenation must equal the lossy decoding of the whole. */
static void check_stream(const memra_tokenizer *t, const int32_t *ids, size_t n, const char *what) {
    memra_detok d;
    memra_error err = {{0}};
    if (memra_detok_init(&d, t, &err)) {
        CHECK(0, "detok init: %s", err.msg);
        return;
    }
    size_t dl, ll, cap = 64, got = 0;
    char *full = dec(t, ids, n, &dl), *want = lossy(full, dl, &ll), *acc = malloc(cap);
    int chunks_valid = 1;
    for (size_t i = 0; i <= n; i++) {
        const char *p;
        size_t len;
        if (i < n) {
            if (memra_detok_push(&d, ids[i], &p, &len, &err)) {
                CHECK(0, "detok push: %s", err.msg);
                break;
            }
        } else {
            memra_detok_flush(&d, &p, &len);
        }
        chunks_valid &= memra_utf8_valid(p, len);
        while (got + len > cap) acc = realloc(acc, cap *= 2);
        memcpy(acc + got, p, len);
        got += len;
    }
    CHECK(chunks_valid, "%s: the detokenizer emitted invalid UTF-8", what);
    CHECK(got == ll && !memcmp(acc, want, ll), "%s: streamed text differs from the lossy decode", what);
    memra_detok_free(&d);
    free(full);
    free(want);
    free(acc);
}

/* One case: ids must match; decode must give back the normalized text. */
static void check_case(const memra_tokenizer *t, const char *text, size_t n, const int32_t *want, size_t nw,
                       const char *what) {
    memra_tokens v = {0};
    if (!enc(t, text, n, 1, &v)) return;
    int same = v.n == nw && (nw == 0 || !memcmp(v.ids, want, nw * sizeof *want));
    CHECK(same, "%s: ids differ for \"%.60s\"", what, text);
    if (!same) {
        print_ids("want", want, nw);
        print_ids("got ", v.ids, v.n);
    }
    size_t dl, ll, nl;
    char *d = dec(t, v.ids, v.n, &dl), *l = lossy(text, n, &ll), *nf = nfc(l, ll, &nl);
    CHECK(d && nf && dl == nl && !memcmp(d, nf, nl), "%s: decode(encode(x)) != NFC(x) for \"%.60s\"", what, text);
    check_stream(t, v.ids, v.n, what);
    free(d);
    free(l);
    free(nf);
    memra_tokens_free(&v);
}

static int32_t *json_ids(json_t *arr, size_t *n) {
    *n = json_array_size(arr);
    int32_t *ids = malloc((*n ? *n : 1) * sizeof *ids);
    for (size_t i = 0; i < *n; i++) ids[i] = (int32_t)json_integer_value(json_array_get(arr, i));
    return ids;
}

/* Runs a cases file ([{"text", "ids"}, ...]) against a tokenizer. */
static void run_cases(const memra_tokenizer *t, json_t *cases, const char *what) {
    size_t i;
    json_t *c;
    int n = 0;
    json_array_foreach(cases, i, c) {
        json_t *tx = json_object_get(c, "text");
        size_t nw;
        int32_t *want = json_ids(json_object_get(c, "ids"), &nw);
        char label[256];
        snprintf(label, sizeof label, "%s case %zu", what, i);
        check_case(t, json_string_value(tx), json_string_length(tx), want, nw, label);
        free(want);
        n++;
    }
    CHECK(n > 0, "%s: no cases", what);
}

static json_t *load_json(const char *path) {
    json_error_t je;
    json_t *j = json_load_file(path, JSON_ALLOW_NUL, &je);
    CHECK(j != NULL, "%s: %s (line %d)", path, je.text, je.line);
    return j;
}

/* ---- naive reference BPE over strings, for long words ---- */

static size_t byte_level(const unsigned char *s, size_t n, char *out) {
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned b = s[i], cp;
        int printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
        if (printable) {
            cp = b;
        } else {
            cp = 0x100;
            for (unsigned x = 0; x < b; x++) cp += !((x >= 0x21 && x <= 0x7E) || (x >= 0xA1 && x <= 0xAC) || x >= 0xAE);
        }
        o += (size_t)utf8proc_encode_char((utf8proc_int32_t)cp, (utf8proc_uint8_t *)out + o);
    }
    return o;
}

typedef struct {
    char **merge; /* sorted "A B" strings */
    int32_t *rank;
    size_t n;
} merge_index;

static int cmp_str(const void *a, const void *b) {
    return strcmp(**(char *const **)a, **(char *const **)b);
}

static merge_index build_merge_index(const memra_gguf *g) {
    merge_index m = {0};
    const memra_gguf_kv *kv = memra_gguf_find_kv(g, "tokenizer.ggml.merges");
    memra_gguf_str *v = NULL;
    memra_error err;
    if (!kv || memra_gguf_arr_strings(kv, &v, &err)) return m;
    m.n = kv->v.arr.n;
    char ***idx = malloc(m.n * sizeof *idx);
    char **strs = malloc(m.n * sizeof *strs);
    for (size_t i = 0; i < m.n; i++) {
        strs[i] = strndup(v[i].ptr, v[i].len);
        idx[i] = &strs[i];
    }
    qsort(idx, m.n, sizeof *idx, cmp_str);
    m.merge = malloc(m.n * sizeof *m.merge);
    m.rank = malloc(m.n * sizeof *m.rank);
    for (size_t i = 0; i < m.n; i++) {
        m.merge[i] = *idx[i];
        m.rank[i] = (int32_t)(idx[i] - strs);
    }
    free(idx);
    free(strs);
    free(v);
    return m;
}

static int32_t merge_rank(const merge_index *m, const char *pair) {
    size_t lo = 0, hi = m->n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        int c = strcmp(m->merge[mid], pair);
        if (!c) return m->rank[mid];
        if (c < 0) lo = mid + 1;
        else hi = mid;
    }
    return -1;
}

/* Textbook BPE on one word: symbols are strings; merge the lowest-rank pair, leftmost first. */
static size_t naive_bpe(const memra_tokenizer *t, const merge_index *m, const char *word, size_t n, int32_t *out) {
    char *bl = malloc(4 * n + 1);
    size_t bn = byte_level((const unsigned char *)word, n, bl);
    bl[bn] = 0;
    char **sym = malloc(n * sizeof *sym);
    size_t k = 0;
    for (size_t i = 0; i < bn;) {
        size_t l = 1;
        while (i + l < bn && ((unsigned char)bl[i + l] & 0xC0) == 0x80) l++;
        sym[k++] = strndup(bl + i, l);
        i += l;
    }
    char pair[4096];
    for (;;) {
        int32_t best = -1;
        size_t at = 0;
        for (size_t i = 0; i + 1 < k; i++) {
            snprintf(pair, sizeof pair, "%s %s", sym[i], sym[i + 1]);
            int32_t r = merge_rank(m, pair);
            if (r >= 0 && (best < 0 || r < best)) {
                best = r;
                at = i;
            }
        }
        if (best < 0) break;
        size_t la = strlen(sym[at]), lb = strlen(sym[at + 1]);
        char *c = malloc(la + lb + 1);
        memcpy(c, sym[at], la);
        memcpy(c + la, sym[at + 1], lb + 1);
        free(sym[at]);
        free(sym[at + 1]);
        sym[at] = c;
        memmove(sym + at + 1, sym + at + 2, (k - at - 2) * sizeof *sym);
        k--;
    }
    for (size_t i = 0; i < k; i++) {
        out[i] = memra_tokenizer_lookup(t, sym[i], strlen(sym[i]));
        free(sym[i]);
    }
    free(sym);
    free(bl);
    return k;
}

static void test_long_words(const memra_tokenizer *t, const char *gguf_path) {
    memra_error err;
    memra_gguf *g = NULL;
    if (memra_gguf_open(gguf_path, &g, &err)) return;
    merge_index m = build_merge_index(g);
    CHECK(m.n > 0, "no merges in %s", gguf_path);
    /* words that are one pre-token each, long enough for the heap path */
    const char *units[] = {"東京都の天気は晴れです", "a", "ab", "Ğ", "ÅÅ", "\xe0\xb8\x81\xe0\xb8\xb2", "한국어"};
    uint32_t seed = 12345;
    for (size_t u = 0; u < MEMRA_ARRAY_LEN(units); u++) {
        for (int rep = 0; rep < 3; rep++) {
            char word[2048];
            size_t n = 0, ul = strlen(units[u]);
            seed = seed * 1103515245u + 12345u;
            size_t count = 20 + (seed >> 16) % 200;
            for (size_t i = 0; i < count && n + ul < sizeof word; i++) {
                memcpy(word + n, units[u], ul);
                n += ul;
            }
            int32_t *want = malloc(n * sizeof *want);
            size_t nw = naive_bpe(t, &m, word, n, want);
            memra_tokens v = {0};
            enc(t, word, n, 0, &v);
            CHECK(v.n == nw && !memcmp(v.ids, want, nw * sizeof *want), "long word %zu x%zu: heap BPE != naive BPE",
                  u, count);
            memra_tokens_free(&v);
            free(want);
        }
    }
    for (size_t i = 0; i < m.n; i++) free(m.merge[i]);
    free(m.merge);
    free(m.rank);
    memra_gguf_free(g);
}

/* ---- fixture-driven tests ---- */

static void test_ref_text_case(const char *dir, const char *ref_name) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, ref_name);
    json_t *j = load_json(path);
    if (!j) return;
    json_t *tc = json_object_get(j, "text_case");
    json_t *gg = json_object_get(j, "gguf");
    const char *gname = json_is_array(gg) ? json_string_value(json_array_get(gg, 0)) : NULL;
    if (!tc || !gname) {
        CHECK(0, "%s: no text_case or gguf", path);
        json_decref(j);
        return;
    }
    snprintf(path, sizeof path, "%s/%s", dir, gname);
    memra_tokenizer *t = load(path);
    if (t) {
        json_t *tx = json_object_get(tc, "text");
        size_t nw, ng;
        int32_t *want = json_ids(json_object_get(tc, "ids"), &nw);
        int32_t *greedy = json_ids(json_object_get(tc, "greedy"), &ng);
        memra_tokens v = {0};
        enc(t, json_string_value(tx), json_string_length(tx), 1, &v);
        CHECK(v.n == nw && !memcmp(v.ids, want, nw * sizeof *want), "%s: text_case ids differ", ref_name);
        size_t dl, ll;
        char *d = dec(t, greedy, ng, &dl), *l = lossy(d, dl, &ll);
        json_t *gt = json_object_get(tc, "greedy_text");
        CHECK(ll == json_string_length(gt) && !memcmp(l, json_string_value(gt), ll),
              "%s: lossy decode of the greedy ids differs from HF's greedy_text", ref_name);
        check_stream(t, greedy, ng, ref_name);
        free(d);
        free(l);
        free(want);
        free(greedy);
        memra_tokens_free(&v);
        memra_tokenizer_free(t);
    }
    json_decref(j);
}

static void test_fixtures(const char *dir) {
    char path[1024];
    /* mini cases against every qwen35 fixture's vocab */
    snprintf(path, sizeof path, "%s/tokenizer-mini.cases.json", dir);
    json_t *mini = load_json(path);
    DIR *dp = opendir(dir);
    struct dirent *de;
    int n_models = 0;
    while (mini && dp && (de = readdir(dp))) {
        size_t l = strlen(de->d_name);
        if (strncmp(de->d_name, "qwen35-", 7) || l < 5 || strcmp(de->d_name + l - 5, ".gguf")) continue;
        snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
        memra_tokenizer *t = load(path);
        if (!t) continue;
        CHECK(!strcmp(memra_tokenizer_pre_name(t), "qwen35"), "%s: pre is %s", de->d_name, memra_tokenizer_pre_name(t));
        run_cases(t, mini, de->d_name);
        memra_tokenizer_free(t);
        n_models++;
    }
    if (dp) closedir(dp);
    CHECK(n_models > 0, "no qwen35-*.gguf fixture found in %s", dir);
    json_decref(mini);

    const char *refs[] = {"qwen35-tiny-dense.ref.json", "qwen35-small-dense.ref.json", "qwen35-tiny-moe.ref.json"};
    for (size_t i = 0; i < MEMRA_ARRAY_LEN(refs); i++) test_ref_text_case(dir, refs[i]);
}

/* ---- Qwen3 vocabulary: specials, EOG, invalid UTF-8, long words ---- */

static int same_encoding(const memra_tokenizer *t, const char *a, size_t na, const char *b, size_t nb, int special) {
    memra_tokens x = {0}, y = {0};
    enc(t, a, na, special, &x);
    enc(t, b, nb, special, &y);
    int same = x.n == y.n && !memcmp(x.ids, y.ids, x.n * sizeof *x.ids);
    memra_tokens_free(&x);
    memra_tokens_free(&y);
    return same;
}

static int has_id(const memra_tokens *v, int32_t id) {
    for (size_t i = 0; i < v->n; i++)
        if (v->ids[i] == id) return 1;
    return 0;
}

typedef struct {
    const memra_tokenizer *t;
    const char *text;
    size_t len;
    memra_tokens out;
} thread_job;

static void *encode_thread(void *p) {
    thread_job *j = p;
    for (int r = 0; r < 20; r++) {
        j->out.n = 0;
        memra_tokenizer_encode(j->t, j->text, j->len, 1, &j->out, NULL);
    }
    return NULL;
}

static void test_qwen3(const char *dir) {
    char path[1024];
    snprintf(path, sizeof path, "%s/qwen3-vocab.gguf", dir);
    memra_tokenizer *t = load(path);
    if (!t) return;
    CHECK(!strcmp(memra_tokenizer_pre_name(t), "qwen2"), "qwen3 pre is %s", memra_tokenizer_pre_name(t));
    snprintf(path, sizeof path, "%s/tokenizer-qwen3.cases.json", dir);
    json_t *cases = load_json(path);
    if (cases) run_cases(t, cases, "qwen3");
    json_decref(cases);

    int32_t im_start = memra_tokenizer_lookup(t, "<|im_start|>", 12);
    int32_t im_end = memra_tokenizer_lookup(t, "<|im_end|>", 10);
    int32_t think = memra_tokenizer_lookup(t, "<think>", 7);
    int32_t eot = memra_tokenizer_lookup(t, "<|endoftext|>", 13);
    CHECK(im_start == 151644 && im_end == 151645 && think == 151667 && eot == 151643, "special ids %d %d %d %d",
          im_start, im_end, think, eot);
    CHECK(memra_tokenizer_token_type(t, im_start) == MEMRA_TOKEN_TYPE_CONTROL, "im_start type");
    CHECK(memra_tokenizer_token_type(t, think) == MEMRA_TOKEN_TYPE_USER_DEFINED, "think type");
    CHECK(memra_tokenizer_eos(t) == im_end, "eos %d", memra_tokenizer_eos(t));
    CHECK(memra_tokenizer_is_eog(t, im_end) && memra_tokenizer_is_eog(t, eot) && !memra_tokenizer_is_eog(t, im_start) &&
              !memra_tokenizer_is_eog(t, 9707),
          "EOG set");
    const char *eog_names[] = {"<|fim_pad|>", "<|repo_name|>", "<|file_sep|>"};
    for (size_t i = 0; i < MEMRA_ARRAY_LEN(eog_names); i++)
        CHECK(memra_tokenizer_is_eog(t, memra_tokenizer_lookup(t, eog_names[i], strlen(eog_names[i]))), "%s is EOG",
              eog_names[i]);
    size_t n_eog;
    memra_tokenizer_eog_ids(t, &n_eog);
    CHECK(n_eog == 5, "%zu EOG ids", n_eog);

    /* special matching */
    memra_tokens v = {0};
    enc(t, "<|im_start|>", 12, 1, &v);
    CHECK(v.n == 1 && v.ids[0] == im_start, "<|im_start|> with specials");
    enc(t, "<|im_start|>", 12, 0, &v);
    CHECK(v.n > 1 && !has_id(&v, im_start), "<|im_start|> without specials must be plain text");
    enc(t, "x<think>y", 9, 0, &v);
    CHECK(v.n == 3 && v.ids[1] == think, "USER_DEFINED <think> is matched even without specials");
    enc(t, "<|im_start|><|im_end|><|im_start", 32, 1, &v);
    CHECK(v.n > 2 && v.ids[0] == im_start && v.ids[1] == im_end, "adjacent specials");
    CHECK(v.n > 2 && v.ids[2] != im_start, "a cut-off special is text");
    enc(t, "<<|im_end|>>", 12, 1, &v);
    CHECK(v.n == 3 && v.ids[1] == im_end, "special inside text");
    size_t len;
    const char *p = memra_tokenizer_piece(t, im_start, &len);
    CHECK(len == 12 && !memcmp(p, "<|im_start|>", 12), "special piece is its text");
    p = memra_tokenizer_piece(t, 151900, &len);
    CHECK(p && len == 0, "padding tokens decode to nothing");
    CHECK(memra_tokenizer_piece(t, -1, &len) == NULL && memra_tokenizer_piece(t, 1 << 30, &len) == NULL,
          "piece out of range");
    p = memra_tokenizer_token_text(t, 1879, &len);
    CHECK(len == 7 && !memcmp(p, "\xc4\xa0world", 7), "token text of ' world'");
    p = memra_tokenizer_piece(t, 1879, &len);
    CHECK(len == 6 && !memcmp(p, " world", 6), "piece of ' world'");
    memra_error err = {{0}};
    int32_t bad[] = {9707, 1 << 30};
    CHECK(memra_tokenizer_decode(t, bad, 2, NULL, 0, &len, &err) == MEMRA_ERR_INVALID && strstr(err.msg, "1073741824"),
          "decode of a bad id: %s", err.msg);

    /* invalid UTF-8 is repaired as Python's errors="replace" does */
    static const struct {
        const char *raw, *fixed;
    } repl[] = {
        {"a\xff" "b", "a\xef\xbf\xbd" "b"},
        {"\xe2\x82" "A", "\xef\xbf\xbd" "A"},
        {"x\xf0\x9f\x98", "x\xef\xbf\xbd"},
        {"\xc0\xaf", "\xef\xbf\xbd\xef\xbf\xbd"},
        {"\xed\xa0\x80!", "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd!"},
        {"\xf4\x90\x80\x80", "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd"},
        {"\xe0\x80\xaf", "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd"},
        {"\xc2" "A", "\xef\xbf\xbd" "A"},
        {"ok \xf0\x9f\x98\x80", "ok \xf0\x9f\x98\x80"},
    };
    for (size_t i = 0; i < MEMRA_ARRAY_LEN(repl); i++) {
        char out[64];
        size_t n = memra_utf8_sanitize(repl[i].raw, strlen(repl[i].raw), out);
        CHECK(n == strlen(repl[i].fixed) && !memcmp(out, repl[i].fixed, n), "sanitize case %zu", i);
        CHECK(same_encoding(t, repl[i].raw, strlen(repl[i].raw), repl[i].fixed, strlen(repl[i].fixed), 1),
              "invalid UTF-8 case %zu encodes as its repaired text", i);
        CHECK(memra_utf8_valid(repl[i].fixed, strlen(repl[i].fixed)), "valid case %zu", i);
    }
    /* NUL bytes are text like any other */
    enc(t, "a\0b", 3, 1, &v);
    CHECK(v.n >= 2 && has_id(&v, memra_tokenizer_lookup(t, "\xc4\x80", 2)), "NUL byte is a token");

    /* streaming: one emoji as four byte tokens, then an invalid byte */
    int32_t b4[5];
    const unsigned char emoji[] = {0xF0, 0x9F, 0x98, 0x80, 0xFF};
    for (int i = 0; i < 5; i++) {
        char u[4];
        size_t ul = (size_t)utf8proc_encode_char(
            (utf8proc_int32_t)(emoji[i] < 0xA1 ? 0x100 + 33 + emoji[i] - 0x7F : emoji[i]), (utf8proc_uint8_t *)u);
        b4[i] = memra_tokenizer_lookup(t, u, ul);
    }
    CHECK(b4[0] >= 0 && b4[1] >= 0 && b4[2] >= 0 && b4[3] >= 0 && b4[4] >= 0, "byte tokens found");
    memra_detok d;
    memra_detok_init(&d, t, &err);
    const char *o;
    size_t ol;
    for (int i = 0; i < 3; i++) {
        memra_detok_push(&d, b4[i], &o, &ol, &err);
        CHECK(ol == 0, "byte %d of an emoji emits nothing yet (%zu bytes)", i, ol);
    }
    memra_detok_push(&d, b4[3], &o, &ol, &err);
    CHECK(ol == 4 && !memcmp(o, emoji, 4), "the fourth byte completes the emoji");
    memra_detok_push(&d, b4[4], &o, &ol, &err);
    CHECK(ol == 3 && !memcmp(o, "\xef\xbf\xbd", 3), "0xFF becomes U+FFFD at once");
    memra_detok_push(&d, b4[0], &o, &ol, &err);
    memra_detok_push(&d, b4[1], &o, &ol, &err);
    CHECK(ol == 0, "held prefix");
    memra_detok_push(&d, 9707, &o, &ol, &err); /* "Hello" breaks the sequence */
    CHECK(ol == 8 && !memcmp(o, "\xef\xbf\xbdHello", 8), "a broken prefix becomes one U+FFFD, then the text");
    memra_detok_push(&d, b4[0], &o, &ol, &err);
    memra_detok_flush(&d, &o, &ol);
    CHECK(ol == 3 && !memcmp(o, "\xef\xbf\xbd", 3), "flush of an incomplete tail");
    memra_detok_flush(&d, &o, &ol);
    CHECK(ol == 0, "flush resets");
    CHECK(memra_detok_push(&d, -5, &o, &ol, &err) == MEMRA_ERR_INVALID, "detok bad id");
    memra_detok_free(&d);

    /* random bytes (biased toward UTF-8 lead/continuation bytes, spaces and
     * special-token text): never a failure, and decode(encode(x)) == NFC(repair(x)) */
    uint32_t rs = 777;
    int roundtrip_ok = 1;
    for (int iter = 0; iter < 300; iter++) {
        char raw[400];
        size_t n = 0;
        rs = rs * 1103515245u + 12345u;
        size_t want = (rs >> 16) % 380;
        while (n < want) {
            rs = rs * 1103515245u + 12345u;
            unsigned r = rs >> 16;
            if (r % 23 == 0 && n + 12 < sizeof raw) {
                memcpy(raw + n, "<|im_start|>", 12);
                n += 12;
            } else {
                static const unsigned char pool[] = {' ', 'a', 'Z', '\n', '\'', '0', 0xC3, 0xA9, 0xE6, 0x9D, 0xB1,
                                                     0xF0, 0x9F, 0x98, 0x80, 0xCC, 0x81, 0xFF, 0xED, 0xA0, '\t'};
                raw[n++] = (char)(r % 3 ? pool[r % sizeof pool] : (unsigned char)(r >> 3));
            }
        }
        if (!enc(t, raw, n, iter & 1, &v)) break;
        size_t dl, ll, nl;
        char *dd = dec(t, v.ids, v.n, &dl), *l = lossy(raw, n, &ll), *nf = nfc(l, ll, &nl);
        roundtrip_ok &= dd && nf && dl == nl && !memcmp(dd, nf, nl);
        free(dd);
        free(l);
        free(nf);
    }
    CHECK(roundtrip_ok, "random bytes: decode(encode(x)) != NFC(repair(x))");

    /* long single words take the heap path: compare with the naive BPE */
    snprintf(path, sizeof path, "%s/qwen3-vocab.gguf", dir);
    test_long_words(t, path);

    /* big whitespace and letter runs stay within the regex engine's limits */
    size_t big = 1 << 20;
    char *s = malloc(big);
    memset(s, ' ', big);
    enc(t, s, big, 1, &v);
    CHECK(v.n > 0 && v.n < big / 8, "1 MiB of spaces: %zu ids", v.n);
    memset(s, 'a', big);
    s[big / 2] = '\n';
    enc(t, s, big, 1, &v);
    CHECK(v.n > 0, "1 MiB of letters: %zu ids", v.n);
    free(s);

    /* several threads on one tokenizer agree (the word cache is try-locked) */
    const char *txt = "The quick brown fox jumps over the lazy dog. 東京都の天気は晴れです。 naïve café";
    thread_job jobs[4];
    pthread_t th[4];
    for (int i = 0; i < 4; i++) {
        jobs[i] = (thread_job){t, txt, strlen(txt), {0}};
        pthread_create(&th[i], NULL, encode_thread, &jobs[i]);
    }
    for (int i = 0; i < 4; i++) pthread_join(th[i], NULL);
    enc(t, txt, strlen(txt), 1, &v);
    for (int i = 0; i < 4; i++) {
        CHECK(jobs[i].out.n == v.n && !memcmp(jobs[i].out.ids, v.ids, v.n * sizeof *v.ids), "thread %d differs", i);
        memra_tokens_free(&jobs[i].out);
    }
    memra_tokens_free(&v);
    memra_tokenizer_free(t);
}

/* ---- a tokenizer from plain arrays: no fixtures needed ---- */

static void test_toy(void) {
    /* bytes 'a' 'b' '<' '>' ' '(Ġ) plus merges; specials <a> and <a>b */
    memra_tok_str toks[] = {{"a", 1}, {"b", 1}, {"<", 1}, {">", 1}, {"\xc4\xa0", 2}, {"ab", 2}, {"abab", 4},
                            {"\xc4\xa0" "ab", 4}, {"<a>", 3}, {"<a>b", 4}, {"<u>", 3}, {"[PAD]", 5}};
    int32_t types[] = {1, 1, 1, 1, 1, 1, 1, 1, 3, 3, 4, 5};
    memra_tok_str merges[] = {{"a b", 3}, {"ab ab", 5}, {"\xc4\xa0 ab", 5}, {"x y", 3}, {"nospace", 7}};
    memra_tokenizer_desc d = {toks, MEMRA_ARRAY_LEN(toks), merges, MEMRA_ARRAY_LEN(merges), types, "qwen35", -1, 9, -1, -1,
                              -1};
    memra_tokenizer *t = NULL;
    memra_error err = {{0}};
    CHECK(memra_tokenizer_init(&d, &t, &err) == MEMRA_OK, "toy init: %s", err.msg);
    if (!t) return;
    memra_tokens v = {0};
    enc(t, "ababab ab", 9, 1, &v);
    int32_t w1[] = {6, 5, 7};
    CHECK(v.n == 3 && !memcmp(v.ids, w1, sizeof w1), "toy merges (%zu ids)", v.n);
    if (v.n != 3) print_ids("toy", v.ids, v.n);
    enc(t, "<a>b<a>", 7, 1, &v);
    CHECK(v.n == 2 && v.ids[0] == 9 && v.ids[1] == 8, "longest special first");
    enc(t, "<a>b<u>", 7, 0, &v);
    CHECK(v.n >= 2 && v.ids[v.n - 1] == 10 && !has_id(&v, 9) && !has_id(&v, 8), "control off, user-defined on");
    CHECK(memra_tokenizer_is_eog(t, 9) && !memra_tokenizer_is_eog(t, 8), "eos from the description");
    enc(t, "c", 1, 1, &v);
    CHECK(v.n == 0, "a byte missing from the vocabulary is dropped (HF without unk)");
    memra_tokenizer_free(t);

    d.pre = "gpt4";
    CHECK(memra_tokenizer_init(&d, &t, &err) == MEMRA_ERR_INVALID && strstr(err.msg, "gpt4"), "bad pre: %s", err.msg);
    d.pre = NULL;
    CHECK(memra_tokenizer_init(&d, &t, &err) == MEMRA_ERR_INVALID, "no pre");
    d.pre = "qwen2";
    types[0] = 9;
    CHECK(memra_tokenizer_init(&d, &t, &err) == MEMRA_ERR_INVALID && strstr(err.msg, "type"), "bad type: %s", err.msg);
    types[0] = 1;
    d.eos_id = 99;
    CHECK(memra_tokenizer_init(&d, &t, &err) == MEMRA_ERR_INVALID && strstr(err.msg, "eos"), "bad eos: %s", err.msg);
    d.eos_id = -1;
    d.n_tokens = 0;
    CHECK(memra_tokenizer_init(&d, &t, &err) == MEMRA_ERR_INVALID, "empty vocabulary");
    memra_tokens_free(&v);
}

/* A GGUF without a tokenizer gives NOT_FOUND with a clear message. */
static void test_gguf_errors(void) {
    /* minimal GGUF v3: no tensors, one kv general.architecture = "x" */
    unsigned char buf[256];
    size_t n = 0;
    memcpy(buf, "GGUF", 4);
    n = 4;
    uint32_t ver = 3;
    memcpy(buf + n, &ver, 4);
    n += 4;
    uint64_t nt = 0, nkv = 1, kl = 20, vl = 1;
    memcpy(buf + n, &nt, 8);
    n += 8;
    memcpy(buf + n, &nkv, 8);
    n += 8;
    memcpy(buf + n, &kl, 8);
    n += 8;
    memcpy(buf + n, "general.architecture", 20);
    n += 20;
    uint32_t ty = 8;
    memcpy(buf + n, &ty, 4);
    n += 4;
    memcpy(buf + n, &vl, 8);
    n += 8;
    buf[n++] = 'x';
    memra_gguf *g = NULL;
    memra_error err = {{0}};
    if (memra_gguf_open_buffer(buf, n, &g, &err)) {
        CHECK(0, "minimal gguf: %s", err.msg);
        return;
    }
    memra_tokenizer *t = NULL;
    CHECK(memra_tokenizer_from_gguf(g, &t, &err) == MEMRA_ERR_NOT_FOUND && strstr(err.msg, "tokenizer"),
          "no tokenizer: %s", err.msg);
    memra_gguf_free(g);
}

/* tests/data/tokenizer-bundled.cases.json: a list of cases (with the GGUF
 * named by a "gguf" key of an object form, or the one GGUF in tests/data). */
static void test_bundled(void) {
    FILE *f = fopen("tests/data/tokenizer-bundled.cases.json", "rb");
    if (!f) {
        printf("test_tokenizer: tests/data/tokenizer-bundled.cases.json absent, bundled cases skipped\n");
        return;
    }
    fclose(f);
    json_t *j = load_json("tests/data/tokenizer-bundled.cases.json");
    if (!j) return;
    json_t *cases = json_is_array(j) ? j : json_object_get(j, "cases");
    const char *gname = json_is_object(j) ? json_string_value(json_object_get(j, "gguf")) : NULL;
    char path[1024] = {0};
    if (gname) {
        snprintf(path, sizeof path, "tests/data/%s", strrchr(gname, '/') ? strrchr(gname, '/') + 1 : gname);
    } else {
        DIR *dp = opendir("tests/data");
        struct dirent *de;
        while (dp && (de = readdir(dp))) {
            size_t l = strlen(de->d_name);
            if (l > 5 && !strcmp(de->d_name + l - 5, ".gguf")) snprintf(path, sizeof path, "tests/data/%s", de->d_name);
        }
        if (dp) closedir(dp);
    }
    CHECK(path[0] && cases, "bundled cases: no GGUF or no cases");
    memra_tokenizer *t = path[0] ? load(path) : NULL;
    if (t && cases) run_cases(t, cases, "bundled");
    memra_tokenizer_free(t);
    json_decref(j);
}

int main(void) {
    test_toy();
    test_gguf_errors();
    test_bundled();
    const char *dir = test_fixtures_dir();
    if (dir) {
        test_fixtures(dir);
        test_qwen3(dir);
    } else {
        printf("test_tokenizer: ../shared/fixtures absent, fixture cases skipped\n");
    }
    return test_finish("test_tokenizer");
}
