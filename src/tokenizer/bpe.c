/* Byte-level BPE: vocabulary tables, merges, encode and decode.
 *
 * BPE runs in id space: a word starts as the ids of its bytes' byte-level
 * characters, and a merge table maps a pair of ids (left, right) to (rank,
 * id of left+right). The lowest-rank pair is merged first, the leftmost one
 * on ties; this is HF's order. Short words use a plain array scan; long ones
 * (runs of CJK text, long identifiers) a binary heap of candidate pairs over
 * a linked list, so a word of n symbols costs O(n log n) instead of O(n^2).
 *
 * A bounded direct-mapped cache remembers the ids of short words (most words
 * of running text repeat). It is taken with a try-lock for a whole encode
 * call; a call that finds it busy simply runs without it. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer/tok_internal.h"
#include "tokenizer/tokenizer.h"

enum {
    CACHE_SLOTS = 1 << 15,
    CACHE_WORD = 30, /* longest cached word, bytes */
    CACHE_IDS = 8,   /* most ids a cached word may have */
    SMALL_WORD = 48, /* words with at most this many symbols use the array scan */
};

/* One cache slot: 64 bytes. wlen == 0 marks an empty slot. */
typedef struct cache_slot {
    uint8_t wlen, nids;
    char word[CACHE_WORD];
    int32_t ids[CACHE_IDS];
} cache_slot;

_Static_assert(sizeof(cache_slot) == 64, "cache slot is one cache line");

typedef struct word_cache {
    pthread_mutex_t lock;
    cache_slot slots[CACHE_SLOTS];
} word_cache;

typedef struct merge_slot {
    uint64_t key; /* left << 32 | right; EMPTY_KEY when free */
    int32_t rank;
    int32_t id; /* id of the merged token */
} merge_slot;

#define EMPTY_KEY UINT64_MAX

struct memra_tokenizer {
    int32_t n_vocab;
    char *text;          /* vocabulary texts, back to back */
    uint32_t *text_off;  /* [n_vocab + 1] */
    char *piece;         /* decoded bytes of each token, back to back */
    uint32_t *piece_off; /* [n_vocab + 1] */
    uint8_t *types;      /* [n_vocab] memra_token_type */
    size_t max_piece;

    int32_t *vocab_slots; /* [vocab_mask + 1] text -> id + 1 (0 = empty) */
    uint64_t vocab_mask;
    merge_slot *merge_slots; /* [merge_mask + 1] */
    uint64_t merge_mask;
    int32_t byte_id[256]; /* id of each byte's one-character token, -1 if absent */

    /* Tokens matched in raw text: sorted by first byte, then longest first,
     * so the first hit at a position is the longest. */
    int32_t *specials; /* [n_specials] */
    size_t n_specials;
    uint32_t special_start[257]; /* specials[special_start[c] .. special_start[c + 1]) start with byte c */

    int32_t bos, eos, pad;
    int32_t *eog; /* [n_eog] ascending */
    size_t n_eog;

    memra_pretok *pre;
    word_cache *cache;
};

/* ---- hashing ---- */

static inline uint64_t mix64(uint64_t h) {
    h ^= h >> 31;
    h *= 0xbf58476d1ce4e5b9ull;
    h ^= h >> 29;
    h *= 0x94d049bb133111ebull;
    h ^= h >> 32;
    return h;
}

static uint64_t hash_bytes(const char *p, size_t n) {
    uint64_t h = 0x9E3779B97F4A7C15ull ^ (uint64_t)n;
    while (n >= 8) {
        uint64_t v;
        memcpy(&v, p, 8);
        h = (h ^ v) * 0xbf58476d1ce4e5b9ull;
        h ^= h >> 29;
        p += 8;
        n -= 8;
    }
    uint64_t v = 0;
    memcpy(&v, p, n);
    return mix64(h ^ v);
}

static uint64_t table_size(size_t n) {
    /* power of two with load factor <= 1/2 */
    uint64_t c = 16;
    while (c < (uint64_t)n * 2) c <<= 1;
    return c;
}

static const char *tok_text(const memra_tokenizer *t, int32_t id, size_t *len) {
    *len = t->text_off[id + 1] - t->text_off[id];
    return t->text + t->text_off[id];
}

int32_t memra_tokenizer_lookup(const memra_tokenizer *t, const char *text, size_t len) {
    uint64_t h = hash_bytes(text, len) & t->vocab_mask;
    for (;; h = (h + 1) & t->vocab_mask) {
        int32_t v = t->vocab_slots[h];
        if (!v) return -1;
        size_t n;
        const char *s = tok_text(t, v - 1, &n);
        if (n == len && !memcmp(s, text, len)) return v - 1;
    }
}

static inline const merge_slot *merge_find(const memra_tokenizer *t, int32_t a, int32_t b) {
    uint64_t key = (uint64_t)(uint32_t)a << 32 | (uint32_t)b;
    uint64_t h = mix64(key) & t->merge_mask;
    for (;; h = (h + 1) & t->merge_mask) {
        const merge_slot *m = &t->merge_slots[h];
        if (m->key == key) return m;
        if (m->key == EMPTY_KEY) return NULL;
    }
}

/* ---- construction ---- */

static int is_special_type(uint8_t ty) {
    return ty == MEMRA_TOKEN_TYPE_CONTROL || ty == MEMRA_TOKEN_TYPE_USER_DEFINED || ty == MEMRA_TOKEN_TYPE_UNKNOWN;
}

/* Decoded bytes of a token: raw text for specials, "" for padding, else the
 * byte-level map undone (a character outside the map is kept as UTF-8). */
static size_t decode_piece(const char *s, size_t n, uint8_t type, char *out) {
    if (type == MEMRA_TOKEN_TYPE_UNUSED) return 0;
    if (is_special_type(type) || !memra_utf8_valid(s, n)) {
        memcpy(out, s, n);
        return n;
    }
    size_t o = 0;
    const unsigned char *p = (const unsigned char *)s;
    for (size_t i = 0; i < n;) {
        uint32_t cp;
        size_t k = memra_utf8_decode(p + i, n - i, &cp);
        int b = memra_cp_to_byte(cp);
        if (b >= 0) {
            out[o++] = (char)b;
        } else {
            memcpy(out + o, p + i, k);
            o += k;
        }
        i += k;
    }
    return o;
}

static int cmp_special(const void *a, const void *b, void *ctx) {
    const memra_tokenizer *t = ctx;
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    size_t nx, ny;
    const char *sx = tok_text(t, x, &nx), *sy = tok_text(t, y, &ny);
    unsigned char cx = (unsigned char)sx[0], cy = (unsigned char)sy[0];
    if (cx != cy) return cx < cy ? -1 : 1;
    if (nx != ny) return nx > ny ? -1 : 1;
    return x < y ? -1 : x > y;
}

static const char *const eog_names[] = {
    "<|endoftext|>", "<|im_end|>", "<|fim_pad|>", "<|repo_name|>", "<|file_sep|>",
};

static int cmp_i32(const void *a, const void *b) {
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

static memra_status build_vocab(memra_tokenizer *t, const memra_tokenizer_desc *d, memra_error *err) {
    size_t n = d->n_tokens, total = 0, pieces = 0;
    t->text_off = malloc((n + 1) * sizeof *t->text_off);
    t->piece_off = malloc((n + 1) * sizeof *t->piece_off);
    t->types = malloc(n ? n : 1);
    if (!t->text_off || !t->piece_off || !t->types) return memra_errorf(err, MEMRA_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < n; i++) {
        if (!d->tokens[i].ptr && d->tokens[i].len)
            return memra_errorf(err, MEMRA_ERR_INVALID, "token %zu has no text", i);
        int32_t ty = d->types ? d->types[i] : MEMRA_TOKEN_TYPE_NORMAL;
        if (ty < 0 || ty > MEMRA_TOKEN_TYPE_BYTE)
            return memra_errorf(err, MEMRA_ERR_INVALID, "token %zu has type %d (valid: 0..6)", i, (int)ty);
        t->types[i] = (uint8_t)ty;
        if (memra_add_size(total, d->tokens[i].len, &total) || total > UINT32_MAX)
            return memra_errorf(err, MEMRA_ERR_INVALID, "vocabulary texts exceed 4 GiB");
    }
    t->text = malloc(total ? total : 1);
    /* a decoded piece is never longer than its text */
    t->piece = malloc(total ? total : 1);
    if (!t->text || !t->piece) return memra_errorf(err, MEMRA_ERR_NOMEM, "out of memory for %zu bytes of tokens", total);
    total = 0;
    for (size_t i = 0; i < n; i++) {
        const memra_tok_str s = d->tokens[i];
        t->text_off[i] = (uint32_t)total;
        if (s.len) memcpy(t->text + total, s.ptr, s.len);
        t->piece_off[i] = (uint32_t)pieces;
        size_t pl = decode_piece(s.ptr, s.len, t->types[i], t->piece + pieces);
        if (pl > t->max_piece) t->max_piece = pl;
        pieces += pl;
        total += s.len;
    }
    t->text_off[n] = (uint32_t)total;
    t->piece_off[n] = (uint32_t)pieces;

    uint64_t cap = table_size(n);
    t->vocab_mask = cap - 1;
    t->vocab_slots = calloc(cap, sizeof *t->vocab_slots);
    if (!t->vocab_slots) return memra_errorf(err, MEMRA_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < n; i++) {
        size_t len;
        const char *s = tok_text(t, (int32_t)i, &len);
        uint64_t h = hash_bytes(s, len) & t->vocab_mask;
        int dup = 0;
        for (; t->vocab_slots[h]; h = (h + 1) & t->vocab_mask) {
            size_t l2;
            const char *s2 = tok_text(t, t->vocab_slots[h] - 1, &l2);
            if (l2 == len && !memcmp(s, s2, len)) {
                dup = 1; /* the first id keeps the text */
                break;
            }
        }
        if (!dup) t->vocab_slots[h] = (int32_t)i + 1;
    }

    for (int b = 0; b < 256; b++) {
        char u[4];
        size_t k = memra_utf8_encode(memra_byte_to_cp((unsigned char)b), u);
        t->byte_id[b] = memra_tokenizer_lookup(t, u, k);
    }
    return MEMRA_OK;
}

static memra_status build_merges(memra_tokenizer *t, const memra_tokenizer_desc *d, memra_error *err) {
    uint64_t cap = table_size(d->n_merges);
    t->merge_mask = cap - 1;
    t->merge_slots = malloc(cap * sizeof *t->merge_slots);
    if (!t->merge_slots) return memra_errorf(err, MEMRA_ERR_NOMEM, "out of memory for %zu merges", d->n_merges);
    for (uint64_t i = 0; i < cap; i++) t->merge_slots[i].key = EMPTY_KEY;
    memra_tok_buf cat = {0};
    for (size_t r = 0; r < d->n_merges && r < INT32_MAX; r++) {
        const char *s = d->merges[r].ptr;
        size_t n = d->merges[r].len;
        const char *sp = s ? memchr(s, ' ', n) : NULL;
        if (!sp) continue;
        size_t na = (size_t)(sp - s), nb = n - na - 1;
        int32_t a = memra_tokenizer_lookup(t, s, na), b = memra_tokenizer_lookup(t, sp + 1, nb);
        if (a < 0 || b < 0) continue;
        cat.n = 0;
        if (memra_tok_buf_reserve(&cat, na + nb)) {
            free(cat.p);
            return memra_errorf(err, MEMRA_ERR_NOMEM, "out of memory");
        }
        memcpy(cat.p, s, na);
        memcpy(cat.p + na, sp + 1, nb);
        int32_t id = memra_tokenizer_lookup(t, cat.p, na + nb);
        if (id < 0) continue;
        uint64_t key = (uint64_t)(uint32_t)a << 32 | (uint32_t)b;
        uint64_t h = mix64(key) & t->merge_mask;
        while (t->merge_slots[h].key != EMPTY_KEY && t->merge_slots[h].key != key) h = (h + 1) & t->merge_mask;
        t->merge_slots[h] = (merge_slot){key, (int32_t)r, id};
    }
    free(cat.p);
    return MEMRA_OK;
}

static memra_status build_specials(memra_tokenizer *t, const memra_tokenizer_desc *d, memra_error *err) {
    size_t n = 0;
    for (int32_t i = 0; i < t->n_vocab; i++)
        if (is_special_type(t->types[i]) && t->text_off[i + 1] > t->text_off[i]) n++;
    t->specials = malloc((n ? n : 1) * sizeof *t->specials);
    if (!t->specials) return memra_errorf(err, MEMRA_ERR_NOMEM, "out of memory");
    n = 0;
    for (int32_t i = 0; i < t->n_vocab; i++)
        if (is_special_type(t->types[i]) && t->text_off[i + 1] > t->text_off[i]) t->specials[n++] = i;
    t->n_specials = n;
    qsort_r(t->specials, n, sizeof *t->specials, cmp_special, t);
    size_t k = 0;
    for (int c = 0; c < 256; c++) {
        t->special_start[c] = (uint32_t)k;
        while (k < n && (unsigned char)t->text[t->text_off[t->specials[k]]] == c) k++;
    }
    t->special_start[256] = (uint32_t)n;

    /* end-of-generation ids: metadata ids plus the known EOG names */
    int32_t cand[5 + MEMRA_ARRAY_LEN(eog_names)];
    size_t nc = 0;
    int32_t meta[] = {d->eos_id, d->eot_id, d->eom_id};
    for (size_t i = 0; i < MEMRA_ARRAY_LEN(meta); i++)
        if (meta[i] >= 0) cand[nc++] = meta[i];
    for (size_t i = 0; i < MEMRA_ARRAY_LEN(eog_names); i++) {
        int32_t id = memra_tokenizer_lookup(t, eog_names[i], strlen(eog_names[i]));
        if (id >= 0 && is_special_type(t->types[id])) cand[nc++] = id;
    }
    qsort(cand, nc, sizeof *cand, cmp_i32);
    t->eog = malloc((nc ? nc : 1) * sizeof *t->eog);
    if (!t->eog) return memra_errorf(err, MEMRA_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < nc; i++)
        if (!t->n_eog || t->eog[t->n_eog - 1] != cand[i]) t->eog[t->n_eog++] = cand[i];
    return MEMRA_OK;
}

memra_status memra_tokenizer_init(const memra_tokenizer_desc *d, memra_tokenizer **out, memra_error *err) {
    *out = NULL;
    if (!d || (!d->tokens && d->n_tokens) || (!d->merges && d->n_merges))
        return memra_errorf(err, MEMRA_ERR_INVALID, "tokenizer description is missing its arrays");
    if (d->n_tokens == 0 || d->n_tokens > INT32_MAX - 1)
        return memra_errorf(err, MEMRA_ERR_INVALID, "vocabulary size %zu out of range (1..%d)", d->n_tokens,
                            INT32_MAX - 1);
    const int32_t ids[] = {d->bos_id, d->eos_id, d->eot_id, d->eom_id, d->pad_id};
    const char *names[] = {"bos", "eos", "eot", "eom", "pad"};
    for (size_t i = 0; i < MEMRA_ARRAY_LEN(ids); i++)
        if (ids[i] < -1 || ids[i] >= (int64_t)d->n_tokens)
            return memra_errorf(err, MEMRA_ERR_INVALID, "%s token id %d out of range (vocabulary of %zu)", names[i],
                                (int)ids[i], d->n_tokens);
    memra_tokenizer *t = calloc(1, sizeof *t);
    if (!t) return memra_errorf(err, MEMRA_ERR_NOMEM, "out of memory");
    t->n_vocab = (int32_t)d->n_tokens;
    t->bos = d->bos_id;
    t->eos = d->eos_id;
    t->pad = d->pad_id;
    memra_status st = memra_pretok_init(d->pre, &t->pre, err);
    if (!st) st = build_vocab(t, d, err);
    if (!st) st = build_merges(t, d, err);
    if (!st) st = build_specials(t, d, err);
    if (!st) {
        t->cache = calloc(1, sizeof *t->cache);
        if (!t->cache || pthread_mutex_init(&t->cache->lock, NULL)) {
            free(t->cache);
            t->cache = NULL;
            st = memra_errorf(err, MEMRA_ERR_NOMEM, "out of memory for the word cache");
        }
    }
    if (st) {
        memra_tokenizer_free(t);
        return st;
    }
    *out = t;
    return MEMRA_OK;
}

void memra_tokenizer_free(memra_tokenizer *t) {
    if (!t) return;
    if (t->cache) pthread_mutex_destroy(&t->cache->lock);
    free(t->cache);
    memra_pretok_free(t->pre);
    free(t->text);
    free(t->text_off);
    free(t->piece);
    free(t->piece_off);
    free(t->types);
    free(t->vocab_slots);
    free(t->merge_slots);
    free(t->specials);
    free(t->eog);
    free(t);
}

/* ---- encode ---- */

typedef struct heap_ent {
    int32_t rank, pos;   /* candidate merge of the symbol at pos with its successor */
    int32_t left, right; /* the pair's ids when pushed: still equal means still valid */
    int32_t id;          /* the merged token */
} heap_ent;

typedef struct enc {
    const memra_tokenizer *t;
    memra_tokens *out;
    cache_slot *cache; /* NULL: running without the cache */
    memra_pretok_state *pst;
    memra_tok_buf nfc;
    /* BPE scratch, grown as needed: [sym_cap] each */
    int32_t *sym, *rank, *mid, *prev, *next;
    size_t sym_cap;
    heap_ent *heap; /* [heap_cap] */
    size_t heap_cap;
} enc;

void memra_tokens_free(memra_tokens *v) {
    free(v->ids);
    v->ids = NULL;
    v->n = v->cap = 0;
}

static memra_status tokens_reserve(memra_tokens *v, size_t more) {
    size_t need;
    if (memra_add_size(v->n, more, &need) || need > SIZE_MAX / sizeof(int32_t)) return MEMRA_ERR_NOMEM;
    if (need <= v->cap) return MEMRA_OK;
    size_t cap = v->cap ? v->cap : 64;
    while (cap < need) cap = cap > SIZE_MAX / 8 ? need : cap * 2;
    int32_t *p = realloc(v->ids, cap * sizeof *p);
    if (!p) return MEMRA_ERR_NOMEM;
    v->ids = p;
    v->cap = cap;
    return MEMRA_OK;
}

static memra_status grow_scratch(enc *e, size_t n) {
    if (n <= e->sym_cap) return MEMRA_OK;
    size_t cap = e->sym_cap ? e->sym_cap : 64;
    while (cap < n) cap *= 2;
    int32_t **arrs[] = {&e->sym, &e->rank, &e->mid, &e->prev, &e->next};
    for (size_t i = 0; i < MEMRA_ARRAY_LEN(arrs); i++) {
        int32_t *p = realloc(*arrs[i], cap * sizeof *p);
        if (!p) return MEMRA_ERR_NOMEM;
        *arrs[i] = p;
    }
    e->sym_cap = cap;
    return MEMRA_OK;
}

/* Array scan for short words: repeatedly merge the leftmost lowest-rank pair.
 * rank[i]/mid[i] describe the pair (sym[i], sym[i + 1]). Returns the count. */
static size_t bpe_small(const memra_tokenizer *t, int32_t *sym, int32_t *rank, int32_t *mid, size_t k) {
    for (size_t i = 0; i + 1 < k; i++) {
        const merge_slot *m = merge_find(t, sym[i], sym[i + 1]);
        rank[i] = m ? m->rank : INT32_MAX;
        mid[i] = m ? m->id : -1;
    }
    while (k > 1) {
        size_t best = 0;
        for (size_t i = 1; i + 1 < k; i++)
            if (rank[i] < rank[best]) best = i;
        if (rank[best] == INT32_MAX) break;
        sym[best] = mid[best];
        /* drop symbol best + 1 and pair best + 1 */
        memmove(sym + best + 1, sym + best + 2, (k - best - 2) * sizeof *sym);
        memmove(rank + best + 1, rank + best + 2, (k - best - 2) * sizeof *rank);
        memmove(mid + best + 1, mid + best + 2, (k - best - 2) * sizeof *mid);
        k--;
        for (size_t i = best ? best - 1 : 0; i <= best && i + 1 < k; i++) {
            const merge_slot *m = merge_find(t, sym[i], sym[i + 1]);
            rank[i] = m ? m->rank : INT32_MAX;
            mid[i] = m ? m->id : -1;
        }
    }
    return k;
}

static inline int heap_less(heap_ent a, heap_ent b) {
    return a.rank < b.rank || (a.rank == b.rank && a.pos < b.pos);
}

static void heap_push(heap_ent *h, size_t *n, heap_ent x) {
    size_t i = (*n)++;
    while (i) {
        size_t p = (i - 1) / 2;
        if (!heap_less(x, h[p])) break;
        h[i] = h[p];
        i = p;
    }
    h[i] = x;
}

static heap_ent heap_pop(heap_ent *h, size_t *n) {
    heap_ent top = h[0], x = h[--*n];
    size_t i = 0, m = *n;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= m) break;
        if (c + 1 < m && heap_less(h[c + 1], h[c])) c++;
        if (!heap_less(h[c], x)) break;
        h[i] = h[c];
        i = c;
    }
    if (m) h[i] = x;
    return top;
}

/* Heap order for long words: same result as bpe_small (lowest rank, then
 * lowest position; a merged symbol keeps its left position). Entries go
 * stale when a neighbour merges; a popped entry is used only if the symbols
 * at pos and after it are still the pair it was pushed for (symbols only
 * grow, so the same ids there mean the same pair), which saves a table
 * lookup per merge over re-checking the merge table. */
static memra_status bpe_large(enc *e, size_t k, size_t *out_k) {
    const memra_tokenizer *t = e->t;
    int32_t *sym = e->sym, *prev = e->prev, *next = e->next;
    size_t cap_need = 2 * k + 16; /* k - 1 initial pairs + at most 2 per merge */
    if (cap_need > e->heap_cap) {
        heap_ent *h = realloc(e->heap, cap_need * sizeof *h);
        if (!h) return MEMRA_ERR_NOMEM;
        e->heap = h;
        e->heap_cap = cap_need;
    }
    heap_ent *heap = e->heap;
    size_t hn = 0;
    for (size_t i = 0; i < k; i++) {
        prev[i] = (int32_t)i - 1;
        next[i] = i + 1 < k ? (int32_t)i + 1 : -1;
        if (i + 1 < k) {
            const merge_slot *m = merge_find(t, sym[i], sym[i + 1]);
            if (m) heap_push(heap, &hn, (heap_ent){m->rank, (int32_t)i, sym[i], sym[i + 1], m->id});
        }
    }
    while (hn) {
        heap_ent top = heap_pop(heap, &hn);
        int32_t p = top.pos, q = next[p];
        if (q < 0 || sym[p] != top.left || sym[q] != top.right) continue;
        const merge_slot *m;
        sym[p] = top.id;
        sym[q] = -1;
        next[p] = next[q];
        if (next[q] >= 0) prev[next[q]] = p;
        if (prev[p] >= 0 && (m = merge_find(t, sym[prev[p]], sym[p])))
            heap_push(heap, &hn, (heap_ent){m->rank, prev[p], sym[prev[p]], sym[p], m->id});
        if (next[p] >= 0 && (m = merge_find(t, sym[p], sym[next[p]])))
            heap_push(heap, &hn, (heap_ent){m->rank, p, sym[p], sym[next[p]], m->id});
    }
    size_t n = 0;
    for (int32_t i = 0; i >= 0; i = next[i]) sym[n++] = sym[i]; /* symbol 0 is never removed */
    *out_k = n;
    return MEMRA_OK;
}

/* Appends the ids of one pre-tokenized word. */
static memra_status bpe_word(enc *e, const char *w, size_t n) {
    const memra_tokenizer *t = e->t;
    const unsigned char *u = (const unsigned char *)w;
    cache_slot *slot = NULL;
    if (n == 1) {
        if (t->byte_id[u[0]] < 0) return MEMRA_OK;
        if (tokens_reserve(e->out, 1)) return MEMRA_ERR_NOMEM;
        e->out->ids[e->out->n++] = t->byte_id[u[0]];
        return MEMRA_OK;
    }
    if (e->cache && n <= CACHE_WORD) {
        slot = &e->cache[hash_bytes(w, n) & (CACHE_SLOTS - 1)];
        if (slot->wlen == n && !memcmp(slot->word, w, n)) {
            if (tokens_reserve(e->out, slot->nids)) return MEMRA_ERR_NOMEM;
            memcpy(e->out->ids + e->out->n, slot->ids, slot->nids * sizeof(int32_t));
            e->out->n += slot->nids;
            return MEMRA_OK;
        }
    }
    if (grow_scratch(e, n)) return MEMRA_ERR_NOMEM;
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (t->byte_id[u[i]] >= 0) e->sym[k++] = t->byte_id[u[i]]; /* HF drops characters missing from the vocab */
    if (k <= SMALL_WORD) {
        k = bpe_small(t, e->sym, e->rank, e->mid, k);
    } else if (bpe_large(e, k, &k)) {
        return MEMRA_ERR_NOMEM;
    }
    if (tokens_reserve(e->out, k)) return MEMRA_ERR_NOMEM;
    memcpy(e->out->ids + e->out->n, e->sym, k * sizeof(int32_t));
    e->out->n += k;
    if (slot && k <= CACHE_IDS) {
        slot->wlen = (uint8_t)n;
        slot->nids = (uint8_t)k;
        memcpy(slot->word, w, n);
        memcpy(slot->ids, e->sym, k * sizeof(int32_t));
    }
    return MEMRA_OK;
}

/* Normalizes, pre-tokenizes and BPE-encodes text without special tokens. */
static memra_status encode_text(enc *e, const char *s, size_t n, memra_error *err) {
    if (!n) return MEMRA_OK;
    const char *norm;
    size_t nn;
    if (memra_tok_nfc(s, n, &e->nfc, &norm, &nn)) return memra_errorf(err, MEMRA_ERR_NOMEM, "out of memory in NFC");
    size_t pos = 0, ws, we;
    int rc;
    while ((rc = memra_pretok_next(e->pst, norm, nn, &pos, &ws, &we, err)) > 0)
        if (bpe_word(e, norm + ws, we - ws))
            return memra_errorf(err, MEMRA_ERR_NOMEM, "out of memory encoding %zu bytes", n);
    return rc < 0 ? (memra_status)rc : MEMRA_OK;
}

/* The longest special token that starts at s[0..n), or -1. */
static int32_t match_special(const memra_tokenizer *t, const char *s, size_t n, int allow_control) {
    unsigned char c = (unsigned char)s[0];
    for (uint32_t k = t->special_start[c]; k < t->special_start[c + 1]; k++) {
        int32_t id = t->specials[k];
        if (!allow_control && t->types[id] != MEMRA_TOKEN_TYPE_USER_DEFINED) continue;
        size_t len;
        const char *tx = tok_text(t, id, &len);
        if (len <= n && !memcmp(tx, s, len)) return id;
    }
    return -1;
}

memra_status memra_tokenizer_encode(const memra_tokenizer *t, const char *text, size_t len, int allow_special,
                                    memra_tokens *out, memra_error *err) {
    if (!t || !out || (!text && len)) return memra_errorf(err, MEMRA_ERR_INVALID, "encode: NULL argument");
    if (!len) return MEMRA_OK;
    memra_status st = MEMRA_OK;
    char *clean = NULL;
    if (!memra_utf8_valid(text, len)) {
        size_t cap;
        if (memra_mul_size(len, 3, &cap) || !(clean = malloc(cap)))
            return memra_errorf(err, MEMRA_ERR_NOMEM, "out of memory for %zu bytes of text", len);
        len = memra_utf8_sanitize(text, len, clean);
        text = clean;
    }
    enc e = {.t = t, .out = out};
    st = memra_pretok_state_init(t->pre, &e.pst, err);
    int locked = !st && pthread_mutex_trylock(&t->cache->lock) == 0;
    if (locked) e.cache = t->cache->slots;

    /* cut special tokens out of the raw text; normal text goes through BPE */
    size_t seg = 0;
    for (size_t i = 0; !st && i < len; i++) {
        unsigned char c = (unsigned char)text[i];
        if (t->special_start[c] == t->special_start[c + 1]) continue;
        int32_t id = match_special(t, text + i, len - i, allow_special);
        if (id < 0) continue;
        st = encode_text(&e, text + seg, i - seg, err);
        if (st) break;
        if (tokens_reserve(out, 1)) {
            st = memra_errorf(err, MEMRA_ERR_NOMEM, "out of memory");
            break;
        }
        out->ids[out->n++] = id;
        i += t->text_off[id + 1] - t->text_off[id] - 1;
        seg = i + 1;
    }
    if (!st) st = encode_text(&e, text + seg, len - seg, err);

    if (locked) pthread_mutex_unlock(&t->cache->lock);
    memra_pretok_state_free(e.pst);
    free(e.nfc.p);
    free(e.sym);
    free(e.rank);
    free(e.mid);
    free(e.prev);
    free(e.next);
    free(e.heap);
    free(clean);
    return st;
}

/* ---- decode and accessors ---- */

const char *memra_tokenizer_piece(const memra_tokenizer *t, int32_t id, size_t *len) {
    if (id < 0 || id >= t->n_vocab) {
        *len = 0;
        return NULL;
    }
    *len = t->piece_off[id + 1] - t->piece_off[id];
    return t->piece + t->piece_off[id];
}

const char *memra_tokenizer_token_text(const memra_tokenizer *t, int32_t id, size_t *len) {
    if (id < 0 || id >= t->n_vocab) {
        *len = 0;
        return NULL;
    }
    return tok_text(t, id, len);
}

memra_status memra_tokenizer_decode(const memra_tokenizer *t, const int32_t *ids, size_t n, char *buf, size_t cap,
                                    size_t *out_len, memra_error *err) {
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        size_t len;
        const char *p = memra_tokenizer_piece(t, ids[i], &len);
        if (!p) {
            *out_len = o;
            return memra_errorf(err, MEMRA_ERR_INVALID, "decode: token %zu has id %d, outside the vocabulary of %d", i,
                                (int)ids[i], (int)t->n_vocab);
        }
        if (o < cap) memcpy(buf + o, p, len < cap - o ? len : cap - o);
        o += len;
    }
    *out_len = o;
    return MEMRA_OK;
}

int32_t memra_tokenizer_n_vocab(const memra_tokenizer *t) {
    return t->n_vocab;
}

memra_token_type memra_tokenizer_token_type(const memra_tokenizer *t, int32_t id) {
    return id < 0 || id >= t->n_vocab ? MEMRA_TOKEN_TYPE_UNDEFINED : (memra_token_type)t->types[id];
}

int32_t memra_tokenizer_bos(const memra_tokenizer *t) {
    return t->bos;
}

int32_t memra_tokenizer_eos(const memra_tokenizer *t) {
    return t->eos;
}

int32_t memra_tokenizer_pad(const memra_tokenizer *t) {
    return t->pad;
}

int memra_tokenizer_is_eog(const memra_tokenizer *t, int32_t id) {
    for (size_t i = 0; i < t->n_eog; i++)
        if (t->eog[i] == id) return 1;
    return 0;
}

const int32_t *memra_tokenizer_eog_ids(const memra_tokenizer *t, size_t *n) {
    *n = t->n_eog;
    return t->eog;
}

size_t memra_tokenizer_max_piece(const memra_tokenizer *t) {
    return t->max_piece;
}

const char *memra_tokenizer_pre_name(const memra_tokenizer *t) {
    return memra_pretok_name(t->pre);
}
