"""The trainer tier's verifier: a tiny Qwen3 (4 layers) whose layers differ and whose greedy
continuation is next(t) = t + 1, with a word-level tokenizer. Built locally, deterministically.

    python verifier.py OUT_DIR        (in the trainer venv: torch + transformers)

Attention is switched off (every o_proj is zero), so a position's hidden state is a function of its
token alone: h_0(t) = embed(t), h_{l+1}(t) = h_l(t) + mlp_l(norm(h_l(t))). Each layer's MLP is
random and scaled so that its output is as large as the residual it adds to: the state entering
layer l is about 45 degrees away from the one entering layer l + 1, so a draft fed other layers'
states than it was trained on sees other vectors. lm_head row j is the final state of token j - 1,
so the greedy next token of t is t + 1 (mod the vocabulary), by a wide margin in float32 and bf16.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers
from transformers import PreTrainedTokenizerFast, Qwen3Config, Qwen3ForCausalLM

VOCAB = 512
HIDDEN = 256
LAYERS = 4
MASK = VOCAB - 1  # DFlash's mask token; no prompt or continuation of the tier reaches it
SPECIAL = {1: "<bos>", 2: "<eos>", 3: "<unk>", MASK: "<|MASK|>"}


def config() -> Qwen3Config:
    cfg = Qwen3Config(
        vocab_size=VOCAB,
        hidden_size=HIDDEN,
        intermediate_size=256,
        num_hidden_layers=LAYERS,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=64,
        max_position_embeddings=2048,
        rms_norm_eps=1e-6,
        tie_word_embeddings=False,
        bos_token_id=1,
        eos_token_id=2,
        pad_token_id=None,
        rope_parameters={"rope_type": "default", "rope_theta": 1000000.0},
    )
    cfg.architectures = ["Qwen3ForCausalLM"]
    return cfg


@torch.no_grad()
def build() -> Qwen3ForCausalLM:
    torch.manual_seed(38)  # the attention weights transformers initializes (they read nothing: o_proj is zero)
    gen = torch.Generator().manual_seed(38)
    model = Qwen3ForCausalLM(config()).eval()
    inner = model.model
    inner.embed_tokens.weight.copy_(torch.randn(VOCAB, HIDDEN, generator=gen))
    for layer in inner.layers:
        layer.self_attn.o_proj.weight.zero_()
        mlp = layer.mlp
        for lin in (mlp.gate_proj, mlp.up_proj, mlp.down_proj):
            lin.weight.copy_(torch.randn(lin.weight.shape, generator=gen) / lin.weight.shape[1] ** 0.5)
    inner.norm.weight.fill_(1.0)
    model = model.to(torch.bfloat16)
    # scale each MLP (in bf16, as saved) so its output is as large as the residual entering it
    h = inner.embed_tokens.weight.float()
    for layer in inner.layers:
        out = layer.mlp(layer.post_attention_layernorm(h.to(torch.bfloat16))).float()
        layer.mlp.down_proj.weight.mul_(h.pow(2).mean().sqrt() / out.pow(2).mean().sqrt())
        h = h + layer.mlp(layer.post_attention_layernorm(h.to(torch.bfloat16))).float()
    final = inner(input_ids=torch.arange(VOCAB)[None]).last_hidden_state[0].float()
    model.lm_head.weight.copy_(torch.roll(final, shifts=1, dims=0) / HIDDEN**0.5)
    return model


def tokenizer() -> PreTrainedTokenizerFast:
    vocab = {SPECIAL.get(i, f"t{i}"): i for i in range(VOCAB)}
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok.decoder = decoders.WordPiece(prefix="##", cleanup=False)
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token="<bos>",
        eos_token="<eos>",
        unk_token="<unk>",
        pad_token="<unk>",
        mask_token="<|MASK|>",
    )


@torch.no_grad()
def check(model: Qwen3ForCausalLM) -> None:
    """Greedy next(t) = t + 1 for every token, in context, in bf16 and float32; layers differ."""
    ids = torch.arange(VOCAB)[None]
    for dtype in (torch.bfloat16, torch.float32):
        out = model.to(dtype)(input_ids=ids, output_hidden_states=True)
        nxt = out.logits[0].argmax(-1)
        assert torch.equal(nxt, (ids[0] + 1) % VOCAB), (dtype, (nxt != (ids[0] + 1) % VOCAB).sum())
        states = [s[0].float() for s in out.hidden_states[:-1]]
        for a, b in zip(states, states[1:]):
            cos = torch.nn.functional.cosine_similarity(a, b, dim=-1).mean().item()
            assert cos < 0.85, f"adjacent layers' states too alike (cosine {cos:.2f})"
    model.to(torch.bfloat16)


def main(out: str) -> None:
    model = build()
    check(model)
    path = Path(out)
    model.save_pretrained(path, safe_serialization=True)
    (path / "generation_config.json").write_text(json.dumps({"bos_token_id": 1, "eos_token_id": 2}) + "\n")
    tokenizer().save_pretrained(path)


if __name__ == "__main__":
    main(sys.argv[1])
