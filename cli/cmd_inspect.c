/* memra inspect FILE.gguf [--json]: a GGUF file's metadata, tensor table and
 * a summary (architecture, parameter count, file size, and for the Qwen3.5 /
 * Qwen3-Next family the weight bytes one decoded token reads).
 *
 * A debug subcommand: it reads the file through src/gguf directly. Damaged
 * files are opened leniently, so everything before the damage is shown,
 * followed by one line saying where parsing stopped and why (exit 1). */
#include <inttypes.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "gguf/gguf.h"
#include "gguf/quant.h"

#define ARR_HEAD_NUM 8 /* array elements shown */
#define ARR_HEAD_STR 4
#define STR_SHOW 60 /* bytes of a string value shown in the table */

static void usage(FILE *f) {
    fprintf(f, "usage: memra inspect FILE.gguf [--json]\n"
               "  Shows a GGUF file's metadata (arrays shortened), its tensors and a summary.\n"
               "  --json   one JSON document on stdout instead of the table\n"
               "Exit status: 0 ok, 1 unreadable or damaged file (what could be read is shown), 2 usage.\n");
}

/* ---- the summary, shared by both outputs ---- */

typedef struct summary {
    char arch[64];         /* general.architecture, "" if absent */
    uint64_t params;       /* elements over all tensors */
    uint64_t params_mtp;   /* of which in MTP layers */
    uint64_t tensor_bytes; /* data bytes over all tensors */
    int has_per_token;     /* 1 for the qwen35 family with a block_count */
    uint64_t per_token;    /* weight bytes read per decoded token */
    char per_token_what[320];
} summary;

static int is_qwen35_family(const char *a) {
    return !strcmp(a, "qwen35") || !strcmp(a, "qwen35moe") || !strcmp(a, "qwen3next");
}

/* Layer index of a "blk.N." tensor name, or -1. */
static int64_t layer_of(memra_gguf_str name) {
    if (name.len < 6 || memcmp(name.ptr, "blk.", 4) != 0) return -1;
    int64_t n = 0;
    uint64_t i = 4;
    for (; i < name.len && name.ptr[i] >= '0' && name.ptr[i] <= '9' && n < (INT64_MAX - 9) / 10; i++)
        n = n * 10 + (name.ptr[i] - '0');
    return i > 4 && i < name.len && name.ptr[i] == '.' ? n : -1;
}

static int name_has(memra_gguf_str name, const char *sub) {
    size_t k = strlen(sub);
    for (uint64_t i = 0; i + k <= name.len; i++)
        if (!memcmp(name.ptr + i, sub, k)) return 1;
    return 0;
}

static uint64_t arch_u64(const memra_gguf *g, const char *arch, const char *suffix, uint64_t dflt, int *found) {
    char key[128];
    uint64_t v;
    memra_error err;
    snprintf(key, sizeof key, "%s.%s", arch, suffix);
    if (memra_gguf_get_u64(g, key, &v, &err) == MEMRA_OK) {
        if (found) *found = 1;
        return v;
    }
    if (found) *found = 0;
    return dflt;
}

static void summarize(const memra_gguf *g, summary *s) {
    memset(s, 0, sizeof *s);
    memra_gguf_str a;
    memra_error err;
    if (memra_gguf_get_str(g, "general.architecture", &a, &err) == MEMRA_OK) {
        size_t n = a.len < sizeof s->arch - 1 ? (size_t)a.len : sizeof s->arch - 1;
        memcpy(s->arch, a.ptr, n);
        s->arch[n] = 0;
    }
    int have_blocks = 0;
    uint64_t blocks = arch_u64(g, s->arch, "block_count", 0, &have_blocks);
    uint64_t nextn = arch_u64(g, s->arch, "nextn_predict_layers", 0, NULL);
    uint64_t n_expert = arch_u64(g, s->arch, "expert_count", 0, NULL);
    uint64_t n_used = arch_u64(g, s->arch, "expert_used_count", 0, NULL);
    uint64_t trunk = nextn <= blocks ? blocks - nextn : 0;
    s->has_per_token = have_blocks && is_qwen35_family(s->arch) && memra_gguf_n_tensors(g) > 0;
    int tied = memra_gguf_find_tensor(g, "output.weight") == NULL;
    for (int64_t i = 0; i < memra_gguf_n_tensors(g); i++) {
        const memra_gguf_tensor *t = memra_gguf_tensor_at(g, i);
        uint64_t elems = 1;
        /* unsigned: a partial open keeps entries whose shape failed its checks */
        for (int d = 0; d < MEMRA_GGUF_MAX_DIMS; d++) elems *= (uint64_t)t->ne[d];
        int64_t layer = layer_of(t->name);
        int mtp = layer >= 0 && (uint64_t)layer >= trunk && have_blocks;
        s->params += elems;
        s->tensor_bytes += t->nbytes;
        if (mtp) {
            s->params_mtp += elems;
            continue;
        }
        if (memra_gguf_str_eq(t->name, "token_embd.weight")) {
            /* one row looked up; the whole matrix again when it is also the output head */
            uint64_t rows = (uint64_t)t->ne[1] * (uint64_t)t->ne[2] * (uint64_t)t->ne[3];
            s->per_token += (rows ? t->nbytes / rows : 0) + (tied ? t->nbytes : 0);
        } else if (name_has(t->name, "_exps") && n_expert && n_used <= n_expert &&
                   (uint64_t)t->ne[t->n_dims - 1] == n_expert) {
            s->per_token += t->nbytes / n_expert * n_used; /* top-k expert slabs */
        } else {
            s->per_token += t->nbytes;
        }
    }
    if (!s->has_per_token) return;
    int n = snprintf(s->per_token_what, sizeof s->per_token_what,
                     "every trunk weight once, token_embd one row%s", tied ? " plus all of it as the tied output head" : "");
    if (n_expert)
        n += snprintf(s->per_token_what + n, sizeof s->per_token_what - n,
                      ", %" PRIu64 "/%" PRIu64 " of each *_exps tensor", n_used, n_expert);
    if (nextn && nextn <= blocks)
        snprintf(s->per_token_what + n, sizeof s->per_token_what - n, ", without the MTP layer%s blk.%" PRIu64 "%s",
                 nextn > 1 ? "s" : "", trunk, nextn > 1 ? "+" : "");
    else
        snprintf(s->per_token_what + n, sizeof s->per_token_what - n, ", no MTP layers");
}

/* ---- text output ---- */

static void human_size(uint64_t b, char *out, size_t cap) {
    const char *u[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
    double v = (double)b;
    int i = 0;
    while (v >= 1024 && i < 5) {
        v /= 1024;
        i++;
    }
    if (i == 0)
        snprintf(out, cap, "%" PRIu64 " B", b);
    else
        snprintf(out, cap, "%.2f %s", v, u[i]);
}

static void human_count(uint64_t n, char *out, size_t cap) {
    if (n >= 1000000000ull)
        snprintf(out, cap, "%.2f B", n / 1e9);
    else if (n >= 1000000ull)
        snprintf(out, cap, "%.2f M", n / 1e6);
    else if (n >= 1000ull)
        snprintf(out, cap, "%.2f K", n / 1e3);
    else
        snprintf(out, cap, "%" PRIu64, n);
}

/* Prints a file string quoted, escaped and cut to max bytes (at a UTF-8 boundary). */
static void put_str(const char *s, uint64_t len, uint64_t max) {
    uint64_t n = len;
    if (n > max) {
        n = max;
        while (n > 0 && ((unsigned char)s[n] & 0xc0) == 0x80) n--;
    }
    putchar('"');
    for (uint64_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\')
            printf("\\%c", c);
        else if (c == '\n')
            fputs("\\n", stdout);
        else if (c == '\t')
            fputs("\\t", stdout);
        else if (c < 0x20 || c == 0x7f)
            printf("\\x%02x", c);
        else
            putchar(c);
    }
    putchar('"');
    if (n < len) printf("... (%" PRIu64 " bytes)", len);
}

static void put_number(const memra_gguf_kv *kv, memra_gguf_type t, uint64_t i) {
    uint64_t u;
    int64_t s;
    double d;
    if (t == MEMRA_GGUF_TYPE_BOOL) {
        memra_gguf_arr_u64(kv, i, &u);
        fputs(u ? "true" : "false", stdout);
    } else if (t == MEMRA_GGUF_TYPE_FLOAT32 || t == MEMRA_GGUF_TYPE_FLOAT64) {
        memra_gguf_arr_f64(kv, i, &d);
        printf("%.9g", d);
    } else if (memra_gguf_arr_i64(kv, i, &s) == MEMRA_OK) {
        printf("%" PRId64, s);
    } else if (memra_gguf_arr_u64(kv, i, &u) == MEMRA_OK) {
        printf("%" PRIu64, u);
    }
}

static void put_value(const memra_gguf_kv *kv) {
    switch (kv->type) {
    case MEMRA_GGUF_TYPE_STRING: put_str(kv->v.str.ptr, kv->v.str.len, STR_SHOW); break;
    case MEMRA_GGUF_TYPE_BOOL: fputs(kv->v.u64 ? "true" : "false", stdout); break;
    case MEMRA_GGUF_TYPE_FLOAT32:
    case MEMRA_GGUF_TYPE_FLOAT64: printf("%.9g", kv->v.f64); break;
    case MEMRA_GGUF_TYPE_INT8:
    case MEMRA_GGUF_TYPE_INT16:
    case MEMRA_GGUF_TYPE_INT32:
    case MEMRA_GGUF_TYPE_INT64: printf("%" PRId64, kv->v.i64); break;
    case MEMRA_GGUF_TYPE_ARRAY: {
        uint64_t n = kv->v.arr.n;
        printf("%" PRIu64 " [", n);
        if (kv->v.arr.type == MEMRA_GGUF_TYPE_STRING) {
            memra_gguf_str *strs;
            memra_error err;
            if (memra_gguf_arr_strings(kv, &strs, &err) == MEMRA_OK) {
                for (uint64_t i = 0; i < n && i < ARR_HEAD_STR; i++) {
                    if (i) fputs(", ", stdout);
                    put_str(strs[i].ptr, strs[i].len, 24);
                }
                free(strs);
            }
            if (n > ARR_HEAD_STR) fputs(", ...", stdout);
        } else {
            for (uint64_t i = 0; i < n && i < ARR_HEAD_NUM; i++) {
                if (i) fputs(", ", stdout);
                put_number(kv, kv->v.arr.type, i);
            }
            if (n > ARR_HEAD_NUM) fputs(", ...", stdout);
        }
        putchar(']');
        break;
    }
    default: printf("%" PRIu64, kv->v.u64); break;
    }
}

static void type_label(const memra_gguf_kv *kv, char *out, size_t cap) {
    if (kv->type == MEMRA_GGUF_TYPE_ARRAY)
        snprintf(out, cap, "arr[%s]", memra_gguf_type_name(kv->v.arr.type));
    else
        snprintf(out, cap, "%s", memra_gguf_type_name(kv->type));
}

static void tensor_type_label(uint32_t type, char *out, size_t cap) {
    const memra_type_info *ti = memra_type_get(type);
    if (ti)
        snprintf(out, cap, "%s", ti->name);
    else
        snprintf(out, cap, "type %" PRIu32 "?", type);
}

static void shape_label(const memra_gguf_tensor *t, char *out, size_t cap) {
    int n = snprintf(out, cap, "[");
    for (uint32_t d = 0; d < t->n_dims && n < (int)cap; d++)
        n += snprintf(out + n, cap - n, "%s%" PRId64, d ? ", " : "", t->ne[d]);
    if (n < (int)cap) snprintf(out + n, cap - n, "]");
}

/* A name for a table column: printable, at most max bytes. */
static void col_name(memra_gguf_str s, char *out, size_t cap) {
    size_t n = 0;
    for (uint64_t i = 0; i < s.len && n + 1 < cap; i++) {
        unsigned char c = (unsigned char)s.ptr[i];
        out[n++] = c >= 0x20 && c != 0x7f ? (char)c : '?';
    }
    out[n] = 0;
}

static void print_text(const char *path, const memra_gguf *g, const summary *s, int damaged) {
    char a[64], b[64];
    human_size(memra_gguf_file_size(g), a, sizeof a);
    printf("%s: GGUF v%" PRIu32 ", %" PRId64 " metadata keys, %" PRId64 " tensors, alignment %" PRIu64
           ", data section at offset %" PRIu64 ", %s\n",
           path, memra_gguf_version(g), memra_gguf_n_kv(g), memra_gguf_n_tensors(g), memra_gguf_alignment(g),
           memra_gguf_data_offset(g), a);

    int kw = 3;
    for (int64_t i = 0; i < memra_gguf_n_kv(g); i++) {
        uint64_t l = memra_gguf_kv_at(g, i)->key.len;
        if ((int64_t)l > kw) kw = l > 48 ? 48 : (int)l;
    }
    printf("\nmetadata\n  %-*s  %-9s  %s\n", kw, "key", "type", "value");
    for (int64_t i = 0; i < memra_gguf_n_kv(g); i++) {
        const memra_gguf_kv *kv = memra_gguf_kv_at(g, i);
        char key[512], type[32];
        col_name(kv->key, key, sizeof key);
        type_label(kv, type, sizeof type);
        printf("  %-*s  %-9s  ", kw, key, type);
        put_value(kv);
        putchar('\n');
    }

    int nw = 4;
    for (int64_t i = 0; i < memra_gguf_n_tensors(g); i++) {
        uint64_t l = memra_gguf_tensor_at(g, i)->name.len;
        if ((int64_t)l > nw) nw = l > 64 ? 64 : (int)l;
    }
    printf("\ntensors (offset: from the start of the data section)\n  %-*s  %-8s  %-24s  %12s  %12s\n", nw, "name",
           "type", "shape", "bytes", "offset");
    for (int64_t i = 0; i < memra_gguf_n_tensors(g); i++) {
        const memra_gguf_tensor *t = memra_gguf_tensor_at(g, i);
        char name[512], type[32], shape[128], size[32];
        col_name(t->name, name, sizeof name);
        tensor_type_label(t->type, type, sizeof type);
        shape_label(t, shape, sizeof shape);
        human_size(t->nbytes, size, sizeof size);
        printf("  %-*s  %-8s  %-24s  %12s  %12" PRIu64 "%s\n", nw, name, type, shape, size, t->offset,
               t->data ? "" : "  (no data)");
    }

    printf("\nsummary%s\n", damaged ? " (of what could be read)" : "");
    printf("  %-16s %s\n", "architecture", s->arch[0] ? s->arch : "(none)");
    human_count(s->params, a, sizeof a);
    printf("  %-16s %s (%" PRIu64 ")", "parameters", a, s->params);
    if (s->params_mtp) {
        human_count(s->params_mtp, b, sizeof b);
        printf(", of which MTP layers %s", b);
    }
    putchar('\n');
    human_size(memra_gguf_file_size(g), a, sizeof a);
    human_size(s->tensor_bytes, b, sizeof b);
    printf("  %-16s %s (%" PRIu64 " bytes), tensor data %s\n", "file size", a, memra_gguf_file_size(g), b);
    if (s->has_per_token) {
        human_size(s->per_token, a, sizeof a);
        printf("  %-16s %s (%" PRIu64 " bytes): %s\n", "read per token", a, s->per_token, s->per_token_what);
    }
}

/* ---- JSON output ---- */

/* A JSON string from file bytes: invalid UTF-8 becomes U+FFFD. */
static json_t *jstr(const char *s, uint64_t len) {
    json_t *j = json_stringn(s, (size_t)len);
    if (j) return j;
    char *buf = malloc((size_t)len * 3 + 1);
    if (!buf) return json_null();
    size_t n = 0;
    const unsigned char *p = (const unsigned char *)s;
    for (uint64_t i = 0; i < len;) {
        unsigned c = p[i];
        int k = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
        int ok = k > 0 && i + (uint64_t)k <= len;
        for (int q = 1; ok && q < k; q++) ok = (p[i + q] & 0xc0) == 0x80;
        if (ok && k > 1) { /* reject what jansson rejects: overlong, surrogates, > U+10FFFF */
            uint32_t cp = c & (0x7f >> k);
            for (int q = 1; q < k; q++) cp = cp << 6 | (p[i + q] & 0x3f);
            ok = !(cp < (k == 2 ? 0x80u : k == 3 ? 0x800u : 0x10000u)) && !(cp >= 0xd800 && cp <= 0xdfff) &&
                 cp <= 0x10ffff;
        }
        if (ok) {
            memcpy(buf + n, p + i, (size_t)k);
            n += (size_t)k;
            i += (uint64_t)k;
        } else {
            memcpy(buf + n, "\xef\xbf\xbd", 3);
            n += 3;
            i++;
        }
    }
    j = json_stringn(buf, n);
    free(buf);
    return j ? j : json_null();
}

static json_t *jreal(double d) {
    if (isnan(d)) return json_string("nan");
    if (isinf(d)) return json_string(d > 0 ? "inf" : "-inf");
    return json_real(d);
}

static json_t *ju64(uint64_t u) {
    if (u <= (uint64_t)INT64_MAX) return json_integer((json_int_t)u);
    char b[32];
    snprintf(b, sizeof b, "%" PRIu64, u);
    return json_string(b);
}

static json_t *jelem(const memra_gguf_kv *kv, uint64_t i) {
    memra_gguf_type t = kv->v.arr.type;
    uint64_t u = 0;
    int64_t s;
    double d = 0;
    if (t == MEMRA_GGUF_TYPE_BOOL) {
        memra_gguf_arr_u64(kv, i, &u);
        return json_boolean(u);
    }
    if (t == MEMRA_GGUF_TYPE_FLOAT32 || t == MEMRA_GGUF_TYPE_FLOAT64) {
        memra_gguf_arr_f64(kv, i, &d);
        return jreal(d);
    }
    if (memra_gguf_arr_i64(kv, i, &s) == MEMRA_OK) return json_integer(s);
    memra_gguf_arr_u64(kv, i, &u);
    return ju64(u);
}

static json_t *jvalue(const memra_gguf_kv *kv) {
    switch (kv->type) {
    case MEMRA_GGUF_TYPE_STRING: return jstr(kv->v.str.ptr, kv->v.str.len);
    case MEMRA_GGUF_TYPE_BOOL: return json_boolean(kv->v.u64);
    case MEMRA_GGUF_TYPE_FLOAT32:
    case MEMRA_GGUF_TYPE_FLOAT64: return jreal(kv->v.f64);
    case MEMRA_GGUF_TYPE_INT8:
    case MEMRA_GGUF_TYPE_INT16:
    case MEMRA_GGUF_TYPE_INT32:
    case MEMRA_GGUF_TYPE_INT64: return json_integer(kv->v.i64);
    default: return ju64(kv->v.u64);
    }
}

static json_t *json_doc(const char *path, const memra_gguf *g, const summary *s, const char *error) {
    json_t *root = json_object(), *meta = json_array(), *tens = json_array(), *sum = json_object();
    json_object_set_new(root, "file", jstr(path, strlen(path)));
    json_object_set_new(root, "file_size", ju64(memra_gguf_file_size(g)));
    json_object_set_new(root, "version", json_integer(memra_gguf_version(g)));
    json_object_set_new(root, "alignment", ju64(memra_gguf_alignment(g)));
    json_object_set_new(root, "data_offset", ju64(memra_gguf_data_offset(g)));
    for (int64_t i = 0; i < memra_gguf_n_kv(g); i++) {
        const memra_gguf_kv *kv = memra_gguf_kv_at(g, i);
        json_t *o = json_object();
        json_object_set_new(o, "key", jstr(kv->key.ptr, kv->key.len));
        json_object_set_new(o, "type", json_string(memra_gguf_type_name(kv->type)));
        if (kv->type == MEMRA_GGUF_TYPE_ARRAY) {
            json_t *head = json_array();
            json_object_set_new(o, "elem_type", json_string(memra_gguf_type_name(kv->v.arr.type)));
            json_object_set_new(o, "count", ju64(kv->v.arr.n));
            if (kv->v.arr.type == MEMRA_GGUF_TYPE_STRING) {
                memra_gguf_str *strs;
                memra_error err;
                if (memra_gguf_arr_strings(kv, &strs, &err) == MEMRA_OK) {
                    for (uint64_t k = 0; k < kv->v.arr.n && k < ARR_HEAD_NUM; k++)
                        json_array_append_new(head, jstr(strs[k].ptr, strs[k].len));
                    free(strs);
                }
            } else {
                for (uint64_t k = 0; k < kv->v.arr.n && k < ARR_HEAD_NUM; k++) json_array_append_new(head, jelem(kv, k));
            }
            json_object_set_new(o, "head", head);
        } else {
            json_object_set_new(o, "value", jvalue(kv));
        }
        json_array_append_new(meta, o);
    }
    for (int64_t i = 0; i < memra_gguf_n_tensors(g); i++) {
        const memra_gguf_tensor *t = memra_gguf_tensor_at(g, i);
        json_t *o = json_object(), *shape = json_array();
        const memra_type_info *ti = memra_type_get(t->type);
        json_object_set_new(o, "name", jstr(t->name.ptr, t->name.len));
        json_object_set_new(o, "type", ti ? json_string(ti->name) : json_null());
        json_object_set_new(o, "type_id", json_integer(t->type));
        for (uint32_t d = 0; d < t->n_dims; d++) json_array_append_new(shape, json_integer(t->ne[d]));
        json_object_set_new(o, "shape", shape);
        json_object_set_new(o, "bytes", ju64(t->nbytes));
        json_object_set_new(o, "offset", ju64(t->offset));
        json_object_set_new(o, "file_offset", t->data ? ju64(memra_gguf_data_offset(g) + t->offset) : json_null());
        json_array_append_new(tens, o);
    }
    json_object_set_new(sum, "architecture", s->arch[0] ? jstr(s->arch, strlen(s->arch)) : json_null());
    json_object_set_new(sum, "parameters", ju64(s->params));
    json_object_set_new(sum, "parameters_mtp", ju64(s->params_mtp));
    json_object_set_new(sum, "file_size", ju64(memra_gguf_file_size(g)));
    json_object_set_new(sum, "tensor_bytes", ju64(s->tensor_bytes));
    json_object_set_new(sum, "bytes_per_token", s->has_per_token ? ju64(s->per_token) : json_null());
    json_object_set_new(sum, "bytes_per_token_counts",
                        s->has_per_token ? json_string(s->per_token_what) : json_null());
    json_object_set_new(root, "metadata", meta);
    json_object_set_new(root, "tensors", tens);
    json_object_set_new(root, "summary", sum);
    json_object_set_new(root, "error", error ? jstr(error, strlen(error)) : json_null());
    return root;
}

int memra_cmd_inspect(int argc, char **argv) {
    const char *path = NULL;
    int json = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--json")) {
            json = 1;
        } else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            usage(stdout);
            return 0;
        } else if (argv[i][0] == '-' && argv[i][1]) {
            fprintf(stderr, "memra inspect: unknown option '%s'\n", argv[i]);
            usage(stderr);
            return 2;
        } else if (path) {
            fprintf(stderr, "memra inspect: one file at a time ('%s' and '%s')\n", path, argv[i]);
            return 2;
        } else {
            path = argv[i];
        }
    }
    if (!path) {
        usage(stderr);
        return 2;
    }
    memra_gguf *g = NULL;
    memra_error err = {{0}};
    memra_status st = memra_gguf_open_partial(path, &g, &err);
    /* nothing usable: no file, not a GGUF, a version we do not read, a cut header */
    if (!g || (st && ((memra_gguf_version(g) != 2 && memra_gguf_version(g) != 3) || memra_gguf_file_size(g) < 24))) {
        fprintf(stderr, "memra inspect: %s\n", err.msg);
        memra_gguf_free(g);
        return 1;
    }
    summary s;
    summarize(g, &s);
    if (json) {
        json_t *doc = json_doc(path, g, &s, st ? err.msg : NULL);
        if (json_dumpf(doc, stdout, JSON_INDENT(1)) != 0) st = MEMRA_ERR_IO;
        putchar('\n');
        json_decref(doc);
        if (st) fprintf(stderr, "memra inspect: %s\n", err.msg);
    } else {
        print_text(path, g, &s, st != MEMRA_OK);
        if (st) {
            fflush(stdout);
            fprintf(stderr, "memra inspect: stopped: %s\n", err.msg);
        }
    }
    memra_gguf_free(g);
    return st ? 1 : 0;
}
