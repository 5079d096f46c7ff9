"""Exit 0 when two fixture files hold the same tensors (bitwise) and metadata, else 1.

Python's safetensors writer orders __metadata__ keys at random, so regenerated files can differ
in bytes while holding the same content; regen.sh keeps the committed file in that case.
Run: python same_fixture.py A B
"""
import json
import sys

from safetensors import safe_open


def content(path):
    if path.endswith(".json") or path.endswith(".txt"):
        with open(path, encoding="utf-8") as f:
            return f.read()
    with safe_open(path, "pt") as f:
        return f.metadata(), {k: f.get_tensor(k) for k in f.keys()}


def main():
    try:
        a, b = content(sys.argv[1]), content(sys.argv[2])
    except (OSError, json.JSONDecodeError, Exception):
        return 1
    if isinstance(a, str) or isinstance(b, str):
        return 0 if a == b else 1
    (ma, ta), (mb, tb) = a, b
    if ma != mb or ta.keys() != tb.keys():
        return 1
    return 0 if all(ta[k].dtype == tb[k].dtype and ta[k].shape == tb[k].shape
                    and bool((ta[k] == tb[k]).all()) for k in ta) else 1


if __name__ == "__main__":
    sys.exit(main())
