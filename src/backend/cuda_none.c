/* Built instead of src/backend/cuda/ when nvcc is absent (or NOCUDA=1). */
#include "backend/backend.h"

memra_status memra_backend_cuda_init(memra_backend **out, int device, memra_error *err) {
    *out = NULL;
    return memra_errorf(err, MEMRA_ERR_UNSUPPORTED, "this memra was built without CUDA (no nvcc at build time)");
}

int memra_backend_cuda_prefill_matvec(memra_backend *be, uint32_t type, int64_t in, int64_t n_out) {
    (void)be, (void)type, (void)in, (void)n_out;
    return 0;
}

int memra_backend_cuda_weight_tm(memra_backend *be, const memra_weight *w) {
    (void)be, (void)w;
    return 0;
}

int memra_backend_cuda_moe_regimes_equal(memra_backend *be, const memra_moe_params *p) {
    (void)be, (void)p;
    return 0;
}
