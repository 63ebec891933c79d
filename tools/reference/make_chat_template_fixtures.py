#!/usr/bin/env python3
"""Reference fixtures for Vireo's Jinja chat-template engine (src/template/).

Run on the device machine (transformers + jinja2 installed):
  PYTHONUNBUFFERED=1 python3 tools/reference/make_chat_template_fixtures.py \
      --configs .dev/tmpl --out "$OUT"
--configs holds <model>/tokenizer_config.json (copies of models/<model>/tokenizer_config.json).

Writes two files:
  chat_template_models.json: for every model whose tokenizer_config.json has a chat template, and every
      conversation case x add_generation_prompt x extra kwargs, what transformers renders (the same
      call apply_chat_template makes: render_jinja_template(conversations=[messages], tools=...,
      add_generation_prompt=..., bos_token=..., eos_token=..., **extra)), or the exception raised.
      The templates themselves are not stored: the test reads them from models/<model>/.
  chat_template_features.json: small templates written for Vireo's tests (one Jinja feature each),
      rendered by transformers' own Jinja environment (_compile_jinja_template), or the exception.
"""
import argparse
import inspect
import json
import os
import sys

import transformers
from transformers.utils import chat_template_utils as ctu

TOOLS = [
    {"type": "function", "function": {
        "name": "get_weather",
        "description": "Get the current weather in a city.",
        "parameters": {"type": "object",
                       "properties": {"city": {"type": "string", "description": "City name, e.g. \"Paris\""},
                                      "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
                       "required": ["city"]}}},
    {"type": "function", "function": {
        "name": "add",
        "description": "Add two numbers — exactly.",
        "parameters": {"type": "object",
                       "properties": {"a": {"type": "number"}, "b": {"type": "integer", "default": 1.5}},
                       "required": ["a", "b"]}}},
]


# Small templates written for Vireo's tests, one Jinja feature each: (name, template, context).
MSGS = [{"role": "system", "content": "sys"}, {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "yo", "tool_calls": [{"function": {"name": "f", "arguments": {"x": 1}}}]},
        {"role": "user", "content": "bye"}]
FEATURES = [
    ("text_only", "plain text\nline 2\n", {}),
    ("trailing_newlines", "a\n\n", {}),
    ("crlf", "a\r\nb{% if true %}\r\nc{% endif %}\r\n", {}),
    ("var", "{{ x }}|{{ y }}|{{ missing }}|{{ n }}|{{ f }}|{{ b }}|{{ nn }}", {"x": "s", "y": 3, "n": None, "f": 2.5, "b": True, "nn": -7}),
    ("var_repr", "{{ l }}|{{ d }}|{{ t }}|{{ e }}|{{ q }}", {"l": [1, "a", None, True, 1.0], "d": {"k": "v", "n": [1]}, "t": [], "e": {}, "q": ["it's", "a\"b", "x\ny", "\\"]}),
    ("float_repr", "{{ 1.0 }} {{ 0.1 + 0.2 }} {{ 1e16 }} {{ 1e15 }} {{ 1.5e-5 }} {{ 0.0001 }} {{ 10 / 4 }} {{ 10 / 5 }} {{ 2 ** 0.5 }} {{ -0.0 }} {{ 123456789.123 }}", {}),
    ("comment", "a{# comment #}b\n{# c2 #}\nc", {}),
    ("ws_minus", "a  {{- ' b ' -}}  c\n  {%- if true -%}  d  {%- endif -%}\n e", {}),
    ("trim_blocks", "{% if true %}\nyes\n{% endif %}\nafter\n{% for i in [1,2] %}\n{{ i }}\n{% endfor %}\n", {}),
    ("lstrip_blocks", "  {% if true %}\n    x\n  {% endif %}\n\t{# c #}\n  {{ 'v' }}\n  a {% if true %}b{% endif %}\n", {}),
    ("plus_modifiers", "  {%+ if true +%}\nx{% endif %}", {}),
    ("if_elif_else", "{% for v in [1, 2, 3, 0] %}{% if v == 1 %}one{% elif v == 2 %}two{% elif v > 2 %}big{% else %}zero{% endif %},{% endfor %}", {}),
    ("for_loop_vars", "{% for x in ['a','b','c'] %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}{{ loop.revindex0 }}{{ loop.first }}{{ loop.last }}{{ loop.length }}[{{ loop.previtem }}|{{ loop.nextitem }}] {% endfor %}", {}),
    ("for_else", "{% for x in [] %}{{ x }}{% else %}empty{% endfor %}{% for x in [1] %}{{ x }}{% else %}no{% endfor %}", {}),
    ("for_items", "{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}{% for k, v in d | items %}{{ k }}{% endfor %}{% for k in d %}{{ k }}{% endfor %}", {"d": {"b": 1, "a": 2, "c": [3]}}),
    ("for_filter", "{% for m in messages if m.role != 'system' %}{{ loop.index }}:{{ m.role }}/{{ loop.length }} {% endfor %}", {"messages": MSGS}),
    ("for_string_iter", "{% for c in 'héllo' %}[{{ c }}]{% endfor %}", {}),
    ("for_undefined", "{% for c in nothing %}x{% else %}none{% endfor %}", {}),
    ("for_none_raises", "{% for c in n %}x{% endfor %}", {"n": None}),
    ("for_scope", "{% set c = 0 %}{% for i in range(3) %}{% set c = c + 1 %}{{ c }}{% endfor %}{{ c }}{{ i }}", {}),
    ("loop_cycle_changed", "{% for i in [1,1,2,3,3] %}{{ loop.cycle('a','b') }}{% if loop.changed(i) %}!{% endif %}{% endfor %}", {}),
    ("nested_loops", "{% for a in [1,2] %}{% for b in 'xy' %}{{ loop.index }}{{ a }}{{ b }} {% endfor %}{{ loop.index }};{% endfor %}", {}),
    ("break_continue", "{% for i in range(10) %}{% if i == 2 %}{% continue %}{% endif %}{% if i == 5 %}{% break %}{% endif %}{{ i }}{% endfor %}", {}),
    ("set_simple", "{% set a = 1 %}{% set b, c = [2, 3] %}{% set d = a + b * c %}{{ a }}{{ b }}{{ c }}{{ d }}", {}),
    ("set_block", "{% set blk %}  inner {{ 1 + 1 }}\n{% endset %}[{{ blk }}]{% set t | trim | upper %}  hi  {% endset %}[{{ t }}]", {}),
    ("namespace", "{% set ns = namespace(count=0, found=false, items=[]) %}{% for m in messages %}{% if m.role == 'user' %}{% set ns.count = ns.count + 1 %}{% set ns.found = true %}{% set ns.items = ns.items + [m.content] %}{% endif %}{% endfor %}{{ ns.count }} {{ ns.found }} {{ ns.items }}", {"messages": MSGS}),
    ("namespace_from_dict", "{% set ns = namespace({'a': 1}, b=2) %}{{ ns.a }}{{ ns.b }}{{ ns.c }}", {}),
    ("set_attr_non_namespace", "{% set d = {} %}{% set d.x = 1 %}", {}),
    ("macro", "{% macro greet(name, punct='!') %}Hello {{ name }}{{ punct }}{% endmacro %}{{ greet('A') }} {{ greet('B', '?') }} {{ greet(punct='.', name='C') }}", {}),
    ("macro_varargs", "{% macro m(a) %}{{ a }}{{ varargs }}{{ kwargs }}{% endmacro %}{{ m(1, 2, 3, k=4) }}", {}),
    ("macro_recursive", "{% macro render(v) %}{% if v is mapping %}{{ '{' }}{% for k, x in v.items() %}{{ k }}:{{ render(x) }},{% endfor %}{{ '}' }}{% elif v is iterable and v is not string %}[{% for x in v %}{{ render(x) }}{% endfor %}]{% else %}{{ v }}{% endif %}{% endmacro %}{{ render(d) }}", {"d": {"a": [1, 2, {"b": "c"}], "e": None}}),
    ("macro_caller", "{% macro wrap(tag) %}<{{ tag }}>{{ caller() }}</{{ tag }}>{% endmacro %}{% call wrap('b') %}inside {{ 1 }}{% endcall %}{% macro list(items) %}{% for i in items %}{{ caller(i) }}{% endfor %}{% endmacro %}{% call(x) list([1,2]) %}<{{ x }}>{% endcall %}", {}),
    ("macro_sees_outer", "{% set g = 'G' %}{% macro m() %}{{ g }}{{ messages | length }}{% endmacro %}{{ m() }}", {"messages": MSGS}),
    ("filter_block", "{% filter upper %}abc {{ 'd' }}{% endfilter %}", {}),
    ("with_block", "{% with a = 1, b = 2 %}{{ a + b }}{% endwith %}{{ a }}", {}),
    ("raw_block", "{% raw %}{{ not rendered }} {% if %}{% endraw %}", {}),
    ("generation_block", "{% for m in messages %}{% if m.role == 'assistant' %}{% generation %}{{ m.content }}{% endgeneration %}{% else %}{{ m.content }}{% endif %}{% endfor %}", {"messages": MSGS}),
    ("filters_string", "{{ '  a b  ' | trim }}|{{ 'xxaxx' | trim('x') }}|{{ 'abc' | upper }}|{{ 'ABC' | lower }}|{{ 'hello wORLD-foo(bar' | title }}|{{ 'hELLO world' | capitalize }}|{{ 'aaa' | replace('a', 'b', 2) }}|{{ 'abc' | reverse }}|{{ 'ab' | list }}|{{ 'one two  three' | wordcount }}|{{ 'x' | center(5) }}|{{ '<a&\"\\'>' | e }}|{{ 'hello world foo' | truncate(9) }}", {}),
    ("filters_length", "{{ l | length }} {{ l | count }} {{ 'héllo🎉' | length }} {{ d | length }} {{ missing | length }}", {"l": [1, 2, 3], "d": {"a": 1}}),
    ("filters_first_last", "{{ l | first }} {{ l | last }} {{ 'abc' | first }} {{ 'abc' | last }} [{{ [] | first }}]", {"l": [1, 2, 3]}),
    ("filters_join", "{{ l | join(', ') }}|{{ l | join }}|{{ users | join(',', attribute='name') }}", {"l": [1, "a", None], "users": [{"name": "x"}, {"name": "y"}]}),
    ("filters_default", "{{ missing | default('d') }}|{{ missing | d('d2') }}|{{ '' | default('e') }}|{{ '' | default('e', true) }}|{{ none | default('n') }}|{{ x | default('no') }}", {"x": 0}),
    ("filters_numbers", "{{ '42' | int }} {{ '4.7' | int }} {{ 'x' | int }} {{ 'x' | int(5) }} {{ '0x1A' | int(0, 16) }} {{ 3 | float }} {{ '2.5' | float }} {{ -3 | abs }} {{ 2.567 | round(2) }} {{ 2.5 | round }} {{ 3.5 | round }} {{ 2.1 | round(0, 'ceil') }} {{ 2.9 | round(method='floor') }} {{ 7 | round }}", {}),
    ("filters_string_conv", "{{ 1 | string }}{{ none | string }}{{ [1, 'a'] | string }}{{ true | string | length }}", {}),
    ("filters_items_list", "{{ d | items | list }} {{ d | list }} {{ d.keys() | list }} {{ d.values() | list }} {{ d | dictsort }} {{ d | dictsort(reverse=true) }}", {"d": {"b": 1, "a": 2}}),
    ("filters_select", "{{ users | selectattr('active') | map(attribute='name') | list }} {{ users | rejectattr('active') | map(attribute='name') | join }} {{ users | selectattr('role', 'equalto', 'admin') | list | length }} {{ [1, 2, 3, 4, 0] | select('odd') | list }} {{ [1, 2, 3, 4, 0] | reject('odd') | list }} {{ [0, 1, '', 'a', none] | select | list }} {{ users | map(attribute='age', default=0) | list }} {{ ['a', 'B'] | map('upper') | list }} {{ users | selectattr('name', 'in', ['x', 'z']) | map(attribute='name') | list }}", {"users": [{"name": "x", "active": True, "role": "admin", "age": 3}, {"name": "y", "active": False, "role": "user"}, {"name": "z", "role": "admin"}]}),
    ("filters_sort_unique", "{{ [3, 1, 2] | sort }} {{ [3, 1, 2] | sort(reverse=true) }} {{ ['b', 'A', 'c'] | sort }} {{ ['b', 'A', 'c'] | sort(case_sensitive=true) }} {{ users | sort(attribute='age') | map(attribute='name') | join }} {{ ['a', 'A', 'b', 'a'] | unique | list }} {{ [1, 2, 1] | unique | list }} {{ [1, 2, 3] | reverse | list }} {{ [3, 1, 2] | min }} {{ [3, 1, 2] | max }} {{ [3, 1, 2] | sum }} {{ users | sum(attribute='age') }}", {"users": [{"name": "x", "age": 30}, {"name": "y", "age": 20}]}),
    ("filters_indent", "[{{ 'a\\nb\\n\\nc' | indent }}][{{ 'a\\nb' | indent(2, true) }}][{{ 'a\\n\\nb' | indent('--', blank=true) }}][{{ 'a\\nb\\n' | indent(first=true) }}]", {}),
    ("filters_safe_attr_format", "{{ '<b>' | safe }} {{ d | attr('k') }} {{ '%s-%d' | format('a', 3) }} {{ '%05.1f|%x|%r' | format(3.14159, 255, 'q') }}", {"d": {"k": "v"}}),
    ("tojson_basic", "{{ d | tojson }}|{{ 'é\"<>&\\n' | tojson }}|{{ [1, 2.5, none, true, 'x'] | tojson }}|{{ 1e20 | tojson }}|{{ none | tojson }}", {"d": {"z": 1, "a": {"n": [1, 2]}, "u": "😀 \u00e9 \u2028 \x01"}}),
    ("tojson_indent", "{{ d | tojson(indent=2) }}\n{{ d | tojson(indent=4, sort_keys=true) }}\n{{ d | tojson(separators=(',', ':')) }}\n{{ [] | tojson(indent=2) }}{{ {} | tojson(indent=2) }}\n{{ d | tojson(ensure_ascii=true) }}", {"d": {"z": [1, {"y": []}], "a": "ü", "e": {}}}),
    ("tojson_tools", "{% for tool in tools %}{{ tool | tojson }}\n{{ tool.function.parameters | tojson(indent=4) }}\n{% endfor %}", {"tools": TOOLS}),
    ("tojson_undefined", "{{ missing | tojson }}", {}),
    ("tests", "{{ x is defined }}{{ missing is defined }}{{ missing is undefined }}{{ n is none }}{{ x is none }}{{ 's' is string }}{{ 1 is string }}{{ 1 is number }}{{ 1.5 is number }}{{ true is number }}{{ d is mapping }}{{ l is mapping }}{{ l is iterable }}{{ 's' is iterable }}{{ 1 is iterable }}{{ l is sequence }}{{ d is sequence }}{{ true is boolean }}{{ 1 is boolean }}{{ false is false }}{{ 0 is false }}{{ true is true }}{{ 1 is integer }}{{ 1.0 is float }}{{ 3 is odd }}{{ 4 is even }}{{ 9 is divisibleby 3 }}{{ 9 is divisibleby(4) }}{{ 2 is equalto 2 }}{{ 2 is eq(3) }}{{ 2 is ne 3 }}{{ 'a' is in 'cat' }}{{ 2 is in l }}{{ x is sameas x }}{{ none is sameas none }}{{ 'ABC' is upper }}{{ 'abc' is lower }}{{ 2 is gt 1 }}{{ 2 is lt 1 }}{{ 2 is ge 2 }}{{ 2 is le 1 }}{{ l is callable }}{{ range is callable }}", {"x": "v", "n": None, "d": {"a": 1}, "l": [1, 2]}),
    ("test_not", "{{ x is not defined }}{{ x is not none }}{{ not x is defined }}{{ missing is not string }}", {"x": 1}),
    ("operators_arith", "{{ 1 + 2 }} {{ 7 - 10 }} {{ 3 * 4 }} {{ 7 / 2 }} {{ 7 // 2 }} {{ -7 // 2 }} {{ 7 % 3 }} {{ -7 % 3 }} {{ 2 ** 10 }} {{ 2 ** -1 }} {{ 7.5 // 2 }} {{ 7.5 % 2 }} {{ 1 + 2.5 }} {{ true + 1 }} {{ -(3) }} {{ +4 }} {{ 2 * 3 ** 2 }} {{ (1 + 2) * 3 }} {{ 10 - 2 - 3 }}", {}),
    ("operators_strings", "{{ 'a' + 'b' }} {{ 'ab' * 3 }} {{ 'x' ~ 1 ~ none ~ missing ~ true }} {{ [1] + [2, 3] }} {{ [0] * 3 }} {{ 'ell' in 'hello' }} {{ 'z' not in 'hello' }} {{ 2 in [1, 2] }} {{ 'a' in {'a': 1} }} {{ 'x' in missing }}", {}),
    ("operators_compare", "{{ 1 == 1.0 }} {{ 1 != 2 }} {{ 'a' < 'b' }} {{ 2 >= 2 }} {{ [1, 2] == [1, 2] }} {{ [1, 2] < [1, 3] }} {{ none == none }} {{ missing == none }} {{ 'a' == 1 }} {{ true == 1 }} {{ {'a': 1} == {'a': 1} }} {{ 1 < 2 < 3 }} {{ 3 > 2 > 2 }}", {}),
    ("operators_logic", "{{ true and false }} {{ true or false }} {{ not true }} {{ 0 or 'x' }} {{ 'a' and 'b' }} {{ '' and 'b' }} {{ none or [] }} {{ not missing }} {{ missing or 'fallback' }} {{ 1 and missing }}", {}),
    ("ternary", "{{ 'y' if true else 'n' }} {{ 'y' if false else 'n' }} [{{ 'y' if false }}] {{ 1 if none else 2 if true else 3 }} {{ ('a' if x else 'b') ~ 'c' }}", {"x": ""}),
    ("literals", "{{ 'it\\'s' }} {{ \"dq \\\"x\\\"\" }} {{ 'tab\\there' }} {{ 'nl\\nx' }} {{ '\\u00e9\\x41' }} {{ 'a' 'b' }} {{ 1_000 }} {{ 0.5 }} {{ 1e3 }} {{ (1, 2) }} {{ (1,) }} {{ () }} {{ [1, [2]] }} {{ {'k': 'v', 'n': {'m': none}} }} {{ True }} {{ False }} {{ None }} {{ true }} {{ -1 }}", {}),
    ("subscript", "{{ l[0] }} {{ l[-1] }} {{ l[1:] }} {{ l[:2] }} {{ l[::-1] }} {{ l[::2] }} {{ l[-2:] }} {{ s[1:3] }} {{ s[::-1] }} {{ s[0] }} {{ d['a'] }} {{ d.a }} {{ d['missing'] }} {{ l[10] }} {{ l.0 }} {{ d.get('a') }} {{ d.get('zz') }} {{ d.get('zz', 'dflt') }} {{ s[-1] }} {{ 'héllo'[1] }} {{ 'héllo'[::-1] }}", {"l": [1, 2, 3, 4], "s": "hello", "d": {"a": "A"}}),
    ("attr_of_undefined_raises", "{{ missing.attr }}", {}),
    ("subscript_of_undefined_raises", "{{ missing['k'] }}", {}),
    ("attr_of_none", "[{{ n.attr }}]", {"n": None}),
    ("call_undefined_raises", "{{ n.strip() }}", {"n": None}),
    ("string_methods", "{{ s.startswith('He') }} {{ s.endswith(('x', 'd!')) }} [{{ p.strip() }}] [{{ p.lstrip() }}] [{{ p.rstrip() }}] {{ 'xxhixx'.strip('x') }} {{ 'a,b,,c'.split(',') }} {{ 'a b  c'.split() }} {{ 'a,b,c'.split(',', 1) }} {{ 'a,b,c'.rsplit(',', 1) }} {{ s.replace('l', 'L') }} {{ s.upper() }} {{ s.lower() }} {{ 'ab cd'.title() }} {{ 'abc'.capitalize() }} {{ s.find('o') }} {{ s.find('z') }} {{ s.rfind('o') }} {{ s.count('l') }} {{ '{} and {}'.format('x', 1) }} {{ '{0}{1}{0}'.format('a', 'b') }} {{ '{n}!'.format(n=5) }} {{ '-'.join(['a', 'b']) }} {{ '12'.isdigit() }} {{ 'ab'.isalpha() }} {{ ' '.isspace() }} {{ 'a\\nb\\r\\nc'.splitlines() }} {{ '5'.zfill(3) }} {{ s.split('</think>')[-1] }} {{ 'k=v'.partition('=') }} {{ 'abc'.index('c') }} {{ 'x'.ljust(3) }}|{{ 'x'.rjust(3) }}", {"s": "Hello World!", "p": "  pad \n"}),
    ("dict_methods", "{% for k, v in d.items() %}{{ k }}{{ v }}{% endfor %} {{ d.keys() | list }} {{ d.values() | list }} {{ d.get('a', 0) }} {{ 'a' in d.keys() }} {{ d | length }}", {"d": {"a": 1, "b": 2}}),
    ("list_methods", "{{ l.index(2) }} {{ l.count(1) }}", {"l": [1, 2, 1]}),
    ("list_append_unsafe", "{% set l = [] %}{{ l.append(1) }}{{ l }}", {}),
    ("globals_range_dict", "{{ range(3) | list }} {{ range(1, 7, 2) | list }} {{ range(5, 0, -2) | list }} {{ dict(a=1, b='x') }} {{ range(0) | list }}", {}),
    ("raise_exception", "{% if messages | length > 1 %}{{ raise_exception('Too many: ' ~ messages | length) }}{% endif %}ok", {"messages": MSGS}),
    ("strftime_now_type", "{{ strftime_now('%Y') | length }} {{ strftime_now('%d %b') | length > 3 }}", {}),
    ("whitespace_mixed", "{%- for m in messages -%}\n  <{{ m.role }}>\n  {%- if m.content -%}\n    {{ m.content | trim }}\n  {%- endif %}\n{% endfor -%}\n  end  ", {"messages": MSGS}),
    ("undefined_ops_raise", "{{ missing + 1 }}", {}),
    ("type_error_str_plus_int", "{{ 'a' + 1 }}", {}),
    ("zero_division", "{{ 1 / 0 }}", {}),
    ("syntax_error_unclosed", "line1\n{% if x %}\nabc", {}),
    ("syntax_error_bad_expr", "a\nb\n{{ 1 + }}", {}),
    ("syntax_error_unknown_tag", "{% frobnicate %}", {}),
    ("syntax_error_endfor_mismatch", "{% if x %}{% endfor %}", {}),
    ("syntax_error_unclosed_string", "{{ 'abc }}", {}),
    ("ws_edge_cases", "A\n  {%- if true %}\n\tB {# c -#}   \n  C{{- ' D ' }}  \n{%+ if true %}E{% endif -%}\n\n  F\n{% if true -%}\n\n G{%- endif %}\n{% endif %}\n", {}),
    ("ws_lstrip_midline", "x {% if true %}y{% endif %} z\n    {% for i in [1] %}{{ i }}{% endfor %}\n  {{ 'q' }}  {% if false %}{% endif %}\nend\n\n", {}),
    ("ws_comment_lines", "{# first #}\nline\n    {# indented comment #}\nnext\n{#- strip -#}\n   after", {}),
    ("nested_dict_braces", "{{ {'a': {'b': 1}} }}|{{ {'a': {'b': {'c': [1, {'d': 2}]}}}['a']['b'] }}", {}),
    ("messages_selectors", "{{ messages | selectattr('role', 'equalto', 'user') | list | length }} {{ (messages | last).content }} {{ messages[1:] | map(attribute='role') | join(',') }} {{ messages[:-1] | length }} {{ messages[-1:][0].role }} {% if messages[-1]['role'] == 'user' %}last-user{% endif %} {{ messages | map(attribute='tool_calls') | select('defined') | list | length }}", {"messages": MSGS}),
    ("content_list_handling", "{% for m in messages %}{% if m.content is string %}{{ m.content }}{% else %}{% for p in m.content %}{% if p.type == 'text' %}{{ p.text }}{% elif p['type'] == 'image' %}<img>{% endif %}{% endfor %}{% endif %}|{% endfor %}{{ messages[1].content[0].text | upper }}", {"messages": [{"role": "user", "content": "plain"}, {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "image"}, {"type": "text", "text": "b"}]}]}),
    ("loop_break_else", "{% for i in [1, 2, 3] %}{% if i == 2 %}{% break %}{% endif %}{{ i }}{% else %}never{% endfor %}|{% for i in [1, 2] if i > 5 %}{{ i }}{% else %}filtered-empty{% endfor %}", {}),
    ("unpack_lists", "{% for a, b in [[1, 2], (3, 4)] %}{{ a }}-{{ b }};{% endfor %}{% set x, y = 'ab' %}{{ y }}{{ x }}", {}),
    ("macro_defaults_scope", "{% macro m(a, b=a * 2, c=none) %}{{ a }},{{ b }},{{ c }}{% endmacro %}{{ m(1) }}|{{ m(1, 5) }}|{{ m(1, c='z') }}{% set outer = 'o' %}{% macro n() %}{{ outer }}{% set outer = 'inner' %}{{ outer }}{% endmacro %}|{{ n() }}{{ outer }}", {}),
    ("macro_undefined_before_def", "{{ later() }}{% macro later() %}x{% endmacro %}", {}),
    ("set_in_if_and_loop", "{% set v = 'a' %}{% if true %}{% set v = 'b' %}{% endif %}{{ v }}{% for i in [1] %}{% set v = 'c' %}{{ v }}{% endfor %}{{ v }}{% with %}{% set v = 'd' %}{% endwith %}{{ v }}", {}),
    ("namespace_list_concat", "{% set ns = namespace(parts=[], n=0) %}{% for m in messages %}{% set ns.parts = ns.parts + [m.role[0]] %}{% set ns.n = ns.n + (m.content | length) %}{% endfor %}{{ ns.parts | join('') }} {{ ns.n }}", {"messages": MSGS}),
    ("namespace_append_unsafe", "{% set ns = namespace(l=[]) %}{{ ns.l.append(1) }}", {}),
    ("json_numbers", "{{ [1.0, -0.0, 1e-7, 123456789012345678, 0.1, 2.5e+300, 100.0, 1e16] | tojson }} {{ {'a': 1.0} }} {{ 3 / 1 }} {{ 1e100 }}", {}),
    ("json_unicode_ascii", "{{ s | tojson }} {{ s | tojson(ensure_ascii=true) }} {{ s | tojson(true) }}", {"s": "é😀\u0000\u001f\u007f\u2028'\\/"}),
    ("tojson_nested_tools", "{{ tools | tojson(indent=2) }}", {"tools": TOOLS}),
    ("string_concat_none_raises", "{{ 'a' + none }}", {}),
    ("undefined_plus_str_raises", "{{ 'a' + missing }}", {}),
    ("compare_incompatible_raises", "{{ 1 < 'a' }}", {}),
    ("attr_getattr_methods", "{{ d.items is defined }} {{ d['get']('k') }} {{ d.keys is defined }} {{ s.upper is callable }}", {"d": {"k": "v"}, "s": "x"}),
    ("conditional_strip_think", "{% set content = m.content %}{% if '</think>' in content %}{% set content = content.split('</think>')[-1].lstrip('\n') %}{% set r = m.content.split('</think>')[0].rstrip('\n').split('<think>')[-1].lstrip('\n') %}{% endif %}[{{ r }}][{{ content }}]", {"m": {"content": "<think>\nreason here\n</think>\n\nanswer"}}),
    ("strftime_default", "{%- if not date_string is defined %}{%- set date_string = '26 Jul 2024' %}{%- endif %}{{ date_string }}|{{ custom | default('none', true) }}", {"custom": ""}),
    ("llama31_style_tools", "{{- bos_token }}\n{%- if tools is not none %}\n    {%- set tools_in_user = true %}\n{%- endif %}\n{%- if messages[0]['role'] == 'system' %}\n    {%- set system_message = messages[0]['content']|trim %}\n    {%- set messages = messages[1:] %}\n{%- else %}\n    {%- set system_message = \"\" %}\n{%- endif %}\n{{- '<|header|>system<|/header|>\\n\\n' }}\n{{- system_message }}\n{%- if tools_in_user and messages | length > 0 %}\n    {%- set first = messages[0]['content']|trim %}\n    {%- set messages = messages[1:] %}\n    {{- 'Tools:\\n' }}\n    {%- for t in tools %}\n        {{- t | tojson(indent=4) }}\n        {{- '\\n\\n' }}\n    {%- endfor %}\n    {{- first + '<|eot|>' }}\n{%- endif %}\n{%- for message in messages %}\n    {%- if not (message.role == 'ipython' or message.role == 'tool' or 'tool_calls' in message) %}\n        {{- '<|header|>' + message['role'] + '<|/header|>\\n\\n'+ message['content'] | trim + '<|eot|>' }}\n    {%- elif 'tool_calls' in message %}\n        {%- set tool_call = message.tool_calls[0].function %}\n        {{- '{\"name\": \"' + tool_call.name + '\", \"parameters\": ' }}\n        {{- tool_call.arguments | tojson }}\n        {{- '}<|eot|>' }}\n    {%- else %}\n        {%- if message.content is mapping or message.content is iterable %}\n            {{- message.content | tojson }}\n        {%- else %}\n            {{- message.content }}\n        {%- endif %}\n    {%- endif %}\n{%- endfor %}\n{%- if add_generation_prompt %}\n    {{- '<|header|>assistant<|/header|>\\n\\n' }}\n{%- endif %}\n", {"messages": [{"role": "system", "content": " sys "}, {"role": "user", "content": "weather?"}, {"role": "assistant", "tool_calls": [{"function": {"name": "get_weather", "arguments": {"city": "Paris"}}}]}, {"role": "tool", "content": {"temp": 20}}], "tools": TOOLS, "bos_token": "<B>", "add_generation_prompt": True}),
    ("hermes_style_macro", "{%- macro json_to_python_type(json_spec) %}\n{%- set basic_type_map = {\"string\": \"str\", \"number\": \"float\", \"integer\": \"int\", \"boolean\": \"bool\"} %}\n{%- if basic_type_map[json_spec.type] is defined %}\n    {{- basic_type_map[json_spec.type] }}\n{%- elif json_spec.type == \"array\" %}\n    {{- \"list[\" +  json_to_python_type(json_spec|items) + \"]\" }}\n{%- elif json_spec.type == \"object\" %}\n    {{- \"dict\" }}\n{%- elif json_spec.type is iterable %}\n    {{- \"Union[\" }}\n    {%- for t in json_spec.type %}\n        {{- json_to_python_type({\"type\": t}) }}\n        {%- if not loop.last %}{{- \",\" }}{%- endif %}\n    {%- endfor %}\n    {{- \"]\" }}\n{%- else %}\n    {{- \"Any\" }}\n{%- endif %}\n{%- endmacro %}\n{%- for tool in tools %}\n    {%- set tool = tool.function if tool.function is defined else tool %}\n    {{- tool.name + '(' }}\n    {%- for param_name, param_fields in tool.parameters.properties|items %}\n        {{- param_name + ': ' + json_to_python_type(param_fields) }}\n        {%- if not loop.last %}{{- ', ' }}{%- endif %}\n    {%- endfor %}\n    {{- ')' }}\n    {%- if tool.description is defined %}{{- ' - ' + tool.description | trim }}{%- endif %}\n{{ '' }}\n{%- endfor %}", {"tools": TOOLS + [{"name": "u", "parameters": {"properties": {"x": {"type": ["string", "integer"]}, "y": {}}}}]}),
    ("dict_views_repr", "{{ d.items() }} {{ d.keys() }} {{ d.values() }} {{ d.items() | list }} {{ d.keys() | length }}", {"d": {"a": 1, "b": [2]}}),
    ("lazy_filter_truthiness", "{% if messages | selectattr('role', 'equalto', 'tool') %}always{% endif %}|{{ messages | selectattr('role', 'equalto', 'tool') | list | length }}|{% if [] | map('upper') %}lazy{% endif %}|{{ messages | map(attribute='role') | first }}", {"messages": MSGS}),
    ("percent_operator", "{{ '%s=%d' % ('a', 3) }} {{ 'x%sy' % 'Z' }} {{ 'plain' % [1] }} {{ '%s' % [1, 2] }} {{ '%.2f%%' % 12.345 }}", {}),
    ("truncate_non_string", "{{ [1, 2] | truncate(8) }} {{ 'a very long sentence here' | truncate(12) }} {{ 'a very long sentence here' | truncate(12, true, '>') }}", {}),
    ("int_float_undefined_raise", "{{ missing | int }}", {}),
    ("chatml_style", "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}", {"messages": MSGS, "add_generation_prompt": True}),
    ("inst_style", "{{ bos_token }}{% if messages[0]['role'] == 'system' %}{% set loop_messages = messages[1:] %}{% set system_message = messages[0]['content'] %}{% else %}{% set loop_messages = messages %}{% set system_message = false %}{% endif %}{% for message in loop_messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}{{ raise_exception('roles must alternate') }}{% endif %}{% if loop.index0 == 0 and system_message != false %}{% set content = '<<SYS>>\\n' + system_message + '\\n<</SYS>>\\n\\n' + message['content'] %}{% else %}{% set content = message['content'] %}{% endif %}{% if message['role'] == 'user' %}{{ '[INST] ' + content.strip() + ' [/INST]' }}{% elif message['role'] == 'assistant' %}{{ ' ' + content.strip() + ' ' + eos_token }}{% endif %}{% endfor %}", {"messages": MSGS[:2] + [{"role": "assistant", "content": " ok "}, {"role": "user", "content": "more"}], "bos_token": "<s>", "eos_token": "</s>"}),
    ("phi_style", "{% for message in messages %}{% if message['role'] == 'system' and message['content'] %}{{'<|system|>\n' + message['content'] + '<|end|>\n'}}{% elif message['role'] == 'user' %}{{'<|user|>\n' + message['content'] + '<|end|>\n'}}{% elif message['role'] == 'assistant' %}{{'<|assistant|>\n' + message['content'] + '<|end|>\n'}}{% endif %}{% endfor %}{% if add_generation_prompt %}{{ '<|assistant|>\n' }}{% else %}{{ eos_token }}{% endif %}", {"messages": MSGS, "add_generation_prompt": False, "eos_token": "<|endoftext|>"}),
    ("tool_call_style", "{%- for message in messages %}\n    {%- if message.tool_calls is defined and message.tool_calls %}\n        {%- for tc in message.tool_calls %}\n            {%- set tc = tc.function if tc.function is defined else tc %}\n{{ '<tool_call>' ~ {'name': tc.name, 'arguments': tc.arguments} | tojson ~ '</tool_call>' }}\n        {%- endfor %}\n    {%- elif message.content is string %}\n{{ message.role | upper }}: {{ message.content }}\n    {%- endif %}\n{%- endfor %}\n", {"messages": MSGS}),
]

def tool_call(name, args, as_string):
    return {"id": "call_" + name, "type": "function",
            "function": {"name": name, "arguments": json.dumps(args) if as_string else args}}


CASES = [
    ("single_user", [{"role": "user", "content": "Hello!"}], None),
    ("system_user", [{"role": "system", "content": "You are a helpful assistant."},
                     {"role": "user", "content": "What is 2+2?"}], None),
    ("multi_turn", [{"role": "system", "content": "Be brief."},
                    {"role": "user", "content": "Hi"},
                    {"role": "assistant", "content": "Hello! How can I help?"},
                    {"role": "user", "content": "Tell me a joke."}], None),
    ("multi_turn_no_system", [{"role": "user", "content": "Hi"},
                              {"role": "assistant", "content": "Hey."},
                              {"role": "user", "content": "Bye"},
                              {"role": "assistant", "content": "Goodbye!"}], None),
    ("tools_args_string", [{"role": "user", "content": "Weather in Paris and 1+2?"},
                           {"role": "assistant", "content": None,
                            "tool_calls": [tool_call("get_weather", {"city": "Paris"}, True),
                                           tool_call("add", {"a": 1, "b": 2}, True)]},
                           {"role": "tool", "content": "{\"temp\": 21}", "tool_call_id": "call_get_weather"},
                           {"role": "tool", "content": "3", "tool_call_id": "call_add"},
                           {"role": "assistant", "content": "It is 21 degrees; 1+2=3."}], TOOLS),
    ("tools_args_dict", [{"role": "system", "content": "Use tools."},
                         {"role": "user", "content": "Weather in Zürich?"},
                         {"role": "assistant", "content": "",
                          "tool_calls": [tool_call("get_weather", {"city": "Zürich", "unit": "celsius"}, False)]},
                         {"role": "tool", "content": "sunny, 18°C"},
                         {"role": "user", "content": "Thanks"}], TOOLS),
    ("tools_only_declared", [{"role": "user", "content": "Add 2 and 3"}], TOOLS),
    ("reasoning_content", [{"role": "user", "content": "Think first: 3*7?"},
                           {"role": "assistant", "content": "21", "reasoning_content": "3 times 7 is 21."},
                           {"role": "user", "content": "And 4*5?"},
                           {"role": "assistant", "content": "20", "reasoning_content": "4*5=20"}], None),
    ("inline_think", [{"role": "user", "content": "Q1"},
                      {"role": "assistant", "content": "<think>\nhmm\n</think>\n\nA1"},
                      {"role": "user", "content": "Q2"}], None),
    ("content_parts", [{"role": "system", "content": [{"type": "text", "text": "System in parts."}]},
                       {"role": "user", "content": [{"type": "text", "text": "Part one."},
                                                    {"type": "text", "text": " Part two. "}]}], None),
    ("unicode", [{"role": "user", "content": "  héllo 世界 🎉\n\"quoted\" 'single' \\back\\slash\ttab  "},
                 {"role": "assistant", "content": "Ответ: ✓\n\nline2\r\nline3"},
                 {"role": "user", "content": "<b>&amp;</b> {{ not jinja }} {% raw %}"}], None),
    ("assistant_last", [{"role": "system", "content": "S"}, {"role": "user", "content": "U"},
                        {"role": "assistant", "content": "A final answer."}], None),
    ("two_systems", [{"role": "system", "content": "First system."}, {"role": "system", "content": "Second."},
                     {"role": "user", "content": "Go"}], None),
    ("tool_call_no_content_key", [{"role": "user", "content": "call it"},
                                  {"role": "assistant",
                                   "tool_calls": [tool_call("add", {"a": 1.5, "b": -2}, False)]},
                                  {"role": "tool", "content": "-0.5"}], TOOLS),
    ("tool_result_then_user", [{"role": "user", "content": "q"},
                               {"role": "assistant", "content": None,
                                "tool_calls": [tool_call("get_weather", {"city": "Oslo"}, True)]},
                               {"role": "tool", "content": "<tool_response>cold</tool_response>"},
                               {"role": "assistant", "content": "<think>\nok\n</think>\n\nIt is cold."},
                               {"role": "user", "content": "<tool_response>x</tool_response>"}], TOOLS),
    ("user_content_none", [{"role": "user", "content": None}], None),
    ("roles_not_alternating", [{"role": "user", "content": "one"}, {"role": "user", "content": "two"}], None),
    ("empty_messages", [], None),
]

EXTRAS = [("none", {}), ("thinking_off", {"enable_thinking": False}), ("thinking_on", {"enable_thinking": True})]


def token_str(tok):
    if tok is None:
        return None
    if isinstance(tok, dict):
        return tok.get("content")
    return str(tok)


def render_model(template, messages, tools, add_generation_prompt, bos, eos, extra):
    kwargs = dict(extra)
    if bos is not None:
        kwargs["bos_token"] = bos
    if eos is not None:
        kwargs["eos_token"] = eos
    if hasattr(ctu, "render_jinja_template"):
        rendered, _ = ctu.render_jinja_template(conversations=[messages], tools=tools, chat_template=template,
                                                add_generation_prompt=add_generation_prompt, **kwargs)
        return rendered[0]
    compiled = ctu._compile_jinja_template(template)
    return compiled.render(messages=messages, tools=tools, documents=None,
                           add_generation_prompt=add_generation_prompt, **kwargs)


def outcome(fn):
    try:
        return {"output": fn()}
    except Exception as e:  # the fixture records the exception; the test expects vireo::Error
        return {"error": {"type": type(e).__name__, "message": str(e)}}


def model_fixtures(config_dir):
    models, results = [], []
    for model in sorted(os.listdir(config_dir)):
        path = os.path.join(config_dir, model, "tokenizer_config.json")
        if not os.path.exists(path):
            continue
        cfg = json.load(open(path, encoding="utf-8"))
        tmpl = cfg.get("chat_template")
        if not tmpl:
            print(f"{model}: no chat_template, skipped")
            continue
        named = [(None, tmpl)] if isinstance(tmpl, str) else [(t["name"], t["template"]) for t in tmpl]
        bos, eos = token_str(cfg.get("bos_token")), token_str(cfg.get("eos_token"))
        for name, text in named:
            models.append({"model": model, "name": name, "bos_token": bos, "eos_token": eos})
            for case_id, messages, tools in CASES:
                for agp in (True, False):
                    for extra_id, extra in EXTRAS:
                        r = outcome(lambda: render_model(text, messages, tools, agp, bos, eos, extra))
                        r.update({"model": model, "name": name, "case": case_id,
                                  "add_generation_prompt": agp, "extra": extra_id})
                        results.append(r)
        print(f"{model}: {len(named)} template(s)")
    cases = [{"id": c, "messages": m, "tools": t} for c, m, t in CASES]
    return {"transformers": transformers.__version__, "models": models, "cases": cases,
            "extras": {k: v for k, v in EXTRAS}, "results": results}


def feature_fixtures():
    out = []
    for name, template, ctx in FEATURES:
        def run():
            return ctu._compile_jinja_template(template).render(**ctx)
        r = outcome(run)
        r.update({"name": name, "template": template, "context": ctx})
        out.append(r)
    return {"transformers": transformers.__version__, "features": out}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--configs", required=True)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "transformers_chat_template_src.txt"), "w") as f:
        for fn in ("_compile_jinja_template", "render_jinja_template"):
            if hasattr(ctu, fn):
                f.write(inspect.getsource(getattr(ctu, fn)) + "\n\n")
        from transformers import PreTrainedTokenizerBase as B
        f.write(inspect.getsource(B.apply_chat_template))
    for fname, data in (("chat_template_models.json", model_fixtures(args.configs)),
                        ("chat_template_features.json", feature_fixtures())):
        with open(os.path.join(args.out, fname), "w", encoding="utf-8") as f:
            json.dump(data, f, ensure_ascii=False, indent=1)
        print("wrote", fname)


if __name__ == "__main__":
    main()
