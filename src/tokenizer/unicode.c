/* UTF-8 validation and repair, the GPT-2 byte-to-unicode map, and NFC.
 *
 * Repair follows the Unicode "maximal subpart" practice, which is what
 * Python's bytes.decode("utf-8", "replace") and Rust's from_utf8_lossy do:
 * a byte that cannot start a sequence is one U+FFFD; a valid start followed
 * by too few valid continuation bytes becomes one U+FFFD for the start and
 * the continuation bytes that were valid so far. The valid second-byte
 * ranges exclude overlongs (E0 A0.., F0 90..), surrogates (ED ..9F) and code
 * points above U+10FFFF (F4 ..8F). */
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "tokenizer/tok_internal.h"
#include "tokenizer/tokenizer.h"

int memra_utf8_step(const unsigned char *s, size_t n) {
    unsigned c = s[0];
    if (c < 0x80) return 1;
    int need;
    unsigned lo = 0x80, hi = 0xBF; /* valid range of the next byte */
    if (c >= 0xC2 && c <= 0xDF) {
        need = 1;
    } else if (c >= 0xE0 && c <= 0xEF) {
        need = 2;
        if (c == 0xE0) lo = 0xA0;
        if (c == 0xED) hi = 0x9F;
    } else if (c >= 0xF0 && c <= 0xF4) {
        need = 3;
        if (c == 0xF0) lo = 0x90;
        if (c == 0xF4) hi = 0x8F;
    } else {
        return -1; /* 80..C1, F5..FF never start a sequence */
    }
    for (int i = 1; i <= need; i++) {
        if ((size_t)i >= n) return 0;
        unsigned b = s[i];
        if (b < lo || b > hi) return -i;
        lo = 0x80;
        hi = 0xBF;
    }
    return need + 1;
}

int memra_utf8_valid(const char *s, size_t n) {
    const unsigned char *p = (const unsigned char *)s;
    size_t i = 0;
    while (i < n) {
        /* ASCII runs 8 bytes at a time: most text is mostly ASCII */
        while (i + 8 <= n) {
            uint64_t v;
            memcpy(&v, p + i, 8);
            if (v & 0x8080808080808080ull) break;
            i += 8;
        }
        if (i >= n) break;
        int k = memra_utf8_step(p + i, n - i);
        if (k <= 0) return 0;
        i += (size_t)k;
    }
    return 1;
}

size_t memra_utf8_sanitize(const char *in, size_t n, char *out) {
    const unsigned char *p = (const unsigned char *)in;
    size_t i = 0, o = 0;
    while (i < n) {
        int k = memra_utf8_step(p + i, n - i);
        if (k > 0) {
            memcpy(out + o, p + i, (size_t)k);
            o += (size_t)k;
            i += (size_t)k;
            continue;
        }
        /* invalid subpart, or an incomplete sequence cut by the end */
        memcpy(out + o, "\xEF\xBF\xBD", 3);
        o += 3;
        i += k < 0 ? (size_t)-k : n - i;
    }
    return o;
}

size_t memra_utf8_decode(const unsigned char *s, size_t n, uint32_t *cp) {
    unsigned c = s[0];
    if (c < 0x80 || n < 2) {
        *cp = c;
        return 1;
    }
    if (c < 0xE0) {
        *cp = ((c & 0x1Fu) << 6) | (s[1] & 0x3Fu);
        return 2;
    }
    if (c < 0xF0 || n < 4) {
        *cp = ((c & 0x0Fu) << 12) | ((s[1] & 0x3Fu) << 6) | (s[2] & 0x3Fu);
        return 3;
    }
    *cp = ((c & 0x07u) << 18) | ((s[1] & 0x3Fu) << 12) | ((s[2] & 0x3Fu) << 6) | (s[3] & 0x3Fu);
    return 4;
}

size_t memra_utf8_encode(uint32_t cp, char *out) {
    unsigned char *o = (unsigned char *)out;
    if (cp < 0x80) {
        o[0] = (unsigned char)cp;
        return 1;
    }
    if (cp < 0x800) {
        o[0] = (unsigned char)(0xC0 | (cp >> 6));
        o[1] = (unsigned char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        o[0] = (unsigned char)(0xE0 | (cp >> 12));
        o[1] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
        o[2] = (unsigned char)(0x80 | (cp & 0x3F));
        return 3;
    }
    o[0] = (unsigned char)(0xF0 | (cp >> 18));
    o[1] = (unsigned char)(0x80 | ((cp >> 12) & 0x3F));
    o[2] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
    o[3] = (unsigned char)(0x80 | (cp & 0x3F));
    return 4;
}

/* GPT-2's map: the 188 printable Latin-1 bytes (! .. ~, ¡ .. ¬, ® .. ÿ) stand
 * for themselves; the other 68 bytes (controls, space, DEL, NBSP, soft
 * hyphen) take U+0100, U+0101, ... in byte order, so every byte becomes a
 * visible character and token texts never contain spaces. */
static int byte_is_printable(unsigned b) {
    return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
}

/* The non-printable bytes are 0x00..0x20 (33), 0x7F..0xA0 (34) and 0xAD. */
uint32_t memra_byte_to_cp(unsigned char b) {
    if (byte_is_printable(b)) return b;
    if (b <= 0x20) return 0x100u + b;
    if (b <= 0xA0) return 0x100u + 33 + (b - 0x7Fu);
    return 0x100u + 67; /* 0xAD */
}

int memra_cp_to_byte(uint32_t cp) {
    if (cp < 0x100) return byte_is_printable(cp) ? (int)cp : -1;
    uint32_t k = cp - 0x100;
    if (k < 33) return (int)k;
    if (k < 67) return (int)(0x7F + k - 33);
    return k == 67 ? 0xAD : -1;
}

memra_status memra_tok_buf_reserve(memra_tok_buf *b, size_t more) {
    size_t need;
    if (memra_add_size(b->n, more, &need)) return MEMRA_ERR_NOMEM;
    if (need <= b->cap) return MEMRA_OK;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < need) {
        if (cap > SIZE_MAX / 2) {
            cap = need;
            break;
        }
        cap *= 2;
    }
    char *p = realloc(b->p, cap);
    if (!p) return MEMRA_ERR_NOMEM;
    b->p = p;
    b->cap = cap;
    return MEMRA_OK;
}

static memra_status buf_append(memra_tok_buf *b, const char *s, size_t n) {
    if (!n) return MEMRA_OK;
    memra_status st = memra_tok_buf_reserve(b, n);
    if (st) return st;
    memcpy(b->p + b->n, s, n);
    b->n += n;
    return MEMRA_OK;
}

/* HF tokenizers' NFC runs on Unicode 9.0 tables (its regex has 16.0): a
 * code point assigned later is, to it, a starter that neither reorders,
 * decomposes nor composes. utf8proc (15.0) knows better, so these code points
 * are passed through as-is and NFC runs only on the text between them, which
 * gives exactly HF's result. The list holds the later code points that utf8proc
 * would otherwise treat differently: nonzero combining class, or a canonical
 * decomposition (with its parts). Found by probing HF's normalizer over all
 * code points (reordering against U+0334/U+0300, recomposition of NFD). */
static const uint32_t nfc_opaque[][2] = {
    {0x7FD, 0x7FD}, {0x898, 0x89F}, {0x8CA, 0x8D3}, {0x9FE, 0x9FE}, {0xC3C, 0xC3C}, {0xD3B, 0xD3C},
    {0xEBA, 0xEBA}, {0x1715, 0x1715}, {0x1ABF, 0x1ACE}, {0x1DF6, 0x1DFA}, {0xA82C, 0xA82C},
    {0x10D24, 0x10D27}, {0x10EAB, 0x10EAC}, {0x10EFD, 0x10EFF}, {0x10F46, 0x10F50}, {0x10F82, 0x10F85},
    {0x11070, 0x11070}, {0x1133B, 0x1133B}, {0x1145E, 0x1145E}, {0x11839, 0x1183A}, {0x11930, 0x11930},
    {0x11935, 0x11935}, {0x11938, 0x11938}, {0x1193D, 0x1193E}, {0x11943, 0x11943}, {0x119E0, 0x119E0},
    {0x11A34, 0x11A34}, {0x11A47, 0x11A47}, {0x11A99, 0x11A99}, {0x11D42, 0x11D42}, {0x11D44, 0x11D45},
    {0x11D97, 0x11D97}, {0x11F41, 0x11F42}, {0x16FF0, 0x16FF1}, {0x1E08F, 0x1E08F}, {0x1E130, 0x1E136},
    {0x1E2AE, 0x1E2AE}, {0x1E2EC, 0x1E2EF}, {0x1E4EC, 0x1E4EF},
};

static int nfc_is_opaque(uint32_t cp) {
    if (cp < nfc_opaque[0][0]) return 0;
    size_t lo = 0, hi = MEMRA_ARRAY_LEN(nfc_opaque);
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (cp < nfc_opaque[mid][0]) hi = mid;
        else if (cp > nfc_opaque[mid][1]) lo = mid + 1;
        else return 1;
    }
    return 0;
}

static memra_status nfc_append(memra_tok_buf *buf, const char *s, size_t n) {
    if (!n) return MEMRA_OK;
    utf8proc_uint8_t *norm = NULL;
    utf8proc_ssize_t m = utf8proc_map((const utf8proc_uint8_t *)s, (utf8proc_ssize_t)n, &norm,
                                      (utf8proc_option_t)(UTF8PROC_STABLE | UTF8PROC_COMPOSE));
    memra_status st;
    if (m < 0) {
        /* only UTF8PROC_ERROR_NOMEM is possible on valid input; copy as is otherwise */
        st = m == UTF8PROC_ERROR_NOMEM ? MEMRA_ERR_NOMEM : buf_append(buf, s, n);
    } else {
        st = buf_append(buf, (const char *)norm, (size_t)m);
    }
    free(norm);
    return st;
}

/* NFC is applied only to the stretches around non-ASCII text. This is exact
 * because every ASCII character is a starter that has no decomposition and is
 * never the second half of a canonical composition: NFC(x + y) = NFC(x) +
 * NFC(y) whenever y starts with an ASCII character. The ASCII character just
 * before a non-ASCII run is included in the run, since it may compose with a
 * following combining mark ("e" + U+0301 -> "é"). */
memra_status memra_tok_nfc(const char *s, size_t n, memra_tok_buf *buf, const char **out, size_t *out_n) {
    const unsigned char *p = (const unsigned char *)s;
    size_t i = 0;
    while (i < n && p[i] < 0x80) i++;
    if (i == n) {
        *out = s;
        *out_n = n;
        return MEMRA_OK;
    }
    buf->n = 0;
    size_t done = 0; /* s[0..done) has been appended */
    memra_status st;
    while (i < n) {
        /* i is the first byte of a non-ASCII run */
        size_t start = i > done ? i - 1 : i;
        if ((st = buf_append(buf, s + done, start - done))) return st;
        size_t seg = start; /* start of the text not yet normalized */
        while (i < n && p[i] >= 0x80) {
            uint32_t cp;
            size_t k = memra_utf8_decode(p + i, n - i, &cp);
            if (nfc_is_opaque(cp)) {
                if ((st = nfc_append(buf, s + seg, i - seg)) || (st = buf_append(buf, s + i, k))) return st;
                seg = i + k;
            }
            i += k;
        }
        if ((st = nfc_append(buf, s + seg, i - seg))) return st;
        done = i;
        while (i < n && p[i] < 0x80) i++;
    }
    if ((st = buf_append(buf, s + done, n - done))) return st;
    *out = buf->p;
    *out_n = buf->n;
    return MEMRA_OK;
}
