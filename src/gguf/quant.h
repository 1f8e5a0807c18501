/* Weight types and their block layouts, defined once.
 *
 * Type ids are ggml's (they are what a GGUF tensor entry stores). Each block
 * type has a packed struct whose size is static_assert'ed against the size
 * ggml and the gguf Python package use. Every supported type has a row
 * dequantizer and a reference dot product with an fp32 vector; both are the
 * oracle the CUDA kernels are checked against. */
#ifndef MEMRA_GGUF_QUANT_H
#define MEMRA_GGUF_QUANT_H

#include <assert.h>
#include <stddef.h>
#include <stdint.h>

typedef enum memra_type {
    MEMRA_TYPE_F32 = 0,
    MEMRA_TYPE_F16 = 1,
    MEMRA_TYPE_Q4_0 = 2,
    MEMRA_TYPE_Q4_1 = 3,
    MEMRA_TYPE_Q5_0 = 6,
    MEMRA_TYPE_Q5_1 = 7,
    MEMRA_TYPE_Q8_0 = 8,
    MEMRA_TYPE_Q8_1 = 9,
    MEMRA_TYPE_Q2_K = 10,
    MEMRA_TYPE_Q3_K = 11,
    MEMRA_TYPE_Q4_K = 12,
    MEMRA_TYPE_Q5_K = 13,
    MEMRA_TYPE_Q6_K = 14,
    MEMRA_TYPE_Q8_K = 15,
    MEMRA_TYPE_IQ2_XXS = 16,
    MEMRA_TYPE_IQ2_XS = 17,
    MEMRA_TYPE_IQ3_XXS = 18,
    MEMRA_TYPE_IQ1_S = 19,
    MEMRA_TYPE_IQ4_NL = 20,
    MEMRA_TYPE_IQ3_S = 21,
    MEMRA_TYPE_IQ2_S = 22,
    MEMRA_TYPE_IQ4_XS = 23,
    MEMRA_TYPE_I8 = 24,
    MEMRA_TYPE_I16 = 25,
    MEMRA_TYPE_I32 = 26,
    MEMRA_TYPE_I64 = 27,
    MEMRA_TYPE_F64 = 28,
    MEMRA_TYPE_IQ1_M = 29,
    MEMRA_TYPE_BF16 = 30,
    MEMRA_TYPE_TQ1_0 = 34,
    MEMRA_TYPE_TQ2_0 = 35,
    MEMRA_TYPE_MXFP4 = 39,
    MEMRA_TYPE_NVFP4 = 40,
    MEMRA_TYPE_Q1_0 = 41,
    MEMRA_TYPE_COUNT = 42
} memra_type;

/* Size facts for any ggml type id, including ones memra cannot compute with
 * (so that `memra inspect` can size every tensor of any GGUF). */
typedef struct memra_type_info {
    const char *name;     /* "Q4_K"; NULL for an unassigned id */
    uint32_t block_elems; /* elements per block (1 for plain types) */
    uint32_t block_bytes; /* bytes per block */
    int supported;        /* 1: memra dequantizes and computes with it */
} memra_type_info;

/* NULL for ids >= MEMRA_TYPE_COUNT or unassigned ids. */
const memra_type_info *memra_type_get(uint32_t type);
const char *memra_type_name(uint32_t type); /* "?" for an unknown id */

/* Bytes of a row of n elements; 0 if the type is unknown or n is not a
 * multiple of its block size (callers treat 0 as an error). */
size_t memra_type_row_bytes(uint32_t type, int64_t n);

/* Dequantizes n elements (n a multiple of the block size) of a row. */
void memra_dequant_row(uint32_t type, const void *src, float *dst, int64_t n);

/* Reference dot product of a row of n quantized elements with fp32 x: 16
 * interleaved fp32 partial sums (element i goes to sum i % 16, in index order)
 * added in a fixed pairwise tree at the end. The order depends only on n, never
 * on threading or batch size, and the loop vectorizes without -ffast-math. */
float memra_dot_row(uint32_t type, const void *row, const float *x, int64_t n);

/* Scalar conversions used everywhere (round to nearest even where it matters). */
float memra_fp16_to_fp32(uint16_t h);
uint16_t memra_fp32_to_fp16(float f);
float memra_bf16_to_fp32(uint16_t h);
uint16_t memra_fp32_to_bf16(float f);

/* Block layouts: see quant_blocks.h (included here so one include gives all). */
#include "gguf/quant_blocks.h"

#endif
