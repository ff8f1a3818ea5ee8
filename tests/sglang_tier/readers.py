"""What SGLang 0.5.23 reads from a draft directory and its launch flags, by its own code (imported
here, in the SGLang tier's venv only): get_config, the DFlash and DSpark parsers,
get_dspark_sample_from_anchor, the per-layer attention parameters, the targets' capture hooks and
ServerArgs' resolution. The answer is a `specreg.sglang.reading.Reading`, so it compares with
specreg's model of these readers and with the trained plan."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Mapping, Sequence

from specreg.sglang.reading import Reading
from specreg.sglang.rules import rules

RULES = rules()


def settings(flags: Sequence[str]) -> dict[str, int]:
    """The integer speculative settings a flag list gives (dest -> value)."""
    return {RULES["options"][n]: int(v) for n, v in zip(flags[::2], flags[1::2]) if v.isdigit()}


def _capture(hook: str, layer_ids, num_layers: int) -> tuple[int, ...]:
    """The layers a target captures, by the target class's own hook (llama.py / qwen3.py)."""
    from sglang.srt.models.llama import LlamaForCausalLM
    from sglang.srt.models.qwen3 import Qwen3ForCausalLM

    target = SimpleNamespace(
        pp_group=SimpleNamespace(is_last_rank=True),
        model=SimpleNamespace(),
        config=SimpleNamespace(num_hidden_layers=num_layers),
    )
    cls = LlamaForCausalLM if hook == "eagle3" else Qwen3ForCausalLM
    getattr(cls, f"set_{hook}_layers_to_capture")(target, layer_ids)
    return tuple(target.model.layers_to_capture)


def target_dir(root: Path, num_layers: int, architecture: str = "Qwen3ForCausalLM") -> Path:
    """A verifier directory with only a config.json (ServerArgs reads the target's config)."""
    path = root / f"target-{architecture}-{num_layers}"
    path.mkdir(parents=True, exist_ok=True)
    model_type = "llama" if architecture.startswith("Llama") else "qwen3"
    (path / "config.json").write_text(
        json.dumps(
            {
                "architectures": [architecture],
                "model_type": model_type,
                "hidden_size": 64,
                "intermediate_size": 128,
                "num_hidden_layers": num_layers,
                "num_attention_heads": 4,
                "num_key_value_heads": 2,
                "head_dim": 16,
                "vocab_size": 151936 if model_type == "qwen3" else 128256,
                "max_position_embeddings": 4096,
                "torch_dtype": "bfloat16",
            }
        )
    )
    return path


def read(draft: Path, algorithm: str, flags: Sequence[str], *, target_layers: int | None = None) -> Reading:
    """SGLang's reading; where one of its readers refuses the file, `refused` holds its error."""
    try:
        return _read(draft, algorithm, flags, target_layers)
    except (ValueError, KeyError, OSError) as exc:
        return Reading(refused=f"{type(exc).__name__}: {exc}")


def _read(draft: Path, algorithm: str, flags: Sequence[str], target_layers: int | None) -> Reading:
    from sglang.srt.utils.hf_transformers_utils import get_config

    hf = get_config(str(draft), trust_remote_code=False)
    given = settings(flags)
    n = int(hf.num_hidden_layers)
    if algorithm == "eagle3":
        eagle = getattr(hf, "eagle_config", None) or {}
        ids = eagle.get("eagle_aux_hidden_state_layer_ids")
        capture = _capture("eagle3", ids, target_layers) if ids or target_layers else None
        resolved = resolve(draft, algorithm, flags)
        tree = (
            int(resolved.speculative_num_steps),
            int(resolved.speculative_eagle_topk),
            int(resolved.speculative_num_draft_tokens),
        )
        return Reading(
            capture=capture,
            capture_from="config"
            if ids
            else "SGLang's fallback [2, N // 2, N - 3] (llama.py: set_eagle3_layers_to_capture)",
            attention=((given.get("speculative_draft_window_size"), True),) * n,
            proposals=tree[0],
            query_rows=1,
            eagle_tree=tree,
        )
    from sglang.srt.layers.radix_attention import AttentionType
    from sglang.srt.models.dflash import _get_dflash_layer_attention_params
    from sglang.srt.speculative.dflash_utils import parse_dflash_draft_config

    parsed = parse_dflash_draft_config(draft_hf_config=hf)
    ids = parsed.target_layer_ids
    if algorithm == "dspark":
        from sglang.srt.speculative.dspark_components.dspark_config import parse_dspark_draft_config

        ids = parse_dspark_draft_config(draft_hf_config=hf).target_layer_ids
    how = "config"
    if ids is None and target_layers:
        ids = parsed.resolve_target_layer_ids(target_num_layers=target_layers, draft_num_layers=n)
        how = "SGLang's guess (dflash_utils.py: build_target_layer_ids)"
    capture = _capture("dflash", ids, target_layers or 0) if ids is not None else None
    attention = []
    for i in range(n):
        window_left, kind = _get_dflash_layer_attention_params(hf, i)
        attention.append((window_left + 1 if window_left >= 0 else None, kind == AttentionType.DECODER))
    if algorithm == "dspark":
        from sglang.srt.speculative.dspark_components.dspark_config import get_dspark_sample_from_anchor

        gamma = draft_tokens(draft, algorithm, flags) - 1
        anchor = get_dspark_sample_from_anchor(hf)
        return Reading(
            capture=capture,
            capture_from=how,
            attention=tuple(attention),
            proposals=gamma,
            query_rows=gamma if anchor else gamma + 1,
            sample_from_anchor=anchor,
        )
    size = draft_tokens(draft, algorithm, flags)
    return Reading(
        capture=capture,
        capture_from=how,
        attention=tuple(attention),
        proposals=size - 1,
        query_rows=size,
        sample_from_anchor=False,
    )


def draft_tokens(draft: Path, algorithm: str, flags: Sequence[str]) -> int:
    """--speculative-num-draft-tokens as ServerArgs.resolve_once() sets it (speculative_hook.py:
    _handle_dflash / _handle_dspark)."""
    resolved = resolve(draft, algorithm, flags)
    return int(resolved.speculative_num_draft_tokens)


def resolve(draft: Path, algorithm: str, flags: Sequence[str], *, target: Path | None = None) -> Any:
    """ServerArgs built from the launch flags as SGLang's launcher parses them, then resolve_once(): the
    settings as the server would run with them. The device is "cuda": the speculative handlers refuse
    DFLASH and DSPARK on "cpu" before reading anything, and resolution touches no device."""
    from sglang.srt.arg_groups.overrides import resolved_view
    from sglang.srt.server_args import ServerArgs

    parser = argparse.ArgumentParser()
    ServerArgs.add_cli_args(parser)
    target = target or target_dir(draft.parent, 36)
    algo = RULES["architectures"][algorithm]["algorithm"]
    given = list(flags) if "--speculative-algorithm" in flags else ["--speculative-algorithm", algo, *flags]
    args = parser.parse_args(
        ["--model-path", str(target), "--speculative-draft-model-path", str(draft), "--device", "cuda", *given]
    )
    server_args = ServerArgs.from_cli_args(args)
    server_args.resolve_once()
    return resolved_view(server_args)


def option_dests(options: Mapping[str, str]) -> dict[str, str]:
    """For each option string of specreg's table, the dest SGLang's own parser gives it."""
    from sglang.srt.server_args import ServerArgs

    parser = argparse.ArgumentParser()
    ServerArgs.add_cli_args(parser)
    dests = {}
    for option in options:
        action = parser._option_string_actions.get(option)  # noqa: SLF001 - argparse has no public map
        dests[option] = action.dest if action else None
    return dests
