/* Backend-independent helpers: freeing a backend and the batch arrays. */
#include "backend/backend.h"

#include <stdlib.h>
#include <string.h>

void memra_backend_free(memra_backend *be) {
    if (be && be->ops && be->ops->destroy) be->ops->destroy(be);
}

void memra_batch_free(memra_backend *be, memra_batch *b) {
    if (!b) return;
    free(b->tokens);
    free(b->pos);
    free(b->seq_start);
    free(b->slot);
    free(b->tok_seq);
    if (be) {
        int32_t **d[] = {&b->d_tokens, &b->d_pos, &b->d_seq_start, &b->d_slot, &b->d_tok_seq};
        for (size_t i = 0; i < MEMRA_ARRAY_LEN(d); i++)
            if (*d[i]) be->ops->free(be, *d[i]);
    }
    memset(b, 0, sizeof *b);
}

memra_status memra_batch_init(memra_backend *be, int32_t max_tokens, int32_t max_seqs, memra_batch *b,
                              memra_error *err) {
    memset(b, 0, sizeof *b);
    if (max_tokens < 1 || max_seqs < 1 || max_seqs > max_tokens)
        return memra_errorf(err, MEMRA_ERR_INVALID, "batch: need 1 <= max_seqs (%d) <= max_tokens (%d)", max_seqs,
                            max_tokens);
    size_t nt = (size_t)max_tokens * sizeof(int32_t), ns = (size_t)max_seqs * sizeof(int32_t);
    b->tokens = malloc(nt);
    b->pos = malloc(nt);
    b->tok_seq = malloc(nt);
    b->seq_start = malloc(ns + sizeof(int32_t));
    b->slot = malloc(ns);
    memra_status st = MEMRA_OK;
    if (!b->tokens || !b->pos || !b->tok_seq || !b->seq_start || !b->slot) st = MEMRA_ERR_NOMEM;
    if (st == MEMRA_OK) st = be->ops->alloc(be, nt, (void **)&b->d_tokens);
    if (st == MEMRA_OK) st = be->ops->alloc(be, nt, (void **)&b->d_pos);
    if (st == MEMRA_OK) st = be->ops->alloc(be, nt, (void **)&b->d_tok_seq);
    if (st == MEMRA_OK) st = be->ops->alloc(be, ns + sizeof(int32_t), (void **)&b->d_seq_start);
    if (st == MEMRA_OK) st = be->ops->alloc(be, ns, (void **)&b->d_slot);
    if (st != MEMRA_OK) {
        memra_batch_free(be, b);
        return memra_errorf(err, st, "batch: cannot allocate arrays for %d tokens", max_tokens);
    }
    b->max_tokens = max_tokens;
    b->max_seqs = max_seqs;
    memra_batch_clear(b);
    return MEMRA_OK;
}

void memra_batch_clear(memra_batch *b) {
    b->n_tokens = 0;
    b->n_seqs = 0;
    if (b->seq_start) b->seq_start[0] = 0;
}

memra_status memra_batch_add(memra_batch *b, int32_t slot, const int32_t *tokens, int32_t n, int32_t pos0) {
    if (n < 1 || pos0 < 0 || pos0 > INT32_MAX - n) return MEMRA_ERR_INVALID;
    if (b->n_seqs >= b->max_seqs || n > b->max_tokens - b->n_tokens) return MEMRA_ERR_LIMIT;
    int32_t s = b->n_seqs, t0 = b->n_tokens;
    for (int32_t i = 0; i < n; i++) {
        b->tokens[t0 + i] = tokens[i];
        b->pos[t0 + i] = pos0 + i;
        b->tok_seq[t0 + i] = s;
    }
    b->slot[s] = slot;
    b->seq_start[s] = t0;
    b->seq_start[s + 1] = t0 + n;
    b->n_seqs = s + 1;
    b->n_tokens = t0 + n;
    return MEMRA_OK;
}
