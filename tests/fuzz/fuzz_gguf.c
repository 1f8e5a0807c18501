/* libFuzzer target for the GGUF reader.
 *
 * Each input is parsed twice, strictly and leniently (the path `memra
 * inspect` takes), and everything the handle exposes is walked: every kv and
 * array element, every string, every tensor's first and last data byte, and
 * the name lookups. Invariants the reader promises (data inside the buffer,
 * aligned offsets, lookups finding what was parsed) trap when broken, so the
 * fuzzer reports them as crashes, as it does ASan/UBSan findings. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gguf/gguf.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static volatile uint64_t sink;

#define INVARIANT(c)                       \
    do {                                   \
        if (!(c)) __builtin_trap();        \
    } while (0)

static int in_buf(const void *p, uint64_t n, const uint8_t *data, size_t size) {
    const uint8_t *q = p;
    return q >= data && q <= data + size && n <= (uint64_t)(data + size - q);
}

/* A NUL-terminated copy of a file string, or NULL if it holds a NUL. */
static char *cstr(memra_gguf_str s) {
    if (memchr(s.ptr, 0, (size_t)s.len)) return NULL;
    char *c = malloc((size_t)s.len + 1);
    if (!c) return NULL;
    memcpy(c, s.ptr, (size_t)s.len);
    c[s.len] = 0;
    return c;
}

static void walk(const memra_gguf *g, const uint8_t *data, size_t size) {
    memra_error err;
    uint64_t acc = memra_gguf_version(g) + memra_gguf_alignment(g) + memra_gguf_data_offset(g);
    INVARIANT(memra_gguf_file_size(g) == size);
    uint64_t align = memra_gguf_alignment(g);
    INVARIANT(align && !(align & (align - 1)));
    for (int64_t i = 0; i < memra_gguf_n_kv(g); i++) {
        const memra_gguf_kv *kv = memra_gguf_kv_at(g, i);
        INVARIANT(kv && in_buf(kv->key.ptr, kv->key.len, data, size));
        for (uint64_t k = 0; k < kv->key.len; k++) acc += (uint8_t)kv->key.ptr[k];
        char *key = cstr(kv->key);
        if (key) {
            const memra_gguf_kv *f = memra_gguf_find_kv(g, key);
            INVARIANT(f != NULL && memra_gguf_str_eq(f->key, key));
            uint64_t u;
            int64_t s;
            double d;
            int b;
            memra_gguf_str str;
            if (!memra_gguf_get_u64(g, key, &u, &err)) acc += u;
            if (!memra_gguf_get_i64(g, key, &s, &err)) acc += (uint64_t)s;
            if (!memra_gguf_get_f64(g, key, &d, &err)) acc += (uint64_t)(d != d);
            if (!memra_gguf_get_bool(g, key, &b, &err)) acc += (uint64_t)b;
            if (!memra_gguf_get_str(g, key, &str, &err)) {
                INVARIANT(in_buf(str.ptr, str.len, data, size));
                if (str.len) acc += (uint8_t)str.ptr[str.len - 1];
            }
            free(key);
        }
        if (kv->type != MEMRA_GGUF_TYPE_ARRAY) continue;
        INVARIANT(kv->v.arr.type != MEMRA_GGUF_TYPE_ARRAY && kv->v.arr.type < MEMRA_GGUF_TYPE_COUNT);
        if (kv->v.arr.type == MEMRA_GGUF_TYPE_STRING) {
            memra_gguf_str *strs;
            if (memra_gguf_arr_strings(kv, &strs, &err) == MEMRA_OK) {
                for (uint64_t k = 0; k < kv->v.arr.n; k++) {
                    INVARIANT(in_buf(strs[k].ptr, strs[k].len, data, size));
                    if (strs[k].len) acc += (uint8_t)strs[k].ptr[0] + (uint8_t)strs[k].ptr[strs[k].len - 1];
                }
                free(strs);
            }
            continue;
        }
        INVARIANT(in_buf(kv->v.arr.data, 0, data, size));
        for (uint64_t k = 0; k < kv->v.arr.n; k++) {
            uint64_t u;
            int64_t s;
            double d;
            if (!memra_gguf_arr_u64(kv, k, &u)) acc += u;
            if (!memra_gguf_arr_i64(kv, k, &s)) acc += (uint64_t)s;
            if (!memra_gguf_arr_f64(kv, k, &d)) acc += (uint64_t)(d != d);
        }
        uint64_t u;
        INVARIANT(memra_gguf_arr_u64(kv, kv->v.arr.n, &u) == MEMRA_ERR_INVALID);
    }
    for (int64_t i = 0; i < memra_gguf_n_tensors(g); i++) {
        const memra_gguf_tensor *t = memra_gguf_tensor_at(g, i);
        INVARIANT(t && in_buf(t->name.ptr, t->name.len, data, size));
        INVARIANT(t->n_dims >= 1 && t->n_dims <= MEMRA_GGUF_MAX_DIMS);
        for (int d = 0; d < MEMRA_GGUF_MAX_DIMS; d++) INVARIANT(t->ne[d] >= 0);
        if (t->data) {
            INVARIANT(t->offset % align == 0);
            INVARIANT(in_buf(t->data, t->nbytes, data, size));
            INVARIANT((const uint8_t *)t->data == data + memra_gguf_data_offset(g) + t->offset);
            if (t->nbytes) acc += ((const uint8_t *)t->data)[0] + ((const uint8_t *)t->data)[t->nbytes - 1];
        }
        char *name = cstr(t->name);
        if (name) {
            const memra_gguf_tensor *f = memra_gguf_find_tensor(g, name);
            INVARIANT(f != NULL && memra_gguf_str_eq(f->name, name));
            free(name);
        }
    }
    sink = acc;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    memra_gguf *g = NULL;
    memra_error err;
    if (memra_gguf_open_buffer(data, size, &g, &err) == MEMRA_OK) {
        INVARIANT(g != NULL);
        walk(g, data, size);
        /* a strictly valid file has every tensor's data */
        for (int64_t i = 0; i < memra_gguf_n_tensors(g); i++) INVARIANT(memra_gguf_tensor_at(g, i)->data != NULL);
        memra_gguf_free(g);
    } else {
        INVARIANT(g == NULL);
        INVARIANT(memchr(err.msg, 0, sizeof err.msg) != NULL && err.msg[0]);
    }
    g = NULL;
    memra_status s = memra_gguf_open_buffer_partial(data, size, &g, &err);
    if (g) {
        walk(g, data, size);
        memra_gguf_free(g);
    } else {
        INVARIANT(s != MEMRA_OK);
    }
    return 0;
}
