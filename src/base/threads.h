/* A fixed pool of worker threads and parallel_for over an index range.
 *
 * Work is split into contiguous chunks by index, never by timing, so any
 * reduction a task does over its own indices has a fixed order: results do not
 * depend on the number of threads. */
#ifndef MEMRA_BASE_THREADS_H
#define MEMRA_BASE_THREADS_H

#include <stdint.h>

#include "base/status.h"

typedef struct memra_pool memra_pool;

/* fn(ctx, begin, end): handle indices [begin, end). Called from several threads. */
typedef void (*memra_range_fn)(void *ctx, int64_t begin, int64_t end);

/* n_threads <= 0 picks the number of online CPUs. */
memra_status memra_pool_init(memra_pool **out, int n_threads);
void memra_pool_free(memra_pool *pool);
int memra_pool_size(const memra_pool *pool);

/* Runs fn over [0, n) in chunks of at least min_chunk indices and returns when
 * all are done. pool may be NULL (runs inline). Not reentrant: fn must not call
 * memra_pool_for on the same pool. */
void memra_pool_for(memra_pool *pool, int64_t n, int64_t min_chunk, memra_range_fn fn, void *ctx);

#endif
