/* Block layouts of the ggml weight types memra reads, defined once.
 *
 * A quantized row is a sequence of blocks; each block covers a fixed number
 * of consecutive elements (MEMRA_QK_*) in a fixed number of bytes. Every size
 * is static_assert'ed against the table of the gguf Python package
 * (gguf.constants.GGML_QUANT_SIZES), which is what a GGUF file is sized by.
 *
 * Conventions for every struct below:
 * - multi-byte fields are little-endian (GGUF is little-endian; so is every
 *   host and device memra runs on);
 * - "fp16" fields hold IEEE binary16 bits (memra_fp16_to_fp32 decodes them);
 * - nibble packing "lo/hi" means element j of a group sits in the low nibble
 *   of byte j and element j + half in the high nibble of byte j;
 * - no struct has padding, so an array of blocks is the exact byte stream of
 *   a tensor row. A block pointer must be aligned to the struct's alignment
 *   (2 bytes for fp16 fields, 4 for Q8_1/Q8_K); GGUF tensor data is aligned
 *   to at least 32 bytes and every block size keeps that alignment.
 *
 * Plain C11, also compiled as C++ by nvcc (static_assert is a keyword there). */
#ifndef MEMRA_GGUF_QUANT_BLOCKS_H
#define MEMRA_GGUF_QUANT_BLOCKS_H

#include <assert.h>
#include <stdint.h>

/* Scalar 16-bit floats: raw bits of IEEE binary16 (F16) and of the upper
 * half of an IEEE binary32 (BF16). One element per "block". */
typedef uint16_t memra_fp16;
typedef uint16_t memra_bf16;
static_assert(sizeof(memra_fp16) == 2, "F16 is 2 bytes");
static_assert(sizeof(memra_bf16) == 2, "BF16 is 2 bytes");

/* Elements per block. */
#define MEMRA_QK4_0 32
#define MEMRA_QK4_1 32
#define MEMRA_QK5_0 32
#define MEMRA_QK5_1 32
#define MEMRA_QK8_0 32
#define MEMRA_QK8_1 32
#define MEMRA_QK_K 256       /* super-block of the K-quants and IQ4_XS */
#define MEMRA_QK4_NL 32
#define MEMRA_QK_MXFP4 32
#define MEMRA_QK_NVFP4 64
#define MEMRA_QK_NVFP4_SUB 16 /* NVFP4 has one scale per 16 elements */
#define MEMRA_K_SCALE_SIZE 12 /* packed 6-bit scales/mins of Q4_K and Q5_K */

/* Q4_0: x = d * (q - 8), q in 0..15. */
typedef struct memra_block_q4_0 {
    memra_fp16 d;                    /* fp16 scale */
    uint8_t qs[MEMRA_QK4_0 / 2];     /* 4-bit q, lo/hi: elements 0..15 lo, 16..31 hi */
} memra_block_q4_0;
static_assert(sizeof(memra_block_q4_0) == 18, "Q4_0 block is 18 bytes");

/* Q4_1: x = d * q + m, q in 0..15. */
typedef struct memra_block_q4_1 {
    memra_fp16 d;                    /* fp16 scale */
    memra_fp16 m;                    /* fp16 offset (the block minimum) */
    uint8_t qs[MEMRA_QK4_1 / 2];     /* 4-bit q, lo/hi as Q4_0 */
} memra_block_q4_1;
static_assert(sizeof(memra_block_q4_1) == 20, "Q4_1 block is 20 bytes");

/* Q5_0: x = d * (q - 16), q = low 4 bits | high bit << 4, q in 0..31. */
typedef struct memra_block_q5_0 {
    memra_fp16 d;                    /* fp16 scale */
    uint8_t qh[4];                   /* bit j of the little-endian u32 = 5th bit of element j */
    uint8_t qs[MEMRA_QK5_0 / 2];     /* low 4 bits, lo/hi as Q4_0 */
} memra_block_q5_0;
static_assert(sizeof(memra_block_q5_0) == 22, "Q5_0 block is 22 bytes");

/* Q5_1: x = d * q + m, q in 0..31 packed as Q5_0. */
typedef struct memra_block_q5_1 {
    memra_fp16 d;                    /* fp16 scale */
    memra_fp16 m;                    /* fp16 offset */
    uint8_t qh[4];                   /* 5th bits, as Q5_0 */
    uint8_t qs[MEMRA_QK5_1 / 2];     /* low 4 bits, lo/hi as Q4_0 */
} memra_block_q5_1;
static_assert(sizeof(memra_block_q5_1) == 24, "Q5_1 block is 24 bytes");

/* Q8_0: x = d * q, q int8. */
typedef struct memra_block_q8_0 {
    memra_fp16 d;                    /* fp16 scale */
    int8_t qs[MEMRA_QK8_0];          /* q per element */
} memra_block_q8_0;
static_assert(sizeof(memra_block_q8_0) == 34, "Q8_0 block is 34 bytes");

/* Q8_1: x = d * q, with s = d * sum(q). An activation format (never stored
 * in model files). The gguf package sizes it with fp32 d and s (40 bytes);
 * current ggml C code packs d and s as fp16 (36 bytes). memra follows the
 * package, which is what sizes GGUF tensors here, and does not compute with it. */
typedef struct memra_block_q8_1 {
    float d;                         /* fp32 scale */
    float s;                         /* fp32 d * sum(qs) */
    int8_t qs[MEMRA_QK8_1];          /* q per element */
} memra_block_q8_1;
static_assert(sizeof(memra_block_q8_1) == 40, "Q8_1 block is 40 bytes (gguf package)");

/* Q2_K: 16 sub-blocks of 16. x = (d * sc) * q - (dmin * mn), q in 0..3,
 * sc = scales[s] & 15, mn = scales[s] >> 4 for sub-block s = i / 16. */
typedef struct memra_block_q2_k {
    uint8_t scales[MEMRA_QK_K / 16]; /* per sub-block: scale (lo nibble), min (hi nibble) */
    uint8_t qs[MEMRA_QK_K / 4];      /* 2-bit q: element 128*h + 32*k + l is bits 2k..2k+1 of qs[32*h + l] */
    memra_fp16 d;                    /* fp16 super-block scale of the scales */
    memra_fp16 dmin;                 /* fp16 super-block scale of the mins */
} memra_block_q2_k;
static_assert(sizeof(memra_block_q2_k) == 84, "Q2_K block is 84 bytes");

/* Q3_K: 16 sub-blocks of 16. x = (d * (sc - 32)) * (q - (hbit ? 0 : 4)),
 * q = 2 low bits (laid out as Q2_K), hbit = bit (i / 32) of hmask[i % 32],
 * sc a 6-bit scale: low 4 bits from scales[0..7] (sub-block s < 8: lo nibble
 * of byte s, else hi nibble of byte s - 8), high 2 bits from scales[8 + s % 4]
 * at bit 2 * (s / 4). */
typedef struct memra_block_q3_k {
    uint8_t hmask[MEMRA_QK_K / 8];   /* third bit of each q (set = no -4 offset) */
    uint8_t qs[MEMRA_QK_K / 4];      /* 2 low bits of q, layout as Q2_K */
    uint8_t scales[12];              /* 16 packed 6-bit scales (see above) */
    memra_fp16 d;                    /* fp16 super-block scale */
} memra_block_q3_k;
static_assert(sizeof(memra_block_q3_k) == 110, "Q3_K block is 110 bytes");

/* Q4_K: 8 sub-blocks of 32. x = (d * sc) * q - (dmin * mn), q in 0..15,
 * sc/mn 6-bit, packed in scales[12]: for s < 4, sc = scales[s] & 63 and
 * mn = scales[s + 4] & 63; for s >= 4, sc = (scales[s + 4] & 15) |
 * ((scales[s - 4] >> 6) << 4) and mn = (scales[s + 4] >> 4) |
 * ((scales[s] >> 6) << 4). */
typedef struct memra_block_q4_k {
    memra_fp16 d;                    /* fp16 super-block scale of the scales */
    memra_fp16 dmin;                 /* fp16 super-block scale of the mins */
    uint8_t scales[MEMRA_K_SCALE_SIZE]; /* 8 scales + 8 mins, 6 bits each */
    uint8_t qs[MEMRA_QK_K / 2];      /* 4-bit q: element 64*h + l is lo nibble of qs[32*h + l], 64*h + 32 + l the hi nibble */
} memra_block_q4_k;
static_assert(sizeof(memra_block_q4_k) == 144, "Q4_K block is 144 bytes");

/* Q5_K: as Q4_K with a fifth bit: q = low nibble (Q4_K layout) |
 * (bit (i / 32) of qh[i % 32]) << 4, q in 0..31. */
typedef struct memra_block_q5_k {
    memra_fp16 d;                    /* fp16 super-block scale of the scales */
    memra_fp16 dmin;                 /* fp16 super-block scale of the mins */
    uint8_t scales[MEMRA_K_SCALE_SIZE]; /* as Q4_K */
    uint8_t qh[MEMRA_QK_K / 8];      /* fifth bits */
    uint8_t qs[MEMRA_QK_K / 2];      /* low 4 bits, layout as Q4_K */
} memra_block_q5_k;
static_assert(sizeof(memra_block_q5_k) == 176, "Q5_K block is 176 bytes");

/* Q6_K: 16 sub-blocks of 16. x = (d * sc) * (q - 32), sc int8, q in 0..63.
 * Element 128*h + 32*k + l (h < 2, k < 4, l < 32): low 4 bits are the
 * (k < 2 ? lo : hi) nibble of ql[64*h + 32*(k & 1) + l], high 2 bits are
 * bits 2k..2k+1 of qh[32*h + l]. */
typedef struct memra_block_q6_k {
    uint8_t ql[MEMRA_QK_K / 2];      /* low 4 bits of q */
    uint8_t qh[MEMRA_QK_K / 4];      /* high 2 bits of q */
    int8_t scales[MEMRA_QK_K / 16];  /* signed 8-bit sub-block scales */
    memra_fp16 d;                    /* fp16 super-block scale */
} memra_block_q6_k;
static_assert(sizeof(memra_block_q6_k) == 210, "Q6_K block is 210 bytes");

/* Q8_K: x = d * q. An activation format for the K-quant dots (not computed
 * with by memra). */
typedef struct memra_block_q8_k {
    float d;                         /* fp32 scale */
    int8_t qs[MEMRA_QK_K];           /* q per element */
    int16_t bsums[MEMRA_QK_K / 16];  /* sum of qs per group of 16 */
} memra_block_q8_k;
static_assert(sizeof(memra_block_q8_k) == 292, "Q8_K block is 292 bytes");

/* IQ4_NL: x = d * kvalues_iq4nl[q], q in 0..15 packed lo/hi as Q4_0. */
typedef struct memra_block_iq4_nl {
    memra_fp16 d;                    /* fp16 scale */
    uint8_t qs[MEMRA_QK4_NL / 2];    /* 4-bit table index, lo/hi */
} memra_block_iq4_nl;
static_assert(sizeof(memra_block_iq4_nl) == 18, "IQ4_NL block is 18 bytes");

/* IQ4_XS: 8 sub-blocks of 32. x = (d * (sc - 32)) * kvalues_iq4nl[q],
 * sc 6-bit: low 4 bits are the (s even ? lo : hi) nibble of scales_l[s / 2],
 * high 2 bits are bits 2s..2s+1 of scales_h. Within sub-block s, element l
 * (l < 16) is the lo nibble of qs[16*s + l], element 16 + l the hi nibble. */
typedef struct memra_block_iq4_xs {
    memra_fp16 d;                    /* fp16 super-block scale */
    uint16_t scales_h;               /* high 2 bits of the 8 scales */
    uint8_t scales_l[MEMRA_QK_K / 64]; /* low 4 bits of the 8 scales, lo/hi */
    uint8_t qs[MEMRA_QK_K / 2];      /* 4-bit table indices */
} memra_block_iq4_xs;
static_assert(sizeof(memra_block_iq4_xs) == 136, "IQ4_XS block is 136 bytes");

/* MXFP4 (OCP microscaling): x = 2^(e - 128) * kvalues_fp4[q], i.e. the
 * E8M0 scale 2^(e - 127) times the E2M1 value, with the table holding twice
 * the E2M1 values (so the scale is halved). q packed lo/hi as Q4_0. */
typedef struct memra_block_mxfp4 {
    uint8_t e;                       /* E8M0 exponent byte */
    uint8_t qs[MEMRA_QK_MXFP4 / 2];  /* 4-bit E2M1 codes, lo/hi */
} memra_block_mxfp4;
static_assert(sizeof(memra_block_mxfp4) == 17, "MXFP4 block is 17 bytes");

/* NVFP4: 4 sub-blocks of 16. x = (ue4m3(d[s]) / 2) * kvalues_fp4[q]. In
 * sub-block s, element l (l < 8) is the lo nibble of qs[8*s + l] and element
 * 8 + l the hi nibble. UE4M3: unsigned, 4-bit exponent (bias 7), 3-bit
 * mantissa, exponent 0 subnormal; 0x7F decodes to 0. */
typedef struct memra_block_nvfp4 {
    uint8_t d[MEMRA_QK_NVFP4 / MEMRA_QK_NVFP4_SUB]; /* UE4M3 sub-block scales */
    uint8_t qs[MEMRA_QK_NVFP4 / 2];  /* 4-bit E2M1 codes */
} memra_block_nvfp4;
static_assert(sizeof(memra_block_nvfp4) == 36, "NVFP4 block is 36 bytes");

#endif
