"""open_clip's tokenizer ids for a fixed set of captions, for lorafleet's CLIPTokenizer test.

For each caption, open_clip.tokenize(caption, context_length=77) (SimpleTokenizer with its
default "lower" clean: ftfy.fix_text, html.unescape twice, whitespace collapse, lower-case;
truncation keeps 77 ids with eot forced last; pads with 0) is recorded as ids_pad0, and the same
ids with the positions after the first eot set to 49407 as ids_pad49407 (the SD1 / HF pad
convention). Writes tests/fixtures/oracle/tokenizer_open_clip.json, read by
tests/common/test_tokenizer_oracle.cpp.

Run: tests/oracle/regen.sh (or: python make_tokenizer_fixture.py --output FILE).
"""
import argparse
import json
import os

import open_clip
import ftfy

LONG = ("a highly detailed digital painting of an ancient castle on a cliff above a stormy sea, "
        "dramatic lighting, volumetric clouds, lightning, crashing waves, seagulls, moss covered "
        "stones, banners waving in the wind, knights on horseback riding up the winding road, "
        "torches, sunset, golden hour, trending on artstation, by greg rutkowski and alphonse "
        "mucha, 8k, ultra realistic, octane render, unreal engine 5, masterpiece")

CAPTIONS = [
    "",
    " ",
    "a photo of a cat",
    "A Photo of a CAT, sitting on a Mat!",
    "masterpiece, best quality, 1girl, solo, long hair, looking at viewer",
    "in 2024 there were 3.14 apples and 1,000,000 oranges",
    "0123456789 9876543210 42 007 3.14159 -17 +5 1e-5 50% $100 #1",
    "café au lait, naïve façade, jalapeño, Smörgåsbord, Ærøskøbing",
    "ÀÉÎÕÜ àéîõü ÇÑß",
    "Straße in München",
    "東京タワーの夜景",
    "一只猫坐在垫子上",
    "고양이 사진",
    "кошка сидит на коврике",
    "Καλημέρα κόσμε",
    "مرحبا بالعالم",
    "שלום עולם",
    "नमस्ते दुनिया",
    "emoji 🎉🐱 party 👨\u200d👩\u200d👧",
    "🔥🔥🔥",
    "👍🏽 thumbs up with skin tone",
    "flags 🇯🇵 🇺🇸",
    "<|startoftext|>hello<|endoftext|>",
    "<start_of_text>hello<end_of_text>",
    "don't can't won't it's I'm you're we've they'll he'd",
    "DON'T Stop BeLiEvInG",
    "rock &amp; roll &lt;3 &gt; &quot;quoted&quot; &#39;apos&#39; &amp;amp;",
    "Tom &amp; Jerry",
    "hello!!! what??? ... --- ___ *** ~~~",
    "(masterpiece:1.2), [bad hands], {blue eyes}, <lora:style:0.8>",
    "semi;colon: comma, period. slash/back\\slash |pipe| @at #hash",
    "quotes \"double\" 'single' `back` «guillemets» “curly” ‘curly’",
    "tab\there  and   many    spaces",
    "line one\nline two\r\nline three",
    "   leading and trailing whitespace   ",
    "non\u00a0breaking\u2003em space\u200bzero width",
    "mojibake: cafÃ© â€œquotedâ€\x9d",
    "ﬁne ﬂower ligatures and ｆｕｌｌｗｉｄｔｈ",
    "e\u0301 combining acute vs é precomposed",
    "x² + y³ = z½ ™ © ®",
    "www.example.com/path?query=1&x=2 user@example.com",
    "snake_case_words and camelCaseWords and kebab-case-words",
    "supercalifragilisticexpialidocious antidisestablishmentarianism",
    "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
    "1girl, 2boys, 3others, 4k, 8k, 16:9, 1920x1080",
    "ok",
    "a",
    "A",
    "!",
    "score_9, score_8_up, score_7_up, source_anime, rating_safe",
    "the quick brown fox jumps over the lazy dog " * 3,
    LONG,
    LONG + " " + LONG,
    "word " * 74 + "end",
    "word " * 75 + "end",
    "word " * 76 + "end",
    "🎉" * 80,
    "東京" * 60,
]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--output", required=True)
    args = ap.parse_args()
    cases = []
    for text in CAPTIONS:
        ids = open_clip.tokenize([text], context_length=77)[0].tolist()
        assert len(ids) == 77 and ids[0] == 49406
        eot = ids.index(49407)
        pad49407 = ids[:eot + 1] + [49407] * (76 - eot)
        untruncated = len(open_clip.tokenizer._tokenizer.encode(text)) + 2
        cases.append({"text": text, "truncated": untruncated > 77,
                      "ids_pad0": ids, "ids_pad49407": pad49407})
    assert len(cases) >= 50
    assert any(c["truncated"] for c in cases)
    # open_clip's truncation: the 77th id is eot even when the caption is longer.
    assert all(c["ids_pad0"][76] == 49407 for c in cases if c["truncated"])
    doc = {"generator": "tests/oracle/make_tokenizer_fixture.py",
           "open_clip_torch": open_clip.__version__, "ftfy": ftfy.__version__,
           "context_length": 77, "cases": cases}
    os.makedirs(os.path.dirname(os.path.abspath(args.output)), exist_ok=True)
    with open(args.output, "w", encoding="utf-8") as f:
        json.dump(doc, f, ensure_ascii=False, indent=None, separators=(",", ":"))
        f.write("\n")
    print(f"wrote {args.output}: {len(cases)} captions, "
          f"{sum(c['truncated'] for c in cases)} truncated")


if __name__ == "__main__":
    main()
