/* GGUF reader and writer tests.
 *
 * Valid files are made with the writer (so the writer is tested too) and
 * read back; damaged files are made byte by byte with a small builder, so
 * that the damage is exactly what the test says. Every buffer handed to the
 * reader is a heap copy of exactly its size, so under ASan any read past the
 * end is caught. Finally every fixture .gguf is opened and checked against
 * facts stated in the fixtures' README. */
#include <dirent.h>
#include <inttypes.h>
#include <math.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include "gguf/gguf.h"
#include "gguf/gguf_write.h"
#include "gguf/quant.h"
#include "test.h"

/* ---- byte builder for hand-made (damaged) files ---- */

typedef struct bb {
    uint8_t *p;
    size_t n, cap;
} bb;

static void bb_put(bb *b, const void *d, size_t n) {
    if (b->n + n > b->cap) {
        size_t c = b->cap ? b->cap : 256;
        while (c < b->n + n) c *= 2;
        b->p = realloc(b->p, c);
        if (!b->p) abort();
        b->cap = c;
    }
    memcpy(b->p + b->n, d, n);
    b->n += n;
}
static void bb_u8(bb *b, uint8_t v) { bb_put(b, &v, 1); }
static void bb_u32(bb *b, uint32_t v) { bb_put(b, &v, 4); }
static void bb_u64(bb *b, uint64_t v) { bb_put(b, &v, 8); }
static void bb_str(bb *b, const char *s) {
    bb_u64(b, strlen(s));
    bb_put(b, s, strlen(s));
}
static void bb_pad(bb *b, size_t align) {
    while (b->n % align) bb_u8(b, 0);
}
static void bb_zeros(bb *b, size_t n) {
    for (size_t i = 0; i < n; i++) bb_u8(b, 0);
}
static void bb_header(bb *b, uint32_t version, uint64_t n_tensors, uint64_t n_kv) {
    bb_put(b, "GGUF", 4);
    bb_u32(b, version);
    bb_u64(b, n_tensors);
    bb_u64(b, n_kv);
}
static void bb_kv_u32(bb *b, const char *key, uint32_t v) {
    bb_str(b, key);
    bb_u32(b, MEMRA_GGUF_TYPE_UINT32);
    bb_u32(b, v);
}
static void bb_free(bb *b) {
    free(b->p);
    memset(b, 0, sizeof *b);
}

/* Opens an exact-size heap copy of the first n bytes. */
static memra_status open_copy(const uint8_t *p, size_t n, memra_gguf **g, memra_error *err, uint8_t **copy) {
    *copy = malloc(n ? n : 1);
    if (n) memcpy(*copy, p, n);
    err->msg[0] = 0;
    return memra_gguf_open_buffer(*copy, n, g, err);
}

/* Expects opening b to fail with status want and a message containing each of
 * the given substrings (NULL-terminated list). */
static void expect_fail_(int line, bb *b, memra_status want, const char *const *subs) {
    memra_gguf *g = NULL;
    memra_error err;
    uint8_t *copy;
    memra_status s = open_copy(b->p, b->n, &g, &err, &copy);
    CHECK(s == want, "line %d: status %s, expected %s (msg: %s)", line, memra_status_str(s), memra_status_str(want),
          err.msg);
    CHECK(g == NULL, "line %d: handle returned on failure", line);
    for (int i = 0; subs[i]; i++)
        CHECK(strstr(err.msg, subs[i]) != NULL, "line %d: message '%s' lacks '%s'", line, err.msg, subs[i]);
    memra_gguf_free(g);
    free(copy);
}
#define EXPECT_FAIL(b, want, ...) expect_fail_(__LINE__, (b), (want), (const char *const[]){__VA_ARGS__, NULL})

/* ---- a valid file of every value type, through the writer ---- */

typedef struct mem_out {
    char *p;
    size_t n;
} mem_out;

static const char *const str_vals[] = {"", "a", "hello world", "\xe4\xbd\xa0\xe5\xa5\xbd"};
static const uint8_t a_u8[] = {0, 1, 255};
static const int8_t a_i8[] = {-128, 0, 127};
static const uint16_t a_u16[] = {0, 65535};
static const int16_t a_i16[] = {-32768, 32767, -1};
static const uint32_t a_u32[] = {0, 4000000000u};
static const int32_t a_i32[] = {INT32_MIN, -1, INT32_MAX};
static const float a_f32[] = {1.5f, -0.0f, 3.25e10f};
static const uint8_t a_bool[] = {1, 0, 1, 1};
static const uint64_t a_u64[] = {UINT64_MAX, 0, 1ull << 40};
static const int64_t a_i64[] = {INT64_MIN, INT64_MAX, -5};
static const double a_f64[] = {3.141592653589793, -1e300};

/* Tensors of the valid file. The last one's size is a multiple of the
 * alignment, so the file ends exactly where the last tensor's data ends. */
typedef struct tdesc {
    const char *name;
    uint32_t type;
    uint32_t n_dims;
    int64_t ne[4];
} tdesc;
static const tdesc tens[] = {
    {"token_embd.weight", MEMRA_TYPE_F32, 2, {4, 3, 1, 1}},
    {"blk.0.attn_q.weight", MEMRA_TYPE_Q8_0, 2, {64, 2, 1, 1}},
    {"empty", MEMRA_TYPE_F32, 1, {0, 1, 1, 1}},
    {"blk.0.x", MEMRA_TYPE_F16, 1, {5, 1, 1, 1}},
    {"four.d", MEMRA_TYPE_BF16, 4, {2, 2, 2, 2}},
    {"last", MEMRA_TYPE_F32, 2, {8, 4, 1, 1}},
};
#define N_TENS ((int)MEMRA_ARRAY_LEN(tens))

static void add_all_kvs(memra_gguf_writer *w) {
    memra_gguf_writer_add_u8(w, "t.u8", 200);
    memra_gguf_writer_add_i8(w, "t.i8", -100);
    memra_gguf_writer_add_u16(w, "t.u16", 60000);
    memra_gguf_writer_add_i16(w, "t.i16", -30000);
    memra_gguf_writer_add_u32(w, "t.u32", 4000000000u);
    memra_gguf_writer_add_i32(w, "t.i32", -2000000000);
    memra_gguf_writer_add_f32(w, "t.f32", 0.1f);
    memra_gguf_writer_add_bool(w, "t.bool", 1);
    memra_gguf_writer_add_u64(w, "t.u64", UINT64_MAX);
    memra_gguf_writer_add_i64(w, "t.i64", INT64_MIN);
    memra_gguf_writer_add_f64(w, "t.f64", 2.718281828459045);
    memra_gguf_writer_add_str(w, "general.architecture", "testarch");
    memra_gguf_writer_add_str(w, "t.empty_str", "");
    memra_gguf_writer_add_array(w, "a.u8", MEMRA_GGUF_TYPE_UINT8, a_u8, 3);
    memra_gguf_writer_add_array(w, "a.i8", MEMRA_GGUF_TYPE_INT8, a_i8, 3);
    memra_gguf_writer_add_array(w, "a.u16", MEMRA_GGUF_TYPE_UINT16, a_u16, 2);
    memra_gguf_writer_add_array(w, "a.i16", MEMRA_GGUF_TYPE_INT16, a_i16, 3);
    memra_gguf_writer_add_array(w, "a.u32", MEMRA_GGUF_TYPE_UINT32, a_u32, 2);
    memra_gguf_writer_add_array(w, "a.i32", MEMRA_GGUF_TYPE_INT32, a_i32, 3);
    memra_gguf_writer_add_array(w, "a.f32", MEMRA_GGUF_TYPE_FLOAT32, a_f32, 3);
    memra_gguf_writer_add_array(w, "a.bool", MEMRA_GGUF_TYPE_BOOL, a_bool, 4);
    memra_gguf_writer_add_array(w, "a.u64", MEMRA_GGUF_TYPE_UINT64, a_u64, 3);
    memra_gguf_writer_add_array(w, "a.i64", MEMRA_GGUF_TYPE_INT64, a_i64, 3);
    memra_gguf_writer_add_array(w, "a.f64", MEMRA_GGUF_TYPE_FLOAT64, a_f64, 2);
    memra_gguf_writer_add_array(w, "a.empty", MEMRA_GGUF_TYPE_INT32, NULL, 0);
    memra_gguf_writer_add_str_array(w, "a.str", str_vals, NULL, 4);
}

/* Byte i of tensor t's data: a pattern that differs per tensor. */
static uint8_t pattern(int t, uint64_t i) { return (uint8_t)(i * 7 + (uint64_t)t * 31 + 1); }

/* Builds the valid file; chunk sets the size of each write_data call. */
static mem_out make_valid(uint32_t version, uint32_t alignment, size_t chunk) {
    mem_out m = {0};
    memra_gguf_writer *w;
    memra_error err;
    CHECK(memra_gguf_writer_begin(version, alignment, &w, &err) == MEMRA_OK, "begin: %s", err.msg);
    add_all_kvs(w);
    for (int i = 0; i < N_TENS; i++) memra_gguf_writer_add_tensor(w, tens[i].name, tens[i].type, tens[i].n_dims, tens[i].ne);
    FILE *f = open_memstream(&m.p, &m.n);
    CHECK(memra_gguf_writer_write_header(w, f, &err) == MEMRA_OK, "write_header: %s", err.msg);
    /* one stream of all tensors' bytes, cut into chunks that straddle tensors */
    uint64_t total = 0;
    for (int i = 0; i < N_TENS; i++) total += memra_gguf_writer_tensor_nbytes(w, i);
    uint8_t *all = malloc(total), *q = all;
    for (int i = 0; i < N_TENS; i++)
        for (uint64_t k = 0; k < memra_gguf_writer_tensor_nbytes(w, i); k++) *q++ = pattern(i, k);
    for (uint64_t at = 0; at < total; at += chunk) {
        size_t k = total - at < chunk ? (size_t)(total - at) : chunk;
        CHECK(memra_gguf_writer_write_data(w, f, all + at, k, &err) == MEMRA_OK, "write_data: %s", err.msg);
    }
    free(all);
    CHECK(memra_gguf_writer_finish(w, f, &err) == MEMRA_OK, "finish: %s", err.msg);
    uint64_t predicted = memra_gguf_writer_file_size(w);
    fclose(f);
    CHECK(predicted == m.n, "writer predicted %" PRIu64 " bytes, wrote %zu", predicted, m.n);
    memra_gguf_writer_free(w);
    return m;
}

static void check_valid(const memra_gguf *g, uint32_t version, uint32_t alignment) {
    memra_error err;
    CHECK(memra_gguf_version(g) == version, "version %u", memra_gguf_version(g));
    CHECK(memra_gguf_alignment(g) == alignment, "alignment %" PRIu64, memra_gguf_alignment(g));
    CHECK(memra_gguf_data_offset(g) % alignment == 0, "data offset %" PRIu64, memra_gguf_data_offset(g));
    int64_t extra = alignment != 32; /* general.alignment */
    CHECK(memra_gguf_n_kv(g) == 26 + extra, "n_kv %" PRId64, memra_gguf_n_kv(g));

    const memra_gguf_kv *kv = memra_gguf_find_kv(g, "t.u8");
    CHECK(kv && kv->type == MEMRA_GGUF_TYPE_UINT8 && kv->v.u64 == 200, "u8");
    kv = memra_gguf_find_kv(g, "t.i8");
    CHECK(kv && kv->type == MEMRA_GGUF_TYPE_INT8 && kv->v.i64 == -100, "i8");
    kv = memra_gguf_find_kv(g, "t.u16");
    CHECK(kv && kv->type == MEMRA_GGUF_TYPE_UINT16 && kv->v.u64 == 60000, "u16");
    kv = memra_gguf_find_kv(g, "t.i16");
    CHECK(kv && kv->type == MEMRA_GGUF_TYPE_INT16 && kv->v.i64 == -30000, "i16");
    kv = memra_gguf_find_kv(g, "t.u32");
    CHECK(kv && kv->type == MEMRA_GGUF_TYPE_UINT32 && kv->v.u64 == 4000000000u, "u32");
    kv = memra_gguf_find_kv(g, "t.i32");
    CHECK(kv && kv->type == MEMRA_GGUF_TYPE_INT32 && kv->v.i64 == -2000000000, "i32");
    kv = memra_gguf_find_kv(g, "t.f32");
    CHECK(kv && kv->type == MEMRA_GGUF_TYPE_FLOAT32 && kv->v.f64 == (double)0.1f, "f32");
    kv = memra_gguf_find_kv(g, "t.bool");
    CHECK(kv && kv->type == MEMRA_GGUF_TYPE_BOOL && kv->v.u64 == 1, "bool");
    kv = memra_gguf_find_kv(g, "t.u64");
    CHECK(kv && kv->type == MEMRA_GGUF_TYPE_UINT64 && kv->v.u64 == UINT64_MAX, "u64");
    kv = memra_gguf_find_kv(g, "t.i64");
    CHECK(kv && kv->type == MEMRA_GGUF_TYPE_INT64 && kv->v.i64 == INT64_MIN, "i64");
    kv = memra_gguf_find_kv(g, "t.f64");
    CHECK(kv && kv->type == MEMRA_GGUF_TYPE_FLOAT64 && kv->v.f64 == 2.718281828459045, "f64");
    kv = memra_gguf_find_kv(g, "t.empty_str");
    CHECK(kv && kv->type == MEMRA_GGUF_TYPE_STRING && kv->v.str.len == 0, "empty str");
    CHECK(memra_gguf_find_kv(g, "t.u") == NULL && memra_gguf_find_kv(g, "") == NULL, "prefix of a key found");

    /* typed getters and their conversions */
    uint64_t u;
    int64_t i;
    double d;
    int b;
    memra_gguf_str s;
    CHECK(memra_gguf_get_u64(g, "t.u16", &u, &err) == MEMRA_OK && u == 60000, "get_u64 u16");
    CHECK(memra_gguf_get_u64(g, "t.i8", &u, &err) == MEMRA_ERR_FORMAT && strstr(err.msg, "t.i8"), "negative to u64");
    CHECK(memra_gguf_get_i64(g, "t.u64", &i, &err) == MEMRA_ERR_FORMAT, "u64 max to i64");
    CHECK(memra_gguf_get_i64(g, "t.u32", &i, &err) == MEMRA_OK && i == 4000000000ll, "u32 to i64");
    CHECK(memra_gguf_get_i64(g, "general.architecture", &i, &err) == MEMRA_ERR_FORMAT &&
              strstr(err.msg, "general.architecture") && strstr(err.msg, "str"),
          "string to int: %s", err.msg);
    CHECK(memra_gguf_get_f64(g, "t.f32", &d, &err) == MEMRA_OK && d == (double)0.1f, "get_f64");
    CHECK(memra_gguf_get_f64(g, "t.i32", &d, &err) == MEMRA_OK && d == -2000000000.0, "i32 to f64");
    CHECK(memra_gguf_get_f64(g, "t.u64", &d, &err) == MEMRA_ERR_FORMAT, "u64 max is not exact in f64");
    CHECK(memra_gguf_get_bool(g, "t.bool", &b, &err) == MEMRA_OK && b == 1, "get_bool");
    CHECK(memra_gguf_get_bool(g, "t.u8", &b, &err) == MEMRA_ERR_FORMAT, "u8 as bool");
    CHECK(memra_gguf_get_str(g, "general.architecture", &s, &err) == MEMRA_OK && memra_gguf_str_eq(s, "testarch"),
          "get_str");
    CHECK(memra_gguf_get_str(g, "nope", &s, &err) == MEMRA_ERR_NOT_FOUND && strstr(err.msg, "nope"), "missing key");
    CHECK(memra_gguf_get_u64(g, "a.u8", &u, &err) == MEMRA_ERR_FORMAT, "array as scalar");

    /* arrays of every scalar type */
    struct {
        const char *key;
        memra_gguf_type t;
        uint64_t n;
    } arrs[] = {{"a.u8", MEMRA_GGUF_TYPE_UINT8, 3},    {"a.i8", MEMRA_GGUF_TYPE_INT8, 3},
                {"a.u16", MEMRA_GGUF_TYPE_UINT16, 2},  {"a.i16", MEMRA_GGUF_TYPE_INT16, 3},
                {"a.u32", MEMRA_GGUF_TYPE_UINT32, 2},  {"a.i32", MEMRA_GGUF_TYPE_INT32, 3},
                {"a.f32", MEMRA_GGUF_TYPE_FLOAT32, 3}, {"a.bool", MEMRA_GGUF_TYPE_BOOL, 4},
                {"a.u64", MEMRA_GGUF_TYPE_UINT64, 3},  {"a.i64", MEMRA_GGUF_TYPE_INT64, 3},
                {"a.f64", MEMRA_GGUF_TYPE_FLOAT64, 2}, {"a.empty", MEMRA_GGUF_TYPE_INT32, 0},
                {"a.str", MEMRA_GGUF_TYPE_STRING, 4}};
    for (size_t k = 0; k < MEMRA_ARRAY_LEN(arrs); k++) {
        kv = memra_gguf_find_kv(g, arrs[k].key);
        CHECK(kv && kv->type == MEMRA_GGUF_TYPE_ARRAY && kv->v.arr.type == arrs[k].t && kv->v.arr.n == arrs[k].n,
              "array %s", arrs[k].key);
    }
    int ok = 1;
    for (uint64_t k = 0; k < 3; k++) ok &= memra_gguf_arr_u64(memra_gguf_find_kv(g, "a.u8"), k, &u) == 0 && u == a_u8[k];
    for (uint64_t k = 0; k < 3; k++) ok &= memra_gguf_arr_i64(memra_gguf_find_kv(g, "a.i8"), k, &i) == 0 && i == a_i8[k];
    for (uint64_t k = 0; k < 2; k++) ok &= memra_gguf_arr_u64(memra_gguf_find_kv(g, "a.u16"), k, &u) == 0 && u == a_u16[k];
    for (uint64_t k = 0; k < 3; k++) ok &= memra_gguf_arr_i64(memra_gguf_find_kv(g, "a.i16"), k, &i) == 0 && i == a_i16[k];
    for (uint64_t k = 0; k < 2; k++) ok &= memra_gguf_arr_u64(memra_gguf_find_kv(g, "a.u32"), k, &u) == 0 && u == a_u32[k];
    for (uint64_t k = 0; k < 3; k++) ok &= memra_gguf_arr_i64(memra_gguf_find_kv(g, "a.i32"), k, &i) == 0 && i == a_i32[k];
    for (uint64_t k = 0; k < 3; k++)
        ok &= memra_gguf_arr_f64(memra_gguf_find_kv(g, "a.f32"), k, &d) == 0 && d == (double)a_f32[k] &&
              !!signbit(d) == !!signbit(a_f32[k]);
    for (uint64_t k = 0; k < 4; k++) ok &= memra_gguf_arr_u64(memra_gguf_find_kv(g, "a.bool"), k, &u) == 0 && u == a_bool[k];
    for (uint64_t k = 0; k < 3; k++) ok &= memra_gguf_arr_u64(memra_gguf_find_kv(g, "a.u64"), k, &u) == 0 && u == a_u64[k];
    for (uint64_t k = 0; k < 3; k++) ok &= memra_gguf_arr_i64(memra_gguf_find_kv(g, "a.i64"), k, &i) == 0 && i == a_i64[k];
    for (uint64_t k = 0; k < 2; k++) ok &= memra_gguf_arr_f64(memra_gguf_find_kv(g, "a.f64"), k, &d) == 0 && d == a_f64[k];
    CHECK(ok, "array element values");
    CHECK(memra_gguf_arr_u64(memra_gguf_find_kv(g, "a.u8"), 3, &u) == MEMRA_ERR_INVALID, "index past the end");
    CHECK(memra_gguf_arr_u64(memra_gguf_find_kv(g, "a.i8"), 0, &u) == MEMRA_ERR_FORMAT, "-128 as u64");
    CHECK(memra_gguf_arr_i64(memra_gguf_find_kv(g, "a.u64"), 0, &i) == MEMRA_ERR_FORMAT, "UINT64_MAX as i64");
    CHECK(memra_gguf_arr_u64(memra_gguf_find_kv(g, "a.str"), 0, &u) == MEMRA_ERR_FORMAT, "string elem as u64");
    CHECK(memra_gguf_arr_u64(memra_gguf_find_kv(g, "t.u8"), 0, &u) == MEMRA_ERR_INVALID, "scalar as array");
    memra_gguf_str *strs;
    CHECK(memra_gguf_arr_strings(memra_gguf_find_kv(g, "a.str"), &strs, &err) == MEMRA_OK, "arr_strings: %s", err.msg);
    for (int k = 0; k < 4; k++) CHECK(memra_gguf_str_eq(strs[k], str_vals[k]), "string %d", k);
    free(strs);
    CHECK(memra_gguf_arr_strings(memra_gguf_find_kv(g, "a.u8"), &strs, &err) == MEMRA_ERR_FORMAT, "u8 array as strings");

    /* tensors */
    CHECK(memra_gguf_n_tensors(g) == N_TENS, "n_tensors %" PRId64, memra_gguf_n_tensors(g));
    const uint8_t *prev_end = NULL;
    for (int k = 0; k < N_TENS && k < memra_gguf_n_tensors(g); k++) {
        const memra_gguf_tensor *t = memra_gguf_tensor_at(g, k);
        CHECK(memra_gguf_str_eq(t->name, tens[k].name), "tensor %d name", k);
        CHECK(memra_gguf_find_tensor(g, tens[k].name) == t, "find_tensor %s", tens[k].name);
        CHECK(t->type == tens[k].type && t->n_dims == tens[k].n_dims, "tensor %d type/dims", k);
        for (int dd = 0; dd < 4; dd++) CHECK(t->ne[dd] == tens[k].ne[dd], "tensor %d ne[%d]", k, dd);
        int64_t rows = tens[k].ne[1] * tens[k].ne[2] * tens[k].ne[3];
        CHECK(t->nbytes == memra_type_row_bytes(tens[k].type, tens[k].ne[0]) * (uint64_t)rows, "tensor %d nbytes", k);
        CHECK(t->offset % alignment == 0, "tensor %d offset %" PRIu64, k, t->offset);
        CHECK(t->data != NULL, "tensor %d data", k);
        if (!t->data) continue;
        const uint8_t *q = t->data;
        int same = 1;
        for (uint64_t j = 0; j < t->nbytes; j++) same &= q[j] == pattern(k, j);
        CHECK(same, "tensor %d bytes", k);
        if (t->nbytes) {
            CHECK(!prev_end || q >= prev_end, "tensor %d overlaps", k);
            prev_end = q + t->nbytes;
        }
    }
    CHECK(memra_gguf_find_tensor(g, "token_embd") == NULL, "prefix of a tensor name found");
    CHECK(memra_gguf_tensor_at(g, N_TENS) == NULL && memra_gguf_kv_at(g, -1) == NULL, "out-of-range index");
}

/* Which section of the valid file a byte offset falls in, as the word the
 * error message must contain. */
static void expected_section(const memra_gguf *g, size_t len, char *out, size_t cap) {
    if (len < 4) {
        snprintf(out, cap, "not a GGUF");
        return;
    }
    if (len < 24) {
        snprintf(out, cap, "header");
        return;
    }
    for (int64_t i = memra_gguf_n_kv(g) - 1; i >= 0; i--)
        if (len >= memra_gguf_kv_at(g, i)->offset) {
            if (i == memra_gguf_n_kv(g) - 1 && memra_gguf_n_tensors(g) > 0 && len >= memra_gguf_tensor_at(g, 0)->info_offset)
                break;
            snprintf(out, cap, "kv %" PRId64, i);
            return;
        }
    for (int64_t i = memra_gguf_n_tensors(g) - 1; i >= 0; i--)
        if (len >= memra_gguf_tensor_at(g, i)->info_offset) {
            const memra_gguf_tensor *t = memra_gguf_tensor_at(g, i);
            uint64_t end = t->info_offset + 8 + t->name.len + 4 + 8ull * t->n_dims + 4 + 8;
            if (i == memra_gguf_n_tensors(g) - 1 && len >= end) break;
            if (len < t->info_offset + 8 + t->name.len)
                snprintf(out, cap, "tensor %" PRId64, i);
            else
                snprintf(out, cap, "tensor '%.*s'", (int)t->name.len, t->name.ptr);
            return;
        }
    if (len < memra_gguf_data_offset(g)) {
        snprintf(out, cap, "padding");
        return;
    }
    snprintf(out, cap, "runs past the end");
}

static void test_valid_and_truncation(uint32_t version, uint32_t alignment) {
    mem_out m = make_valid(version, alignment, 13);
    memra_gguf *g = NULL;
    memra_error err;
    uint8_t *copy;
    memra_status s = open_copy((const uint8_t *)m.p, m.n, &g, &err, &copy);
    CHECK(s == MEMRA_OK, "v%u align %u: open: %s", version, alignment, err.msg);
    if (s) {
        free(copy);
        free(m.p);
        return;
    }
    check_valid(g, version, alignment);

    /* the same file written in one chunk is byte-identical */
    mem_out m2 = make_valid(version, alignment, 1 << 20);
    CHECK(m2.n == m.n && !memcmp(m2.p, m.p, m.n), "chunking changed the output");
    free(m2.p);

    /* every prefix: fails cleanly up to the end of the last tensor's data,
     * with a message naming the section that was cut */
    uint64_t need = 0;
    for (int64_t i = 0; i < memra_gguf_n_tensors(g); i++) {
        const memra_gguf_tensor *t = memra_gguf_tensor_at(g, i);
        if (t->offset + t->nbytes > need) need = t->offset + t->nbytes;
    }
    need += memra_gguf_data_offset(g);
    CHECK(need == m.n, "last tensor ends at %" PRIu64 ", file is %zu bytes", need, m.n);
    int bad_status = 0, bad_msg = 0, bad_handle = 0;
    for (size_t len = 0; len < m.n; len++) {
        memra_gguf *h = NULL;
        uint8_t *c2;
        char sect[128];
        s = open_copy((const uint8_t *)m.p, len, &h, &err, &c2);
        expected_section(g, len, sect, sizeof sect);
        if (s != MEMRA_ERR_FORMAT) {
            if (bad_status++ < 5) fprintf(stderr, "prefix %zu: status %s: %s\n", len, memra_status_str(s), err.msg);
        } else if (!strstr(err.msg, sect) && !strstr(err.msg, "cannot fit")) {
            if (bad_msg++ < 5) fprintf(stderr, "prefix %zu: message '%s' lacks '%s'\n", len, err.msg, sect);
        }
        if (!strstr(err.msg, "offset") && !strstr(err.msg, "not a GGUF")) bad_msg++;
        if (h) bad_handle++;
        memra_gguf_free(h);
        free(c2);
    }
    CHECK(bad_status == 0, "v%u: %d prefixes did not fail with MEMRA_ERR_FORMAT", version, bad_status);
    CHECK(bad_msg == 0, "v%u: %d prefixes gave a message without the section or offset", version, bad_msg);
    CHECK(bad_handle == 0, "v%u: %d prefixes returned a handle", version, bad_handle);

    /* partial open of a file cut inside the tensor directory keeps the kvs */
    const memra_gguf_tensor *t2 = memra_gguf_tensor_at(g, 2);
    char path[] = "/tmp/memra_test_gguf_XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0, "mkstemp");
    if (fd >= 0) {
        FILE *f = fdopen(fd, "wb");
        fwrite(m.p, 1, t2->info_offset + 5, f);
        fclose(f);
        memra_gguf *h = NULL;
        s = memra_gguf_open_partial(path, &h, &err);
        CHECK(s == MEMRA_ERR_FORMAT && h != NULL, "partial open: %s", err.msg);
        if (h) {
            CHECK(memra_gguf_n_kv(h) == memra_gguf_n_kv(g), "partial kvs %" PRId64, memra_gguf_n_kv(h));
            CHECK(memra_gguf_n_tensors(h) == 2, "partial tensors %" PRId64, memra_gguf_n_tensors(h));
            CHECK(memra_gguf_find_kv(h, "general.architecture") != NULL, "partial find_kv");
            CHECK(memra_gguf_find_tensor(h, "blk.0.attn_q.weight") != NULL, "partial find_tensor");
            CHECK(strstr(err.msg, "tensor 2") != NULL && strstr(err.msg, path) != NULL, "partial msg: %s", err.msg);
        }
        memra_gguf_free(h);
        h = NULL;
        CHECK(memra_gguf_open(path, &h, &err) == MEMRA_ERR_FORMAT && h == NULL, "strict open of a cut file");
        unlink(path);
    }
    memra_gguf_free(g);
    free(copy);
    free(m.p);
}

/* ---- hand-made damaged files ---- */

static void test_header(void) {
    bb b = {0};
    bb_put(&b, "GGUG", 4);
    bb_u32(&b, 3);
    bb_u64(&b, 0);
    bb_u64(&b, 0);
    EXPECT_FAIL(&b, MEMRA_ERR_FORMAT, "not a GGUF");
    bb_free(&b);

    uint32_t versions[] = {0, 1, 4, 0x03000000u};
    const char *words[] = {"version 0", "version 1", "version 4", "big-endian"};
    for (int i = 0; i < 4; i++) {
        bb_header(&b, versions[i], 0, 0);
        EXPECT_FAIL(&b, i == 0 || i == 2 ? MEMRA_ERR_UNSUPPORTED : MEMRA_ERR_UNSUPPORTED, words[i], "offset 4");
        bb_free(&b);
    }

    /* an empty v2 and v3 file is valid */
    for (uint32_t v = 2; v <= 3; v++) {
        bb_header(&b, v, 0, 0);
        memra_gguf *g = NULL;
        memra_error err;
        uint8_t *c;
        CHECK(open_copy(b.p, b.n, &g, &err, &c) == MEMRA_OK, "empty v%u: %s", v, err.msg);
        CHECK(g && memra_gguf_n_kv(g) == 0 && memra_gguf_n_tensors(g) == 0 && memra_gguf_version(g) == v, "empty");
        memra_gguf_free(g);
        free(c);
        bb_free(&b);
    }

    /* counts near UINT64_MAX, and one more than the bytes could hold */
    bb_header(&b, 3, 0, UINT64_MAX);
    EXPECT_FAIL(&b, MEMRA_ERR_FORMAT, "metadata count", "cannot fit");
    bb_free(&b);
    bb_header(&b, 3, UINT64_MAX, 0);
    EXPECT_FAIL(&b, MEMRA_ERR_FORMAT, "tensor count", "cannot fit");
    bb_free(&b);
    bb_header(&b, 3, UINT64_MAX / 32 + 1, UINT64_MAX / 13 + 1);
    EXPECT_FAIL(&b, MEMRA_ERR_FORMAT, "cannot fit");
    bb_free(&b);
    bb_header(&b, 3, 0, 2);
    bb_zeros(&b, 25); /* 2 kvs need at least 26 bytes */
    EXPECT_FAIL(&b, MEMRA_ERR_FORMAT, "metadata count 2");
    bb_free(&b);
    bb_header(&b, 3, 1, 1);
    bb_zeros(&b, 13 + 31); /* 1 kv + 1 tensor need at least 45 */
    EXPECT_FAIL(&b, MEMRA_ERR_FORMAT, "tensor count 1");
    bb_free(&b);
}

static void test_kv_damage(void) {
    bb b = {0};
    /* key length near UINT64_MAX */
    uint64_t lens[] = {UINT64_MAX, UINT64_MAX - 7, 1ull << 63, 100};
    for (int i = 0; i < 4; i++) {
        bb_header(&b, 3, 0, 1);
        bb_u64(&b, lens[i]);
        bb_zeros(&b, 20);
        EXPECT_FAIL(&b, MEMRA_ERR_FORMAT, "kv 0", "key length", "offset 24");
        bb_free(&b);
    }
    /* string value length huge */
    bb_header(&b, 3, 0, 1);
    bb_str(&b, "k");
    bb_u32(&b, MEMRA_GGUF_TYPE_STRING);
    bb_u64(&b, UINT64_MAX - 3);
    bb_zeros(&b, 8);
    EXPECT_FAIL(&b, MEMRA_ERR_FORMAT, "kv 0 'k'", "string value length");
    bb_free(&b);
    /* unknown value types */
    uint32_t types[] = {13, 0xffffffffu};
    for (int i = 0; i < 2; i++) {
        bb_header(&b, 3, 0, 2);
        bb_kv_u32(&b, "ok", 1);
        bb_str(&b, "bad.type");
        bb_u32(&b, types[i]);
        bb_zeros(&b, 16);
        EXPECT_FAIL(&b, MEMRA_ERR_FORMAT, "kv 1 'bad.type'", "unknown value type", "offset 58");
        bb_free(&b);
    }
    /* nested array, unknown element type */
    bb_header(&b, 3, 0, 1);
    bb_str(&b, "nest");
    bb_u32(&b, MEMRA_GGUF_TYPE_ARRAY);
    bb_u32(&b, MEMRA_GGUF_TYPE_ARRAY);
    bb_u64(&b, 1);
    bb_zeros(&b, 16);
    EXPECT_FAIL(&b, MEMRA_ERR_FORMAT, "'nest'", "nested arrays");
    bb_free(&b);
    bb_header(&b, 3, 0, 1);
    bb_str(&b, "arr");
    bb_u32(&b, MEMRA_GGUF_TYPE_ARRAY);
    bb_u32(&b, 77);
    bb_u64(&b, 1);
    bb_zeros(&b, 16);
    EXPECT_FAIL(&b, MEMRA_ERR_FORMAT, "'arr'", "unknown array element type 77");
    bb_free(&b);
    /* array lengths near UINT64_MAX, for 1-byte, 8-byte and string elements */
    memra_gguf_type ets[] = {MEMRA_GGUF_TYPE_UINT8, MEMRA_GGUF_TYPE_UINT64, MEMRA_GGUF_TYPE_STRING,
                             MEMRA_GGUF_TYPE_FLOAT32};
    uint64_t ns[] = {UINT64_MAX, UINT64_MAX / 8 + 1, UINT64_MAX, 1ull << 62};
    for (int i = 0; i < 4; i++) {
        bb_header(&b, 3, 0, 1);
        bb_str(&b, "arr");
        bb_u32(&b, MEMRA_GGUF_TYPE_ARRAY);
        bb_u32(&b, ets[i]);
        bb_u64(&b, ns[i]);
        bb_zeros(&b, 64);
        EXPECT_FAIL(&b, MEMRA_ERR_FORMAT, "'arr'", "array of");
        bb_free(&b);
    }
    /* string array whose second element's length runs out */
    bb_header(&b, 3, 0, 1);
    bb_str(&b, "toks");
    bb_u32(&b, MEMRA_GGUF_TYPE_ARRAY);
    bb_u32(&b, MEMRA_GGUF_TYPE_STRING);
    bb_u64(&b, 3);
    bb_str(&b, "a");
    bb_u64(&b, 1000);
    bb_zeros(&b, 20);
    EXPECT_FAIL(&b, MEMRA_ERR_FORMAT, "'toks'", "element 1 of 3");
    bb_free(&b);
    /* bool that is neither 0 nor 1 */
    bb_header(&b, 3, 0, 1);
    bb_str(&b, "flag");
    bb_u32(&b, MEMRA_GGUF_TYPE_BOOL);
    bb_u8(&b, 2);
    EXPECT_FAIL(&b, MEMRA_ERR_FORMAT, "'flag'", "bool");
    bb_free(&b);
    /* duplicate key */
    bb_header(&b, 3, 0, 3);
    bb_kv_u32(&b, "a", 1);
    bb_kv_u32(&b, "b", 2);
    bb_kv_u32(&b, "a", 3);
    EXPECT_FAIL(&b, MEMRA_ERR_FORMAT, "kv 2 'a'", "duplicate key", "offset 24");
    bb_free(&b);
}

static void test_alignment_kv(void) {
    bb b = {0};
    uint32_t bad[] = {0, 3, 48, 0x80000001u};
    for (int i = 0; i < 4; i++) {
        bb_header(&b, 3, 0, 1);
        bb_kv_u32(&b, "general.alignment", bad[i]);
        EXPECT_FAIL(&b, MEMRA_ERR_FORMAT, "general.alignment", "power of two", "offset 24");
        bb_free(&b);
    }
    /* right value, wrong types */
    bb_header(&b, 3, 0, 1);
    bb_str(&b, "general.alignment");
    bb_u32(&b, MEMRA_GGUF_TYPE_UINT64);
    bb_u64(&b, 64);
    EXPECT_FAIL(&b, MEMRA_ERR_FORMAT, "general.alignment", "must be u32, is u64");
    bb_free(&b);
    bb_header(&b, 3, 0, 1);
    bb_str(&b, "general.alignment");
    bb_u32(&b, MEMRA_GGUF_TYPE_INT32);
    bb_u32(&b, 32);
    EXPECT_FAIL(&b, MEMRA_ERR_FORMAT, "general.alignment", "is i32");
    bb_free(&b);
    /* alignment 1 and 64 are fine, and used for the data section */
    uint32_t good[] = {1, 64};
    for (int i = 0; i < 2; i++) {
        bb_header(&b, 3, 1, 1);
        bb_kv_u32(&b, "general.alignment", good[i]);
        bb_str(&b, "t");
        bb_u32(&b, 1);
        bb_u64(&b, 3);
        bb_u32(&b, MEMRA_TYPE_F32);
        bb_u64(&b, 0);
        bb_pad(&b, good[i]);
        size_t data_at = b.n;
        bb_zeros(&b, 12);
        memra_gguf *g = NULL;
        memra_error err;
        uint8_t *c;
        CHECK(open_copy(b.p, b.n, &g, &err, &c) == MEMRA_OK, "alignment %u: %s", good[i], err.msg);
        CHECK(g && memra_gguf_alignment(g) == good[i] && memra_gguf_data_offset(g) == data_at,
              "alignment %u data offset", good[i]);
        memra_gguf_free(g);
        free(c);
        bb_free(&b);
    }
}

typedef struct tspec {
    const char *name;
    uint32_t n_dims;
    uint64_t ne[5];
    uint32_t type;
    uint64_t offset;
} tspec;

/* A v3 file with the given tensor entries, then data_bytes of data. */
static void build_tensors(bb *b, const tspec *ts, int n, uint64_t data_bytes) {
    bb_header(b, 3, (uint64_t)n, 0);
    for (int i = 0; i < n; i++) {
        bb_str(b, ts[i].name);
        bb_u32(b, ts[i].n_dims);
        for (uint32_t d = 0; d < ts[i].n_dims; d++) bb_u64(b, ts[i].ne[d]);
        bb_u32(b, ts[i].type);
        bb_u64(b, ts[i].offset);
    }
    bb_pad(b, 32);
    bb_zeros(b, (size_t)data_bytes);
}

static void test_tensor_damage(void) {
    bb b = {0};
    /* baseline: two F32 tensors, valid */
    tspec ok[] = {{"a", 1, {8}, MEMRA_TYPE_F32, 0}, {"b", 2, {4, 2}, MEMRA_TYPE_F32, 32}};
    build_tensors(&b, ok, 2, 64);
    memra_gguf *g = NULL;
    memra_error err;
    uint8_t *c;
    CHECK(open_copy(b.p, b.n, &g, &err, &c) == MEMRA_OK, "baseline: %s", err.msg);
    memra_gguf_free(g);
    free(c);
    bb_free(&b);

    tspec t;
    t = (tspec){"d0", 0, {0}, MEMRA_TYPE_F32, 0};
    build_tensors(&b, &t, 1, 32);
    EXPECT_FAIL(&b, MEMRA_ERR_FORMAT, "tensor 'd0'", "n_dims is 0", "offset 24");
    bb_free(&b);
    t = (tspec){"d5", 5, {1, 1, 1, 1, 1}, MEMRA_TYPE_F32, 0};
    build_tensors(&b, &t, 1, 32);
    EXPECT_FAIL(&b, MEMRA_ERR_FORMAT, "tensor 'd5'", "n_dims is 5");
    bb_free(&b);
    /* unknown type ids: unassigned, retired, huge */
    uint32_t types[] = {99, 4, 0xffffffffu, MEMRA_TYPE_COUNT};
    for (int i = 0; i < 4; i++) {
        char want[64];
        snprintf(want, sizeof want, "unknown tensor type id %u", types[i]);
        t = (tspec){"blk.7.weird", 1, {32}, types[i], 0};
        build_tensors(&b, &t, 1, 256);
        EXPECT_FAIL(&b, MEMRA_ERR_UNSUPPORTED, "tensor 'blk.7.weird'", want, "offset 24");
        bb_free(&b);
    }
    /* negative (as int64) and overflowing shapes */
    t = (tspec){"neg", 2, {4, (uint64_t)INT64_MAX + 1}, MEMRA_TYPE_F32, 0};
    build_tensors(&b, &t, 1, 32);
    EXPECT_FAIL(&b, MEMRA_ERR_FORMAT, "'neg'", "dimension 1");
    bb_free(&b);
    t = (tspec){"big", 4, {1ull << 32, 1ull << 32, 1ull << 32, 1ull << 32}, MEMRA_TYPE_F32, 0};
    build_tensors(&b, &t, 1, 32);
    EXPECT_FAIL(&b, MEMRA_ERR_FORMAT, "'big'", "elements");
    bb_free(&b);
    t = (tspec){"bytes", 2, {1ull << 61, 2}, MEMRA_TYPE_F64, 0};
    build_tensors(&b, &t, 1, 32);
    EXPECT_FAIL(&b, MEMRA_ERR_FORMAT, "'bytes'", "overflow");
    bb_free(&b);
    /* row not a multiple of the block size */
    t = (tspec){"q", 2, {33, 2}, MEMRA_TYPE_Q8_0, 0};
    build_tensors(&b, &t, 1, 128);
    EXPECT_FAIL(&b, MEMRA_ERR_FORMAT, "'q'", "not a multiple", "Q8_0");
    bb_free(&b);
    /* misaligned, out of file, offset+size overflow */
    t = (tspec){"mis", 1, {4}, MEMRA_TYPE_F32, 4};
    build_tensors(&b, &t, 1, 64);
    EXPECT_FAIL(&b, MEMRA_ERR_FORMAT, "'mis'", "not a multiple of the alignment 32");
    bb_free(&b);
    t = (tspec){"far", 1, {4}, MEMRA_TYPE_F32, 64};
    build_tensors(&b, &t, 1, 64);
    EXPECT_FAIL(&b, MEMRA_ERR_FORMAT, "'far'", "past the end");
    bb_free(&b);
    t = (tspec){"end", 1, {32}, MEMRA_TYPE_F32, 0};
    build_tensors(&b, &t, 1, 127); /* needs 128 */
    EXPECT_FAIL(&b, MEMRA_ERR_FORMAT, "'end'", "past the end");
    bb_free(&b);
    t = (tspec){"wrap", 1, {64}, MEMRA_TYPE_F32, UINT64_MAX - 31};
    build_tensors(&b, &t, 1, 64);
    EXPECT_FAIL(&b, MEMRA_ERR_FORMAT, "'wrap'", "past the end");
    bb_free(&b);
    /* overlap: same start, and one ending inside the next */
    tspec ov[] = {{"x", 1, {16}, MEMRA_TYPE_F32, 0}, {"y", 1, {8}, MEMRA_TYPE_F32, 32}, {"z", 1, {8}, MEMRA_TYPE_F32, 96}};
    build_tensors(&b, ov, 3, 128);
    EXPECT_FAIL(&b, MEMRA_ERR_FORMAT, "overlaps", "'x'", "'y'");
    bb_free(&b);
    tspec same[] = {{"p", 1, {8}, MEMRA_TYPE_F32, 32}, {"r", 1, {8}, MEMRA_TYPE_F32, 0}, {"s", 1, {8}, MEMRA_TYPE_F32, 32}};
    build_tensors(&b, same, 3, 64);
    EXPECT_FAIL(&b, MEMRA_ERR_FORMAT, "overlaps");
    bb_free(&b);
    /* zero-size tensors overlap nothing */
    tspec zero[] = {{"z0", 1, {0}, MEMRA_TYPE_F32, 0}, {"z1", 2, {32, 0}, MEMRA_TYPE_Q8_0, 0}, {"n", 1, {8}, MEMRA_TYPE_F32, 0}};
    build_tensors(&b, zero, 3, 32);
    CHECK(open_copy(b.p, b.n, &g, &err, &c) == MEMRA_OK, "zero-size tensors: %s", err.msg);
    if (g) CHECK(memra_gguf_find_tensor(g, "z1")->nbytes == 0, "zero-size nbytes");
    memra_gguf_free(g);
    free(c);
    bb_free(&b);
    /* duplicate names */
    tspec dup[] = {{"w", 1, {8}, MEMRA_TYPE_F32, 0}, {"v", 1, {8}, MEMRA_TYPE_F32, 32}, {"w", 1, {8}, MEMRA_TYPE_F32, 64}};
    build_tensors(&b, dup, 3, 96);
    EXPECT_FAIL(&b, MEMRA_ERR_FORMAT, "tensor 'w'", "duplicate tensor name", "offset 24");
    bb_free(&b);
    /* empty name */
    t = (tspec){"", 1, {8}, MEMRA_TYPE_F32, 0};
    build_tensors(&b, &t, 1, 32);
    EXPECT_FAIL(&b, MEMRA_ERR_FORMAT, "empty tensor name");
    bb_free(&b);
    /* name length huge */
    bb_header(&b, 3, 1, 0);
    bb_u64(&b, UINT64_MAX);
    bb_zeros(&b, 40);
    EXPECT_FAIL(&b, MEMRA_ERR_FORMAT, "tensor 0", "name length");
    bb_free(&b);
    /* a hostile name is printed safely */
    t = (tspec){"bad\n\x1b[2Jname", 1, {8}, MEMRA_TYPE_F32, 4};
    build_tensors(&b, &t, 1, 64);
    EXPECT_FAIL(&b, MEMRA_ERR_FORMAT, "bad??[2Jname");
    bb_free(&b);
}

/* Partial open keeps going over semantic errors and reports the first. */
static void test_partial(void) {
    bb b = {0};
    tspec ts[] = {{"ok0", 1, {8}, MEMRA_TYPE_F32, 0},
                  {"unk", 1, {8}, 99, 32},
                  {"far", 1, {8}, MEMRA_TYPE_F32, 4096},
                  {"ok1", 1, {8}, MEMRA_TYPE_F32, 64}};
    build_tensors(&b, ts, 4, 96);
    char path[] = "/tmp/memra_test_gguf_XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0, "mkstemp");
    if (fd < 0) return;
    FILE *f = fdopen(fd, "wb");
    fwrite(b.p, 1, b.n, f);
    fclose(f);
    memra_gguf *g = NULL;
    memra_error err;
    memra_status s = memra_gguf_open_partial(path, &g, &err);
    CHECK(s == MEMRA_ERR_UNSUPPORTED && g, "partial: %s", err.msg);
    CHECK(strstr(err.msg, "'unk'") && strstr(err.msg, "99"), "first error names the unknown type: %s", err.msg);
    if (g) {
        CHECK(memra_gguf_n_tensors(g) == 4, "all 4 entries kept");
        CHECK(memra_gguf_find_tensor(g, "ok1") && memra_gguf_find_tensor(g, "ok1")->data, "ok1 has data");
        CHECK(memra_gguf_find_tensor(g, "far") && !memra_gguf_find_tensor(g, "far")->data, "far has no data");
    }
    memra_gguf_free(g);
    g = NULL;
    s = memra_gguf_open(path, &g, &err);
    CHECK(s == MEMRA_ERR_UNSUPPORTED && !g, "strict open of the same file");
    unlink(path);
    bb_free(&b);

    s = memra_gguf_open("/nonexistent/x.gguf", &g, &err);
    CHECK(s == MEMRA_ERR_NOT_FOUND && !g && strstr(err.msg, "/nonexistent/x.gguf"), "missing file: %s", err.msg);
    s = memra_gguf_open("/tmp", &g, &err);
    CHECK(s == MEMRA_ERR_IO && !g, "directory: %s", err.msg);
}

static void test_writer_errors(void) {
    memra_gguf_writer *w;
    memra_error err;
    CHECK(memra_gguf_writer_begin(1, 0, &w, &err) == MEMRA_ERR_INVALID, "version 1");
    CHECK(memra_gguf_writer_begin(3, 24, &w, &err) == MEMRA_ERR_INVALID, "alignment 24");
    CHECK(memra_gguf_writer_begin(3, 0, &w, &err) == MEMRA_OK, "begin");
    memra_gguf_writer_add_u32(w, "k", 1);
    CHECK(memra_gguf_writer_add_u32(w, "k", 2) == MEMRA_ERR_INVALID, "duplicate key");
    CHECK(memra_gguf_writer_add_u32(w, "other", 2) == MEMRA_ERR_INVALID, "sticky error");
    FILE *f = fopen("/dev/null", "wb");
    CHECK(memra_gguf_writer_write_header(w, f, &err) == MEMRA_ERR_INVALID && strstr(err.msg, "duplicate key 'k'"),
          "write_header reports the first error: %s", err.msg);
    memra_gguf_writer_free(w);

    memra_gguf_writer_begin(3, 0, &w, &err);
    CHECK(memra_gguf_writer_add_u32(w, "general.alignment", 64) == MEMRA_ERR_INVALID, "user general.alignment");
    memra_gguf_writer_free(w);
    memra_gguf_writer_begin(3, 0, &w, &err);
    CHECK(memra_gguf_writer_add_tensor(w, "q", MEMRA_TYPE_Q8_0, 1, (int64_t[]){33}) == MEMRA_ERR_INVALID, "row 33 Q8_0");
    memra_gguf_writer_free(w);
    memra_gguf_writer_begin(3, 0, &w, &err);
    CHECK(memra_gguf_writer_add_tensor(w, "q", 99, 1, (int64_t[]){32}) == MEMRA_ERR_INVALID, "type 99");
    memra_gguf_writer_free(w);
    memra_gguf_writer_begin(3, 0, &w, &err);
    memra_gguf_writer_add_tensor(w, "t", MEMRA_TYPE_F32, 1, (int64_t[]){4});
    CHECK(memra_gguf_writer_add_tensor(w, "t", MEMRA_TYPE_F32, 1, (int64_t[]){4}) == MEMRA_ERR_INVALID, "dup tensor");
    memra_gguf_writer_free(w);
    memra_gguf_writer_begin(3, 0, &w, &err);
    memra_gguf_writer_add_tensor(w, "t", MEMRA_TYPE_F32, 1, (int64_t[]){4});
    memra_gguf_writer_write_header(w, f, &err);
    float x[5] = {0};
    CHECK(memra_gguf_writer_write_data(w, f, x, 8, &err) == MEMRA_OK, "partial data");
    CHECK(memra_gguf_writer_finish(w, f, &err) == MEMRA_ERR_INVALID && strstr(err.msg, "incomplete"), "finish early");
    memra_gguf_writer_free(w);
    memra_gguf_writer_begin(3, 0, &w, &err);
    memra_gguf_writer_add_tensor(w, "t", MEMRA_TYPE_F32, 1, (int64_t[]){4});
    memra_gguf_writer_write_header(w, f, &err);
    CHECK(memra_gguf_writer_write_data(w, f, x, 20, &err) == MEMRA_ERR_INVALID, "too much data");
    memra_gguf_writer_free(w);
    fclose(f);
}

/* ---- fixtures ---- */

static int ends_with(const char *s, const char *suf) {
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && !strcmp(s + a - b, suf);
}

static void check_fixture(const char *path, const char *name) {
    memra_gguf *g = NULL;
    memra_error err;
    memra_status s = memra_gguf_open(path, &g, &err);
    CHECK(s == MEMRA_OK, "%s: %s", name, err.msg);
    if (s) return;
    memra_gguf_str arch;
    CHECK(memra_gguf_get_str(g, "general.architecture", &arch, &err) == MEMRA_OK, "%s: %s", name, err.msg);
    CHECK(memra_gguf_version(g) == 3, "%s: version %u", name, memra_gguf_version(g));
    const memra_gguf_kv *toks = memra_gguf_find_kv(g, "tokenizer.ggml.tokens");
    CHECK(toks && toks->type == MEMRA_GGUF_TYPE_ARRAY && toks->v.arr.type == MEMRA_GGUF_TYPE_STRING, "%s: tokens", name);
    memra_gguf_str *strs = NULL;
    if (toks && memra_gguf_arr_strings(toks, &strs, &err) == MEMRA_OK) {
        /* the strings are laid out back to back: the last one ends inside the file */
        const char *end = strs[toks->v.arr.n - 1].ptr + strs[toks->v.arr.n - 1].len;
        const char *start = (const char *)toks->v.arr.data;
        CHECK(end > start && (uint64_t)(end - start) < memra_gguf_file_size(g), "%s: token strings", name);
        free(strs);
    }
    if (!strncmp(name, "qwen3-vocab", 11)) {
        /* README: 151,643 tokens + specials (151,936 ids), 151,387 merges, pre-tokenizer qwen2 */
        const memra_gguf_kv *merges = memra_gguf_find_kv(g, "tokenizer.ggml.merges");
        memra_gguf_str pre;
        CHECK(memra_gguf_str_eq(arch, "qwen3"), "%s: arch", name);
        CHECK(toks && toks->v.arr.n == 151936, "%s: token count", name);
        CHECK(merges && merges->v.arr.n == 151387, "%s: merge count", name);
        CHECK(memra_gguf_get_str(g, "tokenizer.ggml.pre", &pre, &err) == 0 && memra_gguf_str_eq(pre, "qwen2"), "%s: pre", name);
        memra_gguf_free(g);
        return;
    }
    /* a qwen35 model fixture */
    int moe = strstr(name, "-moe") != NULL;
    CHECK(memra_gguf_str_eq(arch, moe ? "qwen35moe" : "qwen35"), "%s: arch '%.*s'", name, (int)arch.len, arch.ptr);
    char key[96];
    uint64_t h = 0, blocks = 0, nextn = 0;
    snprintf(key, sizeof key, "%.*s.embedding_length", (int)arch.len, arch.ptr);
    CHECK(memra_gguf_get_u64(g, key, &h, &err) == MEMRA_OK, "%s: %s", name, err.msg);
    CHECK(h == (strstr(name, "small") ? 256u : 128u), "%s: H %" PRIu64, name, h);
    snprintf(key, sizeof key, "%.*s.block_count", (int)arch.len, arch.ptr);
    CHECK(memra_gguf_get_u64(g, key, &blocks, &err) == MEMRA_OK, "%s: %s", name, err.msg);
    snprintf(key, sizeof key, "%.*s.nextn_predict_layers", (int)arch.len, arch.ptr);
    memra_gguf_get_u64(g, key, &nextn, &err);
    if (strstr(name, "tiny")) CHECK(blocks - nextn == 8, "%s: trunk layers %" PRIu64, name, blocks - nextn);
    if (strstr(name, "small")) CHECK(blocks - nextn == 4, "%s: trunk layers %" PRIu64, name, blocks - nextn);
    if (moe) {
        uint64_t ne = 0, nu = 0;
        memra_gguf_get_u64(g, "qwen35moe.expert_count", &ne, &err);
        memra_gguf_get_u64(g, "qwen35moe.expert_used_count", &nu, &err);
        CHECK(ne == 16 && nu == 4, "%s: experts %" PRIu64 " top-%" PRIu64, name, ne, nu);
    }
    CHECK(memra_gguf_n_tensors(g) > 0, "%s: no tensors", name);
    const memra_gguf_tensor *emb = memra_gguf_find_tensor(g, "token_embd.weight");
    CHECK(emb && emb->ne[0] == (int64_t)h && toks && emb->ne[1] == (int64_t)toks->v.arr.n, "%s: token_embd shape", name);
    /* tied embeddings only for the MoE fixture */
    CHECK((memra_gguf_find_tensor(g, "output.weight") == NULL) == moe, "%s: output.weight presence", name);
    uint64_t total = 0, data_size = memra_gguf_file_size(g) - memra_gguf_data_offset(g);
    int inside = 1;
    for (int64_t i = 0; i < memra_gguf_n_tensors(g); i++) {
        const memra_gguf_tensor *t = memra_gguf_tensor_at(g, i);
        inside &= t->data != NULL && t->offset + t->nbytes <= data_size && t->offset % memra_gguf_alignment(g) == 0;
        total += t->nbytes;
    }
    CHECK(inside, "%s: a tensor's data is outside the file", name);
    CHECK(total <= data_size && total > data_size / 2, "%s: tensor bytes %" PRIu64 " vs data %" PRIu64, name, total,
          data_size);
    memra_gguf_free(g);
}

static void test_fixtures(void) {
    const char *dir = test_fixtures_dir();
    if (!dir) {
        printf("test_gguf: no fixture folder, skipping fixture checks\n");
        return;
    }
    DIR *d = opendir(dir);
    CHECK(d != NULL, "opendir %s", dir);
    if (!d) return;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (!ends_with(e->d_name, ".gguf")) continue;
        char path[1024];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        check_fixture(path, e->d_name);
        n++;
    }
    closedir(d);
    CHECK(n >= 10, "only %d fixture .gguf files", n);
}

int main(void) {
    test_valid_and_truncation(3, 32);
    test_valid_and_truncation(2, 32);
    test_valid_and_truncation(3, 64);
    test_header();
    test_kv_damage();
    test_alignment_kv();
    test_tensor_damage();
    test_partial();
    test_writer_errors();
    test_fixtures();
    return test_finish("test_gguf");
}
