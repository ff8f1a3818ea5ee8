"""docs/semantics.md's table of the attention backend each vLLM version picks, from the selector's facts."""

from __future__ import annotations

from specreg.vllm.attention import GPUS, Case, select, versions


#: the GPUs of the table in docs/semantics.md, one per capability that differs
TABLE_GPUS = ("A100", "L40S", "H100", "B200", "RTX 5090", "GB10")


def table_markdown() -> str:
    """docs/semantics.md's table: the backend each version picks for a non-causal draft (DFlash) and
    for a causal one (Eagle-3), by head size, on one GPU per capability (bfloat16; KV cache auto and
    fp8); versions that answer alike share a row. A test holds the doc to this function."""
    head = (
        "| vLLM | layers | head | KV cache | "
        + " | ".join(f"{g} (sm_{GPUS[g][0]}{GPUS[g][1]})" for g in TABLE_GPUS)
        + " |"
    )
    keys = [
        (non_causal, size, kv) for non_causal in (True, False) for size in (128, 256, 512) for kv in ("auto", "fp8")
    ]

    def answers(version: str) -> list[list[str]]:
        return [
            [
                select(version, GPUS[g], Case(head_size=size, kv_cache_dtype=kv, non_causal=nc)).chosen or "**none**"
                for g in TABLE_GPUS
            ]
            for nc, size, kv in keys
        ]

    runs: list[tuple[list[str], list[list[str]]]] = []
    for version in versions():
        got = answers(version)
        if runs and runs[-1][1] == got:
            runs[-1][0].append(version)
        else:
            runs.append(([version], got))
    rows = [head, "|" + "---|" * (4 + len(TABLE_GPUS))]
    for vs, got in runs:
        label = vs[0] if len(vs) == 1 else f"{vs[0]}-{vs[-1]}"
        for (nc, size, kv), cells in zip(keys, got):
            rows.append(f"| {label} | {'non-causal' if nc else 'causal'} | {size} | {kv} | " + " | ".join(cells) + " |")
    return "\n".join(rows)
