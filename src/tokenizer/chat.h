/* Chat template rendering: OpenAI-style messages -> prompt text.
 *
 * The Qwen3 and Qwen3.5 chat templates are hand-coded here rather than run
 * through a Jinja interpreter. The output is byte-identical to what Python's
 * Jinja2 renders from the models' own tokenizer.chat_template in the
 * environment transformers builds (ImmutableSandboxedEnvironment with
 * trim_blocks, lstrip_blocks, loopcontrols, a raise_exception global and a
 * tojson filter = json.dumps(x, ensure_ascii=False): keys in insertion order,
 * non-ASCII raw, ", " and ": " separators). tests/data/chat_cases.json holds
 * the Jinja2 renderings that prove it (tools/make_chat_cases.py made them).
 *
 * Values the templates print with Python's str() (a non-string tool-call
 * argument, a tool message whose content is a list under Qwen3, ...) are
 * printed the way Python would: True/False/None, float repr, dict/list repr.
 * Where the template would raise (its raise_exception calls, or a Python
 * TypeError/UndefinedError such as str + None), the renderer returns
 * MEMRA_ERR_INVALID with a message naming the message index and field; the
 * template's own raise_exception text is quoted verbatim in the message. */
#ifndef MEMRA_TOKENIZER_CHAT_H
#define MEMRA_TOKENIZER_CHAT_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "memra.h"

typedef enum memra_chat_template {
    MEMRA_CHAT_CHATML = 0, /* fallback: <|im_start|>role\ncontent<|im_end|>\n, no tools,
                              no thinking; tests/data/chatml-chat-template.jinja */
    MEMRA_CHAT_QWEN3 = 1,  /* Qwen3 (April 2025 hybrid thinking), Hermes JSON tool calls */
    MEMRA_CHAT_QWEN35 = 2, /* Qwen3.5: XML tool calls, <think> opened by the prompt, vision */
} memra_chat_template;

typedef struct memra_chat_options {
    memra_chat_template kind;   /* default MEMRA_CHAT_QWEN35 */
    bool add_generation_prompt; /* default true: end with the assistant header (and the
                                   think prefix the template adds) */
    bool enable_thinking;       /* default true; false is the template's
                                   enable_thinking=false (pre-closed empty think block) */
    bool add_vision_id;         /* default false; Qwen3.5 only: "Picture N: " before images */
    /* default true: first apply the input clean-up transformers'
     * apply_chat_template does before rendering (every message must be an
     * object; keys whose value is null are dropped, so content:null renders
     * like a missing content; "thinking"/"reasoning" are copied to
     * reasoning_content; every tool must be an object; an empty conversation
     * is an error). false renders exactly what a bare Jinja2 render of the
     * given JSON gives. */
    bool hf_normalize;
} memra_chat_options;

/* The documented defaults above. */
memra_chat_options memra_chat_options_default(void);

/* Renders messages (a JSON array of message objects: role, content as a
 * string or a list of {"type":"text","text":...} / image / video parts,
 * reasoning_content, tool_calls [{"function":{"name":..., "arguments":
 * object or string}}], tool results as role "tool") and tools (NULL, JSON
 * null, or an array of tool schemas) into *out (malloc'd, NUL-terminated; the
 * caller frees it). *out_len (may be NULL) gets the length, which can differ
 * from strlen when the input held "\u0000". On error *out is NULL.
 * Note: Qwen3.5 requires tool-call arguments as a JSON object (its template
 * iterates them with |items); a caller holding OpenAI's string form should
 * parse it first. Qwen3 prints a string argument verbatim. */
memra_status memra_chat_render(const json_t *messages, const json_t *tools,
                               const memra_chat_options *opt, char **out, size_t *out_len,
                               memra_error *err);

/* Which renderer reproduces a GGUF's tokenizer.chat_template. A template
 * equal to a known one up to leading/trailing whitespace of its lines and
 * blank lines (which trim_blocks/lstrip_blocks and the templates' {%- -%}
 * markers make irrelevant) is an exact match (*exact = true). Otherwise a
 * template that carries all the distinctive lines of a known family (a later
 * revision of it) maps to that family with *exact = false, and anything else
 * (or NULL) to MEMRA_CHAT_CHATML with *exact = false; the caller logs once
 * that the rendering is an approximation. exact may be NULL. */
memra_chat_template memra_chat_detect(const char *tmpl, size_t len, bool *exact);

/* "qwen35", "qwen3", "chatml". */
const char *memra_chat_template_name(memra_chat_template kind);

/* Python's json.dumps(v, ensure_ascii=False) of a JSON value (the templates'
 * tojson), malloc'd into *out. */
memra_status memra_chat_tojson(const json_t *v, char **out, size_t *out_len, memra_error *err);

/* Python's str(v) of a JSON value as Jinja2 prints it ({{ v }} and |string):
 * strings raw, True/False/None, float repr, containers as their repr. */
memra_status memra_chat_pystr(const json_t *v, char **out, size_t *out_len, memra_error *err);

#endif
