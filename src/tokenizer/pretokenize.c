/* Pre-tokenizers: the regex that splits normalized text into words before BPE.
 *
 * HF's Qwen2 pre-tokenizer is Split(regex, behavior=Isolated) followed by
 * ByteLevel(use_regex=false): every regex match is a word, and so is any text
 * between matches (the regexes below match every character, so in practice
 * there is none). The patterns are HF's, written for PCRE2 (UTF + UCP, JIT):
 *
 *   qwen2:  contractions | [^\r\n\p{L}\p{N}]?\p{L}+ | \p{N} | ' '?[^\s\p{L}\p{N}]+[\r\n]*
 *           | \s*[\r\n]+ | \s+(?!\S) | \s+
 *   qwen35: the same with [\p{L}\p{M}]+ as the letter run and \p{M} left out
 *           of the punctuation run, so combining marks stay inside words.
 *
 * Two deliberate differences from a literal transcription, both to match what
 * HF's engine (Oniguruma) actually does:
 *  - HF writes the contractions as (?i:'s|'t|...). Under PCRE2's Unicode case
 *    folding "'ſ" (U+017F) would match "'s"; Oniguruma does not fold it there,
 *    so the cases are spelled out ([sS]) instead.
 *  - \s: Oniguruma's \s is exactly the Unicode White_Space property. PCRE2's
 *    UCP \s also takes U+180E (MONGOLIAN VOWEL SEPARATOR, a space before
 *    Unicode 6.3), so the White_Space list is spelled out (and its complement
 *    for \S).
 *  - Unicode version: HF's Oniguruma has Unicode 16.0 tables, PCRE2 10.42
 *    (Debian 12) has 14.0. The letters, marks and digits assigned since 14.0
 *    (CJK extensions H and I, Kawi, Garay, Todhri, ...) are added to \p{L},
 *    \p{M} and \p{N} as explicit ranges (U16_* below, generated from the
 *    Unicode 16.0 UnicodeData.txt via Python's unicodedata2 16.0.0 against
 *    unicodedata 14.0; no code point left L/M/N between the two versions).
 *    With a newer PCRE2 the ranges are redundant and harmless. */
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer/tok_internal.h"

/* Unicode White_Space (PropList.txt, unchanged since Unicode 6.3) */
#define WS "\\t\\n\\x{0B}\\f\\r\\x{20}\\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}\\x{205F}\\x{3000}"
#define U16_L \
    "\\x{1C89}-\\x{1C8A}\\x{A7CB}-\\x{A7CD}\\x{A7DA}-\\x{A7DC}\\x{105C0}-\\x{105F3}" \
    "\\x{10D4A}-\\x{10D65}\\x{10D6F}-\\x{10D85}\\x{10EC2}-\\x{10EC4}\\x{1123F}-\\x{11240}" \
    "\\x{11380}-\\x{11389}\\x{1138B}\\x{1138E}\\x{11390}-\\x{113B5}\\x{113B7}\\x{113D1}\\x{113D3}" \
    "\\x{11BC0}-\\x{11BE0}\\x{11F02}\\x{11F04}-\\x{11F10}\\x{11F12}-\\x{11F33}\\x{1342F}" \
    "\\x{13441}-\\x{13446}\\x{13460}-\\x{143FA}\\x{16100}-\\x{1611D}\\x{16D40}-\\x{16D6C}\\x{18CFF}" \
    "\\x{1B132}\\x{1B155}\\x{1DF25}-\\x{1DF2A}\\x{1E030}-\\x{1E06D}\\x{1E4D0}-\\x{1E4EB}" \
    "\\x{1E5D0}-\\x{1E5ED}\\x{1E5F0}\\x{2B739}\\x{2EBF0}-\\x{2EE5D}\\x{31350}-\\x{323AF}"
#define U16_M \
    "\\x{897}\\x{CF3}\\x{ECE}\\x{10D69}-\\x{10D6D}\\x{10EFC}-\\x{10EFF}\\x{11241}" \
    "\\x{113B8}-\\x{113C0}\\x{113C2}\\x{113C5}\\x{113C7}-\\x{113CA}\\x{113CC}-\\x{113D0}\\x{113D2}" \
    "\\x{113E1}-\\x{113E2}\\x{11F00}-\\x{11F01}\\x{11F03}\\x{11F34}-\\x{11F3A}\\x{11F3E}-\\x{11F42}" \
    "\\x{11F5A}\\x{13440}\\x{13447}-\\x{13455}\\x{1611E}-\\x{1612F}\\x{1E08F}\\x{1E4EC}-\\x{1E4EF}" \
    "\\x{1E5EE}-\\x{1E5EF}"
#define U16_N \
    "\\x{10D40}-\\x{10D49}\\x{116D0}-\\x{116E3}\\x{11BF0}-\\x{11BF9}\\x{11F50}-\\x{11F59}" \
    "\\x{16130}-\\x{16139}\\x{16D70}-\\x{16D79}\\x{1CCF0}-\\x{1CCF9}\\x{1D2C0}-\\x{1D2D3}" \
    "\\x{1E4F0}-\\x{1E4F9}\\x{1E5F1}-\\x{1E5FA}"
#define L "\\p{L}" U16_L
#define M "\\p{M}" U16_M
#define N "\\p{N}" U16_N
#define CONTRACTIONS "'[sStTmMdD]|'[rR][eE]|'[vV][eE]|'[lL][lL]"

static const struct {
    const char *name;
    const char *pattern;
} patterns[] = {
    {"qwen2", CONTRACTIONS "|[^\\r\\n" L N "]?[" L "]+"
                           "|[" N "]"
                           "| ?[^" WS L N "]+[\\r\\n]*"
                           "|[" WS "]*[\\r\\n]+"
                           "|[" WS "]+(?![^" WS "])"
                           "|[" WS "]+"},
    {"qwen35", CONTRACTIONS "|[^\\r\\n" L N "]?[" L M "]+"
                            "|[" N "]"
                            "| ?[^" WS L M N "]+[\\r\\n]*"
                            "|[" WS "]*[\\r\\n]+"
                            "|[" WS "]+(?![^" WS "])"
                            "|[" WS "]+"},
};

struct memra_pretok {
    const char *name;
    pcre2_code *code;
    int jit; /* 1 when JIT compilation succeeded */
};

struct memra_pretok_state {
    const memra_pretok *pre;
    pcre2_match_data *md;
    pcre2_match_context *mctx; /* carries the JIT stack */
    pcre2_jit_stack *jit_stack;
};

int memra_pretok_supported(const char *name) {
    for (size_t k = 0; name && k < MEMRA_ARRAY_LEN(patterns); k++)
        if (!strcmp(patterns[k].name, name)) return 1;
    return 0;
}

memra_status memra_pretok_init(const char *name, memra_pretok **out, memra_error *err) {
    *out = NULL;
    if (!name) return memra_errorf(err, MEMRA_ERR_INVALID, "no pre-tokenizer name");
    size_t k = 0;
    while (k < MEMRA_ARRAY_LEN(patterns) && strcmp(patterns[k].name, name)) k++;
    if (k == MEMRA_ARRAY_LEN(patterns))
        return memra_errorf(err, MEMRA_ERR_INVALID, "unsupported pre-tokenizer '%.64s' (supported: qwen2, qwen35)",
                            name);
    memra_pretok *p = calloc(1, sizeof *p);
    if (!p) return memra_errorf(err, MEMRA_ERR_NOMEM, "out of memory");
    p->name = patterns[k].name;
    int ec;
    PCRE2_SIZE eo;
    p->code = pcre2_compile((PCRE2_SPTR)patterns[k].pattern, PCRE2_ZERO_TERMINATED, PCRE2_UTF | PCRE2_UCP, &ec, &eo,
                            NULL);
    if (!p->code) {
        char msg[256];
        pcre2_get_error_message(ec, (PCRE2_UCHAR *)msg, sizeof msg);
        free(p);
        return memra_errorf(err, MEMRA_ERR_INVALID, "pre-tokenizer '%s': regex error at %zu: %s", name, (size_t)eo,
                            msg);
    }
    p->jit = pcre2_jit_compile(p->code, PCRE2_JIT_COMPLETE) == 0;
    *out = p;
    return MEMRA_OK;
}

void memra_pretok_free(memra_pretok *p) {
    if (!p) return;
    pcre2_code_free(p->code);
    free(p);
}

const char *memra_pretok_name(const memra_pretok *p) {
    return p->name;
}

memra_status memra_pretok_state_init(const memra_pretok *p, memra_pretok_state **out, memra_error *err) {
    *out = NULL;
    memra_pretok_state *st = calloc(1, sizeof *st);
    if (!st) return memra_errorf(err, MEMRA_ERR_NOMEM, "out of memory");
    st->pre = p;
    st->md = pcre2_match_data_create_from_pattern(p->code, NULL);
    if (!st->md) goto nomem;
    if (p->jit) {
        /* The patterns need little stack (no nested quantifiers), but the
         * default 32 KiB machine-stack block is replaced by a heap one so a
         * caller on a small thread stack is safe too. */
        st->mctx = pcre2_match_context_create(NULL);
        st->jit_stack = pcre2_jit_stack_create(32 * 1024, 1024 * 1024, NULL);
        if (!st->mctx || !st->jit_stack) goto nomem;
        pcre2_jit_stack_assign(st->mctx, NULL, st->jit_stack);
    }
    *out = st;
    return MEMRA_OK;
nomem:
    memra_pretok_state_free(st);
    return memra_errorf(err, MEMRA_ERR_NOMEM, "out of memory for regex match data");
}

void memra_pretok_state_free(memra_pretok_state *st) {
    if (!st) return;
    pcre2_match_data_free(st->md);
    pcre2_match_context_free(st->mctx);
    pcre2_jit_stack_free(st->jit_stack);
    free(st);
}

int memra_pretok_next(memra_pretok_state *st, const char *s, size_t n, size_t *pos, size_t *ws, size_t *we,
                      memra_error *err) {
    size_t at = *pos;
    if (at >= n) return 0;
    int rc;
    if (st->pre->jit)
        rc = pcre2_jit_match(st->pre->code, (PCRE2_SPTR)s, n, at, 0, st->md, st->mctx);
    else
        rc = pcre2_match(st->pre->code, (PCRE2_SPTR)s, n, at, PCRE2_NO_UTF_CHECK, st->md, NULL);
    if (rc == PCRE2_ERROR_NOMATCH) {
        /* the rest is one unmatched piece */
        *ws = at;
        *we = n;
        *pos = n;
        return 1;
    }
    if (rc < 0) {
        char msg[256];
        pcre2_get_error_message(rc, (PCRE2_UCHAR *)msg, sizeof msg);
        memra_errorf(err, MEMRA_ERR_INVALID, "pre-tokenizer '%s': regex match failed at byte %zu: %s",
                     st->pre->name, at, msg);
        return MEMRA_ERR_INVALID;
    }
    PCRE2_SIZE *ov = pcre2_get_ovector_pointer(st->md);
    size_t ms = ov[0], me = ov[1];
    if (ms > at) {
        /* unmatched text before the match: a piece of its own; the match
         * is found again on the next call */
        *ws = at;
        *we = ms;
        *pos = ms;
        return 1;
    }
    if (me <= ms) {
        /* cannot happen with these patterns (no empty alternative); step one
         * character so the loop always advances */
        me = ms + 1;
        while (me < n && ((unsigned char)s[me] & 0xC0) == 0x80) me++;
    }
    *ws = ms;
    *we = me;
    *pos = me;
    return 1;
}
