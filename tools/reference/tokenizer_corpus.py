#!/usr/bin/env python3
"""Deterministic tokenizer test corpus (seeded), written as JSONL: one JSON string per line.

  python3 tools/reference/tokenizer_corpus.py > tests/fixtures/tokenizer/corpus.jsonl

Covers English, CJK, Arabic, Hindi and other scripts, emoji and ZWJ sequences, code, runs of
spaces/tabs/newlines, digits, special-token text inside prose, random code-point soups, text
needing NFC (decomposed accents, Hangul jamo, compatibility singletons), leading/trailing spaces
and the empty string. Random mixtures of all of these make up most of the corpus.
"""
import json
import random
import sys

SEED = 20261130
NUM_MIXED = 1700
NUM_SOUPS = 150
NUM_LONG = 8

ENGLISH = [
    "Hello world", "Hello, world!", "The quick brown fox jumps over the lazy dog.",
    "I'm sure you'll see it's fine, isn't it? We've done what they'd said.",
    "DON'T SHOUT! I'LL BE THERE. IT'S OK.", "He said: \"no\" -- and left...",
    "e.g. Mr. Smith & Mrs. Jones (both 42) went to St. Louis; they're happy.",
    "Can't won't shouldn't wouldn't ain't y'all", "rock'n'roll o'clock 'quoted' ''double''",
    "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n\r\n", "email: someone@example.com, url: https://example.org/a?b=c&d=e#f",
    "Once upon a time, in a land far, far away...", "  leading spaces", "trailing spaces   ",
    " single leading", "tabs\tin\tbetween", "new\nlines\n\nand\n\n\nmore", "CamelCaseIdentifiersLikeThisOne",
    "snake_case_identifier_name", "ALLCAPS lowercase MiXeD", "Don't stop believin'", "rock 'n' roll",
    "The year 2024 had 366 days; pi is 3.14159265358979.", "Price: $1,234,567.89 (-12.5%)",
    "a", "A", "?", ".", "!", "I", "'s", "'S", "'ll", "x'", "'", "''", "\"", "...", "--", "—", "…",
]
CJK = [
    "你好，世界！", "我爱自然语言处理。", "今天天气很好，我们去公园散步吧。", "中华人民共和国成立于1949年。",
    "こんにちは世界", "日本語のテキストをトークン化します。", "カタカナとひらがなと漢字", "東京タワーは333メートルです",
    "안녕하세요 세계", "한국어 문장을 토큰화합니다.", "繁體中文測試：臺灣、香港。", "漢字かな交じり文",
    "ｆｕｌｌｗｉｄｔｈ　ＡＢＣ　１２３", "「引用」『二重』【括弧】〔亀甲〕", "中文English混合mixed文本",
]
SCRIPTS = [
    "مرحبا بالعالم", "اللغة العربية جميلة جداً.", "السلام عليكم ورحمة الله", "١٢٣٤٥ أرقام عربية",
    "नमस्ते दुनिया", "हिन्दी भाषा बहुत सुंदर है।", "क्षत्रिय ज्ञान श्री", "Привет, мир!", "Съешь же ещё этих мягких французских булок.",
    "Γειά σου Κόσμε", "שלום עולם", "สวัสดีชาวโลก", "Xin chào thế giới", "Tiếng Việt có dấu: ắ ằ ẳ ẵ ặ",
    "Zażółć gęślą jaźń", "Ærøskøbing Ångström façade naïve coöperate résumé", "Straße ß ẞ", "ğüşıöç İĞÜŞÖÇ",
    "ሰላም ልዑል", "ជំរាបសួរ", "ᚠᚢᚦᚨᚱᚲ", "𝔘𝔫𝔦𝔠𝔬𝔡𝔢 𝕄𝕒𝕥𝕙", "ℌℑℜ ℵ ∀x∈ℝ: x²≥0", "½ ⅓ ¼ ⅔ ¾ ① ② ③",
]
EMOJI = [
    "😀", "👍🏽", "👨‍👩‍👧‍👦", "🏳️‍🌈", "👩🏾‍💻", "🇺🇸🇯🇵🇫🇷", "❤️", "✌🏿", "🧑‍🤝‍🧑", "😂😂😂",
    "I ❤️ NY", "Party 🎉🎊🥳 time!", "🐍 Python", "👁️‍🗨️", "🤷‍♀️", "1️⃣2️⃣#️⃣", "©®™", "🫠🫡🫶",
]
CODE = [
    "def foo(x):\n    return x * 2\n", "for (int i = 0; i < n; ++i) {\n\tsum += a[i];\n}",
    "#include <stdio.h>\nint main(void) { printf(\"hi\\n\"); return 0; }",
    "{\"key\": [1, 2, 3], \"nested\": {\"a\": null, \"b\": true}}", "<div class=\"x\">&nbsp;<b>bold</b></div>",
    "SELECT * FROM users WHERE id = 42 AND name LIKE '%bob%';", "x = [i**2 for i in range(10) if i % 2 == 0]",
    "    indented four\n        indented eight\n\t\ttabbed", "fn main() -> Result<(), Box<dyn Error>> { Ok(()) }",
    "$ ls -la | grep '.cc$' && echo \"done\" > /dev/null 2>&1", "a+=b; c-=d; e*=f; g/=h; i%=j;",
    "if (a && b || !c) { return a->b.c[0]; }", "// comment\n/* block */\n# hash\n-- sql", "=== --- +++ *** ___ ~~~",
    "std::vector<std::pair<int, std::string>> v;", "lambda x: x if x else None  # noqa", "\\n \\t \\\\ \\u00e9",
]
WHITESPACE = [
    " ", "  ", "   ", "\t", "\t\t", "\n", "\n\n", "\n\n\n", "\r\n", "\r", " \n ", "\n \n", "  \n  ",
    "a  b", "a   b", "a\t\tb", "a \t b", "a\n\nb", "a \n\n b", "a\r\n\r\nb", "end.   ", "   start",
    "\u00a0nbsp\u00a0", "em\u2003space", "ideo\u3000space", "zero\u200bwidth", "\u2028line\u2029para",
    "tab\tthen  spaces   then\nnewline", "    ", "        x", "x        ", "\v\f", "\x00nul\x00",
]
DIGITS = [
    "0", "1", "12", "123", "1234", "12345", "123456789012345678901234567890", "3.14", "-0.001", "1e-10",
    "2024-11-30", "12:34:56", "+1 (555) 123-4567", "0x1F 0b1010 0o777", "v1.2.3-rc.4", "١٢٣", "४२",
    "１２３４５", "Ⅻ", "10,000,000", "99%", "#1", "1st 2nd 3rd 4th",
]
SPECIAL_TEXT = [
    "<|im_start|>", "<|im_end|>", "<|endoftext|>", "<s>", "</s>", "<unk>", "<pad>", "<bos>", "<eos>",
    "<|begin_of_text|>", "<|end_of_text|>", "<|eot_id|>", "<|start_header_id|>", "<|end_header_id|>",
    "<start_of_turn>", "<end_of_turn>", "<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>", "<｜User｜>",
    "<｜Assistant｜>", "<|startoftext|>", "<|return|>", "<|channel|>", "<|message|>", "<think>", "</think>",
    "<tool_call>", "<|fim_prefix|>", "<mask>", "[INST]", "<<SYS>>", "<start_of_image>", "<0x41>", "▁", "▁▁",
]
SPECIAL_PROSE = [
    "<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\n", "text <s> with </s> markers",
    "<s>[INST] hi [/INST]", "before<|endoftext|>after", "a <|begin_of_text|>b", " <bos> spaced <eos> ",
    "<start_of_turn>user\nhi<end_of_turn>", "<｜begin▁of▁sentence｜>hi<｜User｜>q<｜Assistant｜>",
    "<|start|>user<|message|>hi<|end|>", "<think>\nreason\n</think>\n\nanswer", "<s><s></s></s>", "<<s>>",
    "<|im_start|><|im_start|>", "x<unk>y", "▁leading metaspace", "byte <0x0A> token text",
]
NFC = [
    "e\u0301", "cafe\u0301", "Ame\u0301lie", "A\u030a", "\u212b", "\u2126", "n\u0303", "o\u0308\u0304",
    "\u1100\u1161\u11a8", "\u1112\u1161\u11ab\u1100\u1173\u11af", "\u0041\u0301\u0302", "\u1e9b\u0323",
    "q\u0307\u0323", "\u00c5 vs A\u030a", "\u0958\u0959", "\u2000\u2001", "\ufb01 ligature", "\u0344",
    "\u0f73", "Zo\u0308e\u0308", "i\u0307\u0301", "\u30ab\u3099", "\u304b\u3099", "\uac00\u11a8",
]
ALL_FRAGMENTS = ENGLISH + CJK + SCRIPTS + EMOJI + CODE + WHITESPACE + DIGITS + SPECIAL_TEXT + SPECIAL_PROSE + NFC
SEPARATORS = ["", " ", "  ", "\n", "\t", ", ", ". ", "\n\n", " \n", "\r\n", "   ", "-", "'", "\u3000"]

# Code-point ranges for "byte soups": ASCII, Latin-1, combining marks, Cyrillic, Arabic, Devanagari,
# CJK, Hangul jamo/syllables, private use, specials, emoji, SMP letters, tags.
SOUP_RANGES = [
    (0x00, 0x7F), (0x80, 0xFF), (0x300, 0x36F), (0x400, 0x4FF), (0x600, 0x6FF), (0x900, 0x97F),
    (0x1100, 0x11FF), (0x2000, 0x206F), (0x3000, 0x30FF), (0x4E00, 0x9FFF), (0xAC00, 0xD7A3),
    (0xE000, 0xE0FF), (0xFFF0, 0xFFFD), (0x1F300, 0x1FAFF), (0x1D400, 0x1D7FF), (0xE0020, 0xE007F),
    (0x10000, 0x1007F), (0x20000, 0x2A6DF),
]


def soup(rng):
    n = rng.randint(1, 24)
    out = []
    for _ in range(n):
        lo, hi = rng.choice(SOUP_RANGES)
        out.append(chr(rng.randint(lo, hi)))
    return "".join(out)


def mixed(rng):
    parts = []
    for _ in range(rng.randint(1, 6)):
        r = rng.random()
        if r < 0.08:
            parts.append(soup(rng))
        else:
            parts.append(rng.choice(ALL_FRAGMENTS))
        parts.append(rng.choice(SEPARATORS))
    s = "".join(parts)
    r = rng.random()
    if r < 0.15:
        s = " " * rng.randint(1, 3) + s
    elif r < 0.3:
        s = s.rstrip() + " " * rng.randint(1, 3)
    return s


def main():
    rng = random.Random(SEED)
    corpus = [""] + ALL_FRAGMENTS
    corpus += [soup(rng) for _ in range(NUM_SOUPS)]
    corpus += [mixed(rng) for _ in range(NUM_MIXED)]
    for _ in range(NUM_LONG):  # long inputs: many pre-token words, BPE cache reuse
        corpus.append("".join(mixed(rng) for _ in range(40)))
    seen = set()
    out = sys.stdout
    for s in corpus:
        if s in seen:
            continue
        seen.add(s)
        out.write(json.dumps(s, ensure_ascii=True) + "\n")


if __name__ == "__main__":
    main()
