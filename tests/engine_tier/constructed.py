"""Tiny verifiers and drafts whose acceptance is known by construction (real safetensors, no Hub).

Every weight is set by hand so that greedy decoding is predictable and each draft is right exactly
when vLLM serves it as it was trained. The residual stream is a set of named channels:

    0..V-1   the token, one-hot              B   a constant 1 in every token's embedding
    MARK+i   "verifier layer i has run"      G   "the draft was fed the wrong verifier layers"
    Q        the DFlash query/key channel    MK  "this is the mask token"     R  what DFlash attention read

Verifier (Qwen3ForCausalLM, LAYERS layers). Attention writes nothing (o_proj = 0). The MLP of layer
i reads B and writes exactly 1.0 into MARK+i, so the hidden state entering layer L (what vLLM
captures for aux id L, and what DFlash's target_layer_ids = L - 1 names) carries MARK+0..MARK+L-1.
`next_token` mode: the final norm keeps the token channels and lm_head maps token t to t + 1, so
the greedy continuation of t is t+1, t+2, ... `zero` mode: the final norm's weight is 0, every logit
is 0 and the greedy token is always 0 (argmax takes the first).

Layer probe (both draft kinds): `fc` writes into G, for each aux slot j trained on layer L_j,
B - MARK+(L_j - 1) + MARK+L_j: 0 when the slot holds exactly layer L_j's state, 1 when it holds a
later or an earlier one. G > 0 makes the draft wrong (below), so an aux id served one layer off in
either direction drops acceptance to nothing.

EAGLE-3 draft (one layer). Attention writes nothing; the residual is fc's output (the token of the
verifier position it came from, B, G). The MLP is a lookup table that turns token x into x + 1 in
the residual, and lm_head maps the residual's token y to y + 1; so draft step s proposes x + s + 1,
which is what the `next_token` verifier will produce: every draft token is accepted, AL = k + 1.
G feeds lm_head's garbage token with weight 10: a wrongly fed draft proposes it, AL = 1.
`hidden_norm` has weight 0: served with norm_before_residual = true (the residual taken after
hidden_norm) the residual is empty, the draft proposes draft id 0, never the verifier's token: AL 1.
A reduced vocabulary maps draft id i to target 63 - i (d2t[i] = 63 - 2i): proposed without d2t,
every token is wrong.

DFlash draft (one layer, block_size 4, k = 3, against the `zero` verifier). Every token's embedding
has Q; the mask token's also MK. q and k read Q into one head dimension whose RoPE frequency is
negligible (the pair's last dimension), q_norm/k_norm give every block key the score 32; context
keys read G, so they score 0 (ignored) when the draft is fed the trained layers. v reads MK: the
attention output at a mask query is 8 x (the share of mask tokens among the block tokens it sees).
Non-causal (as trained) every query sees the anchor and 3 masks: 8 x 3/4 = 6. Causal, query j sees
j masks of j + 1: 4, 5.33, 6. lm_head gives token 0 the logit R and token 1 the logit 5.67 x Q, so
token 0 (the verifier's) is proposed exactly where the query saw all 3 masks: non-causal, all three
positions (AL 4); causal, the first position is already wrong (AL 1). Token 2's logit 2R - 6.2 Q
wins past R = 6.2: served with a block one longer (k = 4, 4 masks of 5: R = 6.4) every proposal is
wrong, so the draft length is probed too. A wrongly fed draft (G > 0) lets the context keys score
32 too and dilutes the share: AL 1.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
from safetensors.numpy import save_file

V = 64  # vocabulary
H = 128  # hidden size
HEADS, HEAD_DIM = 2, 64
LAYERS = 5  # verifier layers
B, MARK, G, Q, MK, R = 64, 65, 80, 81, 82, 83
ROPE_DIM = HEAD_DIM // 2 - 1  # neox pairs (i, i + 32) turn at theta^(-2i/64): i = 31 is the slowest
MASK_TOKEN = 60
GARBAGE_REDUCED, GARBAGE_FULL = 8, 0
EPS = 1e-6
THETA = 1e6
#: DFlash: token 1's logit per unit of Q, between what causal query 2 (16/3) and any query that
#: sees all 3 masks (6) read
DFLASH_THRESHOLD = (16 / 3 + 6) / 2
#: DFlash: token 2's logit is 2 R - 6.2 Q: above R once R passes 6.2, between what a query reads
#: seeing 3 masks of 4 (6) and 4 of 5 (6.4, a block one longer than trained)
DFLASH_CEILING = 6.2


def silu(x: float) -> float:
    return x / (1 + math.exp(-x))


def _save(folder: Path, tensors: dict[str, np.ndarray], config: dict) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    save_file({k: np.ascontiguousarray(v) for k, v in tensors.items()}, str(folder / "model.safetensors"))
    (folder / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    return folder


def tokenizer_files(folder: Path) -> None:
    """A word-level tokenizer over "t0".."t63" (built with the `tokenizers` library), t63 = eos."""
    from tokenizers import Tokenizer, models, pre_tokenizers

    tok = Tokenizer(models.WordLevel({f"t{i}": i for i in range(V)}, unk_token="t63"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok.save(str(folder / "tokenizer.json"))
    (folder / "tokenizer_config.json").write_text(
        json.dumps(
            {
                "tokenizer_class": "PreTrainedTokenizerFast",
                "eos_token": "t63",
                "unk_token": "t63",
                "pad_token": "t62",
                "model_max_length": 512,
                "chat_template": "{% for m in messages %}{{ m['content'] }} {% endfor %}",
            }
        )
        + "\n"
    )
    (folder / "generation_config.json").write_text(json.dumps({"eos_token_id": 63}) + "\n")


def _decoder_config(model_type: str, layers: int, intermediate: int) -> dict:
    return {
        "model_type": model_type,
        "hidden_size": H,
        "intermediate_size": intermediate,
        "num_hidden_layers": layers,
        "num_attention_heads": HEADS,
        "num_key_value_heads": HEADS,
        "head_dim": HEAD_DIM,
        "vocab_size": V,
        "rms_norm_eps": EPS,
        "hidden_act": "silu",
        "max_position_embeddings": 512,
        "tie_word_embeddings": False,
        "attention_bias": False,
        "rope_parameters": {"rope_type": "default", "rope_theta": THETA},
        "dtype": "float32",
    }


def verifier(folder: Path, mode: str = "next_token") -> Path:
    """The verifier: greedy continuation t -> t + 1 (`next_token`) or always 0 (`zero`)."""
    assert mode in ("next_token", "zero")
    inter = 8
    t: dict[str, np.ndarray] = {}
    embed = np.zeros((V, H), np.float32)
    embed[np.arange(V), np.arange(V)] = 1.0
    embed[:, B] = 1.0
    t["model.embed_tokens.weight"] = embed
    for i in range(LAYERS):
        p = f"model.layers.{i}."
        for name, shape in (
            ("q_proj", (HEADS * HEAD_DIM, H)),
            ("k_proj", (HEADS * HEAD_DIM, H)),
            ("v_proj", (HEADS * HEAD_DIM, H)),
            ("o_proj", (H, HEADS * HEAD_DIM)),
        ):
            t[p + f"self_attn.{name}.weight"] = np.zeros(shape, np.float32)
        t[p + "self_attn.q_norm.weight"] = np.ones(HEAD_DIM, np.float32)
        t[p + "self_attn.k_norm.weight"] = np.ones(HEAD_DIM, np.float32)
        t[p + "input_layernorm.weight"] = np.ones(H, np.float32)
        t[p + "post_attention_layernorm.weight"] = np.ones(H, np.float32)
        # entering layer i the residual is one-hot token + B + i markers of 1.0
        n_b = 1.0 / math.sqrt((2 + i) / H)
        act = silu(n_b) * n_b
        gate = np.zeros((inter, H), np.float32)
        up = np.zeros((inter, H), np.float32)
        down = np.zeros((H, inter), np.float32)
        gate[0, B] = up[0, B] = 1.0
        down[MARK + i, 0] = 1.0 / act
        t[p + "mlp.gate_proj.weight"], t[p + "mlp.up_proj.weight"], t[p + "mlp.down_proj.weight"] = gate, up, down
    norm = np.zeros(H, np.float32)
    if mode == "next_token":
        norm[:V] = 1.0
    t["model.norm.weight"] = norm
    head = np.zeros((V, H), np.float32)
    head[(np.arange(V) + 1) % V, np.arange(V)] = 1.0
    t["lm_head.weight"] = head
    config = {
        **_decoder_config("qwen3", LAYERS, inter),
        "architectures": ["Qwen3ForCausalLM"],
        "bos_token_id": None,
        "eos_token_id": 63,
    }
    _save(folder, t, config)
    tokenizer_files(folder)
    return folder


def _layer_probe_fc(aux: list[int], copy_token: bool) -> np.ndarray:
    """fc: [H, len(aux) * H]; G = sum over slots of (B - MARK+(L-1) + MARK+L); slot 0's token and B copied."""
    fc = np.zeros((H, len(aux) * H), np.float32)
    for j, layer in enumerate(aux):
        o = j * H
        fc[G, o + B] += 1.0
        fc[G, o + MARK + layer - 1] -= 1.0
        fc[G, o + MARK + layer] += 1.0
    if copy_token:
        fc[np.arange(V), np.arange(V)] = 1.0
    fc[B, B] = 1.0
    return fc


def _envelope(algorithm: str, verifier_dir: Path, k: int, layer: dict, extra: dict) -> dict:
    return {
        "architectures": [
            {"eagle3": "Eagle3Speculator", "peagle": "PEagleSpeculator", "dflash": "DFlashSpeculator"}[algorithm]
        ],
        "speculators_model_type": algorithm,
        "speculators_version": "0.9.0",
        "speculators_config": {
            "algorithm": algorithm,
            "default_proposal_method": "greedy",
            "proposal_methods": [
                {"proposal_type": "greedy", "speculative_tokens": k, "accept_tolerance": 0.0, "verifier_accept_k": 1}
            ],
            "verifier": {"architectures": ["Qwen3ForCausalLM"], "name_or_path": str(verifier_dir)},
        },
        "transformer_layer_config": layer,
        **extra,
    }


def eagle3(
    folder: Path,
    verifier_dir: Path,
    *,
    head: str = "llama",
    aux: tuple[int, ...] = (1, 2, 3),
    k: int = 3,
    reduced_vocab: bool = True,
    agree: bool = True,
    norm_before_residual: bool | None = None,
    parallel: bool = False,
    int8_mlp: bool = False,
    int8_ignore: tuple[str, ...] = (),
) -> Path:
    """A speculators EAGLE-3 draft for the `next_token` verifier (module docstring).

    norm_before_residual=None leaves the field out (speculators' default, false, is what it was
    trained with); agree=False shifts lm_head by one more token, so every proposal is wrong.
    parallel=True: the same weights as a P-EAGLE draft (parallel drafting), whose `mask_hidden` is 0:
    the first parallel position is the EAGLE-3 step above (accepted), the others see an empty
    residual and propose draft id 0, never the verifier's token (so exactly one token is accepted
    per draft). int8_mlp=True: the MLP's three projections saved int8 with per-channel scales, as a
    compressed-tensors W8A8 checkpoint (`INT8_MLP`, at the top of config.json as quantizers write it);
    every weight and activation there is exact in int8, so served quantized it proposes the same.
    int8_ignore: names for the quantization config's ignore list; when given, down_proj is saved
    unquantized (a quantizer that left it out names it there)."""
    assert head in ("llama", "qwen3")
    aux = list(aux)
    t: dict[str, np.ndarray] = {}
    embed = np.zeros((V, H), np.float32)
    embed[np.arange(V), np.arange(V)] = 1.0
    t["embed_tokens.weight"] = embed
    t["fc.weight"] = _layer_probe_fc(aux, copy_token=True)
    p = "layers.0."
    t[p + "input_layernorm.weight"] = np.ones(H, np.float32)
    t[p + "hidden_norm.weight"] = np.zeros(H, np.float32)
    t[p + "post_attention_layernorm.weight"] = np.ones(H, np.float32)
    for name, shape in (
        ("q_proj", (HEADS * HEAD_DIM, 2 * H)),
        ("k_proj", (HEADS * HEAD_DIM, 2 * H)),
        ("v_proj", (HEADS * HEAD_DIM, 2 * H)),
        ("o_proj", (H, HEADS * HEAD_DIM)),
    ):
        t[p + f"self_attn.{name}.weight"] = np.zeros(shape, np.float32)
    if head == "qwen3":
        t[p + "self_attn.q_norm.weight"] = np.ones(HEAD_DIM, np.float32)
        t[p + "self_attn.k_norm.weight"] = np.ones(HEAD_DIM, np.float32)
    # MLP lookup: residual one-hot x (+ B) -> adds e_{x+1} - e_x. Entering it, the residual is
    # e_x + B (G = 0), so its RMS-normed token channel is sqrt(H / 2).
    n_x = math.sqrt(H / 2)
    act = silu(n_x) * n_x
    gate = np.zeros((V, H), np.float32)
    up = np.zeros((V, H), np.float32)
    down = np.zeros((H, V), np.float32)
    x = np.arange(V)
    gate[x, x] = up[x, x] = 1.0
    down[(x + 1) % V, x] += 1.0 / act
    down[x, x] -= 1.0 / act
    t[p + "mlp.gate_proj.weight"], t[p + "mlp.up_proj.weight"], t[p + "mlp.down_proj.weight"] = gate, up, down
    norm = np.zeros(H, np.float32)
    norm[:V] = 1.0
    norm[G] = 1.0
    t["norm.weight"] = norm
    shift = 2 if agree else 3  # the residual holds the verifier's next token y; propose y + 1
    y = np.arange(V)
    if reduced_vocab:
        dv = V - 8  # draft id i <-> target 63 - i: targets 63..8
        target = (y + shift - 1) % V
        keep = target >= 8
        lm = np.zeros((dv, H), np.float32)
        lm[(V - 1 - target[keep]), y[keep]] = 1.0
        lm[V - 1 - GARBAGE_REDUCED, G] = 10.0
        ids = np.arange(dv)
        t["d2t"] = ((V - 1 - ids) - ids).astype(np.int64)
        t2d = np.zeros(V, bool)
        t2d[8:] = True
        t["t2d"] = t2d
    else:
        dv = V
        lm = np.zeros((V, H), np.float32)
        lm[(y + shift - 1) % V, y] = 1.0
        lm[GARBAGE_FULL, G] = 10.0
    t["lm_head.weight"] = lm
    layer = _decoder_config(head, 1, V)
    layer["architectures"] = ["LlamaForCausalLM" if head == "llama" else "Qwen3ForCausalLM"]
    extra: dict = {"draft_vocab_size": dv, "eagle_aux_hidden_state_layer_ids": aux, "target_hidden_size": None}
    if norm_before_residual is not None:
        extra["norm_before_residual"] = norm_before_residual
    if parallel:
        extra["mask_token_id"] = MASK_TOKEN
        t["mask_hidden"] = np.zeros((1, 1, len(aux) * H), np.float32)
    config = _envelope("peagle" if parallel else "eagle3", verifier_dir, k, layer, extra)
    if int8_mlp:
        for name in ("gate_proj", "up_proj") if int8_ignore else ("gate_proj", "up_proj", "down_proj"):
            w = t[p + f"mlp.{name}.weight"]
            scale = np.abs(w).max(axis=1, keepdims=True) / 127.0
            scale[scale == 0] = 1.0
            t[p + f"mlp.{name}.weight"] = np.round(w / scale).astype(np.int8)
            t[p + f"mlp.{name}.weight_scale"] = scale.astype(np.float32)
        config["quantization_config"] = {**INT8_MLP, "ignore": list(int8_ignore)}
    return _save(folder, t, config)


#: compressed-tensors W8A8 int8 (per-channel weights, dynamic per-token activations) for the MLP
#: projections only, matched by name whatever the layer's index (vLLM runs draft layer 0 as
#: layers.{verifier layers}); the draft classes have no packed-module mapping, so the fused
#: gate_up_proj is matched by its own name
INT8_MLP = {
    "quant_method": "compressed-tensors",
    "format": "int-quantized",
    "quantization_status": "compressed",
    "ignore": [],
    "config_groups": {
        "group_0": {
            "targets": ["re:.*mlp\\.(gate_up|gate|up|down)_proj$"],
            "weights": {"num_bits": 8, "type": "int", "symmetric": True, "strategy": "channel", "dynamic": False},
            "input_activations": {
                "num_bits": 8,
                "type": "int",
                "symmetric": True,
                "strategy": "token",
                "dynamic": True,
            },
        }
    },
}


def dflash(
    folder: Path,
    verifier_dir: Path,
    *,
    aux: tuple[int, ...] = (1, 2, 3),
    layer_type: str = "full_attention",
    sliding_window_non_causal: bool = False,
    sliding_window: int = 64,
    old_layout: bool = False,
) -> Path:
    """A speculators DFlash draft for the `zero` verifier, trained non-causal with block_size 4:
    the anchor and k = 3 mask tokens (module docstring).

    The default is the z-lab conversion case: full-attention layers, `sliding_window_non_causal:
    false` (speculators trains full layers bidirectional whatever that flag says). `old_layout`:
    the file as speculators < 0.7 wrote it, with speculative_tokens = block_size and no
    sample_from_anchor (its trainer still drafted block_size - 1 tokens after the anchor)."""
    aux = list(aux)
    k = 3
    t: dict[str, np.ndarray] = {}
    embed = np.zeros((V, H), np.float32)
    embed[:, Q] = 1.0
    embed[MASK_TOKEN, MK] = 1.0
    t["embed_tokens.weight"] = embed
    t["fc.weight"] = _layer_probe_fc(aux, copy_token=False)
    t["hidden_norm.weight"] = np.ones(H, np.float32)
    p = "layers.0."
    t[p + "input_layernorm.weight"] = np.ones(H, np.float32)
    t[p + "post_attention_layernorm.weight"] = np.ones(H, np.float32)
    q = np.zeros((HEADS * HEAD_DIM, H), np.float32)
    kp = np.zeros((HEADS * HEAD_DIM, H), np.float32)
    v = np.zeros((HEADS * HEAD_DIM, H), np.float32)
    o = np.zeros((H, HEADS * HEAD_DIM), np.float32)
    q[ROPE_DIM, Q] = 1.0
    kp[ROPE_DIM, Q] = 1.0
    kp[ROPE_DIM, G] = 1.0
    v[0, MK] = 1.0
    o[R, 0] = 1.0
    t[p + "self_attn.q_proj.weight"], t[p + "self_attn.k_proj.weight"] = q, kp
    t[p + "self_attn.v_proj.weight"], t[p + "self_attn.o_proj.weight"] = v, o
    qk_norm = np.ones(HEAD_DIM, np.float32)
    qk_norm[ROPE_DIM] = 2.0  # normed q and k are 16 in that dimension: score 16 * 16 / 8 = 32
    t[p + "self_attn.q_norm.weight"] = qk_norm
    t[p + "self_attn.k_norm.weight"] = qk_norm.copy()
    t[p + "mlp.gate_proj.weight"] = np.zeros((8, H), np.float32)
    t[p + "mlp.up_proj.weight"] = np.zeros((8, H), np.float32)
    t[p + "mlp.down_proj.weight"] = np.zeros((H, 8), np.float32)
    t["norm.weight"] = np.ones(H, np.float32)
    lm = np.zeros((V, H), np.float32)
    lm[0, R] = 1.0
    lm[1, Q] = DFLASH_THRESHOLD
    lm[2, R], lm[2, Q] = 2.0, -DFLASH_CEILING
    t["lm_head.weight"] = lm
    layer = {
        **_decoder_config("qwen3", 1, 8),
        "architectures": ["Qwen3ForCausalLM"],
        "layer_types": [layer_type],
        "sliding_window": sliding_window if layer_type == "sliding_attention" else None,
        "use_sliding_window": layer_type == "sliding_attention",
    }
    extra = {
        "aux_hidden_state_layer_ids": aux,
        "block_size": k + 1,
        "draft_vocab_size": V,
        "mask_token_id": MASK_TOKEN,
        "sample_from_anchor": False,
        "sliding_window_non_causal": sliding_window_non_causal,
        "target_hidden_size": None,
    }
    config = _envelope("dflash", verifier_dir, k, layer, extra)
    if old_layout:
        del config["sample_from_anchor"]
        config["speculators_version"] = "0.5.0"
        config["speculators_config"]["proposal_methods"][0]["speculative_tokens"] = k + 1
    return _save(folder, t, config)
