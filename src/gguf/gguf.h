/* Bounds-checked GGUF reader (versions 2 and 3).
 *
 * The file is mmap'd (or a caller's buffer is borrowed) and parsed once into a
 * metadata table and a tensor directory. Every count, length, offset and shape
 * is checked before use with overflow-safe arithmetic; a bad file yields a
 * memra_status and a message naming the field or tensor and the byte offset.
 * Nothing here ever reads outside the mapped bytes.
 *
 * Layout (all little-endian): magic "GGUF", u32 version, u64 n_tensors,
 * u64 n_kv, then n_kv x {string key, u32 type, value}, then n_tensors x
 * {string name, u32 n_dims, u64 ne[n_dims], u32 ggml_type, u64 offset}, then
 * padding to general.alignment (default 32), then the tensor data; each tensor
 * offset is relative to the data start and must be a multiple of the alignment.
 * Version 1 (u32 counts) is rejected as unsupported. */
#ifndef MEMRA_GGUF_H
#define MEMRA_GGUF_H

#include <stddef.h>
#include <stdint.h>

#include "base/status.h"

#define MEMRA_GGUF_MAX_DIMS 4
#define MEMRA_GGUF_DEFAULT_ALIGNMENT 32

/* Metadata value types, numbered as in the GGUF specification. */
typedef enum memra_gguf_type {
    MEMRA_GGUF_TYPE_UINT8 = 0,
    MEMRA_GGUF_TYPE_INT8 = 1,
    MEMRA_GGUF_TYPE_UINT16 = 2,
    MEMRA_GGUF_TYPE_INT16 = 3,
    MEMRA_GGUF_TYPE_UINT32 = 4,
    MEMRA_GGUF_TYPE_INT32 = 5,
    MEMRA_GGUF_TYPE_FLOAT32 = 6,
    MEMRA_GGUF_TYPE_BOOL = 7,
    MEMRA_GGUF_TYPE_STRING = 8,
    MEMRA_GGUF_TYPE_ARRAY = 9,
    MEMRA_GGUF_TYPE_UINT64 = 10,
    MEMRA_GGUF_TYPE_INT64 = 11,
    MEMRA_GGUF_TYPE_FLOAT64 = 12,
    MEMRA_GGUF_TYPE_COUNT
} memra_gguf_type;

/* A string inside the mapped file: not NUL-terminated. */
typedef struct memra_gguf_str {
    const char *ptr;
    uint64_t len;
} memra_gguf_str;

/* One metadata key/value. Scalars are decoded; arrays point into the file. */
typedef struct memra_gguf_kv {
    memra_gguf_str key;
    memra_gguf_type type;
    uint64_t offset; /* byte offset of the key in the file, for messages */
    union {
        uint64_t u64; /* all unsigned ints and bool */
        int64_t i64;  /* all signed ints */
        double f64;   /* float32 and float64 */
        memra_gguf_str str;
        struct {
            memra_gguf_type type; /* element type (never ARRAY: nested arrays are rejected) */
            uint64_t n;           /* element count */
            const uint8_t *data;  /* first element in the file; strings are length-prefixed */
        } arr;
    } v;
} memra_gguf_kv;

/* One entry of the tensor directory. */
typedef struct memra_gguf_tensor {
    memra_gguf_str name;
    uint32_t type;                   /* ggml type id (memra_type in quant.h) */
    uint32_t n_dims;                 /* 1..4 */
    int64_t ne[MEMRA_GGUF_MAX_DIMS]; /* ne[0] contiguous; unused dims are 1 */
    uint64_t offset;                 /* relative to the data section */
    uint64_t nbytes;                 /* checked: ne and the type's block size agree */
    const void *data;                /* into the mapping */
    uint64_t info_offset;            /* byte offset of its directory entry, for messages */
} memra_gguf_tensor;

typedef struct memra_gguf memra_gguf;

/* Opens and validates a file (mmap, read-only). */
memra_status memra_gguf_open(const char *path, memra_gguf **out, memra_error *err);

/* Parses a caller-owned buffer (tests, fuzzing); the buffer must outlive the handle. */
memra_status memra_gguf_open_buffer(const void *data, size_t size, memra_gguf **out, memra_error *err);

/* Lenient open for `memra inspect`: on a damaged file it keeps whatever was
 * parsed before the error (out is set even on failure unless allocation failed)
 * and the error says where it stopped. Tensor data is not required to be valid. */
memra_status memra_gguf_open_partial(const char *path, memra_gguf **out, memra_error *err);
/* The same lenient parse over a caller-owned buffer (fuzzing, tests). */
memra_status memra_gguf_open_buffer_partial(const void *data, size_t size, memra_gguf **out, memra_error *err);

void memra_gguf_free(memra_gguf *g);

uint32_t memra_gguf_version(const memra_gguf *g);
uint64_t memra_gguf_alignment(const memra_gguf *g);
uint64_t memra_gguf_data_offset(const memra_gguf *g); /* start of the tensor data section */
uint64_t memra_gguf_file_size(const memra_gguf *g);

int64_t memra_gguf_n_kv(const memra_gguf *g);
const memra_gguf_kv *memra_gguf_kv_at(const memra_gguf *g, int64_t i);
const memra_gguf_kv *memra_gguf_find_kv(const memra_gguf *g, const char *key); /* NULL if absent */

int64_t memra_gguf_n_tensors(const memra_gguf *g);
const memra_gguf_tensor *memra_gguf_tensor_at(const memra_gguf *g, int64_t i);
const memra_gguf_tensor *memra_gguf_find_tensor(const memra_gguf *g, const char *name); /* NULL if absent */

/* Typed getters. They fail with MEMRA_ERR_NOT_FOUND when the key is absent and
 * MEMRA_ERR_FORMAT (message names the key and its actual type) on a type that
 * cannot be converted without loss (e.g. negative int to unsigned, string to int). */
memra_status memra_gguf_get_u64(const memra_gguf *g, const char *key, uint64_t *out, memra_error *err);
memra_status memra_gguf_get_i64(const memra_gguf *g, const char *key, int64_t *out, memra_error *err);
memra_status memra_gguf_get_f64(const memra_gguf *g, const char *key, double *out, memra_error *err);
memra_status memra_gguf_get_bool(const memra_gguf *g, const char *key, int *out, memra_error *err);
memra_status memra_gguf_get_str(const memra_gguf *g, const char *key, memra_gguf_str *out, memra_error *err);

/* Array access: element i of an array kv. Strings are walked lazily; for
 * repeated access to a string array use memra_gguf_arr_strings (O(n) once). */
memra_status memra_gguf_arr_u64(const memra_gguf_kv *kv, uint64_t i, uint64_t *out);
memra_status memra_gguf_arr_i64(const memra_gguf_kv *kv, uint64_t i, int64_t *out);
memra_status memra_gguf_arr_f64(const memra_gguf_kv *kv, uint64_t i, double *out);
/* Fills out[0..n) (n = kv->v.arr.n) with views of each string; caller frees with free(). */
memra_status memra_gguf_arr_strings(const memra_gguf_kv *kv, memra_gguf_str **out, memra_error *err);

const char *memra_gguf_type_name(memra_gguf_type t);

/* Bytes of one value of a scalar type; 0 for string, array and unknown ids. */
size_t memra_gguf_scalar_size(uint32_t t);

/* 1 if s equals the NUL-terminated c. */
int memra_gguf_str_eq(memra_gguf_str s, const char *c);

#endif
