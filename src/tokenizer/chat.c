/* Chat template rendering for Qwen3.5, Qwen3 and a ChatML fallback.
 *
 * Each renderer below follows its Jinja template statement by statement, in
 * the same order (so the first error the template would hit is the one we
 * report). Python semantics the templates lean on are reproduced by small
 * helpers: str.strip() with Unicode whitespace, split(sep)[0] / [-1],
 * `in` on dicts/strings/lists, truthiness, str() and repr() of values, and
 * json.dumps(ensure_ascii=False) for tojson. A JSON key that is absent is
 * Jinja's Undefined (NULL here); a key holding null is Python's None. */
#include "tokenizer/chat.h"

#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "base/status.h"

/* Deeper JSON than this is refused rather than risking the C stack (jansson's
 * own parser stops at 2048). */
#define CHAT_MAX_DEPTH 2048

/* ---- growable byte buffer ------------------------------------------------ */

typedef struct sbuf {
    char *p; /* [cap], NUL-terminated at n when p != NULL */
    size_t n, cap;
    bool oom;
} sbuf;

static void sb_put(sbuf *b, const char *s, size_t n) {
    if (b->oom || n == 0) return;
    size_t need;
    if (memra_add_size(b->n, n + 1, &need)) {
        b->oom = true;
        return;
    }
    if (need > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < need) {
            if (cap > SIZE_MAX / 2) {
                b->oom = true;
                return;
            }
            cap *= 2;
        }
        char *p = realloc(b->p, cap);
        if (!p) {
            b->oom = true;
            return;
        }
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = '\0';
}

static void sb_puts(sbuf *b, const char *s) { sb_put(b, s, strlen(s)); }

static void sb_printf(sbuf *b, const char *fmt, ...) MEMRA_PRINTF(2, 3);
static void sb_printf(sbuf *b, const char *fmt, ...) {
    char tmp[64];
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (k > 0) sb_put(b, tmp, (size_t)k < sizeof tmp ? (size_t)k : sizeof tmp - 1);
}

/* ---- string views and Python str methods --------------------------------- */

typedef struct sv {
    const char *p; /* [n] bytes of valid UTF-8 (may be NULL when n == 0) */
    size_t n;
} sv;

static sv sv_buf(const sbuf *b) { return (sv){b->p, b->n}; }
static sv sv_json(const json_t *s) { return (sv){json_string_value(s), json_string_length(s)}; }
static void sb_sv(sbuf *b, sv s) { sb_put(b, s.p, s.n); }

/* Offset of the first (last) occurrence of needle, or -1. */
static long sv_find(sv s, const char *needle) {
    size_t k = strlen(needle);
    if (k > s.n) return -1;
    const char *hit = memmem(s.p, s.n, needle, k);
    return hit ? (long)(hit - s.p) : -1;
}
static long sv_rfind(sv s, const char *needle) {
    size_t k = strlen(needle);
    if (k > s.n) return -1;
    for (size_t i = s.n - k + 1; i-- > 0;)
        if (memcmp(s.p + i, needle, k) == 0) return (long)i;
    return -1;
}
static bool sv_starts(sv s, const char *pre) {
    size_t k = strlen(pre);
    return s.n >= k && memcmp(s.p, pre, k) == 0;
}
static bool sv_ends(sv s, const char *suf) {
    size_t k = strlen(suf);
    return s.n >= k && memcmp(s.p + s.n - k, suf, k) == 0;
}
/* s.split(sep)[0] and s.split(sep)[-1] */
static sv sv_split_first(sv s, const char *sep) {
    long i = sv_find(s, sep);
    return i < 0 ? s : (sv){s.p, (size_t)i};
}
static sv sv_split_last(sv s, const char *sep) {
    long i = sv_rfind(s, sep);
    if (i < 0) return s;
    size_t off = (size_t)i + strlen(sep);
    return (sv){s.p + off, s.n - off};
}
/* s.lstrip(c) / s.rstrip(c) for one ASCII character. */
static sv sv_lstrip_c(sv s, char c) {
    while (s.n && s.p[0] == c) s.p++, s.n--;
    return s;
}
static sv sv_rstrip_c(sv s, char c) {
    while (s.n && s.p[s.n - 1] == c) s.n--;
    return s;
}

/* Python's str.isspace() (Unicode 14, the set str.strip() removes). */
static bool py_isspace(int32_t c) {
    return (c >= 0x09 && c <= 0x0d) || (c >= 0x1c && c <= 0x20) || c == 0x85 || c == 0xa0 ||
           c == 0x1680 || (c >= 0x2000 && c <= 0x200a) || c == 0x2028 || c == 0x2029 ||
           c == 0x202f || c == 0x205f || c == 0x3000;
}

/* Decodes the code point at p[0..n) into *cp and returns its length; invalid
 * bytes (not produced by jansson, which validates UTF-8) count as one
 * non-space byte. */
static size_t utf8_at(const char *p, size_t n, int32_t *cp) {
    utf8proc_int32_t c;
    utf8proc_ssize_t k = utf8proc_iterate((const utf8proc_uint8_t *)p, (utf8proc_ssize_t)n, &c);
    if (k <= 0) {
        *cp = -1;
        return 1;
    }
    *cp = c;
    return (size_t)k;
}

/* Python's str.strip() (Jinja's |trim). */
static sv sv_trim(sv s) {
    while (s.n) {
        int32_t c;
        size_t k = utf8_at(s.p, s.n, &c);
        if (!py_isspace(c)) break;
        s.p += k, s.n -= k;
    }
    while (s.n) {
        size_t start = s.n - 1;
        while (start > 0 && s.n - start < 4 && ((unsigned char)s.p[start] & 0xc0) == 0x80) start--;
        int32_t c;
        size_t k = utf8_at(s.p + start, s.n - start, &c);
        if (start + k != s.n || !py_isspace(c)) break;
        s.n = start;
    }
    return s;
}

/* ---- JSON values seen through Python/Jinja ------------------------------- */

/* value.key as Jinja resolves it on a dict; NULL (Undefined) for non-objects. */
static const json_t *jget(const json_t *v, const char *key) {
    return json_is_object(v) ? json_object_get(v, key) : NULL;
}

static bool jstr_eq(const json_t *v, const char *s) {
    size_t k = strlen(s);
    return json_is_string(v) && json_string_length(v) == k && memcmp(json_string_value(v), s, k) == 0;
}

static bool role_is(const json_t *msg, const char *role) { return jstr_eq(jget(msg, "role"), role); }

/* Python truthiness; Undefined is falsy. */
static bool jtruthy(const json_t *v) {
    if (!v) return false;
    switch (json_typeof(v)) {
    case JSON_OBJECT: return json_object_size(v) > 0;
    case JSON_ARRAY: return json_array_size(v) > 0;
    case JSON_STRING: return json_string_length(v) > 0;
    case JSON_INTEGER: return json_integer_value(v) != 0;
    case JSON_REAL: return json_real_value(v) != 0.0;
    case JSON_TRUE: return true;
    case JSON_FALSE:
    case JSON_NULL: return false;
    }
    return false;
}

/* The Python type name, for error messages. */
static const char *py_type(const json_t *v) {
    if (!v) return "undefined";
    switch (json_typeof(v)) {
    case JSON_OBJECT: return "dict";
    case JSON_ARRAY: return "list";
    case JSON_STRING: return "str";
    case JSON_INTEGER: return "int";
    case JSON_REAL: return "float";
    case JSON_TRUE:
    case JSON_FALSE: return "bool";
    case JSON_NULL: return "None";
    }
    return "?";
}

/* `needle in v`: key test on a dict, substring on a str, element test on a
 * list; -1 where Python raises TypeError (None, numbers, bools). */
static int jin(const char *needle, const json_t *v) {
    if (json_is_object(v)) return json_object_get(v, needle) != NULL;
    if (json_is_string(v)) return sv_find(sv_json(v), needle) >= 0;
    if (json_is_array(v)) {
        size_t i;
        const json_t *e;
        json_array_foreach(v, i, e) if (jstr_eq(e, needle)) return 1;
        return 0;
    }
    return -1;
}

/* float.__repr__: the shortest digit string that reads back as x (ties go to
 * the nearer one), fixed notation when the decimal exponent is in [-4, 16),
 * else d.ddde+XX. json.dumps prints floats the same way. */
static void put_float(sbuf *b, double x, bool json) {
    if (isnan(x)) {
        sb_puts(b, json ? "NaN" : "nan");
        return;
    }
    if (isinf(x)) {
        sb_puts(b, x < 0 ? (json ? "-Infinity" : "-inf") : (json ? "Infinity" : "inf"));
        return;
    }
    char buf[40], digits[24];
    int nd = 0, exp10 = 0;
    bool neg = signbit(x) != 0;
    double ax = fabs(x);
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(buf, sizeof buf, "%.*e", prec - 1, ax);
        /* split "d.ddde+XX" into digits and exponent */
        nd = 0;
        const char *q = buf;
        for (; *q && *q != 'e'; q++)
            if (*q >= '0' && *q <= '9') digits[nd++] = *q;
        exp10 = atoi(q + 1);
        if (strtod(buf, NULL) == ax) break;
        /* The correctly rounded prec-digit value missed; its neighbour on the
         * other side of x may still read back (x a power of two has a
         * narrower rounding interval below than above). */
        char alt[24];
        memcpy(alt, digits, (size_t)nd);
        int aexp = exp10;
        bool up = strtod(buf, NULL) < ax;
        int i = nd - 1;
        if (up) {
            while (i >= 0 && alt[i] == '9') alt[i--] = '0';
            if (i >= 0) {
                alt[i]++;
            } else {
                alt[0] = '1';
                memset(alt + 1, '0', (size_t)nd - 1);
                aexp++;
            }
        } else {
            while (i >= 0 && alt[i] == '0') alt[i--] = '9';
            if (i >= 0) alt[i]--;
            if (alt[0] == '0') { /* 1000 -> 0999: one digit fewer, not a candidate */
                if (prec == 17) break;
                continue;
            }
        }
        char abuf[48];
        snprintf(abuf, sizeof abuf, "%c.%.*se%d", alt[0], nd - 1, alt + 1, aexp);
        if (nd == 1) snprintf(abuf, sizeof abuf, "%ce%d", alt[0], aexp);
        if (strtod(abuf, NULL) == ax) {
            memcpy(digits, alt, (size_t)nd);
            exp10 = aexp;
            break;
        }
    }
    while (nd > 1 && digits[nd - 1] == '0') nd--;
    int decpt = exp10 + 1;
    if (neg) sb_puts(b, "-");
    if (decpt > -4 && decpt <= 16) {
        if (decpt <= 0) {
            sb_puts(b, "0.");
            for (int i = 0; i < -decpt; i++) sb_puts(b, "0");
            sb_put(b, digits, (size_t)nd);
        } else if (decpt >= nd) {
            sb_put(b, digits, (size_t)nd);
            for (int i = nd; i < decpt; i++) sb_puts(b, "0");
            sb_puts(b, ".0");
        } else {
            sb_put(b, digits, (size_t)decpt);
            sb_puts(b, ".");
            sb_put(b, digits + decpt, (size_t)(nd - decpt));
        }
    } else {
        sb_put(b, digits, 1);
        if (nd > 1) {
            sb_puts(b, ".");
            sb_put(b, digits + 1, (size_t)nd - 1);
        }
        int e = decpt - 1;
        sb_printf(b, "e%c%02d", e < 0 ? '-' : '+', e < 0 ? -e : e);
    }
}

/* A JSON string literal as json.dumps(ensure_ascii=False) writes it. */
static void put_json_string(sbuf *b, sv s) {
    sb_puts(b, "\"");
    size_t run = 0;
    for (size_t i = 0; i < s.n; i++) {
        unsigned char c = (unsigned char)s.p[i];
        const char *esc = NULL;
        char u[8];
        switch (c) {
        case '"': esc = "\\\""; break;
        case '\\': esc = "\\\\"; break;
        case '\n': esc = "\\n"; break;
        case '\r': esc = "\\r"; break;
        case '\t': esc = "\\t"; break;
        case '\b': esc = "\\b"; break;
        case '\f': esc = "\\f"; break;
        default:
            if (c < 0x20) {
                snprintf(u, sizeof u, "\\u%04x", c);
                esc = u;
            }
        }
        if (esc) {
            sb_put(b, s.p + run, i - run);
            sb_puts(b, esc);
            run = i + 1;
        }
    }
    sb_put(b, s.p + run, s.n - run);
    sb_puts(b, "\"");
}

/* Python's str.isprintable() for one non-ASCII code point. */
static bool py_isprintable(int32_t c) {
    switch (utf8proc_category(c)) {
    case UTF8PROC_CATEGORY_CC:
    case UTF8PROC_CATEGORY_CF:
    case UTF8PROC_CATEGORY_CS:
    case UTF8PROC_CATEGORY_CO:
    case UTF8PROC_CATEGORY_CN:
    case UTF8PROC_CATEGORY_ZL:
    case UTF8PROC_CATEGORY_ZP:
    case UTF8PROC_CATEGORY_ZS: return false;
    default: return true;
    }
}

/* repr() of a str: single quotes unless the text has ' and no ". */
static void put_repr_string(sbuf *b, sv s) {
    char q = (sv_find(s, "'") >= 0 && sv_find(s, "\"") < 0) ? '"' : '\'';
    sb_put(b, &q, 1);
    for (size_t i = 0; i < s.n;) {
        int32_t c;
        size_t k = utf8_at(s.p + i, s.n - i, &c);
        if (c == q || c == '\\') {
            sb_puts(b, "\\");
            sb_put(b, s.p + i, 1);
        } else if (c == '\t') {
            sb_puts(b, "\\t");
        } else if (c == '\n') {
            sb_puts(b, "\\n");
        } else if (c == '\r') {
            sb_puts(b, "\\r");
        } else if (c < 0 || c < 0x20 || c == 0x7f) {
            sb_printf(b, "\\x%02x", c < 0 ? (unsigned char)s.p[i] : (unsigned)c);
        } else if (c < 0x7f || py_isprintable(c)) {
            sb_put(b, s.p + i, k);
        } else if (c <= 0xff) {
            sb_printf(b, "\\x%02x", (unsigned)c);
        } else if (c <= 0xffff) {
            sb_printf(b, "\\u%04x", (unsigned)c);
        } else {
            sb_printf(b, "\\U%08x", (unsigned)c);
        }
        i += k;
    }
    sb_put(b, &q, 1);
}

typedef enum print_mode { PRINT_JSON, PRINT_REPR, PRINT_STR } print_mode;

/* json.dumps / repr() / str() of v. Returns false only when v nests deeper
 * than CHAT_MAX_DEPTH. */
static bool put_value(sbuf *b, const json_t *v, print_mode mode, int depth) {
    if (depth > CHAT_MAX_DEPTH) return false;
    bool json = mode == PRINT_JSON;
    switch (json_typeof(v)) {
    case JSON_STRING:
        if (mode == PRINT_STR) sb_sv(b, sv_json(v));
        else if (json) put_json_string(b, sv_json(v));
        else put_repr_string(b, sv_json(v));
        return true;
    case JSON_INTEGER: sb_printf(b, "%" JSON_INTEGER_FORMAT, json_integer_value(v)); return true;
    case JSON_REAL: put_float(b, json_real_value(v), json); return true;
    case JSON_TRUE: sb_puts(b, json ? "true" : "True"); return true;
    case JSON_FALSE: sb_puts(b, json ? "false" : "False"); return true;
    case JSON_NULL: sb_puts(b, json ? "null" : "None"); return true;
    case JSON_ARRAY: {
        sb_puts(b, "[");
        size_t i;
        const json_t *e;
        json_array_foreach(v, i, e) {
            if (i) sb_puts(b, ", ");
            if (!put_value(b, e, json ? PRINT_JSON : PRINT_REPR, depth + 1)) return false;
        }
        sb_puts(b, "]");
        return true;
    }
    case JSON_OBJECT: {
        sb_puts(b, "{");
        const char *key;
        const json_t *e;
        bool first = true;
        /* jansson keeps insertion order (a re-set key keeps its first
         * position), which is also how a Python dict from json.loads
         * behaves. */
        json_object_foreach((json_t *)v, key, e) {
            if (!first) sb_puts(b, ", ");
            first = false;
            sv k = {key, strlen(key)};
            if (json) put_json_string(b, k);
            else put_repr_string(b, k);
            sb_puts(b, ": ");
            if (!put_value(b, e, json ? PRINT_JSON : PRINT_REPR, depth + 1)) return false;
        }
        sb_puts(b, "}");
        return true;
    }
    }
    return true;
}

/* ---- render context ------------------------------------------------------- */

typedef struct chat_ctx {
    const memra_chat_options *opt;
    memra_error *err;
    sbuf out;
    sbuf tmp; /* one message's rendered content; reused */
    int image_count, video_count;
} chat_ctx;

/* Fails the render. idx >= 0 names the message. */
static memra_status chat_fail(chat_ctx *c, long idx, const char *fmt, ...) MEMRA_PRINTF(3, 4);
static memra_status chat_fail(chat_ctx *c, long idx, const char *fmt, ...) {
    char what[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    const char *name = memra_chat_template_name(c->opt->kind);
    if (idx >= 0)
        return memra_errorf(c->err, MEMRA_ERR_INVALID, "chat template %s: messages[%ld]: %s", name, idx,
                            what);
    return memra_errorf(c->err, MEMRA_ERR_INVALID, "chat template %s: %s", name, what);
}

/* A raise_exception() of the template, its text quoted verbatim. */
#define CHAT_RAISE(c, idx, text) chat_fail((c), (idx), "%s (raised by the template)", (text))

static memra_status chat_put_value(chat_ctx *c, long idx, sbuf *b, const json_t *v, print_mode mode) {
    if (!put_value(b, v, mode, 0)) return chat_fail(c, idx, "value nests deeper than %d levels", CHAT_MAX_DEPTH);
    return MEMRA_OK;
}

/* {{ v }} in a template: str(v), and '' for Undefined. */
static memra_status chat_put_str(chat_ctx *c, long idx, sbuf *b, const json_t *v) {
    return v ? chat_put_value(c, idx, b, v, PRINT_STR) : MEMRA_OK;
}

#define TRY(x)                                                                                     \
    do {                                                                                           \
        memra_status s_ = (x);                                                                     \
        if (s_ != MEMRA_OK) return s_;                                                             \
    } while (0)

/* ---- Qwen3.5 --------------------------------------------------------------- */

static const char Q35_TOOLS_HEAD[] = "# Tools\n\nYou have access to the following functions:\n\n<tools>";
static const char Q35_TOOLS_TAIL[] =
    "\n</tools>"
    "\n\nIf you choose to call a function ONLY reply in the following format with NO suffix:\n\n"
    "<tool_call>\n<function=example_function_name>\n<parameter=example_parameter_1>\nvalue_1\n"
    "</parameter>\n<parameter=example_parameter_2>\nThis is the value for the second parameter\n"
    "that can span\nmultiple lines\n</parameter>\n</function>\n</tool_call>\n\n<IMPORTANT>\n"
    "Reminder:\n- Function calls MUST follow the specified format: an inner <function=...></function> "
    "block must be nested within <tool_call></tool_call> XML tags\n"
    "- Required parameters MUST be specified\n"
    "- You may provide optional reasoning for your function call in natural language BEFORE the "
    "function call, but NOT after\n"
    "- If there is no function call available, answer the question like normal with your current "
    "knowledge and do not tell the user about function calls\n</IMPORTANT>";

/* The template's render_content macro, appended to dst. */
static memra_status q35_content(chat_ctx *c, long idx, const json_t *content, bool do_vision_count,
                                bool is_system, sbuf *dst) {
    if (json_is_string(content)) {
        sb_sv(dst, sv_json(content));
        return MEMRA_OK;
    }
    if (!content || json_is_null(content)) return MEMRA_OK; /* Undefined iterates as empty */
    if (!json_is_array(content)) return CHAT_RAISE(c, idx, "Unexpected content type.");
    size_t i;
    const json_t *item;
    json_array_foreach(content, i, item) {
        int in_image = jin("image", item);
        if (in_image < 0)
            return chat_fail(c, idx, "content[%zu] is %s, not a content part ('image' in it raises "
                                     "TypeError)", i, py_type(item));
        bool image = in_image || jin("image_url", item) == 1 || jstr_eq(jget(item, "type"), "image");
        if (image) {
            if (is_system) return CHAT_RAISE(c, idx, "System message cannot contain images.");
            if (do_vision_count) c->image_count++;
            if (c->opt->add_vision_id) sb_printf(dst, "Picture %d: ", c->image_count);
            sb_puts(dst, "<|vision_start|><|image_pad|><|vision_end|>");
        } else if (jin("video", item) == 1 || jstr_eq(jget(item, "type"), "video")) {
            if (is_system) return CHAT_RAISE(c, idx, "System message cannot contain videos.");
            if (do_vision_count) c->video_count++;
            if (c->opt->add_vision_id) sb_printf(dst, "Video %d: ", c->video_count);
            sb_puts(dst, "<|vision_start|><|video_pad|><|vision_end|>");
        } else if (jin("text", item) == 1) {
            TRY(chat_put_str(c, idx, dst, jget(item, "text")));
        } else {
            return CHAT_RAISE(c, idx, "Unexpected item type in content.");
        }
    }
    return MEMRA_OK;
}

/* render_content(...)|trim into c->tmp; the view points into c->tmp. */
static memra_status q35_content_trim(chat_ctx *c, long idx, const json_t *content, bool count,
                                     bool is_system, sv *out) {
    c->tmp.n = 0;
    TRY(q35_content(c, idx, content, count, is_system, &c->tmp));
    *out = sv_trim(sv_buf(&c->tmp));
    return MEMRA_OK;
}

static memra_status q35_tool_calls(chat_ctx *c, long idx, const json_t *calls, sv content) {
    sbuf *o = &c->out;
    if (json_is_string(calls))
        return chat_fail(c, idx, "tool_calls is a string; the template iterates its characters and "
                                 "fails on their missing name");
    if (!json_is_array(calls)) return MEMRA_OK; /* a dict or a number: skipped by the template */
    size_t j;
    const json_t *call;
    json_array_foreach(calls, j, call) {
        const json_t *fn = jget(call, "function");
        if (fn) call = fn; /* "is defined": present, even when null */
        const json_t *name = jget(call, "name");
        if (!json_is_string(name))
            return chat_fail(c, idx, "tool_calls[%zu]: function name is %s, not a string", j,
                             py_type(name));
        if (j == 0) sb_puts(o, sv_trim(content).n ? "\n\n<tool_call>\n<function=" : "<tool_call>\n<function=");
        else sb_puts(o, "\n<tool_call>\n<function=");
        sb_sv(o, sv_json(name));
        sb_puts(o, ">\n");
        const json_t *args = jget(call, "arguments");
        if (args) {
            if (!json_is_object(args))
                return chat_fail(c, idx,
                                 "tool_calls[%zu]: arguments is %s; Qwen3.5's template needs a JSON "
                                 "object (|items: Can only get item pairs from a mapping)",
                                 j, py_type(args));
            const char *key;
            const json_t *val;
            json_object_foreach((json_t *)args, key, val) {
                sb_puts(o, "<parameter=");
                sb_puts(o, key);
                sb_puts(o, ">\n");
                bool as_json = json_is_object(val) || json_is_array(val);
                TRY(chat_put_value(c, idx, o, val, as_json ? PRINT_JSON : PRINT_STR));
                sb_puts(o, "\n</parameter>\n");
            }
        }
        sb_puts(o, "</function>\n</tool_call>");
    }
    return MEMRA_OK;
}

static memra_status render_qwen35(chat_ctx *c, const json_t *msgs, const json_t *tools) {
    sbuf *o = &c->out;
    size_t n = json_array_size(msgs);
    if (n == 0) return CHAT_RAISE(c, -1, "No messages provided.");
    const json_t *m0 = json_array_get(msgs, 0);
    sv content;
    if (json_is_array(tools) && json_array_size(tools) > 0) {
        sb_puts(o, "<|im_start|>system\n");
        sb_puts(o, Q35_TOOLS_HEAD);
        size_t i;
        const json_t *tool;
        json_array_foreach(tools, i, tool) {
            sb_puts(o, "\n");
            if (!put_value(o, tool, PRINT_JSON, 0))
                return chat_fail(c, -1, "tools[%zu] nests deeper than %d levels", i, CHAT_MAX_DEPTH);
        }
        sb_puts(o, Q35_TOOLS_TAIL);
        if (role_is(m0, "system")) {
            TRY(q35_content_trim(c, 0, jget(m0, "content"), false, true, &content));
            if (content.n) {
                sb_puts(o, "\n\n");
                sb_sv(o, content);
            }
        }
        sb_puts(o, "<|im_end|>\n");
    } else if (role_is(m0, "system")) {
        TRY(q35_content_trim(c, 0, jget(m0, "content"), false, true, &content));
        sb_puts(o, "<|im_start|>system\n");
        sb_sv(o, content);
        sb_puts(o, "<|im_end|>\n");
    }

    /* The last user turn that is a real query (not tool results wrapped as a
     * user turn): assistant turns after it keep their reasoning. */
    bool multi_step_tool = true;
    size_t last_query = n - 1;
    for (size_t k = n; k-- > 0;) {
        const json_t *m = json_array_get(msgs, k);
        if (!role_is(m, "user")) continue;
        TRY(q35_content_trim(c, (long)k, jget(m, "content"), false, false, &content));
        if (!(sv_starts(content, "<tool_response>") && sv_ends(content, "</tool_response>"))) {
            multi_step_tool = false;
            last_query = k;
            break;
        }
    }
    if (multi_step_tool) return CHAT_RAISE(c, -1, "No user query found in messages.");

    for (size_t i = 0; i < n; i++) {
        const json_t *m = json_array_get(msgs, i);
        long li = (long)i;
        TRY(q35_content_trim(c, li, jget(m, "content"), true, false, &content));
        if (role_is(m, "system")) {
            if (i != 0) return CHAT_RAISE(c, li, "System message must be at the beginning.");
        } else if (role_is(m, "user")) {
            sb_puts(o, "<|im_start|>user\n");
            sb_sv(o, content);
            sb_puts(o, "<|im_end|>\n");
        } else if (role_is(m, "assistant")) {
            sv reasoning = {"", 0};
            const json_t *rc = jget(m, "reasoning_content");
            if (json_is_string(rc)) {
                reasoning = sv_json(rc);
            } else if (sv_find(content, "</think>") >= 0) {
                reasoning = sv_split_first(content, "</think>");
                reasoning = sv_lstrip_c(sv_split_last(sv_rstrip_c(reasoning, '\n'), "<think>"), '\n');
                content = sv_lstrip_c(sv_split_last(content, "</think>"), '\n');
            }
            reasoning = sv_trim(reasoning);
            if (i > last_query) {
                sb_puts(o, "<|im_start|>assistant\n<think>\n");
                sb_sv(o, reasoning);
                sb_puts(o, "\n</think>\n\n");
            } else {
                sb_puts(o, "<|im_start|>assistant\n");
            }
            sb_sv(o, content);
            const json_t *calls = jget(m, "tool_calls");
            if (jtruthy(calls)) TRY(q35_tool_calls(c, li, calls, content));
            sb_puts(o, "<|im_end|>\n");
        } else if (role_is(m, "tool")) {
            if (i > 0 && jtruthy(json_array_get(msgs, i - 1)) && !role_is(json_array_get(msgs, i - 1), "tool"))
                sb_puts(o, "<|im_start|>user");
            sb_puts(o, "\n<tool_response>\n");
            sb_sv(o, content);
            sb_puts(o, "\n</tool_response>");
            if (i + 1 == n || !role_is(json_array_get(msgs, i + 1), "tool")) sb_puts(o, "<|im_end|>\n");
        } else {
            return CHAT_RAISE(c, li, "Unexpected message role.");
        }
    }
    if (c->opt->add_generation_prompt)
        sb_puts(o, c->opt->enable_thinking ? "<|im_start|>assistant\n<think>\n"
                                           : "<|im_start|>assistant\n<think>\n\n</think>\n\n");
    return MEMRA_OK;
}

/* ---- Qwen3 ----------------------------------------------------------------- */

static const char Q3_TOOLS_HEAD[] =
    "# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
    "You are provided with function signatures within <tools></tools> XML tags:\n<tools>";
static const char Q3_TOOLS_TAIL[] =
    "\n</tools>\n\nFor each function call, return a json object with function name and arguments "
    "within <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, "
    "\"arguments\": <args-json-object>}\n</tool_call><|im_end|>\n";

/* Qwen3 concatenates message.content with '+', which only works on a str. */
static memra_status q3_str_content(chat_ctx *c, long idx, const json_t *m, sv *out) {
    const json_t *content = jget(m, "content");
    if (!json_is_string(content))
        return chat_fail(c, idx, "content is %s; Qwen3's template needs a string here", py_type(content));
    *out = sv_json(content);
    return MEMRA_OK;
}

static memra_status q3_tool_calls(chat_ctx *c, long idx, const json_t *calls, sv content) {
    sbuf *o = &c->out;
    if (!json_is_array(calls))
        return chat_fail(c, idx, "tool_calls is %s, not a list of tool calls", py_type(calls));
    size_t j;
    const json_t *call;
    json_array_foreach(calls, j, call) {
        if (j > 0 || content.n) sb_puts(o, "\n");
        const json_t *fn = jget(call, "function");
        if (jtruthy(fn)) call = fn;
        sb_puts(o, "<tool_call>\n{\"name\": \"");
        TRY(chat_put_str(c, idx, o, jget(call, "name")));
        sb_puts(o, "\", \"arguments\": ");
        const json_t *args = jget(call, "arguments");
        if (!args)
            return chat_fail(c, idx, "tool_calls[%zu]: no arguments (tojson of Undefined fails)", j);
        TRY(chat_put_value(c, idx, o, args, json_is_string(args) ? PRINT_STR : PRINT_JSON));
        sb_puts(o, "}\n</tool_call>");
    }
    return MEMRA_OK;
}

static memra_status render_qwen3(chat_ctx *c, const json_t *msgs, const json_t *tools) {
    sbuf *o = &c->out;
    size_t n = json_array_size(msgs);
    if (n == 0) return chat_fail(c, -1, "no messages (messages[0] is undefined)");
    const json_t *m0 = json_array_get(msgs, 0);
    sv content;
    if (json_is_array(tools) && json_array_size(tools) > 0) {
        sb_puts(o, "<|im_start|>system\n");
        if (role_is(m0, "system")) {
            TRY(q3_str_content(c, 0, m0, &content));
            sb_sv(o, content);
            sb_puts(o, "\n\n");
        }
        sb_puts(o, Q3_TOOLS_HEAD);
        size_t i;
        const json_t *tool;
        json_array_foreach(tools, i, tool) {
            sb_puts(o, "\n");
            if (!put_value(o, tool, PRINT_JSON, 0))
                return chat_fail(c, -1, "tools[%zu] nests deeper than %d levels", i, CHAT_MAX_DEPTH);
        }
        sb_puts(o, Q3_TOOLS_TAIL);
    } else if (role_is(m0, "system")) {
        TRY(q3_str_content(c, 0, m0, &content));
        sb_puts(o, "<|im_start|>system\n");
        sb_sv(o, content);
        sb_puts(o, "<|im_end|>\n");
    }

    /* Unlike Qwen3.5, no real user query is not an error: last_query stays
     * at the last message. */
    size_t last_query = n - 1;
    for (size_t k = n; k-- > 0;) {
        const json_t *m = json_array_get(msgs, k);
        if (!role_is(m, "user")) continue;
        TRY(q3_str_content(c, (long)k, m, &content));
        if (!(sv_starts(content, "<tool_response>") && sv_ends(content, "</tool_response>"))) {
            last_query = k;
            break;
        }
    }

    for (size_t i = 0; i < n; i++) {
        const json_t *m = json_array_get(msgs, i);
        long li = (long)i;
        if (role_is(m, "user") || (role_is(m, "system") && i != 0)) {
            TRY(q3_str_content(c, li, m, &content));
            sb_puts(o, "<|im_start|>");
            sb_sv(o, sv_json(jget(m, "role")));
            sb_puts(o, "\n");
            sb_sv(o, content);
            sb_puts(o, "<|im_end|>\n");
        } else if (role_is(m, "assistant")) {
            TRY(q3_str_content(c, li, m, &content));
            /* reasoning_content when set (any type), else split out of content */
            const json_t *rc = jget(m, "reasoning_content");
            bool have_rc = rc && !json_is_null(rc);
            sv reasoning = {"", 0};
            if (!have_rc && sv_find(content, "</think>") >= 0) {
                reasoning = sv_split_first(content, "</think>");
                reasoning = sv_lstrip_c(sv_split_last(sv_rstrip_c(reasoning, '\n'), "<think>"), '\n');
                content = sv_lstrip_c(sv_split_last(content, "</think>"), '\n');
            }
            bool reasoning_truthy = have_rc ? jtruthy(rc) : reasoning.n > 0;
            if (i > last_query && (i + 1 == n || reasoning_truthy)) {
                if (have_rc && !json_is_string(rc))
                    return chat_fail(c, li, "reasoning_content is %s, not a string", py_type(rc));
                if (have_rc) reasoning = sv_json(rc);
                sb_puts(o, "<|im_start|>assistant\n<think>\n");
                sb_sv(o, sv_rstrip_c(sv_lstrip_c(reasoning, '\n'), '\n'));
                sb_puts(o, "\n</think>\n\n");
                sb_sv(o, sv_lstrip_c(content, '\n'));
            } else {
                sb_puts(o, "<|im_start|>assistant\n");
                sb_sv(o, content);
            }
            const json_t *calls = jget(m, "tool_calls");
            if (jtruthy(calls)) TRY(q3_tool_calls(c, li, calls, content));
            sb_puts(o, "<|im_end|>\n");
        } else if (role_is(m, "tool")) {
            if (i == 0 || !role_is(json_array_get(msgs, i - 1), "tool")) sb_puts(o, "<|im_start|>user");
            sb_puts(o, "\n<tool_response>\n");
            TRY(chat_put_str(c, li, o, jget(m, "content")));
            sb_puts(o, "\n</tool_response>");
            if (i + 1 == n || !role_is(json_array_get(msgs, i + 1), "tool")) sb_puts(o, "<|im_end|>\n");
        }
        /* any other role (and the first system message) renders nothing */
    }
    if (c->opt->add_generation_prompt) {
        sb_puts(o, "<|im_start|>assistant\n");
        if (!c->opt->enable_thinking) sb_puts(o, "<think>\n\n</think>\n\n");
    }
    return MEMRA_OK;
}

/* ---- ChatML fallback ------------------------------------------------------- */

/* tests/data/chatml-chat-template.jinja: role and content only (text parts
 * of a list concatenated); tools, tool calls and reasoning are not shown. */
static memra_status render_chatml(chat_ctx *c, const json_t *msgs) {
    sbuf *o = &c->out;
    size_t i;
    const json_t *m;
    json_array_foreach(msgs, i, m) {
        const json_t *role = jget(m, "role");
        if (!json_is_string(role)) return chat_fail(c, (long)i, "role is %s, not a string", py_type(role));
        sb_puts(o, "<|im_start|>");
        sb_sv(o, sv_json(role));
        sb_puts(o, "\n");
        const json_t *content = jget(m, "content");
        if (json_is_string(content)) {
            sb_sv(o, sv_json(content));
        } else if (json_is_array(content)) {
            size_t j;
            const json_t *part;
            json_array_foreach(content, j, part) {
                if (!jstr_eq(jget(part, "type"), "text")) continue;
                const json_t *text = jget(part, "text");
                TRY(chat_put_str(c, (long)i, o, text));
            }
        }
        sb_puts(o, "<|im_end|>\n");
    }
    if (c->opt->add_generation_prompt) sb_puts(o, "<|im_start|>assistant\n");
    return MEMRA_OK;
}

/* ---- transformers' input clean-up ----------------------------------------- */

/* What apply_chat_template does to the conversation before rendering:
 * messages must be dicts, top-level None values are dropped, and the first
 * of reasoning_content/thinking/reasoning that is set becomes
 * reasoning_content. Builds a new array (values shared, caller's untouched). */
static memra_status hf_normalize(chat_ctx *c, const json_t *msgs, const json_t *tools, json_t **out) {
    *out = NULL;
    if (json_array_size(msgs) == 0)
        return chat_fail(c, -1, "Cannot apply chat template to an empty conversation.");
    size_t i;
    const json_t *t;
    json_array_foreach(tools, i, t) {
        if (!json_is_object(t)) return chat_fail(c, -1, "tools[%zu] is %s, not a JSON schema object", i, py_type(t));
    }
    json_t *arr = json_array();
    if (!arr) return memra_errorf(c->err, MEMRA_ERR_NOMEM, "chat: out of memory");
    const json_t *m;
    json_array_foreach(msgs, i, m) {
        if (!json_is_object(m)) {
            json_decref(arr);
            return chat_fail(c, (long)i, "is %s; chat messages must be objects", py_type(m));
        }
        json_t *copy = json_object();
        if (!copy || json_array_append_new(arr, copy)) {
            json_decref(arr);
            return memra_errorf(c->err, MEMRA_ERR_NOMEM, "chat: out of memory");
        }
        const char *key;
        json_t *val;
        json_object_foreach((json_t *)m, key, val) {
            if (!json_is_null(val) && json_object_set(copy, key, val)) {
                json_decref(arr);
                return memra_errorf(c->err, MEMRA_ERR_NOMEM, "chat: out of memory");
            }
        }
        static const char *const fields[] = {"reasoning_content", "thinking", "reasoning"};
        for (size_t f = 0; f < MEMRA_ARRAY_LEN(fields); f++) {
            json_t *r = json_object_get(copy, fields[f]);
            if (!r) continue;
            if ((!json_object_get(copy, "thinking") && json_object_set(copy, "thinking", r)) ||
                json_object_set(copy, "reasoning_content", r)) {
                json_decref(arr);
                return memra_errorf(c->err, MEMRA_ERR_NOMEM, "chat: out of memory");
            }
            break;
        }
    }
    *out = arr;
    return MEMRA_OK;
}

/* ---- public API ------------------------------------------------------------ */

memra_chat_options memra_chat_options_default(void) {
    return (memra_chat_options){
        .kind = MEMRA_CHAT_QWEN35,
        .add_generation_prompt = true,
        .enable_thinking = true,
        .add_vision_id = false,
        .hf_normalize = true,
    };
}

const char *memra_chat_template_name(memra_chat_template kind) {
    switch (kind) {
    case MEMRA_CHAT_QWEN35: return "qwen35";
    case MEMRA_CHAT_QWEN3: return "qwen3";
    case MEMRA_CHAT_CHATML: return "chatml";
    }
    return "unknown";
}

memra_status memra_chat_render(const json_t *messages, const json_t *tools,
                               const memra_chat_options *opt, char **out, size_t *out_len,
                               memra_error *err) {
    if (out) *out = NULL;
    if (out_len) *out_len = 0;
    if (!out || !opt) return memra_errorf(err, MEMRA_ERR_INVALID, "chat: NULL output or options");
    if (!json_is_array(messages)) return memra_errorf(err, MEMRA_ERR_INVALID, "chat: messages is not a JSON array");
    if (tools && !json_is_null(tools) && !json_is_array(tools))
        return memra_errorf(err, MEMRA_ERR_INVALID, "chat: tools is not a JSON array");
    if (opt->kind != MEMRA_CHAT_QWEN35 && opt->kind != MEMRA_CHAT_QWEN3 && opt->kind != MEMRA_CHAT_CHATML)
        return memra_errorf(err, MEMRA_ERR_INVALID, "chat: unknown template kind %d", (int)opt->kind);
    if (json_is_null(tools)) tools = NULL;

    chat_ctx c = {.opt = opt, .err = err};
    json_t *norm = NULL;
    memra_status s = MEMRA_OK;
    if (opt->hf_normalize) {
        s = hf_normalize(&c, messages, tools, &norm);
        messages = norm;
    }
    if (s == MEMRA_OK) {
        switch (opt->kind) {
        case MEMRA_CHAT_QWEN35: s = render_qwen35(&c, messages, tools); break;
        case MEMRA_CHAT_QWEN3: s = render_qwen3(&c, messages, tools); break;
        case MEMRA_CHAT_CHATML: s = render_chatml(&c, messages); break;
        }
    }
    json_decref(norm);
    free(c.tmp.p);
    if (s == MEMRA_OK && (c.out.oom || c.tmp.oom)) s = memra_errorf(err, MEMRA_ERR_NOMEM, "chat: out of memory");
    if (s == MEMRA_OK && !c.out.p && !(c.out.p = calloc(1, 1)))
        s = memra_errorf(err, MEMRA_ERR_NOMEM, "chat: out of memory");
    if (s != MEMRA_OK) {
        free(c.out.p);
        return s;
    }
    *out = c.out.p;
    if (out_len) *out_len = c.out.n;
    return MEMRA_OK;
}

static memra_status print_to(const json_t *v, print_mode mode, char **out, size_t *out_len, memra_error *err) {
    if (out) *out = NULL;
    if (out_len) *out_len = 0;
    if (!v || !out) return memra_errorf(err, MEMRA_ERR_INVALID, "chat: NULL value or output");
    sbuf b = {0};
    if (!put_value(&b, v, mode, 0)) {
        free(b.p);
        return memra_errorf(err, MEMRA_ERR_INVALID, "chat: value nests deeper than %d levels", CHAT_MAX_DEPTH);
    }
    if (!b.oom && !b.p) b.p = calloc(1, 1);
    if (b.oom || !b.p) {
        free(b.p);
        return memra_errorf(err, MEMRA_ERR_NOMEM, "chat: out of memory");
    }
    *out = b.p;
    if (out_len) *out_len = b.n;
    return MEMRA_OK;
}

memra_status memra_chat_tojson(const json_t *v, char **out, size_t *out_len, memra_error *err) {
    return print_to(v, PRINT_JSON, out, out_len, err);
}

memra_status memra_chat_pystr(const json_t *v, char **out, size_t *out_len, memra_error *err) {
    return print_to(v, PRINT_STR, out, out_len, err);
}

/* ---- template detection ---------------------------------------------------- */

/* FNV-1a 64 over the template's lines, each stripped of surrounding
 * whitespace, blank lines skipped, each followed by '\n'. Every tag in the
 * known templates starts with {%- or {{-, which eats the whitespace before
 * it, and trim_blocks eats the newline after, so this normal form renders
 * identically. tools/make_chat_cases.py prints the values for new templates. */
static uint64_t template_hash(const char *t, size_t len) {
    uint64_t h = 0xcbf29ce484222325ull;
    size_t i = 0;
    while (i < len) {
        size_t e = i;
        while (e < len && t[e] != '\n') e++;
        size_t a = i, z = e;
        while (a < z && (t[a] == ' ' || t[a] == '\t' || t[a] == '\r' || t[a] == '\v' || t[a] == '\f')) a++;
        while (z > a && (t[z - 1] == ' ' || t[z - 1] == '\t' || t[z - 1] == '\r' || t[z - 1] == '\v' ||
                         t[z - 1] == '\f'))
            z--;
        if (z > a) {
            for (size_t k = a; k < z; k++) h = (h ^ (unsigned char)t[k]) * 0x100000001b3ull;
            h = (h ^ '\n') * 0x100000001b3ull;
        }
        i = e + 1;
    }
    return h;
}

static bool has_all(const char *t, size_t len, const char *const *needles, size_t k) {
    for (size_t i = 0; i < k; i++)
        if (!memmem(t, len, needles[i], strlen(needles[i]))) return false;
    return true;
}

#define QWEN35_TEMPLATE_HASH 0x7ff3a87a165ff7deull
#define QWEN3_TEMPLATE_HASH 0x0069fae55f9bbdccull

memra_chat_template memra_chat_detect(const char *tmpl, size_t len, bool *exact) {
    if (exact) *exact = false;
    if (!tmpl || !len) return MEMRA_CHAT_CHATML;
    /* Text after the last tag is output verbatim (bar one final newline), so
     * an exact match must end in a tag. */
    size_t end = len;
    if (end && tmpl[end - 1] == '\n') end--;
    if (end && tmpl[end - 1] == '\r') end--;
    bool ends_in_tag = end > 0 && tmpl[end - 1] == '}';
    uint64_t h = template_hash(tmpl, len);
    if (ends_in_tag && h == QWEN35_TEMPLATE_HASH) {
        if (exact) *exact = true;
        return MEMRA_CHAT_QWEN35;
    }
    if (ends_in_tag && h == QWEN3_TEMPLATE_HASH) {
        if (exact) *exact = true;
        return MEMRA_CHAT_QWEN3;
    }
    static const char *const q35[] = {"<|im_start|>", "<function=", "<parameter=", "</think>",
                                      "last_query_index", "enable_thinking", "<tool_response>"};
    static const char *const q3[] = {"<|im_start|>", "<tool_call>", "<function-name>", "<args-json-object>",
                                     "</think>", "last_query_index", "enable_thinking", "<tool_response>"};
    if (has_all(tmpl, len, q35, MEMRA_ARRAY_LEN(q35))) return MEMRA_CHAT_QWEN35;
    if (has_all(tmpl, len, q3, MEMRA_ARRAY_LEN(q3))) return MEMRA_CHAT_QWEN3;
    return MEMRA_CHAT_CHATML;
}
