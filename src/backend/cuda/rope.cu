/* NeoX ("rotate-half") RoPE on the first n_rot dims of each head (spec §4.3):
 * pair (j, j + n_rot/2), angle pos * theta^(-2j/n_rot). The angle is formed
 * in double precision: at positions near 262144 an fp32 angle would be off
 * by ~1e-2 rad. */
#include "backend/cuda/ops.cuh"

/* Launch contract: grid (ceil(n_heads * n_rot/2 / 128), T), block 128;
 * thread (h, j) rotates pair j of head h of token blockIdx.y. In place. */
__global__ void k_rope_neox(float *x, const int32_t *__restrict__ pos, int64_t n_heads, int64_t head_stride,
                            int64_t tok_stride, int32_t n_rot, double log_theta) {
    int64_t t = blockIdx.y;
    int half = n_rot / 2;
    int64_t idx = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= n_heads * half) return;
    int64_t h = idx / half;
    int j = (int)(idx % half);
    double inv_freq = exp(-log_theta * (double)(2 * j) / (double)n_rot);
    double ang = (double)pos[t] * inv_freq;
    double sd, cd;
    sincos(ang, &sd, &cd);
    float s = (float)sd, c = (float)cd;
    float *p = x + t * tok_stride + h * head_stride;
    float a = p[j], b = p[j + half];
    p[j] = a * c - b * s;
    p[j + half] = b * c + a * s;
}

memra_status cuda_op_rope_neox(memra_backend *be, float *x, const memra_batch *b, int64_t n_heads,
                               int64_t head_stride, int64_t tok_stride, int32_t n_rot, float theta) {
    int64_t T = b->n_tokens;
    if (n_rot <= 0 || n_rot % 2 || n_heads <= 0 || !(theta > 0.0f) || T > 65535)
        return CUDA_INVALID(be, "rope_neox: n_rot %d, heads %lld, theta %g, T %lld", n_rot, (long long)n_heads,
                            (double)theta, (long long)T);
    if (T <= 0) return MEMRA_OK;
    int64_t pairs = n_heads * (n_rot / 2);
    dim3 grid((unsigned)((pairs + 127) / 128), (unsigned)T);
    k_rope_neox<<<grid, 128, 0, cuda_of(be)->stream>>>(x, b->d_pos, n_heads, head_stride, tok_stride, n_rot,
                                                       log((double)theta));
    return CUDA_LAUNCHED(be, "rope_neox");
}
