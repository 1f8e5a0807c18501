/* Weight types: the size table, fp16/bf16 conversions, one hand-built block
 * per supported type with values worked out from the format definition, and
 * the reference dot product against a double-precision sum of the
 * dequantized row. (tests/py/test_quant_gguf.py checks the dequantizers bit
 * for bit against the gguf package on random blocks and the fixtures.) */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "gguf/quant.h"
#include "test.h"

/* ---- helpers ------------------------------------------------------------ */

static uint32_t bits_of(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static float from_bits(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static uint32_t rng_u32(void) { /* xorshift64*: fixed sequence */
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return (uint32_t)((rng_state * 0x2545f4914f6cdd1dull) >> 32);
}
static float rng_uniform(float lo, float hi) {
    return lo + (hi - lo) * (float)(rng_u32() >> 8) / 16777216.0f;
}

/* Block storage aligned for any block struct. */
typedef union {
    uint64_t align;
    uint8_t b[4096];
} block_buf;

/* Checks n dequantized values against expected, exactly (bit patterns). */
static void check_row(const char *what, uint32_t type, const void *blk, const float *want, int n) {
    float got[256];
    memra_dequant_row(type, blk, got, n);
    int bad = 0, first = -1;
    for (int i = 0; i < n; i++)
        if (bits_of(got[i]) != bits_of(want[i]) && bad++ == 0) first = i;
    CHECK(bad == 0, "%s: %d elements differ, first %d = %.9g (0x%08x), want %.9g (0x%08x)", what, bad, first,
          bad ? (double)got[first] : 0.0, bad ? bits_of(got[first]) : 0, bad ? (double)want[first] : 0.0,
          bad ? bits_of(want[first]) : 0);
}

/* ---- the type table ----------------------------------------------------- */

static void test_table(void) {
    /* From gguf.constants.GGML_QUANT_SIZES (gguf 0.19). */
    static const struct { uint32_t id; const char *name; uint32_t elems, bytes; int supported; } want[] = {
        {0, "F32", 1, 4, 1},         {1, "F16", 1, 2, 1},         {2, "Q4_0", 32, 18, 1},
        {3, "Q4_1", 32, 20, 1},      {6, "Q5_0", 32, 22, 1},      {7, "Q5_1", 32, 24, 1},
        {8, "Q8_0", 32, 34, 1},      {9, "Q8_1", 32, 40, 0},      {10, "Q2_K", 256, 84, 1},
        {11, "Q3_K", 256, 110, 1},   {12, "Q4_K", 256, 144, 1},   {13, "Q5_K", 256, 176, 1},
        {14, "Q6_K", 256, 210, 1},   {15, "Q8_K", 256, 292, 0},   {16, "IQ2_XXS", 256, 66, 0},
        {17, "IQ2_XS", 256, 74, 0},  {18, "IQ3_XXS", 256, 98, 0}, {19, "IQ1_S", 256, 50, 0},
        {20, "IQ4_NL", 32, 18, 1},   {21, "IQ3_S", 256, 110, 0},  {22, "IQ2_S", 256, 82, 0},
        {23, "IQ4_XS", 256, 136, 1}, {24, "I8", 1, 1, 0},         {25, "I16", 1, 2, 0},
        {26, "I32", 1, 4, 0},        {27, "I64", 1, 8, 0},        {28, "F64", 1, 8, 0},
        {29, "IQ1_M", 256, 56, 0},   {30, "BF16", 1, 2, 1},       {34, "TQ1_0", 256, 54, 0},
        {35, "TQ2_0", 256, 66, 0},   {39, "MXFP4", 32, 17, 1},    {40, "NVFP4", 64, 36, 1},
        {41, "Q1_0", 128, 18, 0},
    };
    int seen[MEMRA_TYPE_COUNT] = {0};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        const memra_type_info *t = memra_type_get(want[i].id);
        seen[want[i].id] = 1;
        CHECK(t != NULL, "type %u missing", want[i].id);
        if (!t) continue;
        CHECK(!strcmp(t->name, want[i].name), "type %u named %s, want %s", want[i].id, t->name, want[i].name);
        CHECK(!strcmp(memra_type_name(want[i].id), want[i].name), "memra_type_name(%u)", want[i].id);
        CHECK(t->block_elems == want[i].elems && t->block_bytes == want[i].bytes, "%s: %u elems / %u bytes",
              t->name, t->block_elems, t->block_bytes);
        CHECK(t->supported == want[i].supported, "%s: supported = %d", t->name, t->supported);
    }
    for (uint32_t id = 0; id < MEMRA_TYPE_COUNT; id++) {
        if (seen[id]) continue; /* retired ids: 4, 5, 31..33, 36..38 */
        CHECK(memra_type_get(id) == NULL, "retired id %u has an entry", id);
        CHECK(!strcmp(memra_type_name(id), "?"), "retired id %u name", id);
    }
    CHECK(memra_type_get(MEMRA_TYPE_COUNT) == NULL, "id 42");
    CHECK(memra_type_get(UINT32_MAX) == NULL, "id UINT32_MAX");
    CHECK(!strcmp(memra_type_name(1000), "?"), "name of 1000");

    /* Struct sizes as the header sees them. */
    CHECK(sizeof(memra_block_q4_k) * 2 == memra_type_row_bytes(MEMRA_TYPE_Q4_K, 512), "Q4_K row");

    CHECK(memra_type_row_bytes(MEMRA_TYPE_Q4_K, 512) == 288, "Q4_K 512");
    CHECK(memra_type_row_bytes(MEMRA_TYPE_IQ4_XS, 256) == 136, "IQ4_XS 256");
    CHECK(memra_type_row_bytes(MEMRA_TYPE_MXFP4, 64) == 34, "MXFP4 64");
    CHECK(memra_type_row_bytes(MEMRA_TYPE_NVFP4, 128) == 72, "NVFP4 128");
    CHECK(memra_type_row_bytes(MEMRA_TYPE_F32, 3) == 12, "F32 3");
    CHECK(memra_type_row_bytes(MEMRA_TYPE_BF16, 7) == 14, "BF16 7");
    CHECK(memra_type_row_bytes(MEMRA_TYPE_IQ2_XXS, 512) == 132, "unsupported types are still sized");
    CHECK(memra_type_row_bytes(MEMRA_TYPE_F32, 0) == 0, "empty row");
    CHECK(memra_type_row_bytes(MEMRA_TYPE_Q4_K, 100) == 0, "Q4_K 100 is not whole blocks");
    CHECK(memra_type_row_bytes(MEMRA_TYPE_Q8_0, 33) == 0, "Q8_0 33");
    CHECK(memra_type_row_bytes(MEMRA_TYPE_NVFP4, 32) == 0, "NVFP4 32");
    CHECK(memra_type_row_bytes(MEMRA_TYPE_Q4_0, -32) == 0, "negative n");
    CHECK(memra_type_row_bytes(4, 32) == 0, "retired id");
    CHECK(memra_type_row_bytes(77, 32) == 0, "unknown id");
    CHECK(memra_type_row_bytes(MEMRA_TYPE_F64, INT64_MAX) == 0, "size overflow");
}

/* ---- fp16 / bf16 -------------------------------------------------------- */

static void test_fp16(void) {
    static const struct { uint16_t h; float f; } exact[] = {
        {0x3c00, 1.0f},           {0xc000, -2.0f},         {0x3555, 0.333251953125f},
        {0x7bff, 65504.0f},       {0xfbff, -65504.0f},     {0x0400, 0x1p-14f},
        {0x0001, 0x1p-24f},       {0x03ff, 1023 * 0x1p-24f}, {0x8001, -0x1p-24f},
        {0x3c01, 1.0009765625f},  {0x0000, 0.0f},          {0x7c00, INFINITY},
        {0xfc00, -INFINITY},
    };
    for (size_t i = 0; i < sizeof exact / sizeof exact[0]; i++) {
        CHECK(bits_of(memra_fp16_to_fp32(exact[i].h)) == bits_of(exact[i].f), "fp16 0x%04x -> %.9g",
              exact[i].h, (double)memra_fp16_to_fp32(exact[i].h));
        CHECK(memra_fp32_to_fp16(exact[i].f) == exact[i].h, "%.9g -> fp16 0x%04x, want 0x%04x",
              (double)exact[i].f, memra_fp32_to_fp16(exact[i].f), exact[i].h);
    }
    CHECK(bits_of(memra_fp16_to_fp32(0x8000)) == 0x80000000u, "-0");
    CHECK(memra_fp32_to_fp16(-0.0f) == 0x8000, "-0 -> fp16");
    /* NaN keeps sign and payload (as numpy), and stays NaN both ways */
    CHECK(bits_of(memra_fp16_to_fp32(0x7e00)) == 0x7fc00000u, "qNaN");
    CHECK(bits_of(memra_fp16_to_fp32(0xfc01)) == 0xff802000u, "sNaN payload kept");
    uint16_t hn = memra_fp32_to_fp16(NAN);
    CHECK((hn & 0x7c00) == 0x7c00 && (hn & 0x3ff) != 0, "NaN -> fp16 0x%04x", hn);
    hn = memra_fp32_to_fp16(from_bits(0x7f800001u)); /* payload only in the low bits */
    CHECK((hn & 0x7c00) == 0x7c00 && (hn & 0x3ff) != 0, "sNaN -> fp16 0x%04x stays NaN", hn);

    /* rounding: to nearest, ties to even, at every range boundary */
    CHECK(memra_fp32_to_fp16(1.0f + 0x1p-11f) == 0x3c00, "tie rounds to even (down)");
    CHECK(memra_fp32_to_fp16(1.0f + 3 * 0x1p-11f) == 0x3c02, "tie rounds to even (up)");
    CHECK(memra_fp32_to_fp16(1.0f + 0x1p-11f + 0x1p-23f) == 0x3c01, "above the tie rounds up");
    CHECK(memra_fp32_to_fp16(65519.996f) == 0x7bff, "just below the overflow tie");
    CHECK(memra_fp32_to_fp16(65520.0f) == 0x7c00, "overflow tie goes to inf (even)");
    CHECK(memra_fp32_to_fp16(1e9f) == 0x7c00, "large -> inf");
    CHECK(memra_fp32_to_fp16(-1e9f) == 0xfc00, "large negative -> -inf");
    CHECK(memra_fp32_to_fp16(0x1p-25f) == 0x0000, "2^-25 is a tie with 0: even");
    CHECK(memra_fp32_to_fp16(0x1p-25f * 1.0000001f) == 0x0001, "just above 2^-25");
    CHECK(memra_fp32_to_fp16(-0x1p-26f) == 0x8000, "tiny negative -> -0");
    CHECK(memra_fp32_to_fp16(1.5f * 0x1p-24f) == 0x0002, "subnormal tie to even (up)");
    CHECK(memra_fp32_to_fp16(2.5f * 0x1p-24f) == 0x0002, "subnormal tie to even (down)");
    CHECK(memra_fp32_to_fp16(0x1p-14f - 0x1p-25f) == 0x0400, "rounds up into the smallest normal");
    CHECK(memra_fp32_to_fp16(1e-10f) == 0x0000, "underflow");

    /* every fp16 code survives fp16 -> fp32 -> fp16 */
    int bad = 0;
    for (uint32_t h = 0; h < 65536; h++) {
        float f = memra_fp16_to_fp32((uint16_t)h);
        uint16_t back = memra_fp32_to_fp16(f);
        int is_nan = (h & 0x7c00) == 0x7c00 && (h & 0x3ff);
        if (is_nan ? !isnan(f) || (back & 0x7c00) != 0x7c00 || !(back & 0x3ff) : back != h) bad++;
    }
    CHECK(bad == 0, "%d fp16 codes do not round-trip", bad);

#if defined(__FLT16_MAX__)
    /* The compiler's _Float16 conversions as an independent oracle. */
    bad = 0;
    for (uint32_t h = 0; h < 65536; h++) {
        _Float16 v;
        uint16_t hh = (uint16_t)h;
        memcpy(&v, &hh, 2);
        float want = (float)v, got = memra_fp16_to_fp32(hh);
        if (isnan(want) ? !isnan(got) : bits_of(want) != bits_of(got)) bad++;
    }
    CHECK(bad == 0, "%d fp16 -> fp32 differ from _Float16", bad);
    bad = 0;
    for (int i = 0; i < 2000000; i++) {
        /* half of them near fp16 ties: a fp16 value plus half an ulp +-0/1 bit */
        float f;
        if (i & 1) {
            f = from_bits(rng_u32());
        } else {
            uint16_t h = (uint16_t)(rng_u32() & 0x7bff);
            uint32_t b = bits_of(memra_fp16_to_fp32(h)) + (h >= 0x0400 ? 0x1000 : 0);
            f = from_bits(b + (rng_u32() % 3) - 1);
        }
        _Float16 v = (_Float16)f;
        uint16_t want;
        memcpy(&want, &v, 2);
        uint16_t got = memra_fp32_to_fp16(f);
        if (isnan(f) ? (got & 0x7c00) != 0x7c00 || !(got & 0x3ff) : got != want) {
            if (bad++ < 5) fprintf(stderr, "fp32 0x%08x -> 0x%04x, _Float16 0x%04x\n", bits_of(f), got, want);
        }
    }
    CHECK(bad == 0, "%d fp32 -> fp16 differ from _Float16", bad);
#endif
}

static void test_bf16(void) {
    CHECK(bits_of(memra_bf16_to_fp32(0x3f80)) == 0x3f800000u, "bf16 1.0");
    CHECK(memra_bf16_to_fp32(0x4049) == 3.140625f, "bf16 3.140625");
    CHECK(bits_of(memra_bf16_to_fp32(0x8000)) == 0x80000000u, "bf16 -0");
    CHECK(memra_bf16_to_fp32(0xff80) == -INFINITY, "bf16 -inf");
    CHECK(memra_fp32_to_bf16(1.0f) == 0x3f80, "1.0");
    CHECK(memra_fp32_to_bf16(from_bits(0x3f808000u)) == 0x3f80, "tie to even (down)");
    CHECK(memra_fp32_to_bf16(from_bits(0x3f818000u)) == 0x3f82, "tie to even (up)");
    CHECK(memra_fp32_to_bf16(from_bits(0x3f808001u)) == 0x3f81, "above the tie");
    CHECK(memra_fp32_to_bf16(from_bits(0x3f807fffu)) == 0x3f80, "below the tie");
    CHECK(memra_fp32_to_bf16(from_bits(0x7f7fffffu)) == 0x7f80, "FLT_MAX rounds to inf");
    CHECK(memra_fp32_to_bf16(INFINITY) == 0x7f80, "inf");
    CHECK(memra_fp32_to_bf16(-INFINITY) == 0xff80, "-inf");
    CHECK(memra_fp32_to_bf16(from_bits(0x00000001u)) == 0x0000, "smallest subnormal -> 0");
    CHECK(memra_fp32_to_bf16(from_bits(0x80018000u)) == 0x8002, "negative subnormal tie");
    /* NaN must stay NaN even when rounding would carry it into inf */
    CHECK(memra_fp32_to_bf16(from_bits(0x7f800001u)) == 0x7fc0, "sNaN low payload -> 0x7fc0");
    CHECK(memra_fp32_to_bf16(from_bits(0x7fffffffu)) == 0x7fff, "NaN all-ones payload");
    CHECK(memra_fp32_to_bf16(from_bits(0xffc00000u)) == 0xffc0, "negative qNaN");
    int bad = 0;
    for (uint32_t h = 0; h < 65536; h++) {
        float f = memra_bf16_to_fp32((uint16_t)h);
        uint16_t back = memra_fp32_to_bf16(f);
        if (isnan(f) ? back != (h | 0x40) : back != h) bad++;
    }
    CHECK(bad == 0, "%d bf16 codes do not round-trip", bad);
}

/* ---- one hand-built block per type ----------------------------------------
 * Scales: fp16 0x3400 = 0.25, 0x3800 = 0.5, 0x3c00 = 1, 0x4000 = 2,
 * 0x4200 = 3, 0xbc00 = -1. Unlisted elements are worked out in comments. */

static void fill_row(float *want, int n, float v) {
    for (int i = 0; i < n; i++) want[i] = v;
}

static void test_plain_blocks(void) {
    float want[8];
    const float f32[4] = {1.5f, -0.0f, INFINITY, 0x1p-149f};
    check_row("F32", MEMRA_TYPE_F32, f32, f32, 4);
    const uint16_t f16[4] = {0x3c00, 0xc000, 0x0001, 0x7bff};
    want[0] = 1.0f, want[1] = -2.0f, want[2] = 0x1p-24f, want[3] = 65504.0f;
    check_row("F16", MEMRA_TYPE_F16, f16, want, 4);
    const uint16_t bf16[3] = {0x3f80, 0xc049, 0x0001};
    want[0] = 1.0f, want[1] = -3.140625f, want[2] = 0x1p-133f;
    check_row("BF16", MEMRA_TYPE_BF16, bf16, want, 3);
}

static void test_q4_q5_q8_blocks(void) {
    block_buf buf;
    float want[32];

    /* Q4_0: y = d * (q - 8); nibble 8 -> 0 */
    memra_block_q4_0 *q40 = (memra_block_q4_0 *)buf.b;
    q40->d = 0x3800;
    memset(q40->qs, 0x88, sizeof q40->qs);
    q40->qs[0] = 0x1f;  /* y0 = .5*(15-8) = 3.5, y16 = .5*(1-8) = -3.5 */
    q40->qs[15] = 0xf0; /* y15 = .5*(0-8) = -4, y31 = .5*(15-8) = 3.5 */
    fill_row(want, 32, 0.0f);
    want[0] = 3.5f, want[16] = -3.5f, want[15] = -4.0f, want[31] = 3.5f;
    check_row("Q4_0", MEMRA_TYPE_Q4_0, q40, want, 32);

    /* Q4_1: y = d * q + m with d = 2, m = -1 */
    memra_block_q4_1 *q41 = (memra_block_q4_1 *)buf.b;
    q41->d = 0x4000, q41->m = 0xbc00;
    memset(q41->qs, 0, sizeof q41->qs);
    q41->qs[0] = 0x30; /* y0 = -1, y16 = 2*3-1 = 5 */
    q41->qs[3] = 0x0f; /* y3 = 2*15-1 = 29, y19 = -1 */
    fill_row(want, 32, -1.0f);
    want[16] = 5.0f, want[3] = 29.0f;
    check_row("Q4_1", MEMRA_TYPE_Q4_1, q41, want, 32);

    /* Q5_0: y = d * (q - 16), qh bit j = 5th bit of element j; d = 1 */
    memra_block_q5_0 *q50 = (memra_block_q5_0 *)buf.b;
    q50->d = 0x3c00;
    memset(q50->qs, 0, sizeof q50->qs);
    q50->qh[0] = 0x01, q50->qh[1] = 0, q50->qh[2] = 0, q50->qh[3] = 0x80; /* elements 0 and 31 */
    q50->qs[0] = 0x0f;  /* y0 = (15|16)-16 = 15, y16 = 0-16 */
    q50->qs[15] = 0xa0; /* y15 = -16, y31 = (10|16)-16 = 10 */
    fill_row(want, 32, -16.0f);
    want[0] = 15.0f, want[31] = 10.0f;
    check_row("Q5_0", MEMRA_TYPE_Q5_0, q50, want, 32);

    /* Q5_1: y = d * q + m with d = .5, m = 3 */
    memra_block_q5_1 *q51 = (memra_block_q5_1 *)buf.b;
    q51->d = 0x3800, q51->m = 0x4200;
    memset(q51->qs, 0, sizeof q51->qs);
    q51->qh[0] = 0, q51->qh[1] = 0, q51->qh[2] = 0x01, q51->qh[3] = 0; /* element 16 */
    q51->qs[0] = 0x21; /* y0 = .5*1+3 = 3.5, y16 = .5*(2|16)+3 = 12 */
    fill_row(want, 32, 3.0f);
    want[0] = 3.5f, want[16] = 12.0f;
    check_row("Q5_1", MEMRA_TYPE_Q5_1, q51, want, 32);

    /* Q8_0: y = d * q with d = .25 */
    memra_block_q8_0 *q80 = (memra_block_q8_0 *)buf.b;
    q80->d = 0x3400;
    memset(q80->qs, 0, sizeof q80->qs);
    q80->qs[0] = -128, q80->qs[1] = 127, q80->qs[31] = -1;
    fill_row(want, 32, 0.0f);
    want[0] = -32.0f, want[1] = 31.75f, want[31] = -0.25f;
    check_row("Q8_0", MEMRA_TYPE_Q8_0, q80, want, 32);
}

static void test_k_blocks(void) {
    block_buf buf;
    float want[256];

    /* Q2_K: y = (d*sc)*q - dmin*mn, d = 1, dmin = .5; element i's 2 bits are
     * bits 2k of qs[32h + l] (i = 128h + 32k + l) */
    memra_block_q2_k *q2 = (memra_block_q2_k *)buf.b;
    memset(q2, 0, sizeof *q2);
    q2->d = 0x3c00, q2->dmin = 0x3800;
    q2->scales[0] = 0x21; /* sub 0: sc 1, mn 2 -> offset -1 */
    q2->scales[5] = 0x1f; /* sub 5: sc 15, mn 1 -> offset -.5 */
    q2->qs[0] = 0x03;     /* element 0: q 3 -> 3 - 1 = 2 */
    q2->qs[16] = 0x10;    /* element 80 (h0 k2 l16, sub 5): q 1 -> 15 - .5 = 14.5 */
    fill_row(want, 256, 0.0f);
    for (int i = 0; i < 16; i++) want[i] = -1.0f;
    for (int i = 80; i < 96; i++) want[i] = -0.5f;
    want[0] = 2.0f, want[80] = 14.5f;
    check_row("Q2_K", MEMRA_TYPE_Q2_K, q2, want, 256);

    /* Q3_K: y = (d*(sc-32)) * (q - (hbit ? 0 : 4)), d = 2 */
    memra_block_q3_k *q3 = (memra_block_q3_k *)buf.b;
    memset(q3, 0, sizeof *q3);
    q3->d = 0x4000;
    q3->scales[0] = 0x01; /* sub 0 low bits 1 */
    q3->scales[8] = 0x02; /* sub 0 high bits 2 -> sc 33 -> dl 2 */
    q3->scales[1] = 0xc0; /* sub 9 low bits 12 (hi nibble of byte 9-8) */
    q3->scales[9] = 0x10; /* sub 9 high bits 1 (byte 8+9%4, bits 2*(9/4)) -> sc 28 -> dl -8 */
    q3->qs[0] = 0x02, q3->hmask[0] = 0x01;  /* element 0: q 2, hbit -> 2*2 = 4 */
    q3->qs[48] = 0x03, q3->hmask[16] = 0x10; /* element 144 (h1 k0 l16, sub 9): -8*3 = -24 */
    for (int i = 0; i < 256; i++) want[i] = -64.0f * -4.0f; /* sc 0 -> dl -64, q 0-4 */
    for (int i = 0; i < 16; i++) want[i] = 2.0f * -4.0f;
    for (int i = 144; i < 160; i++) want[i] = -8.0f * -4.0f;
    want[0] = 4.0f, want[144] = -24.0f;
    check_row("Q3_K", MEMRA_TYPE_Q3_K, q3, want, 256);

    /* Q4_K: y = (d*sc)*q - dmin*mn per 32, d = 1, dmin = 2 */
    memra_block_q4_k *q4 = (memra_block_q4_k *)buf.b;
    memset(q4, 0, sizeof *q4);
    q4->d = 0x3c00, q4->dmin = 0x4000;
    q4->scales[0] = 3;    /* sub 0 sc 3 */
    q4->scales[4] = 1;    /* sub 0 mn 1 -> offset -2 */
    q4->scales[9] = 0x53; /* sub 5: sc low 3, mn low 5 */
    q4->scales[1] = 0x40; /* sub 5 sc high bits 1 -> 19 (sub 1 sc stays 0) */
    q4->scales[5] = 0x80; /* sub 5 mn high bits 2 -> 37 -> offset -74 */
    q4->qs[0] = 0x07;     /* element 0: 3*7 - 2 = 19 */
    q4->qs[64] = 0xf0;    /* element 160 (sub 5 = hi nibbles of qs[64..95]): 19*15 - 74 = 211 */
    fill_row(want, 256, 0.0f);
    for (int i = 0; i < 32; i++) want[i] = -2.0f;
    for (int i = 160; i < 192; i++) want[i] = -74.0f;
    want[0] = 19.0f, want[160] = 211.0f;
    check_row("Q4_K", MEMRA_TYPE_Q4_K, q4, want, 256);

    /* Q5_K: same scales; 5th bit of element 32s + l is bit s of qh[l] */
    memra_block_q5_k *q5 = (memra_block_q5_k *)buf.b;
    memset(q5, 0, sizeof *q5);
    q5->d = 0x3c00, q5->dmin = 0x4000;
    q5->scales[0] = 3, q5->scales[4] = 1, q5->scales[9] = 0x53, q5->scales[1] = 0x40, q5->scales[5] = 0x80;
    q5->qs[0] = 0x07, q5->qs[64] = 0xf0;
    q5->qh[0] = 0x21; /* element 0: q 23 -> 3*23 - 2 = 67; element 160: q 31 -> 19*31 - 74 = 515 */
    want[0] = 67.0f, want[160] = 515.0f;
    check_row("Q5_K", MEMRA_TYPE_Q5_K, q5, want, 256);

    /* Q6_K: y = (d*sc)*(q-32) per 16, d = .5 */
    memra_block_q6_k *q6 = (memra_block_q6_k *)buf.b;
    memset(q6, 0, sizeof *q6);
    q6->d = 0x3800;
    q6->scales[0] = 2, q6->scales[11] = -3;
    q6->ql[0] = 0x0f, q6->qh[0] = 0x03;   /* element 0: q 63 -> .5*2*31 = 31 */
    q6->ql[112] = 0x05, q6->qh[48] = 0x04; /* element 176 (h1 k1 l16, sub 11): q 21 -> .5*-3*-11 = 16.5 */
    fill_row(want, 256, -0.0f); /* scale 0: (.5*0)*(0-32) is -0 in fp32 */
    for (int i = 0; i < 16; i++) want[i] = -32.0f;       /* .5*2*-32 */
    for (int i = 176; i < 192; i++) want[i] = 48.0f;     /* .5*-3*-32 */
    want[0] = 31.0f, want[176] = 16.5f;
    check_row("Q6_K", MEMRA_TYPE_Q6_K, q6, want, 256);
}

static void test_nonlinear_blocks(void) {
    block_buf buf;
    float want[256];

    /* IQ4_NL: y = d * kv[q], d = 1; kv[0] = -127 */
    memra_block_iq4_nl *nl = (memra_block_iq4_nl *)buf.b;
    nl->d = 0x3c00;
    memset(nl->qs, 0, sizeof nl->qs);
    nl->qs[0] = 0xf0; /* y0 = kv[0] = -127, y16 = kv[15] = 113 */
    nl->qs[1] = 0x78; /* y1 = kv[8] = 1, y17 = kv[7] = -10 */
    fill_row(want, 32, -127.0f);
    want[16] = 113.0f, want[1] = 1.0f, want[17] = -10.0f;
    check_row("IQ4_NL", MEMRA_TYPE_IQ4_NL, nl, want, 32);

    /* IQ4_XS: y = (d*(sc-32)) * kv[q] per 32, d = .5 */
    memra_block_iq4_xs *xs = (memra_block_iq4_xs *)buf.b;
    memset(xs, 0, sizeof *xs);
    xs->d = 0x3800;
    xs->scales_l[0] = 0x02; /* sub 0 low 2 */
    xs->scales_l[1] = 0xf0; /* sub 3 low 15 */
    xs->scales_h = 0x0042;  /* sub 0 high 2 -> 34 -> dl 1; sub 3 high 1 -> 31 -> dl -.5 */
    xs->qs[0] = 0x9c;       /* element 0: kv[12] = 53; element 16: kv[9] = 13 */
    xs->qs[48] = 0x0f;      /* element 96: kv[15] -> -.5*113; element 112: kv[0] -> 63.5 */
    for (int i = 0; i < 256; i++) want[i] = -16.0f * -127.0f; /* sc 0 -> dl -16 */
    for (int i = 0; i < 32; i++) want[i] = -127.0f;
    for (int i = 96; i < 128; i++) want[i] = 63.5f;
    want[0] = 53.0f, want[16] = 13.0f, want[96] = -56.5f;
    check_row("IQ4_XS", MEMRA_TYPE_IQ4_XS, xs, want, 256);

    /* MXFP4: y = 2^(e-127) * E2M1(q); E2M1 codes 7 = 6, 9 = -0.5, 2 = 1, 15 = -6 */
    memra_block_mxfp4 *mx = (memra_block_mxfp4 *)buf.b;
    mx->e = 129; /* scale 4 */
    memset(mx->qs, 0, sizeof mx->qs);
    mx->qs[0] = 0xf7; /* y0 = 24, y16 = -24 */
    mx->qs[1] = 0x29; /* y1 = -2, y17 = 4 */
    fill_row(want, 32, 0.0f);
    want[0] = 24.0f, want[16] = -24.0f, want[1] = -2.0f, want[17] = 4.0f;
    check_row("MXFP4", MEMRA_TYPE_MXFP4, mx, want, 32);
    mx->e = 0; /* scale 2^-127: E2M1 0.5 gives the fp32 subnormal 2^-128 */
    mx->qs[0] = 0x01, mx->qs[1] = 0;
    fill_row(want, 32, 0.0f);
    want[0] = 0x1p-128f;
    check_row("MXFP4 e=0", MEMRA_TYPE_MXFP4, mx, want, 32);
    mx->e = 254; /* scale 2^127: 6 * 2^127 overflows to inf, as in fp32 math */
    mx->qs[0] = 0x07;
    want[0] = INFINITY;
    check_row("MXFP4 e=254", MEMRA_TYPE_MXFP4, mx, want, 32);

    /* NVFP4: y = UE4M3(d[s]) * E2M1(q) per 16. UE4M3 0x38 = 1.0, 0x3c = 1.5,
     * 0x7f decodes to 0, 0x01 = 2^-9 (subnormal); E2M1 5 = 3, 14 = -4, 7 = 6, 12 = -2 */
    memra_block_nvfp4 *nv = (memra_block_nvfp4 *)buf.b;
    memset(nv, 0, sizeof *nv);
    nv->d[0] = 0x38, nv->d[1] = 0x3c, nv->d[2] = 0x7f, nv->d[3] = 0x01;
    nv->qs[0] = 0xe5;  /* element 0: 1*3 = 3; element 8: -4 */
    nv->qs[8] = 0x07;  /* element 16: 1.5*6 = 9 */
    nv->qs[16] = 0x77; /* elements 32, 40: scale 0 */
    nv->qs[24] = 0x0c; /* element 48: 2^-9 * -2 = -2^-8 */
    fill_row(want, 64, 0.0f);
    want[0] = 3.0f, want[8] = -4.0f, want[16] = 9.0f, want[48] = -0x1p-8f;
    check_row("NVFP4", MEMRA_TYPE_NVFP4, nv, want, 64);
}

/* ---- dot products ------------------------------------------------------- */

/* Byte offsets of fp16 fields per block (kept finite and moderate). */
static int fp16_fields(uint32_t type, int *off) {
    switch (type) {
    case MEMRA_TYPE_Q4_0: case MEMRA_TYPE_Q5_0: case MEMRA_TYPE_Q8_0:
    case MEMRA_TYPE_IQ4_NL: case MEMRA_TYPE_IQ4_XS:
        off[0] = 0;
        return 1;
    case MEMRA_TYPE_Q4_1: case MEMRA_TYPE_Q5_1: case MEMRA_TYPE_Q4_K: case MEMRA_TYPE_Q5_K:
        off[0] = 0, off[1] = 2;
        return 2;
    case MEMRA_TYPE_Q2_K: off[0] = 80, off[1] = 82; return 2;
    case MEMRA_TYPE_Q3_K: off[0] = 108; return 1;
    case MEMRA_TYPE_Q6_K: off[0] = 208; return 1;
    default: return 0;
    }
}

/* A random row of n elements with finite, moderate values. */
static void random_row(uint32_t type, uint8_t *row, int64_t n) {
    const memra_type_info *t = memra_type_get(type);
    size_t bytes = memra_type_row_bytes(type, n);
    for (size_t i = 0; i < bytes; i++) row[i] = (uint8_t)rng_u32();
    if (type == MEMRA_TYPE_F32) {
        for (int64_t i = 0; i < n; i++) {
            float f = rng_uniform(-2, 2);
            memcpy(row + 4 * i, &f, 4);
        }
    } else if (type == MEMRA_TYPE_F16 || type == MEMRA_TYPE_BF16) {
        for (int64_t i = 0; i < n; i++) {
            float f = rng_uniform(-2, 2);
            uint16_t h = type == MEMRA_TYPE_F16 ? memra_fp32_to_fp16(f) : memra_fp32_to_bf16(f);
            memcpy(row + 2 * i, &h, 2);
        }
    }
    int off[2], nf = fp16_fields(type, off);
    for (int64_t b = 0; b < n / t->block_elems; b++) {
        uint8_t *blk = row + b * t->block_bytes;
        for (int f = 0; f < nf; f++) {
            uint16_t h = memra_fp32_to_fp16(rng_uniform(-0.1f, 0.1f));
            memcpy(blk + off[f], &h, 2);
        }
        if (type == MEMRA_TYPE_MXFP4) blk[0] = (uint8_t)(120 + rng_u32() % 12);
    }
}

static void test_dot(void) {
    static const uint32_t types[] = {
        MEMRA_TYPE_F32,  MEMRA_TYPE_F16,  MEMRA_TYPE_BF16, MEMRA_TYPE_Q4_0,   MEMRA_TYPE_Q4_1,   MEMRA_TYPE_Q5_0,
        MEMRA_TYPE_Q5_1, MEMRA_TYPE_Q8_0, MEMRA_TYPE_Q2_K, MEMRA_TYPE_Q3_K,   MEMRA_TYPE_Q4_K,   MEMRA_TYPE_Q5_K,
        MEMRA_TYPE_Q6_K, MEMRA_TYPE_IQ4_NL, MEMRA_TYPE_IQ4_XS, MEMRA_TYPE_MXFP4, MEMRA_TYPE_NVFP4,
    };
    enum { N = 1024 };
    static union { uint64_t a; uint8_t b[N * 4]; } row;
    static float x[N], deq[N], onehot[N];
    for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++) {
        uint32_t type = types[ti];
        const char *name = memra_type_name(type);
        for (int rep = 0; rep < 8; rep++) {
            random_row(type, row.b, N);
            for (int i = 0; i < N; i++) x[i] = rng_uniform(-1, 1);
            memra_dequant_row(type, row.b, deq, N);
            double ref = 0, mag = 0;
            for (int i = 0; i < N; i++) {
                ref += (double)deq[i] * x[i];
                mag += fabs((double)deq[i] * x[i]);
            }
            float got = memra_dot_row(type, row.b, x, N);
            /* fp32 sums of 64 terms per lane: error well under 1e-5 of sum |a x| */
            CHECK(fabs(got - ref) <= 1e-5 * mag + 1e-30, "%s dot %.9g vs %.9g (mag %.3g)", name, (double)got,
                  ref, mag);
            CHECK(bits_of(memra_dot_row(type, row.b, x, N)) == bits_of(got), "%s dot not repeatable", name);
        }
        /* with a one-hot x the dot is exactly the dequantized element */
        memset(onehot, 0, sizeof onehot);
        int bad = 0;
        for (int k = 0; k < N; k += 37) {
            onehot[k] = 1.0f;
            if (bits_of(memra_dot_row(type, row.b, onehot, N)) != bits_of(deq[k] + 0.0f)) bad++;
            onehot[k] = 0.0f;
        }
        CHECK(bad == 0, "%s: %d one-hot dots differ from the dequantized element", name, bad);
        /* a dot over the first block equals the same dot over a 1-block row */
        const memra_type_info *t = memra_type_get(type);
        float part = memra_dot_row(type, row.b, x, t->block_elems);
        double pref = 0;
        for (uint32_t i = 0; i < t->block_elems; i++) pref += (double)deq[i] * x[i];
        CHECK(fabs(part - pref) <= 1e-5 * fabs(pref) + 1e-6, "%s one-block dot", name);
    }

    /* plain types take any n: the tail must be counted */
    float a[37], b[37];
    double ref = 0;
    for (int i = 0; i < 37; i++) {
        a[i] = (float)(i + 1), b[i] = (i % 2) ? 0.5f : -0.25f;
        ref += (double)a[i] * b[i];
    }
    CHECK(memra_dot_row(MEMRA_TYPE_F32, a, b, 37) == (float)ref, "F32 dot, n = 37: %g vs %g",
          (double)memra_dot_row(MEMRA_TYPE_F32, a, b, 37), ref);
    uint16_t h[300];
    float xs[300];
    ref = 0;
    for (int i = 0; i < 300; i++) {
        h[i] = memra_fp32_to_bf16((float)(i % 7) - 3.0f);
        xs[i] = 0.125f * (float)(i % 5);
        ref += ((double)(i % 7) - 3.0) * xs[i];
    }
    CHECK(memra_dot_row(MEMRA_TYPE_BF16, h, xs, 300) == (float)ref, "BF16 dot, n = 300 (chunk + tail)");
}

/* Misuse never reads past the row and is loud (NaN), never a crash. */
static void test_misuse(void) {
    block_buf buf;
    memset(&buf, 0, sizeof buf);
    float out[64], x[64] = {0};
    for (int i = 0; i < 64; i++) out[i] = 1.0f;
    memra_dequant_row(MEMRA_TYPE_Q4_0, buf.b, out, 33);
    CHECK(isnan(out[0]) && isnan(out[32]) && out[33] == 1.0f, "Q4_0 n = 33 -> NaN, nothing past n");
    memra_dequant_row(MEMRA_TYPE_IQ2_XXS, buf.b, out, 64);
    CHECK(isnan(out[0]) && isnan(out[63]), "unsupported type -> NaN");
    memra_dequant_row(99, buf.b, out, 4);
    CHECK(isnan(out[3]), "unknown type -> NaN");
    CHECK(isnan(memra_dot_row(MEMRA_TYPE_Q8_K, buf.b, x, 256)), "dot of an unsupported type");
    CHECK(isnan(memra_dot_row(4, buf.b, x, 32)), "dot of a retired id");
    CHECK(isnan(memra_dot_row(MEMRA_TYPE_Q6_K, buf.b, x, 64)), "dot of a partial block");
    CHECK(memra_dot_row(MEMRA_TYPE_Q4_0, buf.b, x, 0) == 0.0f, "empty dot");
}

int main(void) {
    test_table();
    test_fp16();
    test_bf16();
    test_plain_blocks();
    test_q4_q5_q8_blocks();
    test_k_blocks();
    test_nonlinear_blocks();
    test_dot();
    test_misuse();
    return test_finish("test_quant");
}
