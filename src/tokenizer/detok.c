/* Streaming detokenizer (see tokenizer.h): a generated token may end in the
 * middle of a multi-byte character, so the incomplete tail is held back
 * until the next token completes it, and what is emitted is always whole,
 * valid UTF-8. */
#include <stdlib.h>
#include <string.h>

#include "tokenizer/tok_internal.h"
#include "tokenizer/tokenizer.h"

memra_status memra_detok_init(memra_detok *d, const memra_tokenizer *t, memra_error *err) {
    memset(d, 0, sizeof *d);
    d->tok = t;
    /* input: hold (<= 3) + one piece; output: each input byte at most 3 bytes (U+FFFD) */
    size_t in = memra_tokenizer_max_piece(t) + 4, cap;
    if (memra_mul_size(in, 4, &cap)) return memra_errorf(err, MEMRA_ERR_NOMEM, "token pieces too long");
    d->buf = malloc(cap);
    if (!d->buf) return memra_errorf(err, MEMRA_ERR_NOMEM, "out of memory for the detokenizer");
    d->cap = cap;
    return MEMRA_OK;
}

void memra_detok_free(memra_detok *d) {
    free(d->buf);
    memset(d, 0, sizeof *d);
}

memra_status memra_detok_push(memra_detok *d, int32_t id, const char **text, size_t *len, memra_error *err) {
    size_t plen;
    const char *piece = memra_tokenizer_piece(d->tok, id, &plen);
    *text = d->buf;
    *len = 0;
    if (!piece)
        return memra_errorf(err, MEMRA_ERR_INVALID, "detokenize: id %d outside the vocabulary of %d", (int)id,
                            (int)memra_tokenizer_n_vocab(d->tok));
    /* the input (hold + piece) sits in the last quarter of buf, the output
     * is written from the start: output never overtakes input because each
     * input byte yields at most 3 output bytes */
    size_t m = d->n_hold + plen;
    unsigned char *in = (unsigned char *)d->buf + (d->cap - m);
    memcpy(in, d->hold, d->n_hold);
    memcpy(in + d->n_hold, piece, plen);
    d->n_hold = 0;
    size_t i = 0, o = 0;
    while (i < m) {
        int k = memra_utf8_step(in + i, m - i);
        if (k > 0) {
            memmove(d->buf + o, in + i, (size_t)k);
            o += (size_t)k;
            i += (size_t)k;
        } else if (k < 0) {
            memcpy(d->buf + o, "\xEF\xBF\xBD", 3);
            o += 3;
            i += (size_t)-k;
        } else {
            d->n_hold = m - i; /* a valid prefix: at most 3 bytes */
            memcpy(d->hold, in + i, d->n_hold);
            break;
        }
    }
    *len = o;
    return MEMRA_OK;
}

void memra_detok_flush(memra_detok *d, const char **text, size_t *len) {
    *text = d->buf;
    *len = 0;
    if (d->n_hold) {
        memcpy(d->buf, "\xEF\xBF\xBD", 3);
        *len = 3;
    }
    d->n_hold = 0;
}
