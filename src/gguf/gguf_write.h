/* Streaming GGUF writer (versions 2 and 3).
 *
 * Use: begin; add metadata and tensor entries in the order they should
 * appear; write_header (magic, counts, metadata, tensor directory, padding);
 * then write_data with each tensor's bytes in the order the tensors were
 * added, in as many chunks as convenient (a 10 GB tensor need not be in
 * memory at once); finish. Padding between tensors is inserted by the writer.
 *
 * Errors are sticky: an add that fails (bad argument, duplicate key or tensor
 * name, unknown type, shape not a multiple of the block size) returns its
 * status, and write_header then fails with the first message. So a caller may
 * add everything and check once.
 *
 * The output is a FILE* (a real file, or open_memstream() in tests). */
#ifndef MEMRA_GGUF_WRITE_H
#define MEMRA_GGUF_WRITE_H

#include <stdint.h>
#include <stdio.h>

#include "gguf/gguf.h"

typedef struct memra_gguf_writer memra_gguf_writer;

/* version: 2 or 3. alignment: a power of two, 0 = MEMRA_GGUF_DEFAULT_ALIGNMENT;
 * a non-default alignment is written as the u32 key general.alignment (first),
 * so callers must not add that key themselves. */
memra_status memra_gguf_writer_begin(uint32_t version, uint32_t alignment, memra_gguf_writer **out, memra_error *err);
void memra_gguf_writer_free(memra_gguf_writer *w);

/* The first error, or MEMRA_OK; its message is copied to err when not NULL. */
memra_status memra_gguf_writer_status(const memra_gguf_writer *w, memra_error *err);

/* A scalar of any type but STRING and ARRAY; value points to the C type of
 * that width (uint8_t for BOOL, must be 0 or 1; float for FLOAT32; double for FLOAT64). */
memra_status memra_gguf_writer_add_scalar(memra_gguf_writer *w, const char *key, memra_gguf_type type,
                                          const void *value);
memra_status memra_gguf_writer_add_u8(memra_gguf_writer *w, const char *key, uint8_t v);
memra_status memra_gguf_writer_add_i8(memra_gguf_writer *w, const char *key, int8_t v);
memra_status memra_gguf_writer_add_u16(memra_gguf_writer *w, const char *key, uint16_t v);
memra_status memra_gguf_writer_add_i16(memra_gguf_writer *w, const char *key, int16_t v);
memra_status memra_gguf_writer_add_u32(memra_gguf_writer *w, const char *key, uint32_t v);
memra_status memra_gguf_writer_add_i32(memra_gguf_writer *w, const char *key, int32_t v);
memra_status memra_gguf_writer_add_f32(memra_gguf_writer *w, const char *key, float v);
memra_status memra_gguf_writer_add_bool(memra_gguf_writer *w, const char *key, int v);
memra_status memra_gguf_writer_add_u64(memra_gguf_writer *w, const char *key, uint64_t v);
memra_status memra_gguf_writer_add_i64(memra_gguf_writer *w, const char *key, int64_t v);
memra_status memra_gguf_writer_add_f64(memra_gguf_writer *w, const char *key, double v);
memra_status memra_gguf_writer_add_str(memra_gguf_writer *w, const char *key, const char *s);
memra_status memra_gguf_writer_add_strn(memra_gguf_writer *w, const char *key, const char *s, uint64_t len);

/* An array of n scalars of elem type (not STRING/ARRAY), packed as the C type of that width. */
memra_status memra_gguf_writer_add_array(memra_gguf_writer *w, const char *key, memra_gguf_type elem,
                                         const void *data, uint64_t n);
/* An array of n strings; lens[i] gives each length, or lens == NULL for NUL-terminated strings. */
memra_status memra_gguf_writer_add_str_array(memra_gguf_writer *w, const char *key, const char *const *strs,
                                             const uint64_t *lens, uint64_t n);

/* A tensor entry: ggml type id, 1..4 dims, ne[0] contiguous and a multiple of
 * the type's block size. Its data offset is assigned here (aligned). */
memra_status memra_gguf_writer_add_tensor(memra_gguf_writer *w, const char *name, uint32_t type, uint32_t n_dims,
                                          const int64_t *ne);

/* Bytes of tensor i's data (as added), 0 if i is out of range. */
uint64_t memra_gguf_writer_tensor_nbytes(const memra_gguf_writer *w, int64_t i);
/* Total file size the writer will produce (valid once all entries are added). */
uint64_t memra_gguf_writer_file_size(const memra_gguf_writer *w);

/* Writes magic, counts, metadata, the tensor directory and the padding. */
memra_status memra_gguf_writer_write_header(memra_gguf_writer *w, FILE *f, memra_error *err);
/* Appends n bytes of tensor data (tensors in order, chunks of any size;
 * a chunk may span tensors). */
memra_status memra_gguf_writer_write_data(memra_gguf_writer *w, FILE *f, const void *data, size_t n,
                                          memra_error *err);
/* Checks that every tensor's data was written, and flushes f. */
memra_status memra_gguf_writer_finish(memra_gguf_writer *w, FILE *f, memra_error *err);

#endif
