#!/usr/bin/env python3
"""Check a Hugging Face checkpoint folder with `transformers` itself, offline: perplexity on a fixed
English paragraph and a greedy continuation of a prompt.

    python examples/smollm2/check_hf.py DIR... [--prompt TEXT] [--max-new-tokens N] [--max-perplexity P]

Loads each DIR with AutoModelForCausalLM.from_pretrained and AutoTokenizer.from_pretrained
(float32, CPU, HF_HUB_OFFLINE=1: nothing is fetched), prints the perplexity and the continuation,
then one JSON line ({"model": DIR, "perplexity": ..., "tokens": ..., "generation": ...}). With
--max-perplexity, exits 1 when a perplexity is above it: how examples/smollm2/run.sh and
tests/examples/smollm2_test.cc tell a model that reads English from one whose conversion went wrong.
"""

import argparse
import json
import math
import os
import sys

# A paragraph of plain English prose written for this check (not from any corpus).
PARAGRAPH = (
    "The village sits at the bottom of a narrow valley, where the river slows down before it reaches "
    "the sea. Every morning the baker opens his shop before sunrise, and the smell of fresh bread "
    "drifts along the main street. Children walk to school in small groups, talking about the games "
    "they will play in the afternoon. In the summer, visitors come to swim in the cold water and to "
    "climb the hills that surround the houses. Most of them leave before the autumn rains begin, and "
    "the village becomes quiet again. The people who live there all year say that this is the best "
    "season, because the paths are empty and the evenings are long."
)


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("models", nargs="+", metavar="DIR",
                    help="checkpoint folders (config.json, safetensors, tokenizer files)")
    ap.add_argument("--prompt", default="The capital of France is")
    ap.add_argument("--max-new-tokens", type=int, default=30)
    ap.add_argument("--max-perplexity", type=float, help="fail (exit 1) above this perplexity")
    ap.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    a = ap.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    if a.threads:
        torch.set_num_threads(a.threads)
    failed = False
    for path in a.models:
        failed |= not check(path, a, torch, AutoModelForCausalLM, AutoTokenizer)
    return 1 if failed else 0


def check(path, a, torch, AutoModelForCausalLM, AutoTokenizer):
    tok = AutoTokenizer.from_pretrained(path)
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
    model.eval()
    with torch.no_grad():
        ids = tok(PARAGRAPH, return_tensors="pt").input_ids
        loss = model(ids, labels=ids).loss.item()
        prompt = tok(a.prompt, return_tensors="pt")
        out = model.generate(**prompt, max_new_tokens=a.max_new_tokens, do_sample=False,
                             pad_token_id=tok.pad_token_id)
    generation = tok.decode(out[0][prompt.input_ids.shape[1]:], skip_special_tokens=True)
    perplexity = math.exp(loss)
    print(f"{path}: perplexity {perplexity:.2f} (loss {loss:.4f}) over {ids.shape[1]} tokens of a fixed English "
          "paragraph")
    print(f"{a.prompt}{generation}")
    print(json.dumps({"model": path, "perplexity": perplexity, "loss": loss, "tokens": int(ids.shape[1]),
                      "prompt": a.prompt, "generation": generation}))
    if a.max_perplexity is not None and perplexity > a.max_perplexity:
        print(f"check_hf: {path}: perplexity {perplexity:.2f} is above --max-perplexity {a.max_perplexity}",
              file=sys.stderr)
        return False
    return True

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
