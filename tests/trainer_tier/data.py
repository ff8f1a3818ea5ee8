"""Prompts and training rows for the tier's verifier (greedy next(t) = t + 1).

Prompt tokens are drawn from [LOW, HIGH); a continuation of RESPONSE tokens then stays inside
[LOW, HIGH + RESPONSE), which is DRAFT_VOCAB tokens: an EAGLE-3 draft vocabulary of that size holds
exactly the tokens the data uses, none of them at its own index (d2t is about LOW everywhere), so a
draft served without its d2t proposes other tokens.

    python data.py ROWS.jsonl [N]      # speculators' pre-tokenized rows: input_ids + loss_mask
"""

from __future__ import annotations

import json
import random
import sys

VOCAB = 512
LOW, HIGH = 200, 400
RESPONSE = 48
DRAFT_VOCAB = HIGH + RESPONSE - LOW


def prompts(n: int, seed: int) -> list[list[int]]:
    rng = random.Random(seed)
    return [[rng.randrange(LOW, HIGH) for _ in range(rng.randrange(3, 20))] for _ in range(n)]


def continuation(prompt: list[int], n: int = RESPONSE) -> list[int]:
    return [(prompt[-1] + 1 + i) % VOCAB for i in range(n)]


def rows(n: int, seed: int = 0) -> list[dict]:
    """A prompt (loss 0) and the verifier's own greedy continuation (loss 1): on-policy rows."""
    out = []
    for p in prompts(n, seed):
        r = continuation(p)
        out.append({"input_ids": p + r, "loss_mask": [0] * len(p) + [1] * len(r)})
    return out


if __name__ == "__main__":
    with open(sys.argv[1], "w") as fh:
        for row in rows(int(sys.argv[2]) if len(sys.argv) > 2 else 1000):
            fh.write(json.dumps(row) + "\n")
