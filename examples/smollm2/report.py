#!/usr/bin/env python3
"""The figures of an examples/smollm2/run.sh fine-tune: samples/s and each worker's peak RSS.

    python examples/smollm2/report.py OUT

Reads OUT/summary.json (`swarm local --summary`) and OUT/run/*.worker.json (each worker's report
as it stops: peak_rss_bytes is its VmHWM), and prints them beside the whole model's float32 size
plus AdamW's two moments (16 bytes a parameter), which no worker should come near.
"""

import glob
import json
import os
import sys


def main(argv):
    if len(argv) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    out = argv[0]
    with open(os.path.join(out, "summary.json")) as f:
        s = json.load(f)
    print(f"swarm local: {s['steps']} steps, {s['samples']} samples in {s['train_seconds']:.0f} s: "
          f"{s['samples_per_second']:.3f} samples/s; training loss {s['loss_first']:.3f} -> {s['loss_last']:.3f}, "
          f"eval loss {s['eval_loss']:.3f}")
    with open(os.path.join(out, "hf", "config.json")) as f:
        c = json.load(f)
    h, v, i, n = c["hidden_size"], c["vocab_size"], c["intermediate_size"], c["num_hidden_layers"]
    kv = c.get("num_key_value_heads", c["num_attention_heads"]) * c.get("head_dim", h // c["num_attention_heads"])
    # Untied: the embedding and the head are two tensors (the swarm imports a tied checkpoint untied).
    params = 2 * v * h + n * (2 * h * h + 2 * h * kv + 3 * h * i + 2 * h) + h
    print(f"the whole model: {params / 1e6:.1f} M parameters untied; float32 weights + gradients + AdamW's two "
          f"moments = 16 B x {params / 1e6:.1f} M = {16 * params / 1e9:.2f} GB")
    for p in sorted(glob.glob(os.path.join(out, "run", "*.worker.json"))):
        with open(p) as f:
            r = json.load(f)
        print(f"worker {r['peer']} (stage {r['stage']}): peak RSS {r['peak_rss_bytes'] / 1e6:.0f} MB")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
