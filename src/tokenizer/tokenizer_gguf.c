/* memra_tokenizer_from_gguf: the tokenizer.ggml.* metadata to a tokenizer.
 * The only file of the tokenizer that knows about GGUF. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "gguf/gguf.h"
#include "tokenizer/tok_internal.h"
#include "tokenizer/tokenizer.h"

/* An optional token id key: -1 when absent. */
static memra_status opt_id(const memra_gguf *g, const char *key, int32_t *out, memra_error *err) {
    *out = -1;
    if (!memra_gguf_find_kv(g, key)) return MEMRA_OK;
    uint64_t v;
    memra_status st = memra_gguf_get_u64(g, key, &v, err);
    if (st) return st;
    if (v > INT32_MAX) return memra_errorf(err, MEMRA_ERR_FORMAT, "metadata key '%s' = %" PRIu64 " is not a token id", key, v);
    *out = (int32_t)v;
    return MEMRA_OK;
}

/* A string array as memra_tok_str views into the file. */
static memra_status str_array(const memra_gguf *g, const char *key, memra_tok_str **out, size_t *n, memra_error *err) {
    *out = NULL;
    *n = 0;
    const memra_gguf_kv *kv = memra_gguf_find_kv(g, key);
    if (!kv) return memra_errorf(err, MEMRA_ERR_NOT_FOUND, "metadata key '%s' is missing", key);
    memra_gguf_str *v;
    memra_status st = memra_gguf_arr_strings(kv, &v, err);
    if (st) return st;
    size_t cnt = (size_t)kv->v.arr.n;
    memra_tok_str *s = malloc((cnt ? cnt : 1) * sizeof *s);
    if (!s) {
        free(v);
        return memra_errorf(err, MEMRA_ERR_NOMEM, "out of memory for '%s'", key);
    }
    for (size_t i = 0; i < cnt; i++) s[i] = (memra_tok_str){v[i].ptr, (size_t)v[i].len};
    free(v);
    *out = s;
    *n = cnt;
    return MEMRA_OK;
}

memra_status memra_tokenizer_from_gguf(const memra_gguf *g, memra_tokenizer **out, memra_error *err) {
    *out = NULL;
    memra_gguf_str model, pre_s;
    if (!memra_gguf_find_kv(g, "tokenizer.ggml.model"))
        return memra_errorf(err, MEMRA_ERR_NOT_FOUND, "no tokenizer in the file (tokenizer.ggml.model is missing)");
    memra_status st = memra_gguf_get_str(g, "tokenizer.ggml.model", &model, err);
    if (st) return st;
    if (!memra_gguf_str_eq(model, "gpt2"))
        return memra_errorf(err, MEMRA_ERR_UNSUPPORTED,
                            "tokenizer.ggml.model is '%.*s': only 'gpt2' (byte-level BPE) is supported",
                            (int)(model.len > 64 ? 64 : model.len), model.ptr);
    st = memra_gguf_get_str(g, "tokenizer.ggml.pre", &pre_s, err);
    if (st) return st;
    char pre[64];
    if (pre_s.len >= sizeof pre || memchr(pre_s.ptr, 0, pre_s.len))
        return memra_errorf(err, MEMRA_ERR_UNSUPPORTED, "tokenizer.ggml.pre is not a supported pre-tokenizer name");
    memcpy(pre, pre_s.ptr, pre_s.len);
    pre[pre_s.len] = 0;
    if (!memra_pretok_supported(pre))
        return memra_errorf(err, MEMRA_ERR_UNSUPPORTED,
                            "tokenizer.ggml.pre is '%s': supported pre-tokenizers are qwen2 and qwen35", pre);

    memra_tokenizer_desc d = {.pre = pre};
    memra_tok_str *tokens = NULL, *merges = NULL;
    int32_t *types = NULL;
    st = str_array(g, "tokenizer.ggml.tokens", &tokens, &d.n_tokens, err);
    if (!st) st = str_array(g, "tokenizer.ggml.merges", &merges, &d.n_merges, err);
    const memra_gguf_kv *tkv = memra_gguf_find_kv(g, "tokenizer.ggml.token_type");
    if (!st && tkv) {
        if (tkv->type != MEMRA_GGUF_TYPE_ARRAY || tkv->v.arr.n != d.n_tokens) {
            st = memra_errorf(err, MEMRA_ERR_FORMAT,
                              "tokenizer.ggml.token_type must be an array of %zu entries (one per token)", d.n_tokens);
        } else if (!(types = malloc((d.n_tokens ? d.n_tokens : 1) * sizeof *types))) {
            st = memra_errorf(err, MEMRA_ERR_NOMEM, "out of memory");
        } else {
            for (size_t i = 0; i < d.n_tokens && !st; i++) {
                int64_t v;
                if (memra_gguf_arr_i64(tkv, i, &v) || v < 0 || v > MEMRA_TOKEN_TYPE_BYTE)
                    st = memra_errorf(err, MEMRA_ERR_FORMAT, "tokenizer.ggml.token_type[%zu] is not a token type (0..6)", i);
                else
                    types[i] = (int32_t)v;
            }
        }
    }
    if (!st) st = opt_id(g, "tokenizer.ggml.bos_token_id", &d.bos_id, err);
    if (!st) st = opt_id(g, "tokenizer.ggml.eos_token_id", &d.eos_id, err);
    if (!st) st = opt_id(g, "tokenizer.ggml.eot_token_id", &d.eot_id, err);
    if (!st) st = opt_id(g, "tokenizer.ggml.eom_token_id", &d.eom_id, err);
    if (!st) st = opt_id(g, "tokenizer.ggml.padding_token_id", &d.pad_id, err);
    if (!st) {
        /* ids past the vocabulary in metadata are ignored rather than fatal */
        int32_t *ids[] = {&d.bos_id, &d.eos_id, &d.eot_id, &d.eom_id, &d.pad_id};
        for (size_t i = 0; i < sizeof ids / sizeof ids[0]; i++)
            if (*ids[i] >= (int64_t)d.n_tokens) *ids[i] = -1;
        d.tokens = tokens;
        d.merges = merges;
        d.types = types;
        st = memra_tokenizer_init(&d, out, err);
    }
    if (st) memra_error_prefix(err, "tokenizer");
    free(tokens);
    free(merges);
    free(types);
    return st;
}
