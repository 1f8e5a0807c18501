/* Bounds-checked GGUF reader (see gguf.h for the layout).
 *
 * One cursor walks the bytes; every read first asks need() whether that many
 * bytes are left, so no read can pass the end. Counts from the file are never
 * trusted for allocation: arrays grow as entries are actually parsed, and each
 * entry consumes bytes, so memory stays proportional to the file size.
 *
 * Strict open stops at the first problem. Partial open (for `memra inspect`)
 * stops at the first structural problem (truncation, bad count, bad type
 * byte) but keeps going over semantic ones (unknown tensor type, tensor data
 * out of range, duplicates), remembering only the first message. */
#include "gguf/gguf.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gguf/quant.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "memra's GGUF reader decodes little-endian values with memcpy: big-endian hosts are not supported"
#endif

struct memra_gguf {
    const uint8_t *base; /* [size] the mapping or the caller's buffer */
    size_t size;
    int mapped; /* 1: base is our mmap, unmapped on free */
    uint32_t version;
    uint64_t alignment;
    uint64_t data_offset;
    memra_gguf_kv *kv; /* [n_kv] */
    int64_t n_kv;
    memra_gguf_tensor *tensors; /* [n_tensors] */
    int64_t n_tensors;
    /* Open-addressing hash tables of index + 1 (0 = empty slot); cap is a power of two. */
    int64_t *kv_slots;
    uint64_t kv_cap;
    int64_t *t_slots;
    uint64_t t_cap;
};

/* Smallest encodings, used to bound counts by the bytes that remain:
 * a kv is key length (8) + type (4) + a 1-byte value; a tensor entry is
 * name length (8) + n_dims (4) + one dimension (8) + type (4) + offset (8). */
enum { MIN_KV_BYTES = 13, MIN_TENSOR_INFO_BYTES = 32 };

typedef struct parser {
    const uint8_t *base;
    size_t size;
    size_t pos;
    const char *src; /* file name or "<buffer>", for messages */
    char ctx[192];   /* what is being read, e.g. "kv 3 'general.name'" */
    memra_error *err;
} parser;

/* Copies a file string into dst for a message: at most ~64 bytes, with
 * non-printable bytes replaced, so hostile names cannot garble a terminal. */
static void printable(char *dst, size_t cap, const char *s, uint64_t len) {
    size_t n = 0;
    uint64_t lim = len > 64 ? 64 : len;
    for (uint64_t i = 0; i < lim && n + 1 < cap; i++) {
        unsigned char c = (unsigned char)s[i];
        dst[n++] = (c >= 0x20 && c < 0x7f) ? (char)c : '?';
    }
    if (len > lim && n + 4 < cap) {
        memcpy(dst + n, "...", 3);
        n += 3;
    }
    dst[n] = 0;
}

static memra_status failf(parser *p, memra_status s, uint64_t off, const char *fmt, ...) MEMRA_PRINTF(4, 5);
static memra_status failf(parser *p, memra_status s, uint64_t off, const char *fmt, ...) {
    char detail[320];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(detail, sizeof detail, fmt, ap);
    va_end(ap);
    return memra_errorf(p->err, s, "%s: %s, at offset %" PRIu64 ": %s", p->src, p->ctx, off, detail);
}

static memra_status need(parser *p, uint64_t n, const char *what) {
    if (n > p->size - p->pos)
        return failf(p, MEMRA_ERR_FORMAT, p->pos, "truncated: %s needs %" PRIu64 " bytes, %zu left in the file", what,
                     n, p->size - p->pos);
    return MEMRA_OK;
}

static memra_status rd_u32(parser *p, uint32_t *v, const char *what) {
    memra_status s = need(p, 4, what);
    if (s) return s;
    memcpy(v, p->base + p->pos, 4);
    p->pos += 4;
    return MEMRA_OK;
}

static memra_status rd_u64(parser *p, uint64_t *v, const char *what) {
    memra_status s = need(p, 8, what);
    if (s) return s;
    memcpy(v, p->base + p->pos, 8);
    p->pos += 8;
    return MEMRA_OK;
}

static memra_status rd_str(parser *p, memra_gguf_str *out, const char *what) {
    uint64_t len;
    size_t at = p->pos;
    memra_status s = rd_u64(p, &len, what);
    if (s) return s;
    if (len > p->size - p->pos)
        return failf(p, MEMRA_ERR_FORMAT, at, "%s length %" PRIu64 " runs past the end of the file (%zu bytes left)",
                     what, len, p->size - p->pos);
    out->ptr = (const char *)(p->base + p->pos);
    out->len = len;
    p->pos += (size_t)len;
    return MEMRA_OK;
}

size_t memra_gguf_scalar_size(uint32_t t) {
    switch (t) {
    case MEMRA_GGUF_TYPE_UINT8:
    case MEMRA_GGUF_TYPE_INT8:
    case MEMRA_GGUF_TYPE_BOOL: return 1;
    case MEMRA_GGUF_TYPE_UINT16:
    case MEMRA_GGUF_TYPE_INT16: return 2;
    case MEMRA_GGUF_TYPE_UINT32:
    case MEMRA_GGUF_TYPE_INT32:
    case MEMRA_GGUF_TYPE_FLOAT32: return 4;
    case MEMRA_GGUF_TYPE_UINT64:
    case MEMRA_GGUF_TYPE_INT64:
    case MEMRA_GGUF_TYPE_FLOAT64: return 8;
    default: return 0;
    }
}

const char *memra_gguf_type_name(memra_gguf_type t) {
    switch (t) {
    case MEMRA_GGUF_TYPE_UINT8: return "u8";
    case MEMRA_GGUF_TYPE_INT8: return "i8";
    case MEMRA_GGUF_TYPE_UINT16: return "u16";
    case MEMRA_GGUF_TYPE_INT16: return "i16";
    case MEMRA_GGUF_TYPE_UINT32: return "u32";
    case MEMRA_GGUF_TYPE_INT32: return "i32";
    case MEMRA_GGUF_TYPE_FLOAT32: return "f32";
    case MEMRA_GGUF_TYPE_BOOL: return "bool";
    case MEMRA_GGUF_TYPE_STRING: return "str";
    case MEMRA_GGUF_TYPE_ARRAY: return "arr";
    case MEMRA_GGUF_TYPE_UINT64: return "u64";
    case MEMRA_GGUF_TYPE_INT64: return "i64";
    case MEMRA_GGUF_TYPE_FLOAT64: return "f64";
    case MEMRA_GGUF_TYPE_COUNT: break;
    }
    return "?";
}

/* Decodes one little-endian scalar of type t at q into the kv value union. */
static void decode_scalar(uint32_t t, const uint8_t *q, memra_gguf_kv *kv) {
    switch (t) {
    case MEMRA_GGUF_TYPE_UINT8:
    case MEMRA_GGUF_TYPE_BOOL: kv->v.u64 = q[0]; break;
    case MEMRA_GGUF_TYPE_INT8: kv->v.i64 = (int8_t)q[0]; break;
    case MEMRA_GGUF_TYPE_UINT16: {
        uint16_t x;
        memcpy(&x, q, 2);
        kv->v.u64 = x;
        break;
    }
    case MEMRA_GGUF_TYPE_INT16: {
        int16_t x;
        memcpy(&x, q, 2);
        kv->v.i64 = x;
        break;
    }
    case MEMRA_GGUF_TYPE_UINT32: {
        uint32_t x;
        memcpy(&x, q, 4);
        kv->v.u64 = x;
        break;
    }
    case MEMRA_GGUF_TYPE_INT32: {
        int32_t x;
        memcpy(&x, q, 4);
        kv->v.i64 = x;
        break;
    }
    case MEMRA_GGUF_TYPE_FLOAT32: {
        float x;
        memcpy(&x, q, 4);
        kv->v.f64 = x;
        break;
    }
    case MEMRA_GGUF_TYPE_UINT64: memcpy(&kv->v.u64, q, 8); break;
    case MEMRA_GGUF_TYPE_INT64: memcpy(&kv->v.i64, q, 8); break;
    case MEMRA_GGUF_TYPE_FLOAT64: memcpy(&kv->v.f64, q, 8); break;
    default: break;
    }
}

static memra_status parse_value(parser *p, memra_gguf_kv *kv) {
    uint32_t t;
    size_t at = p->pos;
    memra_status s = rd_u32(p, &t, "value type");
    if (s) return s;
    if (t >= MEMRA_GGUF_TYPE_COUNT) return failf(p, MEMRA_ERR_FORMAT, at, "unknown value type %" PRIu32, t);
    kv->type = (memra_gguf_type)t;
    if (t == MEMRA_GGUF_TYPE_STRING) return rd_str(p, &kv->v.str, "string value");
    if (t != MEMRA_GGUF_TYPE_ARRAY) {
        size_t sz = memra_gguf_scalar_size(t);
        at = p->pos;
        if ((s = need(p, sz, memra_gguf_type_name(kv->type)))) return s;
        if (t == MEMRA_GGUF_TYPE_BOOL && p->base[p->pos] > 1)
            return failf(p, MEMRA_ERR_FORMAT, at, "bool value is %u, must be 0 or 1", p->base[p->pos]);
        decode_scalar(t, p->base + p->pos, kv);
        p->pos += sz;
        return MEMRA_OK;
    }
    uint32_t et;
    uint64_t n;
    at = p->pos;
    if ((s = rd_u32(p, &et, "array element type"))) return s;
    if (et == MEMRA_GGUF_TYPE_ARRAY) return failf(p, MEMRA_ERR_FORMAT, at, "nested arrays are not supported");
    if (et >= MEMRA_GGUF_TYPE_COUNT) return failf(p, MEMRA_ERR_FORMAT, at, "unknown array element type %" PRIu32, et);
    at = p->pos;
    if ((s = rd_u64(p, &n, "array length"))) return s;
    size_t left = p->size - p->pos;
    kv->v.arr.type = (memra_gguf_type)et;
    kv->v.arr.n = n;
    kv->v.arr.data = p->base + p->pos;
    if (et == MEMRA_GGUF_TYPE_STRING) {
        /* each string costs at least its 8-byte length */
        if (n > left / 8)
            return failf(p, MEMRA_ERR_FORMAT, at,
                         "array of %" PRIu64 " strings cannot fit in the %zu bytes left in the file", n, left);
        for (uint64_t i = 0; i < n; i++) {
            memra_gguf_str tmp;
            if ((s = rd_str(p, &tmp, "array string"))) {
                if (p->err) {
                    size_t l = strlen(p->err->msg);
                    snprintf(p->err->msg + l, sizeof p->err->msg - l, " (element %" PRIu64 " of %" PRIu64 ")", i, n);
                }
                return s;
            }
        }
        return MEMRA_OK;
    }
    size_t sz = memra_gguf_scalar_size(et);
    if (n > left / sz)
        return failf(p, MEMRA_ERR_FORMAT, at,
                     "array of %" PRIu64 " x %s (%zu bytes each) runs past the end of the file (%zu bytes left)", n,
                     memra_gguf_type_name((memra_gguf_type)et), sz, left);
    p->pos += (size_t)n * sz;
    return MEMRA_OK;
}

/* ---- hash tables (FNV-1a over the name bytes) ---- */

static uint64_t hash_bytes(const char *s, uint64_t n) {
    uint64_t h = 1469598103934665603ull;
    for (uint64_t i = 0; i < n; i++) h = (h ^ (unsigned char)s[i]) * 1099511628211ull;
    return h;
}

static int str_same(memra_gguf_str a, const char *b, uint64_t blen) {
    return a.len == blen && (blen == 0 || memcmp(a.ptr, b, (size_t)blen) == 0);
}

static memra_status table_alloc(int64_t n, int64_t **slots, uint64_t *cap) {
    uint64_t c = 16;
    while (c < (uint64_t)n * 2) c *= 2; /* n <= file size / 13, so no overflow */
    *slots = calloc((size_t)c, sizeof **slots);
    if (!*slots) return MEMRA_ERR_NOMEM;
    *cap = c;
    return MEMRA_OK;
}

/* Inserts index i with name s; returns the index already holding that name, or -1. */
static int64_t table_insert(int64_t *slots, uint64_t cap, memra_gguf_str s, int64_t i,
                            memra_gguf_str (*name_of)(const memra_gguf *, int64_t), const memra_gguf *g) {
    uint64_t h = hash_bytes(s.ptr, s.len) & (cap - 1);
    for (;; h = (h + 1) & (cap - 1)) {
        if (!slots[h]) {
            slots[h] = i + 1;
            return -1;
        }
        if (str_same(name_of(g, slots[h] - 1), s.ptr, s.len)) return slots[h] - 1;
    }
}

static int64_t table_find(const int64_t *slots, uint64_t cap, const char *name,
                          memra_gguf_str (*name_of)(const memra_gguf *, int64_t), const memra_gguf *g) {
    if (!slots) return -1;
    uint64_t len = strlen(name);
    uint64_t h = hash_bytes(name, len) & (cap - 1);
    for (;; h = (h + 1) & (cap - 1)) {
        if (!slots[h]) return -1;
        if (str_same(name_of(g, slots[h] - 1), name, len)) return slots[h] - 1;
    }
}

static memra_gguf_str kv_name(const memra_gguf *g, int64_t i) { return g->kv[i].key; }
static memra_gguf_str tensor_name(const memra_gguf *g, int64_t i) { return g->tensors[i].name; }

/* ---- the parse ---- */

/* Records a semantic error: strict mode returns it; partial mode keeps the
 * first one in *first and lets the caller continue. */
static memra_status note(memra_status s, int partial, memra_status *first, memra_error *err, memra_error *scratch) {
    if (!partial) return s;
    if (*first == MEMRA_OK) {
        *first = s;
        if (err) *err = *scratch;
    }
    return MEMRA_OK;
}

static memra_status parse_header(parser *p, memra_gguf *g, uint64_t *n_tensors, uint64_t *n_kv) {
    snprintf(p->ctx, sizeof p->ctx, "header");
    if (p->size < 4 || memcmp(p->base, "GGUF", 4) != 0)
        return memra_errorf(p->err, MEMRA_ERR_FORMAT, "%s: not a GGUF file (no \"GGUF\" magic at offset 0)", p->src);
    p->pos = 4;
    memra_status s;
    if ((s = rd_u32(p, &g->version, "version"))) return s;
    if (g->version == 1)
        return failf(p, MEMRA_ERR_UNSUPPORTED, 4, "GGUF version 1 is not supported (only 2 and 3)");
    if (g->version != 2 && g->version != 3) {
        if ((g->version & 0xffffffu) == 0 && (g->version >> 24 == 2 || g->version >> 24 == 3))
            return failf(p, MEMRA_ERR_UNSUPPORTED, 4, "big-endian GGUF files are not supported");
        return failf(p, MEMRA_ERR_UNSUPPORTED, 4, "GGUF version %" PRIu32 " is not supported (only 2 and 3)",
                     g->version);
    }
    if ((s = rd_u64(p, n_tensors, "tensor count"))) return s;
    if ((s = rd_u64(p, n_kv, "metadata count"))) return s;
    size_t left = p->size - p->pos;
    if (*n_kv > left / MIN_KV_BYTES)
        return failf(p, MEMRA_ERR_FORMAT, 16,
                     "metadata count %" PRIu64 " cannot fit in the %zu bytes after the header", *n_kv, left);
    if (*n_tensors > left / MIN_TENSOR_INFO_BYTES ||
        *n_tensors * MIN_TENSOR_INFO_BYTES > left - *n_kv * MIN_KV_BYTES)
        return failf(p, MEMRA_ERR_FORMAT, 8,
                     "tensor count %" PRIu64 " cannot fit in the %zu bytes after the header", *n_tensors, left);
    return MEMRA_OK;
}

static memra_status parse_kvs(parser *p, memra_gguf *g, uint64_t n_kv) {
    memra_status s;
    if (n_kv) {
        g->kv = calloc((size_t)n_kv, sizeof *g->kv); /* n_kv <= size/13: bounded by the file */
        if (!g->kv) return memra_errorf(p->err, MEMRA_ERR_NOMEM, "%s: out of memory for %" PRIu64 " kvs", p->src, n_kv);
    }
    for (uint64_t i = 0; i < n_kv; i++) {
        memra_gguf_kv *kv = &g->kv[i];
        kv->offset = p->pos;
        snprintf(p->ctx, sizeof p->ctx, "kv %" PRIu64, i);
        if ((s = rd_str(p, &kv->key, "key"))) return s;
        char name[80];
        printable(name, sizeof name, kv->key.ptr, kv->key.len);
        snprintf(p->ctx, sizeof p->ctx, "kv %" PRIu64 " '%s' (entry at offset %" PRIu64 ")", i, name, kv->offset);
        if ((s = parse_value(p, kv))) return s;
        g->n_kv = (int64_t)i + 1; /* only fully parsed entries count */
    }
    return MEMRA_OK;
}

static memra_status check_kvs(parser *p, memra_gguf *g, int partial, memra_status *first) {
    memra_error scratch, *real = p->err;
    memra_status s;
    p->err = partial ? &scratch : real;
    if (table_alloc(g->n_kv, &g->kv_slots, &g->kv_cap)) {
        p->err = real;
        return memra_errorf(real, MEMRA_ERR_NOMEM, "%s: out of memory", p->src);
    }
    for (int64_t i = 0; i < g->n_kv; i++) {
        int64_t j = table_insert(g->kv_slots, g->kv_cap, g->kv[i].key, i, kv_name, g);
        if (j >= 0) {
            char name[80];
            printable(name, sizeof name, g->kv[i].key.ptr, g->kv[i].key.len);
            snprintf(p->ctx, sizeof p->ctx, "kv %" PRId64 " '%s'", i, name);
            s = failf(p, MEMRA_ERR_FORMAT, g->kv[i].offset, "duplicate key (first defined at offset %" PRIu64 ")",
                      g->kv[j].offset);
            if ((s = note(s, partial, first, real, &scratch))) goto out;
        }
    }
    g->alignment = MEMRA_GGUF_DEFAULT_ALIGNMENT;
    const memra_gguf_kv *a = memra_gguf_find_kv(g, "general.alignment");
    s = MEMRA_OK;
    if (a) {
        snprintf(p->ctx, sizeof p->ctx, "general.alignment");
        if (a->type != MEMRA_GGUF_TYPE_UINT32)
            s = failf(p, MEMRA_ERR_FORMAT, a->offset, "must be u32, is %s", memra_gguf_type_name(a->type));
        else if (a->v.u64 == 0 || (a->v.u64 & (a->v.u64 - 1)) != 0)
            s = failf(p, MEMRA_ERR_FORMAT, a->offset, "must be a non-zero power of two, is %" PRIu64, a->v.u64);
        else
            g->alignment = a->v.u64;
        s = note(s, partial, first, real, &scratch);
    }
out:
    p->err = real;
    return s;
}

/* Reads the directory entry of tensor i (structure only). */
static memra_status parse_tensor_info(parser *p, memra_gguf_tensor *t, uint64_t i) {
    memra_status s;
    t->info_offset = p->pos;
    snprintf(p->ctx, sizeof p->ctx, "tensor %" PRIu64 " (entry at offset %" PRIu64 ")", i, t->info_offset);
    if ((s = rd_str(p, &t->name, "name"))) return s;
    char name[80];
    printable(name, sizeof name, t->name.ptr, t->name.len);
    snprintf(p->ctx, sizeof p->ctx, "tensor '%s' (entry at offset %" PRIu64 ")", name, t->info_offset);
    size_t at = p->pos;
    if ((s = rd_u32(p, &t->n_dims, "n_dims"))) return s;
    if (t->n_dims < 1 || t->n_dims > MEMRA_GGUF_MAX_DIMS)
        return failf(p, MEMRA_ERR_FORMAT, at, "n_dims is %" PRIu32 ", must be 1..%d", t->n_dims, MEMRA_GGUF_MAX_DIMS);
    for (int d = 0; d < MEMRA_GGUF_MAX_DIMS; d++) t->ne[d] = 1;
    for (uint32_t d = 0; d < t->n_dims; d++) {
        uint64_t ne;
        at = p->pos;
        if ((s = rd_u64(p, &ne, "dimension"))) return s;
        if (ne > (uint64_t)INT64_MAX)
            return failf(p, MEMRA_ERR_FORMAT, at, "dimension %" PRIu32 " is %" PRIu64 ", must be below 2^63", d, ne);
        t->ne[d] = (int64_t)ne;
    }
    if ((s = rd_u32(p, &t->type, "type"))) return s;
    if ((s = rd_u64(p, &t->offset, "data offset"))) return s;
    return MEMRA_OK;
}

/* Sizes a tensor from its shape and type. */
static memra_status size_tensor(parser *p, memra_gguf_tensor *t) {
    char name[80];
    printable(name, sizeof name, t->name.ptr, t->name.len);
    snprintf(p->ctx, sizeof p->ctx, "tensor '%s' (entry at offset %" PRIu64 ")", name, t->info_offset);
    const memra_type_info *ti = memra_type_get(t->type);
    if (!ti || !ti->name || ti->block_elems == 0 || ti->block_bytes == 0)
        return failf(p, MEMRA_ERR_UNSUPPORTED, t->info_offset, "unknown tensor type id %" PRIu32, t->type);
    if (t->name.len == 0) return failf(p, MEMRA_ERR_FORMAT, t->info_offset, "empty tensor name");
    int64_t elems = 1;
    for (int d = 0; d < MEMRA_GGUF_MAX_DIMS; d++)
        if (__builtin_mul_overflow(elems, t->ne[d], &elems))
            return failf(p, MEMRA_ERR_FORMAT, t->info_offset, "shape [%" PRId64 ", %" PRId64 ", %" PRId64
                         ", %" PRId64 "] has more than 2^63 elements", t->ne[0], t->ne[1], t->ne[2], t->ne[3]);
    if (t->ne[0] % ti->block_elems != 0)
        return failf(p, MEMRA_ERR_FORMAT, t->info_offset,
                     "row length %" PRId64 " is not a multiple of the %s block size %" PRIu32, t->ne[0], ti->name,
                     ti->block_elems);
    uint64_t blocks = (uint64_t)t->ne[0] / ti->block_elems, row, rows = 1, total;
    if (__builtin_mul_overflow(blocks, (uint64_t)ti->block_bytes, &row) || row > SIZE_MAX)
        return failf(p, MEMRA_ERR_FORMAT, t->info_offset, "row of %" PRId64 " elements overflows", t->ne[0]);
    size_t rb = t->ne[0] ? memra_type_row_bytes(t->type, t->ne[0]) : 0;
    if (rb != row)
        return failf(p, MEMRA_ERR_FORMAT, t->info_offset, "row size of type %s is inconsistent (%zu vs %" PRIu64 ")",
                     ti->name, rb, row);
    for (int d = 1; d < MEMRA_GGUF_MAX_DIMS; d++) rows *= (uint64_t)t->ne[d]; /* <= elems: no overflow */
    if (__builtin_mul_overflow(row, rows, &total))
        return failf(p, MEMRA_ERR_FORMAT, t->info_offset, "size in bytes overflows 64 bits");
    t->nbytes = total;
    return MEMRA_OK;
}

static int cmp_by_offset(const void *a, const void *b, void *arg) {
    const memra_gguf_tensor *ts = arg;
    const memra_gguf_tensor *x = &ts[*(const int64_t *)a], *y = &ts[*(const int64_t *)b];
    if (x->offset != y->offset) return x->offset < y->offset ? -1 : 1;
    if (x->nbytes != y->nbytes) return x->nbytes < y->nbytes ? -1 : 1;
    return 0;
}

/* Reads the whole tensor directory and the padding after it (structure only). */
static memra_status parse_tensor_infos(parser *p, memra_gguf *g, uint64_t n) {
    memra_status s;
    if (n) {
        g->tensors = calloc((size_t)n, sizeof *g->tensors); /* n <= size/32: bounded by the file */
        if (!g->tensors)
            return memra_errorf(p->err, MEMRA_ERR_NOMEM, "%s: out of memory for %" PRIu64 " tensors", p->src, n);
    }
    for (uint64_t i = 0; i < n; i++) {
        if ((s = parse_tensor_info(p, &g->tensors[i], i))) return s;
        g->n_tensors = (int64_t)i + 1;
    }
    snprintf(p->ctx, sizeof p->ctx, "padding before the data section");
    uint64_t pad = (g->alignment - p->pos % g->alignment) % g->alignment;
    if (pad > p->size - p->pos) {
        if (n)
            return failf(p, MEMRA_ERR_FORMAT, p->pos,
                         "truncated: padding to the %" PRIu64 "-byte alignment needs %" PRIu64 " bytes, %zu left",
                         g->alignment, pad, p->size - p->pos);
        pad = p->size - p->pos; /* no tensors: a file may end without padding */
    }
    g->data_offset = p->pos + pad;
    return MEMRA_OK;
}

/* Semantic checks of the directory: sizes, data ranges (when the data
 * section's start is known), duplicate names, overlaps. */
static memra_status check_tensors(parser *p, memra_gguf *g, int have_data, int partial, memra_status *first) {
    memra_status s = MEMRA_OK;
    memra_error scratch, *real = p->err;
    p->err = partial ? &scratch : real;
    uint64_t data_size = have_data ? p->size - g->data_offset : 0;
    if (table_alloc(g->n_tensors, &g->t_slots, &g->t_cap)) {
        s = memra_errorf(real, MEMRA_ERR_NOMEM, "%s: out of memory", p->src);
        goto out;
    }
    for (int64_t i = 0; i < g->n_tensors; i++) {
        memra_gguf_tensor *t = &g->tensors[i];
        if ((s = size_tensor(p, t))) {
            t->nbytes = 0;
            if ((s = note(s, partial, first, real, &scratch))) goto out;
            continue;
        }
        if (!have_data) continue;
        if (t->offset % g->alignment != 0)
            s = failf(p, MEMRA_ERR_FORMAT, t->info_offset,
                      "data offset %" PRIu64 " is not a multiple of the alignment %" PRIu64, t->offset, g->alignment);
        else if (t->offset > data_size || t->nbytes > data_size - t->offset)
            s = failf(p, MEMRA_ERR_FORMAT, t->info_offset,
                      "data [%" PRIu64 ", +%" PRIu64 ") relative to the data section at %" PRIu64
                      " runs past the end of the file (%zu bytes)",
                      t->offset, t->nbytes, g->data_offset, p->size);
        if (s) {
            if ((s = note(s, partial, first, real, &scratch))) goto out;
            continue;
        }
        t->data = p->base + g->data_offset + t->offset;
    }
    for (int64_t i = 0; i < g->n_tensors; i++) {
        memra_gguf_tensor *t = &g->tensors[i];
        int64_t j = table_insert(g->t_slots, g->t_cap, t->name, i, tensor_name, g);
        if (j >= 0) {
            char name[80];
            printable(name, sizeof name, t->name.ptr, t->name.len);
            snprintf(p->ctx, sizeof p->ctx, "tensor '%s' (entry at offset %" PRIu64 ")", name, t->info_offset);
            s = failf(p, MEMRA_ERR_FORMAT, t->info_offset, "duplicate tensor name (first entry at offset %" PRIu64 ")",
                      g->tensors[j].info_offset);
            if ((s = note(s, partial, first, real, &scratch))) goto out;
        }
    }
    /* Overlap: sort the tensors that have data by offset; each must end at or
     * before the next one's start. Zero-byte tensors overlap nothing. */
    if (g->n_tensors > 1) {
        int64_t *idx = malloc((size_t)g->n_tensors * sizeof *idx), m = 0;
        if (!idx) {
            s = memra_errorf(real, MEMRA_ERR_NOMEM, "%s: out of memory", p->src);
            goto out;
        }
        for (int64_t i = 0; i < g->n_tensors; i++)
            if (g->tensors[i].data && g->tensors[i].nbytes) idx[m++] = i;
        qsort_r(idx, (size_t)m, sizeof *idx, cmp_by_offset, g->tensors);
        for (int64_t k = 1; k < m && s == MEMRA_OK; k++) {
            const memra_gguf_tensor *a = &g->tensors[idx[k - 1]], *b = &g->tensors[idx[k]];
            if (a->offset + a->nbytes > b->offset) { /* both inside the file: no overflow */
                char an[80], bn[80];
                printable(an, sizeof an, a->name.ptr, a->name.len);
                printable(bn, sizeof bn, b->name.ptr, b->name.len);
                snprintf(p->ctx, sizeof p->ctx, "tensor '%s' (entry at offset %" PRIu64 ")", bn, b->info_offset);
                s = failf(p, MEMRA_ERR_FORMAT, g->data_offset + b->offset,
                          "data [%" PRIu64 ", +%" PRIu64 ") overlaps tensor '%s' [%" PRIu64 ", +%" PRIu64 ")",
                          b->offset, b->nbytes, an, a->offset, a->nbytes);
                s = note(s, partial, first, real, &scratch);
            }
        }
        free(idx);
    }
out:
    p->err = real;
    return s;
}

/* Structural problems (truncation, impossible counts, bad type bytes) stop the
 * walk: nothing after them can be located. In partial mode what was parsed
 * before is kept and indexed, and the stop is the error reported. */
static memra_status parse_all(memra_gguf *g, const char *src, int partial, memra_error *err) {
    memra_error stop_msg = {{0}};
    parser p = {.base = g->base, .size = g->size, .pos = 0, .src = src, .err = &stop_msg};
    uint64_t n_tensors = 0, n_kv = 0;
    memra_status first = MEMRA_OK, stop, s;
    g->alignment = MEMRA_GGUF_DEFAULT_ALIGNMENT;
    stop = parse_header(&p, g, &n_tensors, &n_kv);
    if (!stop) stop = parse_kvs(&p, g, n_kv);
    if (stop && !partial) goto stopped;
    p.err = err;
    if ((s = check_kvs(&p, g, partial, &first))) return s;
    if (!stop) {
        p.err = &stop_msg;
        stop = parse_tensor_infos(&p, g, n_tensors);
        if (stop && !partial) goto stopped;
        p.err = err;
    }
    if ((s = check_tensors(&p, g, !stop, partial, &first))) return s;
    if (!stop) return first;
stopped:
    if (err) *err = stop_msg;
    return stop;
}

/* ---- open / free ---- */

static memra_status open_buffer(const void *data, size_t size, const char *src, int partial, memra_gguf **out,
                                memra_error *err) {
    *out = NULL;
    memra_gguf *g = calloc(1, sizeof *g);
    if (!g) return memra_errorf(err, MEMRA_ERR_NOMEM, "%s: out of memory", src);
    g->base = data;
    g->size = size;
    memra_status s = parse_all(g, src, partial, err);
    if (s && !partial) {
        memra_gguf_free(g);
        return s;
    }
    *out = g;
    return s;
}

memra_status memra_gguf_open_buffer(const void *data, size_t size, memra_gguf **out, memra_error *err) {
    if (!out || (!data && size)) return memra_errorf(err, MEMRA_ERR_INVALID, "memra_gguf_open_buffer: bad arguments");
    return open_buffer(data ? data : "", size, "<buffer>", 0, out, err);
}

memra_status memra_gguf_open_buffer_partial(const void *data, size_t size, memra_gguf **out, memra_error *err) {
    if (!out || (!data && size))
        return memra_errorf(err, MEMRA_ERR_INVALID, "memra_gguf_open_buffer_partial: bad arguments");
    return open_buffer(data ? data : "", size, "<buffer>", 1, out, err);
}

static memra_status open_path(const char *path, int partial, memra_gguf **out, memra_error *err) {
    if (!out || !path) return memra_errorf(err, MEMRA_ERR_INVALID, "memra_gguf_open: bad arguments");
    *out = NULL;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return memra_errorf(err, errno == ENOENT ? MEMRA_ERR_NOT_FOUND : MEMRA_ERR_IO, "%s: cannot open: %s", path,
                            strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        return memra_errorf(err, MEMRA_ERR_IO, "%s: cannot stat: %s", path, strerror(e));
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return memra_errorf(err, MEMRA_ERR_IO, "%s: not a regular file", path);
    }
    if (st.st_size < 4) {
        close(fd);
        return memra_errorf(err, MEMRA_ERR_FORMAT, "%s: not a GGUF file (%lld bytes long)", path,
                            (long long)st.st_size);
    }
    size_t size = (size_t)st.st_size;
    void *map = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
    int e = errno;
    close(fd); /* the mapping keeps the file alive */
    if (map == MAP_FAILED) return memra_errorf(err, MEMRA_ERR_IO, "%s: mmap of %zu bytes failed: %s", path, size, strerror(e));
    memra_status s = open_buffer(map, size, path, partial, out, err);
    if (*out)
        (*out)->mapped = 1;
    else
        munmap(map, size);
    return s;
}

memra_status memra_gguf_open(const char *path, memra_gguf **out, memra_error *err) {
    return open_path(path, 0, out, err);
}

memra_status memra_gguf_open_partial(const char *path, memra_gguf **out, memra_error *err) {
    return open_path(path, 1, out, err);
}

void memra_gguf_free(memra_gguf *g) {
    if (!g) return;
    if (g->mapped) munmap((void *)g->base, g->size);
    free(g->kv);
    free(g->tensors);
    free(g->kv_slots);
    free(g->t_slots);
    free(g);
}

/* ---- accessors ---- */

uint32_t memra_gguf_version(const memra_gguf *g) { return g->version; }
uint64_t memra_gguf_alignment(const memra_gguf *g) { return g->alignment; }
uint64_t memra_gguf_data_offset(const memra_gguf *g) { return g->data_offset; }
uint64_t memra_gguf_file_size(const memra_gguf *g) { return g->size; }
int64_t memra_gguf_n_kv(const memra_gguf *g) { return g->n_kv; }
int64_t memra_gguf_n_tensors(const memra_gguf *g) { return g->n_tensors; }

const memra_gguf_kv *memra_gguf_kv_at(const memra_gguf *g, int64_t i) {
    return i >= 0 && i < g->n_kv ? &g->kv[i] : NULL;
}

const memra_gguf_tensor *memra_gguf_tensor_at(const memra_gguf *g, int64_t i) {
    return i >= 0 && i < g->n_tensors ? &g->tensors[i] : NULL;
}

const memra_gguf_kv *memra_gguf_find_kv(const memra_gguf *g, const char *key) {
    int64_t i = table_find(g->kv_slots, g->kv_cap, key, kv_name, g);
    return i >= 0 ? &g->kv[i] : NULL;
}

const memra_gguf_tensor *memra_gguf_find_tensor(const memra_gguf *g, const char *name) {
    int64_t i = table_find(g->t_slots, g->t_cap, name, tensor_name, g);
    return i >= 0 ? &g->tensors[i] : NULL;
}

int memra_gguf_str_eq(memra_gguf_str s, const char *c) { return str_same(s, c, strlen(c)); }

/* ---- typed getters ---- */

static int is_unsigned(memra_gguf_type t) {
    return t == MEMRA_GGUF_TYPE_UINT8 || t == MEMRA_GGUF_TYPE_UINT16 || t == MEMRA_GGUF_TYPE_UINT32 ||
           t == MEMRA_GGUF_TYPE_UINT64;
}
static int is_signed(memra_gguf_type t) {
    return t == MEMRA_GGUF_TYPE_INT8 || t == MEMRA_GGUF_TYPE_INT16 || t == MEMRA_GGUF_TYPE_INT32 ||
           t == MEMRA_GGUF_TYPE_INT64;
}
static int is_float(memra_gguf_type t) { return t == MEMRA_GGUF_TYPE_FLOAT32 || t == MEMRA_GGUF_TYPE_FLOAT64; }

static memra_status lookup(const memra_gguf *g, const char *key, const memra_gguf_kv **kv, memra_error *err) {
    *kv = memra_gguf_find_kv(g, key);
    if (!*kv) return memra_errorf(err, MEMRA_ERR_NOT_FOUND, "metadata key '%s' is missing", key);
    return MEMRA_OK;
}

static memra_status wrong_type(const memra_gguf_kv *kv, const char *key, const char *want, memra_error *err) {
    return memra_errorf(err, MEMRA_ERR_FORMAT, "metadata key '%s' (at offset %" PRIu64 ") is %s, expected %s", key,
                        kv->offset, memra_gguf_type_name(kv->type), want);
}

memra_status memra_gguf_get_u64(const memra_gguf *g, const char *key, uint64_t *out, memra_error *err) {
    const memra_gguf_kv *kv;
    memra_status s = lookup(g, key, &kv, err);
    if (s) return s;
    if (is_unsigned(kv->type)) {
        *out = kv->v.u64;
        return MEMRA_OK;
    }
    if (is_signed(kv->type)) {
        if (kv->v.i64 < 0)
            return memra_errorf(err, MEMRA_ERR_FORMAT, "metadata key '%s' is negative (%" PRId64 "), expected >= 0",
                                key, kv->v.i64);
        *out = (uint64_t)kv->v.i64;
        return MEMRA_OK;
    }
    return wrong_type(kv, key, "an unsigned integer", err);
}

memra_status memra_gguf_get_i64(const memra_gguf *g, const char *key, int64_t *out, memra_error *err) {
    const memra_gguf_kv *kv;
    memra_status s = lookup(g, key, &kv, err);
    if (s) return s;
    if (is_signed(kv->type)) {
        *out = kv->v.i64;
        return MEMRA_OK;
    }
    if (is_unsigned(kv->type)) {
        if (kv->v.u64 > (uint64_t)INT64_MAX)
            return memra_errorf(err, MEMRA_ERR_FORMAT, "metadata key '%s' is %" PRIu64 ", too large for int64", key,
                                kv->v.u64);
        *out = (int64_t)kv->v.u64;
        return MEMRA_OK;
    }
    return wrong_type(kv, key, "an integer", err);
}

memra_status memra_gguf_get_f64(const memra_gguf *g, const char *key, double *out, memra_error *err) {
    const memra_gguf_kv *kv;
    memra_status s = lookup(g, key, &kv, err);
    if (s) return s;
    if (is_float(kv->type)) {
        *out = kv->v.f64;
        return MEMRA_OK;
    }
    /* integers convert exactly up to 2^53 */
    const uint64_t exact = 1ull << 53;
    if (is_unsigned(kv->type) && kv->v.u64 <= exact) {
        *out = (double)kv->v.u64;
        return MEMRA_OK;
    }
    if (is_signed(kv->type) && kv->v.i64 <= (int64_t)exact && kv->v.i64 >= -(int64_t)exact) {
        *out = (double)kv->v.i64;
        return MEMRA_OK;
    }
    return wrong_type(kv, key, "a number exactly representable as f64", err);
}

memra_status memra_gguf_get_bool(const memra_gguf *g, const char *key, int *out, memra_error *err) {
    const memra_gguf_kv *kv;
    memra_status s = lookup(g, key, &kv, err);
    if (s) return s;
    if (kv->type != MEMRA_GGUF_TYPE_BOOL) return wrong_type(kv, key, "bool", err);
    *out = kv->v.u64 != 0;
    return MEMRA_OK;
}

memra_status memra_gguf_get_str(const memra_gguf *g, const char *key, memra_gguf_str *out, memra_error *err) {
    const memra_gguf_kv *kv;
    memra_status s = lookup(g, key, &kv, err);
    if (s) return s;
    if (kv->type != MEMRA_GGUF_TYPE_STRING) return wrong_type(kv, key, "str", err);
    *out = kv->v.str;
    return MEMRA_OK;
}

/* ---- arrays ---- */

/* Decodes element i of a scalar array into a scratch kv (reusing decode_scalar). */
static memra_status arr_elem(const memra_gguf_kv *kv, uint64_t i, memra_gguf_kv *tmp) {
    if (!kv || kv->type != MEMRA_GGUF_TYPE_ARRAY || i >= kv->v.arr.n) return MEMRA_ERR_INVALID;
    size_t sz = memra_gguf_scalar_size(kv->v.arr.type);
    if (!sz) return MEMRA_ERR_FORMAT; /* string arrays: use memra_gguf_arr_strings */
    tmp->type = kv->v.arr.type;
    decode_scalar(kv->v.arr.type, kv->v.arr.data + i * sz, tmp); /* i < n and n * sz was checked at parse */
    return MEMRA_OK;
}

memra_status memra_gguf_arr_u64(const memra_gguf_kv *kv, uint64_t i, uint64_t *out) {
    memra_gguf_kv t;
    memra_status s = arr_elem(kv, i, &t);
    if (s) return s;
    if (is_unsigned(t.type) || t.type == MEMRA_GGUF_TYPE_BOOL) {
        *out = t.v.u64;
        return MEMRA_OK;
    }
    if (is_signed(t.type) && t.v.i64 >= 0) {
        *out = (uint64_t)t.v.i64;
        return MEMRA_OK;
    }
    return MEMRA_ERR_FORMAT;
}

memra_status memra_gguf_arr_i64(const memra_gguf_kv *kv, uint64_t i, int64_t *out) {
    memra_gguf_kv t;
    memra_status s = arr_elem(kv, i, &t);
    if (s) return s;
    if (is_signed(t.type)) {
        *out = t.v.i64;
        return MEMRA_OK;
    }
    if ((is_unsigned(t.type) || t.type == MEMRA_GGUF_TYPE_BOOL) && t.v.u64 <= (uint64_t)INT64_MAX) {
        *out = (int64_t)t.v.u64;
        return MEMRA_OK;
    }
    return MEMRA_ERR_FORMAT;
}

memra_status memra_gguf_arr_f64(const memra_gguf_kv *kv, uint64_t i, double *out) {
    memra_gguf_kv t;
    memra_status s = arr_elem(kv, i, &t);
    if (s) return s;
    if (is_float(t.type))
        *out = t.v.f64;
    else if (is_signed(t.type))
        *out = (double)t.v.i64;
    else
        *out = (double)t.v.u64;
    return MEMRA_OK;
}

memra_status memra_gguf_arr_strings(const memra_gguf_kv *kv, memra_gguf_str **out, memra_error *err) {
    *out = NULL;
    if (!kv || kv->type != MEMRA_GGUF_TYPE_ARRAY || kv->v.arr.type != MEMRA_GGUF_TYPE_STRING) {
        return memra_errorf(err, MEMRA_ERR_FORMAT, "metadata key '%.*s' is not an array of strings",
                            kv ? (int)(kv->key.len > 200 ? 200 : kv->key.len) : 0, kv ? kv->key.ptr : "");
    }
    size_t bytes;
    if (memra_mul_size((size_t)kv->v.arr.n, sizeof **out, &bytes))
        return memra_errorf(err, MEMRA_ERR_NOMEM, "string array too large");
    memra_gguf_str *v = malloc(bytes ? bytes : 1);
    if (!v) return memra_errorf(err, MEMRA_ERR_NOMEM, "out of memory for %" PRIu64 " strings", kv->v.arr.n);
    /* The parse walked every length against the file end, so this walk stays inside. */
    const uint8_t *q = kv->v.arr.data;
    for (uint64_t i = 0; i < kv->v.arr.n; i++) {
        uint64_t len;
        memcpy(&len, q, 8);
        v[i].ptr = (const char *)q + 8;
        v[i].len = len;
        q += 8 + len;
    }
    *out = v;
    return MEMRA_OK;
}
