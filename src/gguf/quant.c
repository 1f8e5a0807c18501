/* Weight type table, scalar float conversions, row dequantizers and the
 * reference dot products (the CPU oracle for every quantized matmul).
 *
 * Dequantization is bit-exact against the gguf Python package
 * (gguf.quants.dequantize, the llama.cpp project's reference): every value is
 * computed with the same float32 operations in the same order. In fact every
 * product in these formats is exact in fp32: an fp16 scale has 11
 * significant bits, sub-block scales at most 7 (6-bit scales, |int8| <= 127)
 * and quant values at most 7 (|q| <= 127, the IQ4 table), and no product
 * needs more than 23 bits (Q6_K: 11 + 7 + 5). So the order of the multiplies
 * cannot change a result, and the one rounding is the final add of an offset
 * (Q4_1, Q5_1 and the K-quant mins), which an FMA rounds identically.
 * (MXFP4 with a huge exponent overflows to inf either way.) A GPU kernel
 * can therefore match these values bit for bit. The code still
 * keeps one rounding per statement, as the reference does. */
#include "gguf/quant.h"

#include <math.h>
#include <string.h>

#include "base/status.h"

/* ---- type table ------------------------------------------------------- */

/* Ids missing here (4, 5, 31..33, 36..38) were assigned by ggml once and
 * retired; they stay NULL. Sizes of unsupported types still let `inspect`
 * size any tensor. */
static const memra_type_info type_table[MEMRA_TYPE_COUNT] = {
    [MEMRA_TYPE_F32] = {"F32", 1, 4, 1},
    [MEMRA_TYPE_F16] = {"F16", 1, 2, 1},
    [MEMRA_TYPE_Q4_0] = {"Q4_0", MEMRA_QK4_0, sizeof(memra_block_q4_0), 1},
    [MEMRA_TYPE_Q4_1] = {"Q4_1", MEMRA_QK4_1, sizeof(memra_block_q4_1), 1},
    [MEMRA_TYPE_Q5_0] = {"Q5_0", MEMRA_QK5_0, sizeof(memra_block_q5_0), 1},
    [MEMRA_TYPE_Q5_1] = {"Q5_1", MEMRA_QK5_1, sizeof(memra_block_q5_1), 1},
    [MEMRA_TYPE_Q8_0] = {"Q8_0", MEMRA_QK8_0, sizeof(memra_block_q8_0), 1},
    [MEMRA_TYPE_Q8_1] = {"Q8_1", MEMRA_QK8_1, sizeof(memra_block_q8_1), 0},
    [MEMRA_TYPE_Q2_K] = {"Q2_K", MEMRA_QK_K, sizeof(memra_block_q2_k), 1},
    [MEMRA_TYPE_Q3_K] = {"Q3_K", MEMRA_QK_K, sizeof(memra_block_q3_k), 1},
    [MEMRA_TYPE_Q4_K] = {"Q4_K", MEMRA_QK_K, sizeof(memra_block_q4_k), 1},
    [MEMRA_TYPE_Q5_K] = {"Q5_K", MEMRA_QK_K, sizeof(memra_block_q5_k), 1},
    [MEMRA_TYPE_Q6_K] = {"Q6_K", MEMRA_QK_K, sizeof(memra_block_q6_k), 1},
    [MEMRA_TYPE_Q8_K] = {"Q8_K", MEMRA_QK_K, sizeof(memra_block_q8_k), 0},
    [MEMRA_TYPE_IQ2_XXS] = {"IQ2_XXS", 256, 66, 0},
    [MEMRA_TYPE_IQ2_XS] = {"IQ2_XS", 256, 74, 0},
    [MEMRA_TYPE_IQ3_XXS] = {"IQ3_XXS", 256, 98, 0},
    [MEMRA_TYPE_IQ1_S] = {"IQ1_S", 256, 50, 0},
    [MEMRA_TYPE_IQ4_NL] = {"IQ4_NL", MEMRA_QK4_NL, sizeof(memra_block_iq4_nl), 1},
    [MEMRA_TYPE_IQ3_S] = {"IQ3_S", 256, 110, 0},
    [MEMRA_TYPE_IQ2_S] = {"IQ2_S", 256, 82, 0},
    [MEMRA_TYPE_IQ4_XS] = {"IQ4_XS", MEMRA_QK_K, sizeof(memra_block_iq4_xs), 1},
    [MEMRA_TYPE_I8] = {"I8", 1, 1, 0},
    [MEMRA_TYPE_I16] = {"I16", 1, 2, 0},
    [MEMRA_TYPE_I32] = {"I32", 1, 4, 0},
    [MEMRA_TYPE_I64] = {"I64", 1, 8, 0},
    [MEMRA_TYPE_F64] = {"F64", 1, 8, 0},
    [MEMRA_TYPE_IQ1_M] = {"IQ1_M", 256, 56, 0},
    [MEMRA_TYPE_BF16] = {"BF16", 1, 2, 1},
    [MEMRA_TYPE_TQ1_0] = {"TQ1_0", 256, 54, 0},
    [MEMRA_TYPE_TQ2_0] = {"TQ2_0", 256, 66, 0},
    [MEMRA_TYPE_MXFP4] = {"MXFP4", MEMRA_QK_MXFP4, sizeof(memra_block_mxfp4), 1},
    [MEMRA_TYPE_NVFP4] = {"NVFP4", MEMRA_QK_NVFP4, sizeof(memra_block_nvfp4), 1},
    [MEMRA_TYPE_Q1_0] = {"Q1_0", 128, 18, 0},
};

const memra_type_info *memra_type_get(uint32_t type) {
    if (type >= MEMRA_TYPE_COUNT || !type_table[type].name) return NULL;
    return &type_table[type];
}

const char *memra_type_name(uint32_t type) {
    const memra_type_info *t = memra_type_get(type);
    return t ? t->name : "?";
}

size_t memra_type_row_bytes(uint32_t type, int64_t n) {
    const memra_type_info *t = memra_type_get(type);
    if (!t || n < 0 || n % t->block_elems != 0) return 0;
    size_t bytes;
    if (memra_mul_size((size_t)(n / t->block_elems), t->block_bytes, &bytes)) return 0;
    return bytes;
}

/* ---- scalar conversions ----------------------------------------------- */

static inline float f32_from_bits(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static inline uint32_t f32_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

/* Exact. NaN keeps its sign and payload (mantissa << 13), as numpy's
 * float16 -> float32 does. Subnormals go through an exact multiply of a
 * normal float (safe even with denormals-are-zero). Branch-free so that the
 * F16 loops vectorize. */
float memra_fp16_to_fp32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000) << 16;
    uint32_t exp = (h >> 10) & 0x1f;
    uint32_t mant = h & 0x3ff;
    uint32_t normal = ((exp + 112) << 23) | (mant << 13);
    uint32_t special = 0x7f800000u | (mant << 13);
    uint32_t sub = f32_bits((float)mant * 0x1p-24f);
    uint32_t mag = exp == 0 ? sub : exp == 31 ? special : normal;
    return f32_from_bits(sign | mag);
}

/* Round to nearest, ties to even; overflow gives inf, underflow gives
 * (signed) subnormals or zero; NaN stays NaN (quiet bit set, top payload
 * bits kept). */
uint16_t memra_fp32_to_fp16(float f) {
    uint32_t x = f32_bits(f);
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000);
    uint32_t ax = x & 0x7fffffffu;
    if (ax > 0x7f800000u) return (uint16_t)(sign | 0x7e00 | ((ax >> 13) & 0x3ff));
    uint32_t exp = ax >> 23; /* biased fp32 exponent */
    if (exp >= 143) return sign | 0x7c00; /* >= 2^16 (and inf): beyond the largest fp16 */
    uint32_t h, rem, half;
    if (exp >= 113) { /* normal fp16: keep 10 mantissa bits, round the other 13 */
        h = ((exp - 112) << 10) | ((ax >> 13) & 0x3ff);
        rem = ax & 0x1fff;
        half = 0x1000;
    } else if (exp >= 102) { /* fp16 subnormal: units of 2^-24 */
        uint32_t full = (ax & 0x7fffff) | 0x800000;
        uint32_t shift = 126 - exp; /* 14..24 */
        h = full >> shift;
        rem = full & ((1u << shift) - 1);
        half = 1u << (shift - 1);
    } else {
        return sign; /* below 2^-25: rounds to zero */
    }
    /* A carry out of the mantissa steps into the exponent, up to inf. */
    if (rem > half || (rem == half && (h & 1))) h++;
    return (uint16_t)(sign | h);
}

float memra_bf16_to_fp32(uint16_t h) {
    return f32_from_bits((uint32_t)h << 16);
}

/* Round to nearest even; NaN keeps sign and top payload and gets the quiet
 * bit (so rounding cannot turn it into inf). */
uint16_t memra_fp32_to_bf16(float f) {
    uint32_t u = f32_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40);
    return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1)) >> 16);
}

/* ---- per-block dequantizers ------------------------------------------- */

/* fp4 tables hold twice the E2M1 values so they are integers; the block
 * scale is halved to compensate (MXFP4, NVFP4). */
static const int8_t kvalues_fp4[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};
/* Non-linear 4-bit table of IQ4_NL and IQ4_XS. */
static const int8_t kvalues_iq4nl[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                         1,    13,   25,  38,  53,  69,  89,  113};

#define H2F(h) memra_fp16_to_fp32(h)

/* y = d * (q - 8) */
static inline void deq_q4_0(const memra_block_q4_0 *b, float *restrict y) {
    const float d = H2F(b->d);
    for (int j = 0; j < MEMRA_QK4_0 / 2; j++) {
        y[j] = d * (float)((b->qs[j] & 15) - 8);
        y[j + MEMRA_QK4_0 / 2] = d * (float)((b->qs[j] >> 4) - 8);
    }
}

/* y = (d * q) + m */
static inline void deq_q4_1(const memra_block_q4_1 *b, float *restrict y) {
    const float d = H2F(b->d), m = H2F(b->m);
    for (int j = 0; j < MEMRA_QK4_1 / 2; j++) {
        float lo = d * (float)(b->qs[j] & 15);
        float hi = d * (float)(b->qs[j] >> 4);
        y[j] = lo + m;
        y[j + MEMRA_QK4_1 / 2] = hi + m;
    }
}

static inline uint32_t load_u32_le(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* y = d * (q - 16), q = nibble | qh bit << 4 */
static inline void deq_q5_0(const memra_block_q5_0 *b, float *restrict y) {
    const float d = H2F(b->d);
    const uint32_t qh = load_u32_le(b->qh);
    for (int j = 0; j < MEMRA_QK5_0 / 2; j++) {
        int lo = (b->qs[j] & 15) | (int)((qh >> j) & 1) << 4;
        int hi = (b->qs[j] >> 4) | (int)((qh >> (j + 16)) & 1) << 4;
        y[j] = d * (float)(lo - 16);
        y[j + MEMRA_QK5_0 / 2] = d * (float)(hi - 16);
    }
}

/* y = (d * q) + m, q as Q5_0 */
static inline void deq_q5_1(const memra_block_q5_1 *b, float *restrict y) {
    const float d = H2F(b->d), m = H2F(b->m);
    const uint32_t qh = load_u32_le(b->qh);
    for (int j = 0; j < MEMRA_QK5_1 / 2; j++) {
        int lo = (b->qs[j] & 15) | (int)((qh >> j) & 1) << 4;
        int hi = (b->qs[j] >> 4) | (int)((qh >> (j + 16)) & 1) << 4;
        float a = d * (float)lo, c = d * (float)hi;
        y[j] = a + m;
        y[j + MEMRA_QK5_1 / 2] = c + m;
    }
}

/* y = d * q */
static inline void deq_q8_0(const memra_block_q8_0 *b, float *restrict y) {
    const float d = H2F(b->d);
    for (int j = 0; j < MEMRA_QK8_0; j++) y[j] = d * (float)b->qs[j];
}

/* y = (d * sc) * q - (dmin * mn), per 16-element sub-block */
static inline void deq_q2_k(const memra_block_q2_k *b, float *restrict y) {
    const float d = H2F(b->d), dmin = H2F(b->dmin);
    float dl[16], ml[16];
    for (int s = 0; s < 16; s++) {
        dl[s] = d * (float)(b->scales[s] & 15);
        ml[s] = dmin * (float)(b->scales[s] >> 4);
    }
    /* element i = 128h + 32k + l, sub-block i / 16 */
    for (int h = 0; h < 2; h++)
        for (int k = 0; k < 4; k++)
            for (int l = 0; l < 32; l++) {
                const int i = 128 * h + 32 * k + l;
                float dq = dl[i / 16] * (float)((b->qs[32 * h + l] >> (2 * k)) & 3);
                y[i] = dq - ml[i / 16];
            }
}

/* 6-bit scale of Q3_K sub-block s (0..15), before the -32 offset */
static inline int q3_k_scale(const uint8_t *sc, int s) {
    int lo = s < 8 ? sc[s] & 15 : sc[s - 8] >> 4;
    int hi = (sc[8 + s % 4] >> (2 * (s / 4))) & 3;
    return lo | hi << 4;
}

/* y = (d * (sc - 32)) * (q - (hbit ? 0 : 4)) */
static inline void deq_q3_k(const memra_block_q3_k *b, float *restrict y) {
    const float d = H2F(b->d);
    float dl[16];
    for (int s = 0; s < 16; s++) dl[s] = d * (float)(q3_k_scale(b->scales, s) - 32);
    for (int h = 0; h < 2; h++)
        for (int k = 0; k < 4; k++)
            for (int l = 0; l < 32; l++) {
                const int i = 128 * h + 32 * k + l;
                int q = (b->qs[32 * h + l] >> (2 * k)) & 3;
                int hbit = (b->hmask[l] >> (4 * h + k)) & 1;
                y[i] = dl[i / 16] * (float)(q - 4 + 4 * hbit);
            }
}

/* 6-bit scale and min of Q4_K/Q5_K sub-block s (0..7) */
static inline void k_scale_min(const uint8_t *sc, int s, int *scale, int *min) {
    if (s < 4) {
        *scale = sc[s] & 63;
        *min = sc[s + 4] & 63;
    } else {
        *scale = (sc[s + 4] & 15) | (sc[s - 4] >> 6) << 4;
        *min = (sc[s + 4] >> 4) | (sc[s] >> 6) << 4;
    }
}

/* y = (d * sc) * q - (dmin * mn), per 32-element sub-block */
static inline void deq_q4_k(const memra_block_q4_k *b, float *restrict y) {
    const float d = H2F(b->d), dmin = H2F(b->dmin);
    for (int s = 0; s < 8; s++) {
        int sc, mn;
        k_scale_min(b->scales, s, &sc, &mn);
        const float ds = d * (float)sc, dm = dmin * (float)mn;
        const uint8_t *qs = b->qs + 32 * (s / 2);
        const int shift = 4 * (s & 1);
        for (int l = 0; l < 32; l++) {
            float dq = ds * (float)((qs[l] >> shift) & 15);
            y[32 * s + l] = dq - dm;
        }
    }
}

/* y = (d * sc) * q - (dmin * mn), q = nibble | qh bit << 4 */
static inline void deq_q5_k(const memra_block_q5_k *b, float *restrict y) {
    const float d = H2F(b->d), dmin = H2F(b->dmin);
    for (int s = 0; s < 8; s++) {
        int sc, mn;
        k_scale_min(b->scales, s, &sc, &mn);
        const float ds = d * (float)sc, dm = dmin * (float)mn;
        const uint8_t *qs = b->qs + 32 * (s / 2);
        const int shift = 4 * (s & 1);
        for (int l = 0; l < 32; l++) {
            int q = ((qs[l] >> shift) & 15) | ((b->qh[l] >> s) & 1) << 4;
            float dq = ds * (float)q;
            y[32 * s + l] = dq - dm;
        }
    }
}

/* y = (d * sc) * (q - 32), sc int8 per 16-element sub-block */
static inline void deq_q6_k(const memra_block_q6_k *b, float *restrict y) {
    const float d = H2F(b->d);
    float ds[16];
    for (int s = 0; s < 16; s++) ds[s] = d * (float)b->scales[s];
    for (int h = 0; h < 2; h++)
        for (int k = 0; k < 4; k++)
            for (int l = 0; l < 32; l++) {
                const int i = 128 * h + 32 * k + l;
                int lo = (b->ql[64 * h + 32 * (k & 1) + l] >> (4 * (k / 2))) & 15;
                int hi = (b->qh[32 * h + l] >> (2 * k)) & 3;
                y[i] = ds[i / 16] * (float)((lo | hi << 4) - 32);
            }
}

/* y = d * kvalues_iq4nl[q] */
static inline void deq_iq4_nl(const memra_block_iq4_nl *b, float *restrict y) {
    const float d = H2F(b->d);
    for (int j = 0; j < MEMRA_QK4_NL / 2; j++) {
        y[j] = d * (float)kvalues_iq4nl[b->qs[j] & 15];
        y[j + MEMRA_QK4_NL / 2] = d * (float)kvalues_iq4nl[b->qs[j] >> 4];
    }
}

/* y = (d * (sc - 32)) * kvalues_iq4nl[q], per 32-element sub-block */
static inline void deq_iq4_xs(const memra_block_iq4_xs *b, float *restrict y) {
    const float d = H2F(b->d);
    for (int s = 0; s < 8; s++) {
        int sc = ((b->scales_l[s / 2] >> (4 * (s & 1))) & 15) | ((b->scales_h >> (2 * s)) & 3) << 4;
        const float dl = d * (float)(sc - 32);
        const uint8_t *qs = b->qs + 16 * s;
        for (int l = 0; l < 16; l++) {
            y[32 * s + l] = dl * (float)kvalues_iq4nl[qs[l] & 15];
            y[32 * s + 16 + l] = dl * (float)kvalues_iq4nl[qs[l] >> 4];
        }
    }
}

/* E8M0 exponent byte -> 2^(e - 127) / 2 = 2^(e - 128), built from bits
 * (subnormal for e < 2) so it is exact for every byte. */
static inline float e8m0_half(uint8_t e) {
    return f32_from_bits(e < 2 ? 0x00200000u << e : (uint32_t)(e - 1) << 23);
}

/* y = 2^(e - 128) * kvalues_fp4[q] */
static inline void deq_mxfp4(const memra_block_mxfp4 *b, float *restrict y) {
    const float d = e8m0_half(b->e);
    for (int j = 0; j < MEMRA_QK_MXFP4 / 2; j++) {
        y[j] = d * (float)kvalues_fp4[b->qs[j] & 15];
        y[j + MEMRA_QK_MXFP4 / 2] = d * (float)kvalues_fp4[b->qs[j] >> 4];
    }
}

/* UE4M3 scale byte -> value / 2. Bits 6..3 exponent (bias 7), 2..0
 * mantissa, exponent 0 subnormal (m * 2^-9); bit 7 is ignored except that
 * only the exact bytes 0x00 and 0x7F decode to 0 (as the reference does).
 * Every result is exact in fp32. */
static inline float ue4m3_half(uint8_t x) {
    if (x == 0 || x == 0x7f) return 0.0f;
    int e = (x >> 3) & 15, m = x & 7;
    /* normal: (1 + m/8) * 2^(e-7), written as fp32 bits */
    float v = e == 0 ? (float)m * 0x1p-9f : f32_from_bits((uint32_t)(e + 120) << 23 | (uint32_t)m << 20);
    return v * 0.5f;
}

/* y = (ue4m3(d[s]) / 2) * kvalues_fp4[q], per 16-element sub-block */
static inline void deq_nvfp4(const memra_block_nvfp4 *b, float *restrict y) {
    for (int s = 0; s < MEMRA_QK_NVFP4 / MEMRA_QK_NVFP4_SUB; s++) {
        const float d = ue4m3_half(b->d[s]);
        const uint8_t *qs = b->qs + 8 * s;
        for (int l = 0; l < 8; l++) {
            y[16 * s + l] = d * (float)kvalues_fp4[qs[l] & 15];
            y[16 * s + 8 + l] = d * (float)kvalues_fp4[qs[l] >> 4];
        }
    }
}

/* ---- rows ------------------------------------------------------------- */

/* The dot accumulates into DOT_LANES interleaved fp32 partial sums (element
 * i of the row goes to lane i % DOT_LANES, in index order), combined at the
 * end by a fixed pairwise tree. The order depends only on n, never on
 * threads or batching, and the lane loop vectorizes without -ffast-math. */
#define DOT_LANES 16
/* Elements converted at a time for the plain 16-bit types (a multiple of
 * DOT_LANES). */
#define SCALAR_CHUNK 256

/* n a multiple of DOT_LANES (every block size is). Inlined into loops
 * whose acc is a local array, so the lanes stay in registers. */
static inline void dot_lanes(float *restrict acc, const float *restrict a, const float *restrict x,
                             int64_t n) {
    for (int64_t i = 0; i < n; i += DOT_LANES)
        for (int l = 0; l < DOT_LANES; l++) acc[l] += a[i + l] * x[i + l];
}

/* Any n: whole lane groups, then the tail into lanes 0.. (plain types). */
static inline void dot_lanes_any(float *restrict acc, const float *restrict a, const float *restrict x,
                                 int64_t n) {
    int64_t whole = n - n % DOT_LANES;
    dot_lanes(acc, a, x, whole);
    for (int64_t i = whole; i < n; i++) acc[i - whole] += a[i] * x[i];
}

static inline float dot_reduce(float *acc) {
    for (int w = DOT_LANES / 2; w > 0; w /= 2)
        for (int l = 0; l < w; l++) acc[l] += acc[l + w];
    return acc[0];
}

/* Per-type row loops over whole blocks, generated from the block
 * dequantizer so the dot sees exactly the dequantized values. */
#define DEFINE_ROW(name, block_t, qk)                                                  \
    static void dequant_row_##name(const void *src, float *dst, int64_t nb) {         \
        const block_t *b = (const block_t *)src;                                       \
        for (int64_t i = 0; i < nb; i++) deq_##name(&b[i], dst + i * (qk));            \
    }                                                                                  \
    static float dot_row_##name(const void *src, const float *x, int64_t nb) {        \
        const block_t *b = (const block_t *)src;                                       \
        float acc[DOT_LANES] = {0}, tmp[qk];                                           \
        for (int64_t i = 0; i < nb; i++) {                                             \
            deq_##name(&b[i], tmp);                                                    \
            dot_lanes(acc, tmp, x + i * (qk), (qk));                                   \
        }                                                                              \
        return dot_reduce(acc);                                                        \
    }

DEFINE_ROW(q4_0, memra_block_q4_0, MEMRA_QK4_0)
DEFINE_ROW(q4_1, memra_block_q4_1, MEMRA_QK4_1)
DEFINE_ROW(q5_0, memra_block_q5_0, MEMRA_QK5_0)
DEFINE_ROW(q5_1, memra_block_q5_1, MEMRA_QK5_1)
DEFINE_ROW(q8_0, memra_block_q8_0, MEMRA_QK8_0)
DEFINE_ROW(q2_k, memra_block_q2_k, MEMRA_QK_K)
DEFINE_ROW(q3_k, memra_block_q3_k, MEMRA_QK_K)
DEFINE_ROW(q4_k, memra_block_q4_k, MEMRA_QK_K)
DEFINE_ROW(q5_k, memra_block_q5_k, MEMRA_QK_K)
DEFINE_ROW(q6_k, memra_block_q6_k, MEMRA_QK_K)
DEFINE_ROW(iq4_nl, memra_block_iq4_nl, MEMRA_QK4_NL)
DEFINE_ROW(iq4_xs, memra_block_iq4_xs, MEMRA_QK_K)
DEFINE_ROW(mxfp4, memra_block_mxfp4, MEMRA_QK_MXFP4)
DEFINE_ROW(nvfp4, memra_block_nvfp4, MEMRA_QK_NVFP4)

static void cvt_f16(const uint16_t *src, float *restrict dst, int64_t n) {
    for (int64_t i = 0; i < n; i++) dst[i] = memra_fp16_to_fp32(src[i]);
}

static void cvt_bf16(const uint16_t *src, float *restrict dst, int64_t n) {
    for (int64_t i = 0; i < n; i++) dst[i] = memra_bf16_to_fp32(src[i]);
}

static float dot_row_f32(const float *a, const float *x, int64_t n) {
    float acc[DOT_LANES] = {0};
    dot_lanes_any(acc, a, x, n);
    return dot_reduce(acc);
}

/* Lane bookkeeping for chunked rows: the chunk boundaries are multiples of
 * DOT_LANES, so element i still lands in lane i % DOT_LANES. */
static float dot_row_16bit(const uint16_t *src, const float *x, int64_t n, int bf16) {
    float acc[DOT_LANES] = {0}, tmp[SCALAR_CHUNK];
    for (int64_t i = 0; i < n; i += SCALAR_CHUNK) {
        int64_t c = n - i < SCALAR_CHUNK ? n - i : SCALAR_CHUNK;
        if (bf16) cvt_bf16(src + i, tmp, c);
        else cvt_f16(src + i, tmp, c);
        dot_lanes_any(acc, tmp, x + i, c);
    }
    return dot_reduce(acc);
}

/* Misuse (unsupported type, n not a whole number of blocks) is a caller
 * bug: callers validate with memra_type_row_bytes first. It never reads
 * past the row; the result is NaN so that it cannot pass silently. */
void memra_dequant_row(uint32_t type, const void *src, float *dst, int64_t n) {
    const memra_type_info *t = memra_type_get(type);
    if (n <= 0) return;
    if (!t || !t->supported || n % t->block_elems != 0) {
        for (int64_t i = 0; i < n; i++) dst[i] = NAN;
        return;
    }
    const int64_t nb = n / t->block_elems;
    switch (type) {
    case MEMRA_TYPE_F32: memcpy(dst, src, (size_t)n * sizeof(float)); return;
    case MEMRA_TYPE_F16: cvt_f16(src, dst, n); return;
    case MEMRA_TYPE_BF16: cvt_bf16(src, dst, n); return;
    case MEMRA_TYPE_Q4_0: dequant_row_q4_0(src, dst, nb); return;
    case MEMRA_TYPE_Q4_1: dequant_row_q4_1(src, dst, nb); return;
    case MEMRA_TYPE_Q5_0: dequant_row_q5_0(src, dst, nb); return;
    case MEMRA_TYPE_Q5_1: dequant_row_q5_1(src, dst, nb); return;
    case MEMRA_TYPE_Q8_0: dequant_row_q8_0(src, dst, nb); return;
    case MEMRA_TYPE_Q2_K: dequant_row_q2_k(src, dst, nb); return;
    case MEMRA_TYPE_Q3_K: dequant_row_q3_k(src, dst, nb); return;
    case MEMRA_TYPE_Q4_K: dequant_row_q4_k(src, dst, nb); return;
    case MEMRA_TYPE_Q5_K: dequant_row_q5_k(src, dst, nb); return;
    case MEMRA_TYPE_Q6_K: dequant_row_q6_k(src, dst, nb); return;
    case MEMRA_TYPE_IQ4_NL: dequant_row_iq4_nl(src, dst, nb); return;
    case MEMRA_TYPE_IQ4_XS: dequant_row_iq4_xs(src, dst, nb); return;
    case MEMRA_TYPE_MXFP4: dequant_row_mxfp4(src, dst, nb); return;
    case MEMRA_TYPE_NVFP4: dequant_row_nvfp4(src, dst, nb); return;
    default: break;
    }
    for (int64_t i = 0; i < n; i++) dst[i] = NAN; /* table says supported but no case: a bug */
}

float memra_dot_row(uint32_t type, const void *row, const float *x, int64_t n) {
    const memra_type_info *t = memra_type_get(type);
    if (n <= 0) return 0.0f;
    if (!t || !t->supported || n % t->block_elems != 0) return NAN;
    const int64_t nb = n / t->block_elems;
    switch (type) {
    case MEMRA_TYPE_F32: return dot_row_f32(row, x, n);
    case MEMRA_TYPE_F16: return dot_row_16bit(row, x, n, 0);
    case MEMRA_TYPE_BF16: return dot_row_16bit(row, x, n, 1);
    case MEMRA_TYPE_Q4_0: return dot_row_q4_0(row, x, nb);
    case MEMRA_TYPE_Q4_1: return dot_row_q4_1(row, x, nb);
    case MEMRA_TYPE_Q5_0: return dot_row_q5_0(row, x, nb);
    case MEMRA_TYPE_Q5_1: return dot_row_q5_1(row, x, nb);
    case MEMRA_TYPE_Q8_0: return dot_row_q8_0(row, x, nb);
    case MEMRA_TYPE_Q2_K: return dot_row_q2_k(row, x, nb);
    case MEMRA_TYPE_Q3_K: return dot_row_q3_k(row, x, nb);
    case MEMRA_TYPE_Q4_K: return dot_row_q4_k(row, x, nb);
    case MEMRA_TYPE_Q5_K: return dot_row_q5_k(row, x, nb);
    case MEMRA_TYPE_Q6_K: return dot_row_q6_k(row, x, nb);
    case MEMRA_TYPE_IQ4_NL: return dot_row_iq4_nl(row, x, nb);
    case MEMRA_TYPE_IQ4_XS: return dot_row_iq4_xs(row, x, nb);
    case MEMRA_TYPE_MXFP4: return dot_row_mxfp4(row, x, nb);
    case MEMRA_TYPE_NVFP4: return dot_row_nvfp4(row, x, nb);
    default: return NAN;
    }
}
