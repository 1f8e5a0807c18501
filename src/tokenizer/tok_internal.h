/* Internals shared by the tokenizer's files (not part of its API). */
#ifndef MEMRA_TOKENIZER_INTERNAL_H
#define MEMRA_TOKENIZER_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "base/status.h"

/* ---- unicode.c ---- */

/* Classifies the bytes at s[0..n), n >= 1: returns k > 0 when a valid k-byte
 * sequence starts there, -k (k >= 1) when the first k bytes are a maximal
 * invalid subpart (to become one U+FFFD), and 0 when s[0..n) is a valid but
 * incomplete prefix of a sequence (more bytes may complete it). */
int memra_utf8_step(const unsigned char *s, size_t n);

/* GPT-2 byte-level map: the code point that stands for each byte. */
uint32_t memra_byte_to_cp(unsigned char b);
/* The inverse: the byte a code point stands for, or -1 when cp is not in the map. */
int memra_cp_to_byte(uint32_t cp);

/* Decodes one code point from valid UTF-8 s[0..n) and returns its length. */
size_t memra_utf8_decode(const unsigned char *s, size_t n, uint32_t *cp);
/* Encodes cp (<= 0x10FFFF) into out[0..4) and returns the length. */
size_t memra_utf8_encode(uint32_t cp, char *out);

/* A growable byte buffer. */
typedef struct memra_tok_buf {
    char *p; /* [cap] */
    size_t n, cap;
} memra_tok_buf;

/* Makes room for `more` bytes after n; MEMRA_ERR_NOMEM on failure. */
memra_status memra_tok_buf_reserve(memra_tok_buf *b, size_t more);

/* Sets out to NFC(s[0..n)) for valid UTF-8 s. When s is already NFC for
 * certain (all ASCII) *out points at s and nothing is copied; otherwise the
 * result is written to buf (reused across calls). */
memra_status memra_tok_nfc(const char *s, size_t n, memra_tok_buf *buf, const char **out, size_t *out_n);

/* ---- pretokenize.c ---- */

typedef struct memra_pretok memra_pretok;
typedef struct memra_pretok_state memra_pretok_state;

/* name: "qwen2" or "qwen35"; MEMRA_ERR_INVALID for anything else. */
memra_status memra_pretok_init(const char *name, memra_pretok **out, memra_error *err);
void memra_pretok_free(memra_pretok *p);
/* 1 if name is a pre-tokenizer memra_pretok_init accepts. */
int memra_pretok_supported(const char *name);
const char *memra_pretok_name(const memra_pretok *p);

/* Per-call match state (one per thread at a time). */
memra_status memra_pretok_state_init(const memra_pretok *p, memra_pretok_state **out, memra_error *err);
void memra_pretok_state_free(memra_pretok_state *st);

/* Next piece of valid UTF-8 s[0..n) at or after *pos: sets [*ws, *we) and
 * advances *pos. Text the regex does not match is a piece of its own (HF's
 * Split "Isolated" behaviour). Returns 1 for a piece, 0 at the end, or a
 * negative memra_status on a regex engine error (message in err). */
int memra_pretok_next(memra_pretok_state *st, const char *s, size_t n, size_t *pos, size_t *ws, size_t *we,
                      memra_error *err);

#endif
