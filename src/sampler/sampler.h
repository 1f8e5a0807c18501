/* Host reference sampler: logits of one sequence -> next token.
 *
 * The pipeline order is fixed (and the device sampler must follow it):
 *   1. penalties over the last penalty_last_n accepted tokens (repeat, presence,
 *      frequency), applied to the logits of tokens that occurred;
 *   2. temperature <= 0: greedy argmax (lowest id on ties), done;
 *   3. logits / temperature, softmax (max-subtracted, fp64 sums);
 *   4. top-k, then top-p (smallest prefix of the sorted list with mass >= top_p,
 *      computed on the renormalised top-k set), then min-p (p >= min_p * p_max);
 *   5. draw: u = memra_rng_uniform(seed, step) in [0, 1); walk the survivors in
 *      (probability descending, id ascending) order and return the first whose
 *      cumulative mass exceeds u * total.
 * step counts the tokens this sampler has drawn since init/reset, so a seeded
 * request gives the same tokens whatever else runs beside it. */
#ifndef MEMRA_SAMPLER_H
#define MEMRA_SAMPLER_H

#include <stdint.h>

#include "base/status.h"

typedef struct memra_sampler memra_sampler;

memra_status memra_sampler_init(memra_sampler **out, int32_t n_vocab, const memra_sampling *params,
                                memra_error *err);
void memra_sampler_free(memra_sampler *s);

/* Forgets the history and sets step back to 0. */
void memra_sampler_reset(memra_sampler *s);

/* Adds a token to the history the penalties look at (the caller decides
 * whether prompt tokens count; memra's CLI and server add them). */
void memra_sampler_accept(memra_sampler *s, int32_t token);

/* Samples from logits[n_vocab] (not modified) and advances step. The caller
 * still has to accept() the returned token. */
int32_t memra_sampler_sample(memra_sampler *s, const float *logits);

uint64_t memra_sampler_step(const memra_sampler *s);

/* Counter-based uniform in [0, 1) with 24 bits: a pure function of (seed,
 * step), so host and device draw the same numbers. */
float memra_rng_uniform(uint64_t seed, uint64_t step);

#endif
