/* Host-side check of the CUDA dequantizers (src/backend/cuda/quant.cuh,
 * compiled for the host) against the reference memra_dequant_row, on random
 * valid blocks. Needs no GPU: it catches layout mistakes before device time
 * is spent. Build and run: bash bench/kernels/dequant_check.sh */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LAB_SEED 0x1234567ull
#include "lab.cuh"

template <int TYPE>
static int check(const char *name) {
    const int64_t n = 2048;
    size_t rb = memra_type_row_bytes(TYPE, n);
    uint8_t *row = (uint8_t *)malloc(rb);
    float *ref = (float *)malloc(n * 4), *got = (float *)malloc(n * 4);
    for (size_t i = 0; i < rb; i++) row[i] = (uint8_t)rnd();
    const memra_type_info *ti = memra_type_get(TYPE);
    size_t bb = ti->block_bytes;
    for (size_t i = 0; i < rb / bb; i++) {
        uint8_t *b = row + i * bb;
        switch (TYPE) {
        case MEMRA_TYPE_F32: { float f = rf(-1, 1); memcpy(b, &f, 4); } break;
        case MEMRA_TYPE_F16: put_h(b, -1, 1); break;
        case MEMRA_TYPE_BF16: { uint16_t h = memra_fp32_to_bf16(rf(-1, 1)); memcpy(b, &h, 2); } break;
        case MEMRA_TYPE_Q4_1: case MEMRA_TYPE_Q5_1: put_h(b, -1, 1); put_h(b + 2, -1, 1); break;
        case MEMRA_TYPE_Q2_K: put_h(b + 80, -1, 1); put_h(b + 82, -1, 1); break;
        case MEMRA_TYPE_Q3_K: put_h(b + 108, -1, 1); break;
        case MEMRA_TYPE_Q4_K: case MEMRA_TYPE_Q5_K: put_h(b, -1, 1); put_h(b + 2, -1, 1); break;
        case MEMRA_TYPE_Q6_K: put_h(b + 208, -1, 1); break;
        case MEMRA_TYPE_MXFP4: b[0] = (uint8_t)(100 + rnd() % 50); break;
        case MEMRA_TYPE_NVFP4: break; /* every byte is a valid ue4m3 */
        default: put_h(b, -1, 1); break;
        }
    }
    memra_dequant_row(TYPE, row, ref, n);
    for (int64_t g = 0; g < n / 32; g++) dq32<TYPE>(row, g, got + 32 * g);
    float *got8 = (float *)malloc(n * 4);
    for (int64_t g = 0; g < n / 32; g++)
        for (int q = 0; q < 4; q++) dq8<TYPE>(row, g, q, got8 + 32 * g + 8 * q);
    int same8 = !memcmp(got8, got, n * 4);
    for (int64_t i = 0; i < n && !same8; i++)
        if (memcmp(&got8[i], &got[i], 4)) {
            printf("dq8 first differs at %lld: %g vs %g\n", (long long)i, got8[i], got[i]);
            break;
        }
    free(got8);
    double md = 0, mr = 0;
    int64_t first = -1;
    for (int64_t i = 0; i < n; i++) {
        double d = fabs((double)ref[i] - got[i]);
        if (!(d <= 0) && first < 0) first = i;
        if (!(d <= md)) md = d;
        if (fabs(ref[i]) > mr) mr = fabs(ref[i]);
    }
    int ok = md <= 1e-6 * mr && same8;
    if (!same8) printf("(dq8 differs from dq32) ");
    printf("%-7s max|diff| %.3e  max|ref| %.3e  %s", name, md, mr, ok ? "ok" : "FAIL");
    if (first >= 0) printf("  (first diff at %lld: ref %g got %g)", (long long)first, ref[first], got[first]);
    printf("\n");
    free(row), free(ref), free(got);
    return ok ? 0 : 1;
}

int main(void) {
    int fails = 0;
#define CHK(TY) fails += check<TY>(#TY + 11);
    CUDA_FOR_EACH_TYPE(CHK)
    printf("dequant_check: %d failed\n", fails);
    return fails ? 1 : 0;
}
