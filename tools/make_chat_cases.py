#!/usr/bin/env python3
"""Builds tests/data/chat_cases.json: conversations rendered by Jinja2 from the
Qwen3.5 and Qwen3 chat templates (and memra's ChatML fallback template), the
expected output of src/tokenizer/chat.c byte for byte.

The Jinja2 environment is the one transformers builds for chat templates
(ImmutableSandboxedEnvironment, trim_blocks, lstrip_blocks, loopcontrols, a
raise_exception global, tojson = json.dumps(ensure_ascii=False) in insertion
order). Each conversation is rendered for every template and for
add_generation_prompt off / on with thinking / on without thinking, both as a
bare Jinja2 render ("hf_normalize": false) and, where it makes a difference,
after transformers' apply_chat_template input clean-up ("hf_normalize": true).
When transformers is installed, every normalized render is also compared with
tokenizer.apply_chat_template itself.

Every case lists the template branches it covers ("covers"); the script checks
that together they cover every branch listed in BRANCHES.

    python3 tools/make_chat_cases.py            # writes tests/data/chat_cases.json
    python3 tools/make_chat_cases.py --hash FILE  # memra_chat_detect's hash of a template
"""
import json
import math
import os
import random
import struct
import sys

import jinja2
from jinja2.ext import loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.join(ROOT, "tests", "data")
FIXTURES = os.path.join(ROOT, "..", "shared", "fixtures")
TEMPLATE_FILES = {
    "qwen35": "qwen35-chat-template.jinja",
    "qwen3": "qwen3-chat-template.jinja",
    "chatml": "chatml-chat-template.jinja",
}
# (add_generation_prompt, enable_thinking)
OPTION_SETS = [(False, True), (True, True), (True, False)]


# ---- the environment transformers renders chat templates in ----------------

class Raised(Exception):
    """Carries the text of a raise_exception() call (transformers raises
    jinja2.TemplateError; the text is what the C renderer must quote)."""


def make_env(raised):
    def raise_exception(message):
        raised.append(message)
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                          sort_keys=sort_keys)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    return env


REASONING_FIELDS = ("reasoning_content", "thinking", "reasoning")


def hf_normalize(messages, tools):
    """transformers' apply_chat_template input clean-up (_normalize_chat_messages,
    the tool check of render_jinja_template, _alias_reasoning_fields)."""
    if isinstance(messages, list) and not messages:
        raise ValueError("Cannot apply chat template to an empty conversation.")
    out = []
    for m in messages:
        if not isinstance(m, dict):
            raise TypeError(f"Chat messages should be dicts, but got {m!r}.")
        out.append({k: v for k, v in m.items() if v is not None})
    if tools is not None:
        for t in tools:
            if not isinstance(t, dict):
                raise ValueError("Tools should either be a JSON schema, or a callable function")
    aliased = []
    for m in out:
        reasoning = next((m[k] for k in REASONING_FIELDS if m.get(k) is not None), None)
        if reasoning is not None:
            m = {"thinking": reasoning, **m, "reasoning_content": reasoning}
        aliased.append(m)
    return aliased, tools


def template_dir():
    """../shared/fixtures when it holds the Qwen templates, else the copies in
    tests/data (the ChatML one only lives in tests/data)."""
    if all(os.path.exists(os.path.join(FIXTURES, TEMPLATE_FILES[k])) for k in ("qwen35", "qwen3")):
        return FIXTURES
    return DATA


def load_templates():
    d = template_dir()
    out = {}
    for kind, name in TEMPLATE_FILES.items():
        path = os.path.join(d if kind != "chatml" else DATA, name)
        with open(path, encoding="utf-8") as f:
            out[kind] = f.read()
    return out


class Renderer:
    def __init__(self, templates):
        self.raised = []
        env = make_env(self.raised)
        self.compiled = {k: env.from_string(t) for k, t in templates.items()}

    def render(self, kind, messages, tools, agp, think, hf, vision_id=False):
        """{"text": ...} or {"error": ..., "raised": text or None}."""
        self.raised.clear()
        try:
            if hf:
                messages, tools = hf_normalize(messages, tools)
            kwargs = dict(messages=messages, tools=tools, add_generation_prompt=agp, enable_thinking=think)
            if vision_id:
                kwargs["add_vision_id"] = True
            return {"text": self.compiled[kind].render(**kwargs)}
        except Exception as e:  # noqa: BLE001 - any template failure is an expected error
            return {"error": f"{type(e).__name__}: {e}", "raised": self.raised[0] if self.raised else None}


def render_case(r, case):
    """Every (template, options) rendering of one case."""
    out = []
    msgs, tools = case["messages"], case.get("tools")
    try:
        normalized_differs = hf_normalize(msgs, tools)[0] != msgs
    except Exception:  # noqa: BLE001
        normalized_differs = True
    for kind in ("qwen35", "qwen3", "chatml"):
        for agp, think in OPTION_SETS:
            hfs = [False, True] if normalized_differs else [False]
            if not normalized_differs and agp and think:
                hfs = [False, True]
            for hf in hfs:
                res = r.render(kind, msgs, tools, agp, think, hf)
                out.append({"template": kind, "add_generation_prompt": agp, "enable_thinking": think,
                            "hf_normalize": hf, "add_vision_id": False, **res})
        if kind == "qwen35" and case.get("vision"):
            res = r.render(kind, msgs, tools, True, True, False, vision_id=True)
            out.append({"template": kind, "add_generation_prompt": True, "enable_thinking": True,
                        "hf_normalize": False, "add_vision_id": True, **res})
    return out


# ---- the conversations ------------------------------------------------------

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get the weather \u2014 in \u00b0C (\u00fcn\u00efc\u00f6d\u00e9, \u4e2d\u6587, emoji \U0001f326)",
        "parameters": {
            "type": "object",
            "properties": {
                "location": {"type": "string",
                             "description": "City, e.g. \"Paris\"\nsecond line\ttab \\ backslash / slash"},
                "days": {"type": "integer", "minimum": 1, "maximum": 14, "default": 3},
                "units": {"type": "string", "enum": ["c", "f"]},
            },
            "required": ["location"],
        },
    },
}
CALC = {
    "type": "function",
    "function": {
        "name": "calc",
        "description": "control chars \u0001 \u001f \u007f \b \f \r end",
        "parameters": {
            "type": "object",
            "properties": {
                "x": {"type": "number", "default": 0.1},
                "y": {"type": "number", "default": 1e-07},
                "z": {"type": "number", "default": 1e22},
                "w": {"type": "number", "default": 1234567890123456.0},
                "v": {"type": "number", "default": 12345678901234567.0},
                "flag": {"type": "boolean", "default": False},
                "opt": {"type": ["string", "null"], "default": None},
                "neg": {"type": "number", "default": -0.0},
                "big": {"type": "integer", "default": 12345678901234567},
                "list": {"type": "array", "items": {}, "default": [], "examples": [[1, 2.5, "x"], {}]},
            },
            "required": [],
        },
    },
}
SEARCH_FLAT = {"name": "search", "description": "An old-style tool without the 'function' wrapper.",
               "parameters": {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}}


def call(name, args, wrap=True, **extra):
    c = {"name": name, "arguments": args}
    return {"type": "function", "id": "call_" + name, "function": c, **extra} if wrap else c


def U(content):
    return {"role": "user", "content": content}


def A(content, **kw):
    return {"role": "assistant", "content": content, **kw}


def S(content):
    return {"role": "system", "content": content}


def T(content, **kw):
    return {"role": "tool", "content": content, **kw}


PARIS = call("get_weather", {"location": "Paris", "days": 3})

CASES = [
    dict(name="user_only", covers=["q35:content_string", "q35:no_tools_no_system", "q35:user", "q3:no_tools_no_system",
                                    "q3:user", "gen_prompt"],
         messages=[U("Hello!")]),
    dict(name="system_user", covers=["q35:no_tools_system", "q3:no_tools_system"],
         messages=[S("You are a helpful assistant."), U("Hi")]),
    dict(name="whitespace_trim", covers=["q35:trim", "q3:no_trim"],
         messages=[S("  \n Be brief. \n "), U(" \t padded \n"), A("\n answer \n")]),
    dict(name="unicode_whitespace_trim", covers=["q35:trim_unicode"],
         messages=[U("\u3000\u00a0\u2029 hi \u0085\u2009\u000b\u001c"), A("\u202fok\u205f\u1680")]),
    dict(name="system_empty", covers=["q35:no_tools_system_empty"],
         messages=[S(""), U("x")]),
    dict(name="tools_no_system", covers=["q35:tools_no_system", "q3:tools_no_system", "tojson"],
         messages=[U("Weather in Paris?")], tools=[WEATHER]),
    dict(name="tools_system", covers=["q35:tools_system", "q3:tools_system", "tojson_numbers", "tojson_escapes"],
         messages=[S("You are a weather bot."), U("Weather in Paris?")], tools=[WEATHER, CALC]),
    dict(name="tools_system_blank", covers=["q35:tools_system_blank"],
         messages=[S("  \n  "), U("hi")], tools=[SEARCH_FLAT]),
    dict(name="tools_empty_list", covers=["q35:tools_empty", "q3:tools_empty"],
         messages=[S("sys"), U("hi")], tools=[]),
    dict(name="tools_not_objects", covers=["tojson_scalars", "hf:tools_must_be_objects"],
         messages=[U("hi")], tools=["a string tool", 42, None, [1, {"k": "v"}]]),
    dict(name="multi_turn_plain", covers=["q35:history_no_think", "q3:history_plain", "q35:last_query_index"],
         messages=[U("One?"), A("1"), U("Two?"), A("2"), U("Three?")]),
    dict(name="reasoning_content_last", covers=["q35:reasoning_content_string", "q35:after_last_query",
                                                "q3:reasoning_content", "q3:think_last"],
         messages=[U("Capital of France?"), A("Paris.", reasoning_content="The user asks about France.\n")]),
    dict(name="reasoning_content_history", covers=["q35:before_last_query_drops_reasoning", "q3:history_plain"],
         messages=[U("Q1"), A("A1", reasoning_content="R1"), U("Q2")]),
    dict(name="think_in_content", covers=["q35:split_think", "q3:split_think"],
         messages=[U("Q"), A("<think>\nI reason\n</think>\n\nAnswer")]),
    dict(name="think_in_content_history", covers=["q35:split_think_history", "q3:split_think_history"],
         messages=[U("Q"), A("<think>\nI reason\n</think>\n\nAnswer"), U("Q2")]),
    dict(name="think_nested_multiple", covers=["q35:split_think_multi", "q3:split_think_multi"],
         messages=[U("Q"), A("pre<think>a</think>mid<think>\n\nb\n\n</think>\n\n\n  end")]),
    dict(name="think_without_open_tag", covers=["q35:split_no_open", "q3:split_no_open"],
         messages=[U("Q"), A("\n\nreasoning only\n\n</think>\n\nanswer")]),
    dict(name="reasoning_content_and_think_in_content", covers=["q35:rc_wins_over_split", "q3:rc_wins_over_split"],
         messages=[U("Q"), A("<think>x</think>y", reasoning_content="R")]),
    dict(name="reasoning_content_null", covers=["q35:rc_not_string", "q3:rc_none", "hf:drop_null"],
         messages=[U("Q"), A("<think>x</think>y", reasoning_content=None)]),
    dict(name="reasoning_content_whitespace", covers=["q35:rc_trim", "q3:rc_strip_newlines"],
         messages=[U("Q"), A("\n\nans", reasoning_content="  \n\n spaced \n\n  ")]),
    dict(name="reasoning_content_number", covers=["q35:rc_not_string", "q3:rc_not_string_error"],
         messages=[U("Q"), A("ans", reasoning_content=7)]),
    dict(name="reasoning_content_falsy_number_not_last", covers=["q3:rc_falsy_not_last"],
         messages=[U("Q"), A("", reasoning_content=0, tool_calls=[PARIS]), T("r")]),
    dict(name="assistant_last_no_reasoning", covers=["q35:empty_think_block", "q3:think_last_empty"],
         messages=[U("Q"), A("Hello")]),
    dict(name="tool_call_no_content", covers=["q35:tool_call_first_no_content", "q3:tool_call_no_content",
                                              "q35:tool_first_after_assistant", "q3:tool_grouping",
                                              "q35:multi_step", "q3:multi_step"],
         messages=[U("Weather in Paris?"), A("", tool_calls=[PARIS]), T("{\"temp\": 20}"), A("It is 20C.")],
         tools=[WEATHER]),
    dict(name="tool_call_with_content", covers=["q35:tool_call_first_with_content", "q3:tool_call_with_content"],
         messages=[U("Weather?"), A("Let me check.", tool_calls=[PARIS]), T("sunny")], tools=[WEATHER]),
    dict(name="tool_call_content_whitespace", covers=["q35:tool_call_content_trim"],
         messages=[U("Weather?"), A("<think>r</think>\n\n", tool_calls=[PARIS]), T("sunny")]),
    dict(name="tool_calls_parallel", covers=["q35:tool_calls_multiple", "q3:tool_calls_multiple",
                                             "q35:tool_consecutive", "q3:tool_consecutive"],
         messages=[U("Paris and Rome?"),
                   A("", reasoning_content="two cities",
                     tool_calls=[PARIS, call("get_weather", {"location": "Rome", "days": 1})]),
                   T("p: 20"), T("r: 25"), A("Both warm.")], tools=[WEATHER]),
    dict(name="tool_call_flat", covers=["q35:tool_call_no_function_key", "q3:tool_call_no_function_key"],
         messages=[U("find x"), A("", tool_calls=[call("search", {"q": "x"}, wrap=False)]), T("found")],
         tools=[SEARCH_FLAT]),
    dict(name="tool_call_argument_types", covers=["q35:args_string", "q35:args_number", "q35:args_bool",
                                                  "q35:args_none", "q35:args_tojson", "q3:args_tojson", "py_str"],
         messages=[U("go"), A("", tool_calls=[call("f", {
             "s": "a \"quoted\" string\nwith newline", "i": 3, "neg": -12, "f": 2.5, "small": 1e-07, "big": 1e16,
             "fixed": 1234567890123456.0, "tiny": 0.0001, "negzero": -0.0, "one": 1.0, "pi": 3.141592653589793,
             "b": True, "bf": False, "n": None, "arr": [1, "a", {"k": "v"}, 2.0, None, True],
             "obj": {"nested": {"x": [True, False, None]}, "u": "\u00e9 \u4e2d \U0001f600"},
             "empty_obj": {}, "empty_arr": [], "esc": "tab\there \\ back \u0001",
         })]), T("ok")]),
    dict(name="tool_call_args_key_order", covers=["q35:args_insertion_order", "tojson_order"],
         messages=[U("go"), A("", tool_calls=[call("f", {"zeta": 1, "alpha": {"b": 2, "a": 1}, "mid": [3]})])]),
    dict(name="tool_call_args_string", covers=["q35:args_json_string_error", "q3:args_json_string_raw"],
         messages=[U("go"), A("", tool_calls=[call("get_weather", "{\"location\": \"Paris\"}")]), T("ok")]),
    dict(name="tool_call_no_arguments", covers=["q35:args_undefined", "q3:args_undefined_error"],
         messages=[U("time?"), A("", tool_calls=[{"type": "function", "function": {"name": "now"}}]), T("12:00")]),
    dict(name="tool_call_args_empty", covers=["q35:args_empty", "q3:args_empty"],
         messages=[U("time?"), A("", tool_calls=[call("now", {})]), T("12:00")]),
    dict(name="tool_call_args_null", covers=["q35:args_null_error", "q3:args_null"],
         messages=[U("time?"), A("", tool_calls=[call("now", None)]), T("12:00")]),
    dict(name="tool_call_content_null", covers=["q35:content_none", "q3:content_none_error", "hf:drop_null"],
         messages=[U("Weather?"), A(None, tool_calls=[PARIS]), T("sunny")], tools=[WEATHER]),
    dict(name="tool_call_name_missing", covers=["q35:tool_call_name_error", "q3:tool_call_name_undefined"],
         messages=[U("x"), A("", tool_calls=[{"function": {"arguments": {"a": 1}}}])]),
    dict(name="tool_call_name_number", covers=["q35:tool_call_name_error", "q3:tool_call_name_str"],
         messages=[U("x"), A("", tool_calls=[{"function": {"name": 5, "arguments": {}}}])]),
    dict(name="tool_call_function_null", covers=["q35:tool_call_function_none", "q3:tool_call_function_falsy"],
         messages=[U("x"), A("", tool_calls=[{"function": None, "name": "outer", "arguments": {"a": 1}}])]),
    dict(name="tool_calls_empty_list", covers=["q35:tool_calls_empty", "q3:tool_calls_empty"],
         messages=[U("x"), A("plain", tool_calls=[])]),
    dict(name="tool_calls_mapping", covers=["q35:tool_calls_mapping_skipped", "q3:tool_calls_mapping_error"],
         messages=[U("x"), A("plain", tool_calls={"function": {"name": "f", "arguments": {}}})]),
    dict(name="tool_calls_string", covers=["q35:tool_calls_string_error", "q3:tool_calls_string_error"],
         messages=[U("x"), A("plain", tool_calls="get_weather")]),
    dict(name="multi_step_ends_with_tool", covers=["q35:tool_last", "q3:tool_last"],
         messages=[S("sys"), U("Weather?"), A("", tool_calls=[PARIS]), T("sunny")], tools=[WEATHER]),
    dict(name="multi_step_two_rounds", covers=["q35:multi_step_reasoning", "q3:think_not_last_with_reasoning"],
         messages=[U("Plan a trip"), A("", reasoning_content="first check weather", tool_calls=[PARIS]),
                   T("sunny"), A("Now hotels.", reasoning_content="then hotels",
                                 tool_calls=[call("hotels", {"city": "Paris", "max_price": 120.5})]),
                   T("[{\"name\": \"H\"}]"), A("Done.", reasoning_content="all set")], tools=[WEATHER]),
    dict(name="multi_step_intermediate_no_reasoning", covers=["q3:not_last_no_reasoning_plain",
                                                              "q35:empty_think_block"],
         messages=[U("Plan"), A("", tool_calls=[PARIS]), T("sunny"), A("ok")]),
    dict(name="user_wrapped_tool_response", covers=["q35:reverse_skip_tool_response", "q3:reverse_skip_tool_response"],
         messages=[U("Q"), A("", tool_calls=[PARIS]), U("<tool_response>\nsunny\n</tool_response>"),
                   A("done", reasoning_content="r")]),
    dict(name="user_wrapped_tool_response_padded", covers=["q35:reverse_trim_before_check", "q3:reverse_no_trim"],
         messages=[U("Q"), A("a1", reasoning_content="r1"), U(" <tool_response>x</tool_response>\n"),
                   A("a2", reasoning_content="r2")]),
    dict(name="only_system", covers=["q35:no_user_query_error", "q3:no_user_query_ok"],
         messages=[S("just a system prompt")]),
    dict(name="only_tool_response_user", covers=["q35:no_user_query_error", "q3:no_user_query_ok"],
         messages=[U("<tool_response>x</tool_response>"), A("hm", reasoning_content="r")]),
    dict(name="empty_messages", covers=["q35:no_messages_error", "q3:no_messages_error", "hf:empty"],
         messages=[]),
    dict(name="system_not_first", covers=["q35:system_not_first_error", "q3:system_not_first_rendered"],
         messages=[U("hi"), S("late system"), A("ok")]),
    dict(name="unknown_role", covers=["q35:unknown_role_error", "q3:unknown_role_skipped"],
         messages=[U("hi"), {"role": "developer", "content": "dev note"}, A("ok")]),
    dict(name="role_not_string", covers=["q35:unknown_role_error", "q3:unknown_role_skipped", "chatml:role_error"],
         messages=[U("hi"), {"role": 5, "content": "x"}]),
    dict(name="tool_first_message", covers=["q35:tool_first_no_header", "q3:tool_first_header"],
         messages=[T("orphan result"), U("q")]),
    dict(name="tool_between_turns", covers=["q35:tool_then_user", "q3:tool_then_user"],
         messages=[U("a"), A("", tool_calls=[PARIS]), T("r1"), U("b"), A("", tool_calls=[PARIS, PARIS]),
                   T("r2"), T("r3")]),
    dict(name="content_text_parts", covers=["q35:content_list_text", "q3:content_list_error", "chatml:parts"],
         messages=[U([{"type": "text", "text": "Hello "}, {"type": "text", "text": "world"}])]),
    dict(name="content_images", vision=True,
         covers=["q35:image_type", "q35:image_key", "q35:image_url_key", "q35:video_type", "q35:video_key",
                 "q35:vision_id", "q35:vision_count_across_messages"],
         messages=[U([{"type": "image", "image": "file:///a.png"}, {"type": "text", "text": "What is this?"}]),
                   A("A cat."),
                   U([{"type": "image_url", "image_url": {"url": "http://x/b.png"}},
                      {"type": "video", "video": "file:///c.mp4"}, {"image": "no type key"},
                      {"video": "no type key"}, {"type": "text", "text": "And these?"}])]),
    dict(name="content_image_in_system", covers=["q35:system_image_error"],
         messages=[S([{"type": "image", "image": "x"}]), U("hi")]),
    dict(name="content_video_in_system_with_tools", covers=["q35:system_video_error"],
         messages=[S([{"type": "video", "video": "x"}]), U("hi")], tools=[WEATHER]),
    dict(name="content_unexpected_item", covers=["q35:unexpected_item_error"],
         messages=[U([{"type": "audio", "audio": "x"}])]),
    dict(name="content_mapping", covers=["q35:unexpected_content_type_error", "q3:content_type_error"],
         messages=[U({"text": "x"})]),
    dict(name="content_number", covers=["q35:unexpected_content_type_error", "q3:content_type_error"],
         messages=[U(5)]),
    dict(name="content_missing", covers=["q35:content_undefined", "q3:content_undefined_error"],
         messages=[{"role": "user"}]),
    dict(name="content_string_items", covers=["q35:string_items_membership"],
         messages=[U(["just a string with text", "an image here", "a video here"])]),
    dict(name="content_string_item_unknown", covers=["q35:unexpected_item_error"],
         messages=[U(["nothing known"])]),
    dict(name="content_list_items", covers=["q35:list_items_membership"],
         messages=[U([["image", "x"], ["text"], ["video"], []])]),
    dict(name="content_list_item_unknown", covers=["q35:unexpected_item_error"],
         messages=[U([["nothing"]])]),
    dict(name="tool_calls_true_reasoning_float", covers=["q35:tool_calls_not_iterable_skipped",
                                                          "q3:tool_calls_not_list_error", "q3:rc_falsy_not_last"],
         messages=[U("x"), A("a", tool_calls=True, reasoning_content=0.0), U("y")]),
    dict(name="content_number_item", covers=["q35:item_type_error"],
         messages=[U([1])]),
    dict(name="content_text_non_string", covers=["q35:text_py_str", "py_repr", "chatml:parts"],
         messages=[U([{"type": "text", "text": 42}, {"type": "text", "text": 2.5},
                      {"type": "text", "text": ["a", 1.5, None, True, {"k": "v'\"", "q": "it's"}]},
                      {"type": "text", "text": ["\t\r\n\\", "\U000e0001 \U0001f600 \u0085 \u00ad \u2028 \u00e9", -0.0, 1e16]},
                      {"type": "text", "text": None}, {"type": "text", "text": {"\u00e9": "\u00a0\u200b\n\x07"}}])]),
    dict(name="tool_content_list", covers=["q35:tool_content_list", "q3:tool_content_repr"],
         messages=[U("q"), A("", tool_calls=[PARIS]),
                   T([{"type": "text", "text": "{\"a\": 1}"}, {"type": "text", "text": "it's \"q\" \\"}])]),
    dict(name="tool_content_null_and_missing", covers=["q35:content_none", "q3:tool_content_none", "hf:drop_null"],
         messages=[U("q"), A("", tool_calls=[PARIS, PARIS]), T(None), {"role": "tool"}]),
    dict(name="system_parts_with_tools", covers=["q35:system_list_with_tools", "q3:content_list_error"],
         messages=[S([{"type": "text", "text": "Sys "}, {"type": "text", "text": "prompt"}]), U("hi")],
         tools=[WEATHER]),
    dict(name="reasoning_alias_reasoning", covers=["hf:alias_reasoning"],
         messages=[U("Q"), A("A", reasoning="R via the 'reasoning' field")]),
    dict(name="reasoning_alias_thinking", covers=["hf:alias_thinking"],
         messages=[U("Q"), A("A", thinking="R via the 'thinking' field", reasoning_content=None)]),
    dict(name="assistant_content_parts_think", covers=["q35:split_after_render_parts"],
         messages=[U("Q"), A([{"type": "text", "text": "<think>r</think>"}, {"type": "text", "text": "ans"}])]),
    dict(name="message_not_object", covers=["q35:message_not_object", "q3:message_not_object", "hf:messages_objects"],
         messages=["hello", U("x")]),
    dict(name="unicode_and_controls", covers=["utf8", "nul"],
         messages=[S("Syst\u00e8me \u2014 \u65e5\u672c\u8a9e"), U("emoji \U0001f600 combining e\u0301 nul[\u0000] "
                                                                  "bell\u0007 del\u007f"),
                   A("r\u00e9ponse", reasoning_content="\u601d\u8003")]),
    dict(name="tool_response_literal_tags", covers=["q35:tool_content_trim", "q3:tool_content_raw"],
         messages=[U("q"), A("", tool_calls=[PARIS]), T("  </tool_response> inside <tool_call>\n  ")]),
    dict(name="long_conversation", covers=["q35:last_query_index", "q3:last_query_index"],
         messages=[S("s")] + [m for i in range(6) for m in (U(f"q{i}"), A(f"a{i}", reasoning_content=f"r{i}"))]
         + [U("final")]),
]

# Every branch of the two templates (and of the transformers clean-up) that
# some case must exercise.
BRANCHES = sorted({b for c in CASES for b in c["covers"]})


def tojson_cases():
    """Values whose json.dumps and str() the C printer must reproduce."""
    rnd = random.Random(1234)
    vals = [0, -1, 2**62, -(2**63), 0.0, -0.0, 1.0, 0.1, 0.5, 1 / 3, 2 / 3, 100.0, 1e15, 1e16, 1e17, 1e-4,
            1e-5, 1.5e-5, 123456.789, 9007199254740993.0, 5e-324, 2.2250738585072014e-308,
            1.7976931348623157e308, 2.0**-1022, 2.0**-1074 * 3, 1e22, 1e23, 8.41e21, 4.35, 0.3, 2.675,
            True, False, None, "", "plain", "quote\" back\\ slash/", "\n\r\t\b\f\u0000\u0001\u001f\u007f",
            "\u00e9\u4e2d\U0001f600\u2028\u2029\u0085\u00a0", "it's", "\"'", "'", [], {}, [[]],
            {"a": [1, {"b": None}], "c": "d"}, {"z": 1, "a": 2},
            ["\t\r\n\\\u0085\u00ad\U000e0001\U0001f600\u00e9\u2028\u0007\u007f", "it's \"q\"", "'", '"'],
            {"k'": {"\u00a0": [-0.0, 1e-05, 1e16, 123.0]}}]
    for e in range(-330, 310, 7):
        vals.append(2.0 ** (e if -1074 <= e <= 1023 else 0))
        vals.append(rnd.uniform(1, 10) * 10.0**e if -300 < e < 300 else 1.0)
    for _ in range(300):
        vals.append(struct.unpack("<d", struct.pack("<Q", rnd.getrandbits(63)))[0])
    for _ in range(100):
        vals.append(round(rnd.uniform(-1000, 1000), rnd.randint(0, 6)))
    vals = [v for v in vals if not (isinstance(v, float) and (math.isnan(v) or math.isinf(v)))]
    return [{"value": v, "json": json.dumps(v, ensure_ascii=False), "str": str(v)} for v in vals]


def detect_hash(text):
    """memra_chat_detect's FNV-1a 64 over stripped, non-blank lines."""
    h = 0xcbf29ce484222325
    for line in text.encode("utf-8").split(b"\n"):
        line = line.strip(b" \t\r\v\f")
        if not line:
            continue
        for byte in line + b"\n":
            h = ((h ^ byte) * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
    return h


def cross_check_transformers(templates, cases):
    """Compares every hf_normalize render with transformers' own
    apply_chat_template; returns (compared, mismatches) or None."""
    try:
        import transformers  # noqa: F401
        from transformers import PreTrainedTokenizerFast
    except Exception:  # noqa: BLE001
        return None
    tok_file = os.path.join(FIXTURES, "qwen3-tokenizer.json")
    if not os.path.exists(tok_file):
        return None
    tok = PreTrainedTokenizerFast(tokenizer_file=tok_file)
    compared, bad = 0, []
    for case in cases:
        if case["messages"] and isinstance(case["messages"][0], list):
            continue
        for r in case["renders"]:
            if not r["hf_normalize"]:
                continue
            kw = dict(tools=case.get("tools"), chat_template=templates[r["template"]], tokenize=False,
                      add_generation_prompt=r["add_generation_prompt"], enable_thinking=r["enable_thinking"])
            try:
                got = {"text": tok.apply_chat_template(case["messages"], **kw)}
            except Exception as e:  # noqa: BLE001
                got = {"error": str(e)}
            compared += 1
            if ("text" in got) != ("text" in r) or got.get("text") != r.get("text"):
                bad.append((case["name"], r["template"], got, r))
    return compared, bad


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--hash":
        with open(sys.argv[2], encoding="utf-8") as f:
            print(f"0x{detect_hash(f.read()):016x}ull")
        return 0
    templates = load_templates()
    for kind in ("qwen35", "qwen3"):  # the committed copies must equal the fixtures
        fx = os.path.join(FIXTURES, TEMPLATE_FILES[kind])
        cp = os.path.join(DATA, TEMPLATE_FILES[kind])
        if os.path.exists(fx) and (not os.path.exists(cp) or open(cp, encoding="utf-8").read() != templates[kind]):
            with open(cp, "w", encoding="utf-8") as f:
                f.write(templates[kind])
            print(f"copied {fx} -> {cp}")
    names = [c["name"] for c in CASES]
    assert len(names) == len(set(names)), "duplicate case names"
    r = Renderer(templates)
    out_cases = []
    for c in CASES:
        oc = {"name": c["name"], "covers": c["covers"], "messages": c["messages"], "tools": c.get("tools")}
        oc["renders"] = render_case(r, c)
        out_cases.append(oc)
    n_renders = sum(len(c["renders"]) for c in out_cases)
    n_err = sum(1 for c in out_cases for x in c["renders"] if "error" in x)
    doc = {
        "about": "Made by tools/make_chat_cases.py: Jinja2 renderings of tests/data/*-chat-template.jinja "
                 "(transformers' environment). tests/test_chat.c checks src/tokenizer/chat.c against them, "
                 "tests/py/test_chat_template.py checks they still equal a fresh Jinja2 render.",
        "jinja2_version": jinja2.__version__,
        "branches": BRANCHES,
        "detect_hashes": {k: f"0x{detect_hash(t):016x}" for k, t in templates.items()},
        "cases": out_cases,
        "tojson": tojson_cases(),
    }
    path = os.path.join(DATA, "chat_cases.json")
    with open(path, "w", encoding="utf-8") as f:
        json.dump(doc, f, ensure_ascii=False, indent=1)
        f.write("\n")
    print(f"wrote {path}: {len(out_cases)} conversations, {n_renders} renders ({n_err} expected errors), "
          f"{len(BRANCHES)} branches, {len(doc['tojson'])} tojson values")
    for k, h in doc["detect_hashes"].items():
        print(f"detect hash {k}: {h}")
    xc = cross_check_transformers(templates, out_cases)
    if xc is None:
        print("transformers not available: apply_chat_template cross-check skipped")
    else:
        compared, bad = xc
        print(f"transformers apply_chat_template cross-check: {compared - len(bad)}/{compared} equal")
        for name, kind, got, want in bad[:10]:
            print(f"  MISMATCH {name} [{kind}]: transformers {str(got)[:200]!r} vs ours {str(want)[:200]!r}")
        if bad:
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
