/* The op entry points of the CUDA backend, one group per .cu file; cuda.cu
 * puts them into the ops table. Signatures are backend.h's. */
#ifndef MEMRA_CUDA_OPS_CUH
#define MEMRA_CUDA_OPS_CUH

#include "backend/cuda/common.cuh"

/* misc.cu */
memra_status cuda_op_embed(memra_backend *be, const memra_weight *table, const memra_batch *b, float *out);
memra_status cuda_op_add(memra_backend *be, float *y, const float *x, int64_t n);
memra_status cuda_op_add_sigmoid_scaled(memra_backend *be, float *y, const float *x, const float *gate,
                                        int64_t gate_stride, int64_t n, int64_t T);
memra_status cuda_op_swiglu(memra_backend *be, const float *gate, const float *up, float *out, int64_t n, int64_t T);
memra_status cuda_op_argmax(memra_backend *be, const float *logits, int64_t n, int64_t T, int32_t *out);

/* norm.cu */
memra_status cuda_op_rmsnorm(memra_backend *be, const float *x, int64_t x_stride, const memra_weight *w, float *y,
                             int64_t y_stride, int64_t n, int64_t n_rows, float eps);

/* norm.cu: matmul_multi's norm with its rows written out (memra_norm.out), F32 weights, T < 16; *done = 0
 * when the shapes are not its own (nothing launched) */
memra_status cuda_rmsnorm_mv(memra_backend *be, int n, const memra_weight *const *w, float *const *y, const float *x,
                             int64_t T, const memra_norm *norm, int *done);
/* matmul.cu */
memra_status cuda_op_matmul(memra_backend *be, const memra_weight *w, const float *x, float *y, int64_t T,
                            int accumulate);
int cuda_type_supported(uint32_t type);
/* matmul.cu: whether T < 16 matmuls of a tile-major Q6_K weight of row length in take the int8 matvec (path 5),
 * the one T < 16 reader of tile-major Q6_K besides k_matvec_multi; c_weight_load tiles Q6_K only then */
int cuda_q6_tiles(int64_t in);

/* rope.cu */
memra_status cuda_op_rope_neox(memra_backend *be, float *x, const memra_batch *b, int64_t n_heads,
                               int64_t head_stride, int64_t tok_stride, int32_t n_rot, float theta);

/* attention.cu */
memra_status cuda_op_kv_store(memra_backend *be, const memra_batch *b, float *k_cache, float *v_cache, int32_t n_ctx,
                              int64_t kv_dim, const float *k, const float *v);
memra_status cuda_op_attention(memra_backend *be, const memra_batch *b, const float *k_cache, const float *v_cache,
                               int32_t n_ctx, const float *q, const float *gate, int64_t q_tok_stride,
                               int64_t q_head_stride, int32_t n_head, int32_t n_kv, int32_t hd, float scale,
                               float *out);

/* gdn.cu */
memra_status cuda_op_gdn(memra_backend *be, const memra_batch *b, const memra_gdn_params *p, float *conv_state,
                         float *ssm_state, const float *mixed, const float *z, const float *braw, const float *araw,
                         float *out);

/* moe.cu */
memra_status cuda_op_moe_route(memra_backend *be, const float *logits, int64_t T, int32_t n_expert, int32_t n_used,
                               int32_t *ids, float *w);
memra_status cuda_op_moe_ffn(memra_backend *be, const memra_moe_params *p, const float *x, const int32_t *ids,
                             const float *w, float *out, int64_t T, void *scratch);
memra_status cuda_op_moe_block(memra_backend *be, const memra_moe_params *p, const float *logits, const float *xn,
                               const float *sg, int64_t sg_stride, float *x, int64_t T, int32_t *ids, float *w,
                               void *scratch);

/* matmul.cu: fused decode matvecs (backend.h matmul_multi, matmul_swiglu) */
memra_status cuda_op_matmul_multi(memra_backend *be, int n, const memra_weight *const *w, float *const *y,
                                  const float *x, int64_t T, const memra_norm *norm);
memra_status cuda_op_matmul_swiglu(memra_backend *be, const memra_weight *gate, const memra_weight *up,
                                   const float *x, float *out, int64_t T, const memra_norm *norm);

/* gemm.cu: the prefill (T >= 16) matmul on the tensor cores; called by
 * cuda_op_matmul after its checks */
memra_status cuda_gemm_tc(memra_backend *be, const memra_weight *w, const float *x, float *y, int64_t T,
                          int accumulate);
/* 1 when cuda_gemm_tc runs k_gemm_wg (wgmma) for this weight: Q8_0 with
 * in % 64 == 0 or Q4_K with in % 256 == 0, more than 512 rows, an sm_90a
 * device, MEMRA_GEMM_WG not 0 */
int cuda_gemm_wg_takes(uint32_t type, int64_t in, int64_t n_out);
/* 1 when k_gemm_wg's 128 x 128 tiles of a 512-token matmul (the engine's
 * prefill batch) with n_out rows fill at least half of their waves (one
 * tile per SM at a time). A function of the shape only, so that a path
 * choice never depends on T. */
int cuda_gemm_wg_fills(memra_backend *be, int64_t n_out);
/* 1 when cuda_gemm_tc_pair runs w1 and w2 (T >= 16) as one k_gemm_wg launch;
 * a function of the shapes only */
int cuda_gemm_wg_pairs(memra_backend *be, const memra_weight *w1, const memra_weight *w2);
memra_status cuda_gemm_tc_pair(memra_backend *be, const memra_weight *w1, const memra_weight *w2, const float *x,
                               float *y1, float *y2, int64_t T);

/* rope.cu: the fused attention head op (backend.h qk_norm_rope_store) */
memra_status cuda_op_qk_norm_rope_store(memra_backend *be, const memra_batch *b, float *q, int64_t q_tok_stride,
                                        int64_t q_head_stride, int32_t n_head, float *k, const float *v, int32_t n_kv,
                                        int32_t hd, const memra_weight *q_norm, const memra_weight *k_norm, float eps,
                                        int32_t n_rot, float theta, float *k_cache, float *v_cache, int32_t n_ctx);

/* prof.cu: the op timeline (backend.h prof_*) */
memra_status cuda_prof_begin(memra_backend *be);
memra_status cuda_prof_mark(memra_backend *be, const char *label);
memra_status cuda_prof_end(memra_backend *be, FILE *f);
/* prof.cu: the kernel timeline (backend.h timeline_*; built with MEMRA_TIMELINE only) */
memra_status cuda_timeline_begin(memra_backend *be);
memra_status cuda_timeline_end(memra_backend *be, FILE *f, const char *csv, int steps);

#endif
