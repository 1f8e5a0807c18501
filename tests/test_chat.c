/* Chat template rendering: src/tokenizer/chat.c against the Jinja2 renderings
 * in tests/data/chat_cases.json (tools/make_chat_cases.py), byte for byte,
 * for every conversation, template and option set; json.dumps / str() of
 * the values the templates print; template detection. */
#include <jansson.h>

#include "test.h"
#include "tokenizer/chat.h"

static const char CASES_PATH[] = "tests/data/chat_cases.json";

/* Prints s[from, from+n) with control characters escaped. */
static void put_escaped(const char *s, size_t n) {
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '\n') fputs("\\n", stderr);
        else if (c < 0x20 || c == 0x7f) fprintf(stderr, "\\x%02x", c);
        else fputc(c, stderr);
    }
}

/* First differing byte with some context on each side. */
static void show_diff(const char *want, size_t wn, const char *got, size_t gn) {
    size_t i = 0;
    while (i < wn && i < gn && want[i] == got[i]) i++;
    size_t from = i > 60 ? i - 60 : 0;
    fprintf(stderr, "    first difference at byte %zu (want %zu bytes, got %zu)\n    want: ...", i, wn, gn);
    put_escaped(want + from, (wn < i + 60 ? wn : i + 60) - from);
    fprintf(stderr, "\n    got:  ...");
    put_escaped(got + from, (gn < i + 60 ? gn : i + 60) - from);
    fputc('\n', stderr);
}

static bool kind_of(const char *name, memra_chat_template *kind) {
    if (!strcmp(name, "qwen35")) *kind = MEMRA_CHAT_QWEN35;
    else if (!strcmp(name, "qwen3")) *kind = MEMRA_CHAT_QWEN3;
    else if (!strcmp(name, "chatml")) *kind = MEMRA_CHAT_CHATML;
    else return false;
    return true;
}

static void test_renders(const json_t *doc) {
    const json_t *cases = json_object_get(doc, "cases");
    CHECK(json_array_size(cases) >= 40, "only %zu conversations", json_array_size(cases));
    int renders = 0, errors = 0;
    size_t ci;
    const json_t *c;
    json_array_foreach(cases, ci, c) {
        const char *name = json_string_value(json_object_get(c, "name"));
        const json_t *msgs = json_object_get(c, "messages");
        const json_t *tools = json_object_get(c, "tools");
        size_t ri;
        const json_t *r;
        json_array_foreach(json_object_get(c, "renders"), ri, r) {
            memra_chat_options opt = memra_chat_options_default();
            const char *tname = json_string_value(json_object_get(r, "template"));
            if (!tname || !kind_of(tname, &opt.kind)) {
                CHECK(0, "%s: bad template name", name);
                continue;
            }
            opt.add_generation_prompt = json_is_true(json_object_get(r, "add_generation_prompt"));
            opt.enable_thinking = json_is_true(json_object_get(r, "enable_thinking"));
            opt.hf_normalize = json_is_true(json_object_get(r, "hf_normalize"));
            opt.add_vision_id = json_is_true(json_object_get(r, "add_vision_id"));
            char label[256];
            snprintf(label, sizeof label, "%s [%s agp=%d think=%d hf=%d vid=%d]", name, tname,
                     opt.add_generation_prompt, opt.enable_thinking, opt.hf_normalize, opt.add_vision_id);
            char *out = (char *)"sentinel";
            size_t n = 12345;
            memra_error err = {{0}};
            memra_status s = memra_chat_render(msgs, tools, &opt, &out, &n, &err);
            const json_t *want = json_object_get(r, "text");
            renders++;
            if (want) {
                size_t wn = json_string_length(want);
                bool same = s == MEMRA_OK && out && n == wn && memcmp(out, json_string_value(want), wn) == 0;
                CHECK(same, "%s: rendering differs from Jinja2 (%s%s)", label, memra_status_str(s),
                      s ? err.msg : "");
                if (!same && s == MEMRA_OK && out) show_diff(json_string_value(want), wn, out, n);
                if (s == MEMRA_OK) CHECK(out[n] == '\0', "%s: output not NUL-terminated", label);
            } else {
                errors++;
                CHECK(s == MEMRA_ERR_INVALID && out == NULL && n == 0,
                      "%s: Jinja2 fails (%s) but memra returned %s", label,
                      json_string_value(json_object_get(r, "error")), memra_status_str(s));
                const char *raised = json_string_value(json_object_get(r, "raised"));
                if (raised && s != MEMRA_OK)
                    CHECK(strstr(err.msg, raised) != NULL, "%s: message '%s' does not quote '%s'", label, err.msg,
                          raised);
                if (s != MEMRA_OK) CHECK(err.msg[0] != '\0', "%s: empty error message", label);
            }
            if (s == MEMRA_OK) free(out);
        }
    }
    printf("test_chat: %d renders checked (%d expected errors)\n", renders, errors);
}

static void test_tojson(const json_t *doc) {
    const json_t *vals = json_object_get(doc, "tojson");
    CHECK(json_array_size(vals) > 100, "tojson cases missing");
    size_t i;
    const json_t *e;
    json_array_foreach(vals, i, e) {
        const json_t *v = json_object_get(e, "value");
        const json_t *wj = json_object_get(e, "json"), *ws = json_object_get(e, "str");
        char *out;
        size_t n;
        memra_error err;
        CHECK(memra_chat_tojson(v, &out, &n, &err) == MEMRA_OK, "tojson[%zu]", i);
        bool ok = n == json_string_length(wj) && !memcmp(out, json_string_value(wj), n);
        CHECK(ok, "tojson[%zu]: got '%s', want '%s'", i, out, json_string_value(wj));
        free(out);
        CHECK(memra_chat_pystr(v, &out, &n, &err) == MEMRA_OK, "pystr[%zu]", i);
        ok = n == json_string_length(ws) && !memcmp(out, json_string_value(ws), n);
        CHECK(ok, "str[%zu]: got '%s', want '%s'", i, out, json_string_value(ws));
        free(out);
    }
}

static char *read_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    char *buf = NULL;
    size_t cap = 0, n = 0;
    for (;;) {
        if (n + 4096 > cap) {
            cap = cap ? cap * 2 : 65536;
            char *p = realloc(buf, cap + 1);
            if (!p) break;
            buf = p;
        }
        size_t k = fread(buf + n, 1, cap - n, f);
        n += k;
        if (k == 0) break;
    }
    fclose(f);
    if (buf) buf[n] = '\0';
    *len = n;
    return buf;
}

/* Re-indents every line, uses CRLF and adds blank lines: the same template
 * as far as rendering goes. */
static char *reformat(const char *t, size_t n, size_t *out_n) {
    char *o = malloc(n * 8 + 16);
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        if (i == 0 || t[i - 1] == '\n') k += (size_t)sprintf(o + k, "\t  ");
        if (t[i] == '\n') k += (size_t)sprintf(o + k, "  \r\n \r\n");
        else o[k++] = t[i];
    }
    o[k] = '\0';
    *out_n = k;
    return o;
}

static void test_detect(void) {
    static const struct {
        const char *file;
        memra_chat_template kind;
    } known[] = {
        {"tests/data/qwen35-chat-template.jinja", MEMRA_CHAT_QWEN35},
        {"tests/data/qwen3-chat-template.jinja", MEMRA_CHAT_QWEN3},
    };
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++) {
        size_t n;
        char *t = read_file(known[i].file, &n);
        CHECK(t != NULL, "cannot read %s", known[i].file);
        if (!t) continue;
        bool exact = false;
        CHECK(memra_chat_detect(t, n, &exact) == known[i].kind && exact, "%s: not detected exactly", known[i].file);
        size_t rn;
        char *r = reformat(t, n, &rn);
        exact = false;
        CHECK(memra_chat_detect(r, rn, &exact) == known[i].kind && exact, "%s reformatted: not exact", known[i].file);
        free(r);
        /* a changed prompt text: same family, but no longer exact */
        char *hit = strstr(t, "<|im_start|>assistant\\n");
        CHECK(hit != NULL, "%s: no assistant header literal", known[i].file);
        if (hit) {
            hit[1] = '!';
            exact = true;
            CHECK(memra_chat_detect(t, n, &exact) == known[i].kind && !exact, "%s edited: must be inexact",
                  known[i].file);
            hit[1] = '|';
        }
        /* trailing text after the last tag is output, so not exact either */
        char *tail = malloc(n + 8);
        memcpy(tail, t, n);
        memcpy(tail + n, "\nEND\n", 5);
        exact = true;
        CHECK(memra_chat_detect(tail, n + 5, &exact) == known[i].kind && !exact, "%s + tail: must be inexact",
              known[i].file);
        free(tail);
        free(t);
    }
    size_t n;
    char *t = read_file("tests/data/chatml-chat-template.jinja", &n);
    bool exact = true;
    CHECK(t && memra_chat_detect(t, n, &exact) == MEMRA_CHAT_CHATML && !exact, "chatml template");
    free(t);
    const char *llama = "{% for m in messages %}<|start_header_id|>{{ m.role }}<|end_header_id|>\n\n"
                        "{{ m.content }}<|eot_id|>{% endfor %}";
    exact = true;
    CHECK(memra_chat_detect(llama, strlen(llama), &exact) == MEMRA_CHAT_CHATML && !exact, "llama-style template");
    CHECK(memra_chat_detect(NULL, 0, NULL) == MEMRA_CHAT_CHATML, "NULL template");
    CHECK(!strcmp(memra_chat_template_name(MEMRA_CHAT_QWEN35), "qwen35"), "name");
}

static void test_api(void) {
    memra_chat_options opt = memra_chat_options_default();
    CHECK(opt.kind == MEMRA_CHAT_QWEN35 && opt.add_generation_prompt && opt.enable_thinking && opt.hf_normalize &&
              !opt.add_vision_id,
          "defaults");
    char *out;
    size_t n;
    memra_error err = {{0}};
    json_t *obj = json_object();
    CHECK(memra_chat_render(obj, NULL, &opt, &out, &n, &err) == MEMRA_ERR_INVALID && !out, "messages not an array");
    json_error_t je;
    json_t *msgs = json_loads("[{\"role\":\"user\",\"content\":\"a\\u0000b\"},"
                              "{\"role\":\"assistant\",\"content\":null,\"reasoning\":\"r\"}]",
                              JSON_ALLOW_NUL, &je);
    CHECK(msgs != NULL, "parse: %s", je.text);
    CHECK(memra_chat_render(msgs, obj, &opt, &out, &n, &err) == MEMRA_ERR_INVALID, "tools not an array");
    char *before = json_dumps(msgs, JSON_ALLOW_NUL);
    /* hf_normalize works on a copy: the caller's messages keep their nulls */
    CHECK(memra_chat_render(msgs, json_null(), &opt, &out, &n, &err) == MEMRA_OK, "render: %s", err.msg);
    const char want[] = "<|im_start|>user\na\0b<|im_end|>\n<|im_start|>assistant\n<think>\nr\n</think>\n\n"
                        "<|im_end|>\n<|im_start|>assistant\n<think>\n";
    CHECK(n == sizeof want - 1 && !memcmp(out, want, n), "embedded NUL / alias rendering");
    free(out);
    char *after = json_dumps(msgs, JSON_ALLOW_NUL);
    CHECK(before && after && !strcmp(before, after), "caller's messages changed");
    free(before);
    free(after);
    opt.kind = (memra_chat_template)99;
    CHECK(memra_chat_render(msgs, NULL, &opt, &out, &n, &err) == MEMRA_ERR_INVALID, "bad kind");
    /* nesting past the limit is an error, not a crash */
    json_t *deep = json_array(), *cur = deep;
    for (int i = 0; i < 3000; i++) {
        json_t *next = json_array();
        json_array_append_new(cur, next);
        cur = next;
    }
    CHECK(memra_chat_tojson(deep, &out, &n, &err) == MEMRA_ERR_INVALID, "deep nesting");
    json_decref(deep);
    json_decref(msgs);
    json_decref(obj);
}

int main(void) {
    json_error_t je;
    json_t *doc = json_load_file(CASES_PATH, JSON_ALLOW_NUL, &je);
    CHECK(doc != NULL, "%s:%d: %s", CASES_PATH, je.line, je.text);
    if (doc) {
        test_renders(doc);
        test_tojson(doc);
    }
    test_detect();
    test_api();
    json_decref(doc);
    return test_finish("test_chat");
}
