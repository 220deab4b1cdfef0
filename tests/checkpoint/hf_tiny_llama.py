"""Random Llama checkpoints built by Hugging Face transformers, and transformers' logits on them.

The import tests (tests/checkpoint/hf_import_test.cc) use it with the venv of
scripts/install-python.sh, offline (HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1): nothing is downloaded.

  hf_tiny_llama.py make OUT [--tied] [--dtype float32|bfloat16|float16] [--max-shard-size 20KB]
                            [--legacy-rope-keys] [--vocab V] [--hidden H] [--intermediate I]
                            [--layers L] [--heads N] [--kv-heads K] [--head-dim D] [--seed S]
      A LlamaForCausalLM with random weights (grouped-query attention, an explicit head_dim that is
      not hidden/heads, llama3 rope scaling), saved by save_pretrained: sharded with an index when
      max_shard_size is small. --legacy-rope-keys rewrites config.json with transformers 4.x's
      rope_theta / rope_scaling instead of rope_parameters.
  hf_tiny_llama.py logits DIR BATCH.json OUT.safetensors
      Loads DIR with AutoModelForCausalLM in float32 (eager attention) and writes its logits on
      BATCH.json's {"inputs": [[id, ...], ...]} as the float32 tensor "logits" [B, T, V].
"""
import argparse
import json
import os
import sys

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import torch  # noqa: E402
import transformers  # noqa: E402
from safetensors.torch import save_file  # noqa: E402

MAJOR = int(transformers.__version__.split(".")[0])
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def make(args):
    rope = {"rope_type": "llama3", "rope_theta": 50000.0, "factor": 4.0, "low_freq_factor": 1.0,
            "high_freq_factor": 4.0, "original_max_position_embeddings": 16}
    kw = dict(vocab_size=args.vocab, hidden_size=args.hidden, intermediate_size=args.intermediate,
              num_hidden_layers=args.layers, num_attention_heads=args.heads,
              num_key_value_heads=args.kv_heads, head_dim=args.head_dim, max_position_embeddings=128,
              rms_norm_eps=1e-5, tie_word_embeddings=args.tied, hidden_act="silu")
    if MAJOR >= 5:
        kw["rope_parameters"] = rope
    else:
        kw["rope_theta"] = rope["rope_theta"]
        kw["rope_scaling"] = {k: v for k, v in rope.items() if k != "rope_theta"}
    torch.manual_seed(args.seed)
    config = transformers.LlamaConfig(**kw)
    model = transformers.LlamaForCausalLM(config)
    # Random weights of a realistic spread (the default init draws std 0.02 with zero norms'
    # offsets; the norms get non-trivial gains so a swapped or skipped norm shows in the logits).
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("norm.weight"):
                p.uniform_(0.5, 1.5)
    model = model.to(DTYPES[args.dtype])
    model.save_pretrained(args.out, max_shard_size=args.max_shard_size, safe_serialization=True)
    if args.legacy_rope_keys:
        path = os.path.join(args.out, "config.json")
        with open(path) as f:
            c = json.load(f)
        c.pop("rope_parameters", None)
        c["rope_theta"] = rope["rope_theta"]
        c["rope_scaling"] = {k: v for k, v in rope.items() if k != "rope_theta"}
        with open(path, "w") as f:
            json.dump(c, f, indent=2)
    print(json.dumps({"out": args.out, "parameters": sum(p.numel() for p in model.parameters()),
                      "files": sorted(os.listdir(args.out))}))


def logits(args):
    kw = {"dtype" if MAJOR >= 5 else "torch_dtype": torch.float32, "attn_implementation": "eager"}
    model = transformers.AutoModelForCausalLM.from_pretrained(args.dir, **kw)
    model.eval()
    with open(args.batch) as f:
        ids = torch.tensor(json.load(f)["inputs"], dtype=torch.long)
    with torch.no_grad():
        out = model(input_ids=ids).logits.float().contiguous()
    save_file({"logits": out}, args.out)


def main():
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="cmd", required=True)
    m = sub.add_parser("make")
    m.add_argument("out")
    m.add_argument("--tied", action="store_true")
    m.add_argument("--dtype", default="float32", choices=sorted(DTYPES))
    m.add_argument("--max-shard-size", default="20KB")
    m.add_argument("--legacy-rope-keys", action="store_true")
    m.add_argument("--vocab", type=int, default=256)
    m.add_argument("--hidden", type=int, default=64)
    m.add_argument("--intermediate", type=int, default=96)
    m.add_argument("--layers", type=int, default=6)
    m.add_argument("--heads", type=int, default=4)
    m.add_argument("--kv-heads", type=int, default=2)
    m.add_argument("--head-dim", type=int, default=24)
    m.add_argument("--seed", type=int, default=0)
    m.set_defaults(fn=make)
    g = sub.add_parser("logits")
    g.add_argument("dir")
    g.add_argument("batch")
    g.add_argument("out")
    g.set_defaults(fn=logits)
    args = p.parse_args()
    args.fn(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
