/* Byte-level BPE tokenizer for GGUF vocabularies with tokenizer.ggml.model =
 * "gpt2" (Qwen2/Qwen3/Qwen3.5), matching HF `tokenizers` id for id.
 *
 * Encoding, in the order HF applies it:
 *   1. invalid UTF-8 is replaced, maximal subpart by maximal subpart, with
 *      U+FFFD: exactly what Python's bytes.decode("utf-8", "replace") gives,
 *      so memra on raw bytes equals HF on the Python string of those bytes;
 *   2. special tokens are cut out of the raw text (leftmost, then longest
 *      match): USER_DEFINED tokens always, CONTROL/UNKNOWN tokens only when
 *      allow_special is set (otherwise their text is encoded as plain text);
 *   3. each piece of text between them is NFC-normalized;
 *   4. the pre-tokenizer regex ("qwen2" or "qwen35") splits it into words;
 *   5. each word's bytes go through the GPT-2 byte-to-unicode map and BPE
 *      merges are applied lowest rank first (leftmost on ties).
 *
 * The tokenizer is pure C with no file I/O: memra_tokenizer_init copies what
 * it needs from plain arrays; memra_tokenizer_from_gguf (tokenizer_gguf.c)
 * reads them from an open GGUF. A tokenizer is immutable after init except for
 * an internal word cache taken with a try-lock, so any number of threads may
 * encode and decode with the same handle. */
#ifndef MEMRA_TOKENIZER_H
#define MEMRA_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>

#include "base/status.h"

typedef struct memra_tokenizer memra_tokenizer;
typedef struct memra_gguf memra_gguf;

/* tokenizer.ggml.token_type values (as llama.cpp's converter writes them). */
typedef enum memra_token_type {
    MEMRA_TOKEN_TYPE_UNDEFINED = 0,
    MEMRA_TOKEN_TYPE_NORMAL = 1,
    MEMRA_TOKEN_TYPE_UNKNOWN = 2,
    MEMRA_TOKEN_TYPE_CONTROL = 3,      /* <|im_start|>, <|endoftext|>: matched only with allow_special */
    MEMRA_TOKEN_TYPE_USER_DEFINED = 4, /* <think>, <tool_call> in Qwen3: always matched */
    MEMRA_TOKEN_TYPE_UNUSED = 5,       /* [PADnnn] padding: never produced, decodes to "" */
    MEMRA_TOKEN_TYPE_BYTE = 6,
} memra_token_type;

/* A byte string that is not NUL-terminated. */
typedef struct memra_tok_str {
    const char *ptr;
    size_t len;
} memra_tok_str;

/* Everything memra_tokenizer_init needs; all of it is copied. */
typedef struct memra_tokenizer_desc {
    const memra_tok_str *tokens; /* [n_tokens] token texts in byte-level form ("Ġthe") */
    size_t n_tokens;
    const memra_tok_str *merges; /* [n_merges] "LEFT RIGHT", rank = index */
    size_t n_merges;
    const int32_t *types; /* [n_tokens] memra_token_type, or NULL: all NORMAL */
    const char *pre;      /* pre-tokenizer: "qwen2" or "qwen35" */
    /* Ids from the metadata, -1 when absent. eos/eot/eom also count as
     * end-of-generation, as do tokens named <|endoftext|>, <|im_end|>,
     * <|fim_pad|>, <|repo_name|>, <|file_sep|> (spec 9.1). */
    int32_t bos_id, eos_id, eot_id, eom_id, pad_id;
} memra_tokenizer_desc;

/* Growable id vector; encode appends to it. Zero-initialize, free with memra_tokens_free. */
typedef struct memra_tokens {
    int32_t *ids; /* [n] */
    size_t n, cap;
} memra_tokens;

void memra_tokens_free(memra_tokens *v);

/* Fails with MEMRA_ERR_INVALID on a missing/unknown pre-tokenizer name or a
 * type/id out of range, MEMRA_ERR_NOMEM on allocation failure. Merges whose
 * sides or result are not in the vocabulary are skipped (HF refuses such files;
 * they cannot change any result). A repeated merge keeps its last rank, as HF does. */
memra_status memra_tokenizer_init(const memra_tokenizer_desc *desc, memra_tokenizer **out, memra_error *err);

/* Reads tokenizer.ggml.{model,pre,tokens,token_type,merges,*_token_id}.
 * MEMRA_ERR_NOT_FOUND when the file has no tokenizer, MEMRA_ERR_UNSUPPORTED
 * for a model other than "gpt2" or an unknown pre-tokenizer. */
memra_status memra_tokenizer_from_gguf(const memra_gguf *g, memra_tokenizer **out, memra_error *err);

void memra_tokenizer_free(memra_tokenizer *t);

/* Encodes text[0..len) (any bytes, NUL included) and appends the ids to out.
 * allow_special: match CONTROL tokens in the text (chat templates); 0 for
 * untrusted user text. Only fails on allocation failure or a regex engine
 * error; out keeps what was appended before the failure. */
memra_status memra_tokenizer_encode(const memra_tokenizer *t, const char *text, size_t len, int allow_special,
                                    memra_tokens *out, memra_error *err);

/* Concatenated bytes of the tokens' pieces (may be invalid UTF-8 when a
 * multi-byte character is split across tokens outside [0, n)). Writes at most
 * cap bytes to buf and sets *out_len to the full length (snprintf-style: call
 * with cap = 0 to measure). MEMRA_ERR_INVALID on an id out of range. */
memra_status memra_tokenizer_decode(const memra_tokenizer *t, const int32_t *ids, size_t n, char *buf, size_t cap,
                                    size_t *out_len, memra_error *err);

/* The bytes one token decodes to (not NUL-terminated): the byte-level map
 * undone for normal tokens, the text itself for CONTROL/USER_DEFINED tokens,
 * "" for UNUSED. NULL (and *len = 0) for an id out of range. */
const char *memra_tokenizer_piece(const memra_tokenizer *t, int32_t id, size_t *len);

/* The vocabulary text of a token as stored in the GGUF ("Ġworld"). */
const char *memra_tokenizer_token_text(const memra_tokenizer *t, int32_t id, size_t *len);

/* Id of the token whose vocabulary text is exactly text[0..len), or -1. */
int32_t memra_tokenizer_lookup(const memra_tokenizer *t, const char *text, size_t len);

int32_t memra_tokenizer_n_vocab(const memra_tokenizer *t);
memra_token_type memra_tokenizer_token_type(const memra_tokenizer *t, int32_t id); /* UNDEFINED if out of range */
int32_t memra_tokenizer_bos(const memra_tokenizer *t);                          /* -1 if none */
int32_t memra_tokenizer_eos(const memra_tokenizer *t);                          /* -1 if none */
int32_t memra_tokenizer_pad(const memra_tokenizer *t);                          /* -1 if none */
int memra_tokenizer_is_eog(const memra_tokenizer *t, int32_t id);
/* All end-of-generation ids, ascending; *n set to their count. */
const int32_t *memra_tokenizer_eog_ids(const memra_tokenizer *t, size_t *n);
/* Longest piece in bytes (sizes buffers for one token). */
size_t memra_tokenizer_max_piece(const memra_tokenizer *t);
const char *memra_tokenizer_pre_name(const memra_tokenizer *t);

/* Streaming detokenizer: turns ids into text as they are generated, never
 * emitting half a UTF-8 character. An incomplete but so-far-valid sequence at
 * the end of the bytes is held back until the next token completes it; bytes
 * that can never become valid are emitted as U+FFFD (maximal subparts, as
 * Python and Rust do), and flush turns a held incomplete tail into one U+FFFD.
 * So the concatenated output is always valid UTF-8 and equals the lossy UTF-8
 * decoding of memra_tokenizer_decode over the same ids. */
typedef struct memra_detok {
    const memra_tokenizer *tok;
    unsigned char hold[4]; /* held incomplete sequence, n_hold <= 3 */
    size_t n_hold;
    char *buf; /* [cap] output of the last call */
    size_t cap;
} memra_detok;

memra_status memra_detok_init(memra_detok *d, const memra_tokenizer *t, memra_error *err);
void memra_detok_free(memra_detok *d);
/* text, len: what to emit now (valid UTF-8, possibly empty), valid until the
 * next call. MEMRA_ERR_INVALID on an id out of range (state unchanged). */
memra_status memra_detok_push(memra_detok *d, int32_t id, const char **text, size_t *len, memra_error *err);
/* Ends the stream (and resets it for reuse). */
void memra_detok_flush(memra_detok *d, const char **text, size_t *len);

/* Replaces invalid UTF-8 in in[0..n) with U+FFFD per maximal subpart (Python's
 * errors="replace"). Writes at most 3 * n bytes to out and returns the length. */
size_t memra_utf8_sanitize(const char *in, size_t n, char *out);
/* 1 if s[0..n) is valid UTF-8 (no surrogates, no overlongs, <= U+10FFFF). */
int memra_utf8_valid(const char *s, size_t n);

#endif
