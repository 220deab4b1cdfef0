"""The exported model's forward pass in plain PyTorch, from its safetensors file alone.

Usage: reference_forward.py MODEL.safetensors BATCH.json
BATCH.json: {"inputs": [[id, ...], ...], "targets": [[id, ...], ...]}.
Prints the mean next-token cross-entropy, as worker/checkpoint/export.h describes the model.
"""
import json
import math
import sys

import torch
import torch.nn.functional as F
from safetensors import safe_open
from safetensors.torch import load_file


def block(x, w, prefix, heads):
    b, t, h = x.shape
    hd = h // heads
    a = F.layer_norm(x, (h,), w[prefix + "ln1_weight"], w[prefix + "ln1_bias"], 1e-5)
    qkv = F.linear(a, w[prefix + "qkv_weight"], w[prefix + "qkv_bias"])
    q, k, v = qkv.view(b, t, 3, heads, hd).permute(2, 0, 3, 1, 4)
    scores = q @ k.transpose(-2, -1) / math.sqrt(hd)
    future = torch.ones(t, t, dtype=torch.bool).triu(1)
    att = torch.softmax(scores.masked_fill(future, float("-inf")), dim=-1)
    y = (att @ v).transpose(1, 2).reshape(b, t, h)
    x = x + F.linear(y, w[prefix + "proj_weight"], w[prefix + "proj_bias"])
    m = F.layer_norm(x, (h,), w[prefix + "ln2_weight"], w[prefix + "ln2_bias"], 1e-5)
    m = F.gelu(F.linear(m, w[prefix + "fc1_weight"], w[prefix + "fc1_bias"]))
    return x + F.linear(m, w[prefix + "fc2_weight"], w[prefix + "fc2_bias"])


def main(model_path, batch_path):
    w = load_file(model_path)
    with safe_open(model_path, framework="pt") as f:
        cfg = json.loads(f.metadata()["swarm.config"])
    batch = json.load(open(batch_path))
    ids = torch.tensor(batch["inputs"], dtype=torch.long)
    targets = torch.tensor(batch["targets"], dtype=torch.long)
    t = ids.shape[1]
    x = w["embed.tokens"][ids] + w["embed.positions"][:t].unsqueeze(0)
    per_stage = cfg["layers_per_stage"]
    for stage in range(cfg["num_stages"]):
        for j in range(per_stage):
            g = stage if cfg["shared_layers"] else stage * per_stage + j
            x = block(x, w, "blocks.%d." % g, cfg["num_heads"])
    h = F.layer_norm(x, (cfg["hidden_size"],), w["head.ln_weight"], w["head.ln_bias"], 1e-5)
    logits = h @ w["head.weight"].t()
    loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))
    print("%.8f" % loss.item())


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
