/* Streaming GGUF writer (see gguf_write.h).
 *
 * Metadata is serialized into a byte buffer as it is added; tensor entries
 * are kept as structs and serialized by write_header, after which only the
 * data stream remains: the writer tracks which tensor the next byte belongs
 * to and emits zero padding up to the alignment after each one. */
#include "gguf/gguf_write.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "gguf/quant.h"

typedef struct wtensor {
    char *name;
    uint32_t type;
    uint32_t n_dims;
    int64_t ne[MEMRA_GGUF_MAX_DIMS];
    uint64_t offset; /* relative to the data section */
    uint64_t nbytes;
} wtensor;

struct memra_gguf_writer {
    uint32_t version;
    uint64_t alignment;
    memra_status status; /* first error (sticky) */
    memra_error err;
    uint8_t *kv_buf; /* [kv_len] serialized metadata */
    size_t kv_len, kv_cap;
    size_t *key_at; /* [n_kv] offset of each key's length field in kv_buf, for duplicate checks */
    uint64_t n_kv;
    size_t key_cap;
    wtensor *tensors; /* [n_tensors] */
    uint64_t n_tensors;
    size_t t_cap;
    uint64_t data_end; /* end of the last tensor's data, relative to the data section */
    int header_done;
    uint64_t cur;      /* tensor the next data byte belongs to */
    uint64_t cur_done; /* bytes of it written so far */
};

static memra_status fail(memra_gguf_writer *w, memra_status s, const char *fmt, ...) MEMRA_PRINTF(3, 4);
static memra_status fail(memra_gguf_writer *w, memra_status s, const char *fmt, ...) {
    if (w->status == MEMRA_OK) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(w->err.msg, sizeof w->err.msg, fmt, ap);
        va_end(ap);
        w->status = s;
    }
    return s;
}

static int grow(void **buf, size_t *cap, size_t need, size_t elem) {
    if (need <= *cap) return 0;
    size_t c = *cap ? *cap : 64, bytes;
    while (c < need) {
        if (memra_mul_size(c, 2, &c)) return -1;
    }
    if (memra_mul_size(c, elem, &bytes)) return -1;
    void *p = realloc(*buf, bytes);
    if (!p) return -1;
    *buf = p;
    *cap = c;
    return 0;
}

static memra_status put(memra_gguf_writer *w, const void *p, size_t n) {
    size_t need;
    if (memra_add_size(w->kv_len, n, &need) || grow((void **)&w->kv_buf, &w->kv_cap, need, 1))
        return fail(w, MEMRA_ERR_NOMEM, "gguf writer: out of memory for metadata");
    if (n) memcpy(w->kv_buf + w->kv_len, p, n);
    w->kv_len += n;
    return MEMRA_OK;
}

static memra_status put_u32(memra_gguf_writer *w, uint32_t v) { return put(w, &v, 4); }
static memra_status put_u64(memra_gguf_writer *w, uint64_t v) { return put(w, &v, 8); }
static memra_status put_str(memra_gguf_writer *w, const char *s, uint64_t len) {
    memra_status st = put_u64(w, len);
    return st ? st : put(w, s, (size_t)len);
}

/* Checks the writer state and the key, then writes the key; the caller
 * writes the type and value. */
static memra_status begin_kv(memra_gguf_writer *w, const char *key) {
    if (w->status) return w->status;
    if (w->header_done) return fail(w, MEMRA_ERR_INVALID, "gguf writer: key '%s' added after write_header", key ? key : "");
    if (!key || !*key) return fail(w, MEMRA_ERR_INVALID, "gguf writer: empty key");
    size_t len = strlen(key);
    for (uint64_t i = 0; i < w->n_kv; i++) {
        uint64_t l;
        memcpy(&l, w->kv_buf + w->key_at[i], 8);
        if (l == len && !memcmp(w->kv_buf + w->key_at[i] + 8, key, len))
            return fail(w, MEMRA_ERR_INVALID, "gguf writer: duplicate key '%s'", key);
    }
    if (grow((void **)&w->key_at, &w->key_cap, (size_t)w->n_kv + 1, sizeof *w->key_at))
        return fail(w, MEMRA_ERR_NOMEM, "gguf writer: out of memory");
    w->key_at[w->n_kv++] = w->kv_len;
    return put_str(w, key, len);
}

static memra_status add_scalar(memra_gguf_writer *w, const char *key, memra_gguf_type type, const void *value,
                               int internal) {
    if (!internal && key && !strcmp(key, "general.alignment"))
        return fail(w, MEMRA_ERR_INVALID, "gguf writer: general.alignment is set by memra_gguf_writer_begin");
    size_t sz = memra_gguf_scalar_size(type);
    if (!sz) return fail(w, MEMRA_ERR_INVALID, "gguf writer: key '%s': type %d is not a scalar", key ? key : "", (int)type);
    if (type == MEMRA_GGUF_TYPE_BOOL && *(const uint8_t *)value > 1)
        return fail(w, MEMRA_ERR_INVALID, "gguf writer: key '%s': bool must be 0 or 1", key);
    memra_status s = begin_kv(w, key);
    if (!s) s = put_u32(w, (uint32_t)type);
    if (!s) s = put(w, value, sz);
    return s;
}

memra_status memra_gguf_writer_begin(uint32_t version, uint32_t alignment, memra_gguf_writer **out, memra_error *err) {
    *out = NULL;
    if (version != 2 && version != 3)
        return memra_errorf(err, MEMRA_ERR_INVALID, "gguf writer: version %" PRIu32 " (only 2 and 3)", version);
    if (alignment & (alignment - 1))
        return memra_errorf(err, MEMRA_ERR_INVALID, "gguf writer: alignment %" PRIu32 " is not a power of two", alignment);
    memra_gguf_writer *w = calloc(1, sizeof *w);
    if (!w) return memra_errorf(err, MEMRA_ERR_NOMEM, "gguf writer: out of memory");
    w->version = version;
    w->alignment = alignment ? alignment : MEMRA_GGUF_DEFAULT_ALIGNMENT;
    if (w->alignment != MEMRA_GGUF_DEFAULT_ALIGNMENT) add_scalar(w, "general.alignment", MEMRA_GGUF_TYPE_UINT32, &alignment, 1);
    if (w->status) {
        memra_status s = memra_gguf_writer_status(w, err);
        memra_gguf_writer_free(w);
        return s;
    }
    *out = w;
    return MEMRA_OK;
}

void memra_gguf_writer_free(memra_gguf_writer *w) {
    if (!w) return;
    for (uint64_t i = 0; i < w->n_tensors; i++) free(w->tensors[i].name);
    free(w->tensors);
    free(w->kv_buf);
    free(w->key_at);
    free(w);
}

memra_status memra_gguf_writer_status(const memra_gguf_writer *w, memra_error *err) {
    if (w->status && err) *err = w->err;
    return w->status;
}

memra_status memra_gguf_writer_add_scalar(memra_gguf_writer *w, const char *key, memra_gguf_type type,
                                          const void *value) {
    return add_scalar(w, key, type, value, 0);
}

memra_status memra_gguf_writer_add_u8(memra_gguf_writer *w, const char *key, uint8_t v) {
    return add_scalar(w, key, MEMRA_GGUF_TYPE_UINT8, &v, 0);
}
memra_status memra_gguf_writer_add_i8(memra_gguf_writer *w, const char *key, int8_t v) {
    return add_scalar(w, key, MEMRA_GGUF_TYPE_INT8, &v, 0);
}
memra_status memra_gguf_writer_add_u16(memra_gguf_writer *w, const char *key, uint16_t v) {
    return add_scalar(w, key, MEMRA_GGUF_TYPE_UINT16, &v, 0);
}
memra_status memra_gguf_writer_add_i16(memra_gguf_writer *w, const char *key, int16_t v) {
    return add_scalar(w, key, MEMRA_GGUF_TYPE_INT16, &v, 0);
}
memra_status memra_gguf_writer_add_u32(memra_gguf_writer *w, const char *key, uint32_t v) {
    return add_scalar(w, key, MEMRA_GGUF_TYPE_UINT32, &v, 0);
}
memra_status memra_gguf_writer_add_i32(memra_gguf_writer *w, const char *key, int32_t v) {
    return add_scalar(w, key, MEMRA_GGUF_TYPE_INT32, &v, 0);
}
memra_status memra_gguf_writer_add_f32(memra_gguf_writer *w, const char *key, float v) {
    return add_scalar(w, key, MEMRA_GGUF_TYPE_FLOAT32, &v, 0);
}
memra_status memra_gguf_writer_add_bool(memra_gguf_writer *w, const char *key, int v) {
    uint8_t b = v != 0;
    return add_scalar(w, key, MEMRA_GGUF_TYPE_BOOL, &b, 0);
}
memra_status memra_gguf_writer_add_u64(memra_gguf_writer *w, const char *key, uint64_t v) {
    return add_scalar(w, key, MEMRA_GGUF_TYPE_UINT64, &v, 0);
}
memra_status memra_gguf_writer_add_i64(memra_gguf_writer *w, const char *key, int64_t v) {
    return add_scalar(w, key, MEMRA_GGUF_TYPE_INT64, &v, 0);
}
memra_status memra_gguf_writer_add_f64(memra_gguf_writer *w, const char *key, double v) {
    return add_scalar(w, key, MEMRA_GGUF_TYPE_FLOAT64, &v, 0);
}

memra_status memra_gguf_writer_add_strn(memra_gguf_writer *w, const char *key, const char *s, uint64_t len) {
    if (!s && len) return fail(w, MEMRA_ERR_INVALID, "gguf writer: key '%s': NULL string", key ? key : "");
    memra_status st = begin_kv(w, key);
    if (!st) st = put_u32(w, MEMRA_GGUF_TYPE_STRING);
    if (!st) st = put_str(w, s, len);
    return st;
}

memra_status memra_gguf_writer_add_str(memra_gguf_writer *w, const char *key, const char *s) {
    return memra_gguf_writer_add_strn(w, key, s, s ? strlen(s) : 0);
}

memra_status memra_gguf_writer_add_array(memra_gguf_writer *w, const char *key, memra_gguf_type elem,
                                         const void *data, uint64_t n) {
    size_t sz = memra_gguf_scalar_size(elem), bytes;
    if (!sz)
        return fail(w, MEMRA_ERR_INVALID, "gguf writer: key '%s': array element type %d is not a scalar",
                    key ? key : "", (int)elem);
    if (n > SIZE_MAX || memra_mul_size((size_t)n, sz, &bytes) || (!data && n))
        return fail(w, MEMRA_ERR_INVALID, "gguf writer: key '%s': bad array of %" PRIu64 " elements", key ? key : "", n);
    if (elem == MEMRA_GGUF_TYPE_BOOL)
        for (uint64_t i = 0; i < n; i++)
            if (((const uint8_t *)data)[i] > 1)
                return fail(w, MEMRA_ERR_INVALID, "gguf writer: key '%s': bool element %" PRIu64 " is not 0 or 1", key, i);
    memra_status s = begin_kv(w, key);
    if (!s) s = put_u32(w, MEMRA_GGUF_TYPE_ARRAY);
    if (!s) s = put_u32(w, (uint32_t)elem);
    if (!s) s = put_u64(w, n);
    if (!s) s = put(w, data, bytes);
    return s;
}

memra_status memra_gguf_writer_add_str_array(memra_gguf_writer *w, const char *key, const char *const *strs,
                                             const uint64_t *lens, uint64_t n) {
    if (!strs && n) return fail(w, MEMRA_ERR_INVALID, "gguf writer: key '%s': NULL string array", key ? key : "");
    memra_status s = begin_kv(w, key);
    if (!s) s = put_u32(w, MEMRA_GGUF_TYPE_ARRAY);
    if (!s) s = put_u32(w, MEMRA_GGUF_TYPE_STRING);
    if (!s) s = put_u64(w, n);
    for (uint64_t i = 0; i < n && !s; i++) {
        uint64_t len = lens ? lens[i] : (strs[i] ? strlen(strs[i]) : 0);
        if (!strs[i] && len) return fail(w, MEMRA_ERR_INVALID, "gguf writer: key '%s': string %" PRIu64 " is NULL", key, i);
        s = put_str(w, strs[i], len);
    }
    return s;
}

memra_status memra_gguf_writer_add_tensor(memra_gguf_writer *w, const char *name, uint32_t type, uint32_t n_dims,
                                          const int64_t *ne) {
    if (w->status) return w->status;
    if (w->header_done) return fail(w, MEMRA_ERR_INVALID, "gguf writer: tensor '%s' added after write_header", name ? name : "");
    if (!name || !*name) return fail(w, MEMRA_ERR_INVALID, "gguf writer: empty tensor name");
    if (n_dims < 1 || n_dims > MEMRA_GGUF_MAX_DIMS || !ne)
        return fail(w, MEMRA_ERR_INVALID, "gguf writer: tensor '%s': n_dims %" PRIu32 " (must be 1..%d)", name, n_dims,
                    MEMRA_GGUF_MAX_DIMS);
    const memra_type_info *ti = memra_type_get(type);
    if (!ti) return fail(w, MEMRA_ERR_INVALID, "gguf writer: tensor '%s': unknown type id %" PRIu32, name, type);
    for (uint64_t i = 0; i < w->n_tensors; i++)
        if (!strcmp(w->tensors[i].name, name))
            return fail(w, MEMRA_ERR_INVALID, "gguf writer: duplicate tensor name '%s'", name);
    wtensor t = {.type = type, .n_dims = n_dims, .ne = {1, 1, 1, 1}};
    uint64_t rows = 1;
    for (uint32_t d = 0; d < n_dims; d++) {
        if (ne[d] < 0) return fail(w, MEMRA_ERR_INVALID, "gguf writer: tensor '%s': negative dimension", name);
        t.ne[d] = ne[d];
        if (d > 0 && __builtin_mul_overflow(rows, (uint64_t)ne[d], &rows))
            return fail(w, MEMRA_ERR_INVALID, "gguf writer: tensor '%s': shape overflows", name);
    }
    size_t row = memra_type_row_bytes(type, ne[0]);
    if (ne[0] > 0 && row == 0)
        return fail(w, MEMRA_ERR_INVALID, "gguf writer: tensor '%s': row of %" PRId64 " is not a multiple of the %s block (%" PRIu32 ")",
                    name, ne[0], ti->name, ti->block_elems);
    uint64_t pad = (w->alignment - w->data_end % w->alignment) % w->alignment;
    if (__builtin_mul_overflow((uint64_t)row, rows, &t.nbytes) ||
        __builtin_add_overflow(w->data_end, pad, &t.offset) ||
        __builtin_add_overflow(t.offset, t.nbytes, &w->data_end))
        return fail(w, MEMRA_ERR_INVALID, "gguf writer: tensor '%s': size overflows", name);
    if (grow((void **)&w->tensors, &w->t_cap, (size_t)w->n_tensors + 1, sizeof *w->tensors) ||
        !(t.name = strdup(name)))
        return fail(w, MEMRA_ERR_NOMEM, "gguf writer: out of memory");
    w->tensors[w->n_tensors++] = t;
    return MEMRA_OK;
}

uint64_t memra_gguf_writer_tensor_nbytes(const memra_gguf_writer *w, int64_t i) {
    return i >= 0 && (uint64_t)i < w->n_tensors ? w->tensors[i].nbytes : 0;
}

static uint64_t header_bytes(const memra_gguf_writer *w) {
    uint64_t n = 4 + 4 + 8 + 8 + w->kv_len;
    for (uint64_t i = 0; i < w->n_tensors; i++) n += 8 + strlen(w->tensors[i].name) + 4 + 8ull * w->tensors[i].n_dims + 4 + 8;
    return n;
}

static uint64_t align_up(uint64_t x, uint64_t a) { return (x + a - 1) / a * a; }

uint64_t memra_gguf_writer_file_size(const memra_gguf_writer *w) {
    return align_up(header_bytes(w), w->alignment) + align_up(w->data_end, w->alignment);
}

static memra_status out(memra_gguf_writer *w, FILE *f, const void *p, size_t n) {
    if (n && fwrite(p, 1, n, f) != n) return fail(w, MEMRA_ERR_IO, "gguf writer: write failed");
    return MEMRA_OK;
}

static memra_status out_zeros(memra_gguf_writer *w, FILE *f, uint64_t n) {
    static const uint8_t zeros[256];
    memra_status s = MEMRA_OK;
    while (n && !s) {
        size_t k = n > sizeof zeros ? sizeof zeros : (size_t)n;
        s = out(w, f, zeros, k);
        n -= k;
    }
    return s;
}

memra_status memra_gguf_writer_write_header(memra_gguf_writer *w, FILE *f, memra_error *err) {
    if (!w->status && w->header_done) fail(w, MEMRA_ERR_INVALID, "gguf writer: write_header called twice");
    if (w->status) return memra_gguf_writer_status(w, err);
    w->header_done = 1;
    uint32_t v = w->version;
    memra_status s = out(w, f, "GGUF", 4);
    if (!s) s = out(w, f, &v, 4);
    if (!s) s = out(w, f, &w->n_tensors, 8);
    if (!s) s = out(w, f, &w->n_kv, 8);
    if (!s) s = out(w, f, w->kv_buf, w->kv_len);
    for (uint64_t i = 0; i < w->n_tensors && !s; i++) {
        const wtensor *t = &w->tensors[i];
        uint64_t len = strlen(t->name);
        s = out(w, f, &len, 8);
        if (!s) s = out(w, f, t->name, (size_t)len);
        if (!s) s = out(w, f, &t->n_dims, 4);
        for (uint32_t d = 0; d < t->n_dims && !s; d++) s = out(w, f, &t->ne[d], 8);
        if (!s) s = out(w, f, &t->type, 4);
        if (!s) s = out(w, f, &t->offset, 8);
    }
    uint64_t h = header_bytes(w);
    if (!s) s = out_zeros(w, f, align_up(h, w->alignment) - h);
    /* tensors of zero bytes need no data: skip to the first one that does */
    while (w->cur < w->n_tensors && w->tensors[w->cur].nbytes == 0) w->cur++;
    return memra_gguf_writer_status(w, err);
}

memra_status memra_gguf_writer_write_data(memra_gguf_writer *w, FILE *f, const void *data, size_t n,
                                          memra_error *err) {
    if (!w->status && !w->header_done) fail(w, MEMRA_ERR_INVALID, "gguf writer: write_data before write_header");
    const uint8_t *p = data;
    while (n && !w->status) {
        if (w->cur >= w->n_tensors) {
            fail(w, MEMRA_ERR_INVALID, "gguf writer: %zu bytes of data beyond the last tensor", n);
            break;
        }
        wtensor *t = &w->tensors[w->cur];
        uint64_t left = t->nbytes - w->cur_done;
        size_t k = n < left ? n : (size_t)left;
        if (out(w, f, p, k)) break;
        p += k;
        n -= k;
        w->cur_done += k;
        if (w->cur_done == t->nbytes) {
            /* pad to where the next tensor starts (or to the alignment after the last) */
            uint64_t end = t->offset + t->nbytes;
            uint64_t next = w->cur + 1 < w->n_tensors ? w->tensors[w->cur + 1].offset : align_up(end, w->alignment);
            if (out_zeros(w, f, next - end)) break;
            w->cur++;
            w->cur_done = 0;
            while (w->cur < w->n_tensors && w->tensors[w->cur].nbytes == 0) w->cur++;
        }
    }
    return memra_gguf_writer_status(w, err);
}

memra_status memra_gguf_writer_finish(memra_gguf_writer *w, FILE *f, memra_error *err) {
    if (!w->status && !w->header_done) fail(w, MEMRA_ERR_INVALID, "gguf writer: finish before write_header");
    if (!w->status && w->cur < w->n_tensors)
        fail(w, MEMRA_ERR_INVALID, "gguf writer: data of tensor '%s' is incomplete (%" PRIu64 " of %" PRIu64 " bytes)",
             w->tensors[w->cur].name, w->cur_done, w->tensors[w->cur].nbytes);
    if (!w->status && fflush(f) != 0) fail(w, MEMRA_ERR_IO, "gguf writer: flush failed");
    return memra_gguf_writer_status(w, err);
}
