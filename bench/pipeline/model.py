"""The swarm's transformer LM, one pipeline stage at a time, written with PyTorch modules.

The same architecture and arithmetic as worker/model/transformer.cc and stage.cc (documented for
the exported file in worker/checkpoint/export.h): token + learned position embedding on the first
stage; pre-LayerNorm decoder blocks (LayerNorm eps 1e-5, fused qkv projection split as
[q | k | v], causal attention through F.scaled_dot_product_attention(is_causal=True) as the C++
code runs it (fused; softmax of the scores scaled by 1/sqrt(head size) over past and present
positions, no dropout); then the output projection added to
the residual, LayerNorm, fc1, exact (erf) GELU, fc2 added to the residual); on the last stage a
final LayerNorm and the LM head (no bias, not tied to the embedding). The loss is the mean
cross-entropy of the next token.

The parameters start from what `swarm export --initial` writes (the swarm's own initialization,
seeded per parameter name), loaded by the names that file uses: embed.tokens, embed.positions,
blocks.<g>.<name> (g the block's index in the whole model), head.ln_weight, head.ln_bias,
head.weight. The modules here are built with those names, so loading is a plain name match.
"""

import json
import struct

import torch
import torch.nn.functional as F
from torch import nn

LAYER_NORM_EPS = 1e-5

_SAFETENSORS_DTYPES = {"F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16,
                       "F64": torch.float64, "I64": torch.int64, "I32": torch.int32}


class SafetensorsFile:
    """A safetensors file read lazily: the header at once, each tensor's bytes only when asked
    (a stage reads its own parameters, not the whole model's)."""

    def __init__(self, path):
        self.path = path
        with open(path, "rb") as f:
            head = f.read(8)
            if len(head) < 8:
                raise ValueError(f"{path}: not a safetensors file (shorter than its header length)")
            (header_len,) = struct.unpack("<Q", head)
            header = f.read(header_len)
        if len(header) != header_len:
            raise ValueError(f"{path}: not a safetensors file (header length {header_len} past the end)")
        self.entries = json.loads(header)
        self.metadata = self.entries.pop("__metadata__", {})
        self.data_start = 8 + header_len

    def get(self, name):
        """The tensor `name`, or None when the file has none of that name."""
        entry = self.entries.get(name)
        if entry is None:
            return None
        dtype = _SAFETENSORS_DTYPES.get(entry["dtype"])
        if dtype is None:
            raise ValueError(f"{self.path}: tensor {name}: unsupported dtype {entry['dtype']}")
        begin, end = entry["data_offsets"]
        with open(self.path, "rb") as f:
            f.seek(self.data_start + begin)
            raw = bytearray(f.read(end - begin))
        if len(raw) != end - begin:
            raise ValueError(f"{self.path}: tensor {name} runs past the end of the file")
        flat = torch.frombuffer(raw, dtype=dtype) if raw else torch.empty(0, dtype=dtype)
        return flat.reshape(entry["shape"])


class ModelShape:
    """spec.model and spec.pipeline.stages (worker/model/config.h)."""

    def __init__(self, vocab_size, hidden_size, num_heads, layers_per_stage, sequence_length,
                 mlp_ratio, num_stages, shared_layers):
        if hidden_size % num_heads:
            raise ValueError(f"spec.model.hiddenSize ({hidden_size}) must be divisible by numHeads ({num_heads})")
        self.vocab_size, self.hidden_size, self.num_heads = vocab_size, hidden_size, num_heads
        self.layers_per_stage, self.sequence_length, self.mlp_ratio = layers_per_stage, sequence_length, mlp_ratio
        self.num_stages, self.shared_layers = num_stages, shared_layers

    def block_index(self, stage, j):
        """The exported index g of block j of a stage: one block per stage with sharedLayers."""
        return stage if self.shared_layers else stage * self.layers_per_stage + j


def _param(*shape):
    return nn.Parameter(torch.zeros(*shape))


class Embedding(nn.Module):
    """Token embedding [V, H] + learned position embedding [S, H]."""

    def __init__(self, shape):
        super().__init__()
        self.tokens = _param(shape.vocab_size, shape.hidden_size)
        self.positions = _param(shape.sequence_length, shape.hidden_size)

    def forward(self, ids):
        return F.embedding(ids, self.tokens) + self.positions[:ids.size(1)].unsqueeze(0)


class Block(nn.Module):
    """Pre-LayerNorm decoder block: x + Attn(LN1(x)), then x + MLP(LN2(x))."""

    def __init__(self, shape):
        super().__init__()
        h, m = shape.hidden_size, shape.hidden_size * shape.mlp_ratio
        self.num_heads = shape.num_heads
        self.ln1_weight, self.ln1_bias = _param(h), _param(h)
        self.qkv_weight, self.qkv_bias = _param(3 * h, h), _param(3 * h)
        self.proj_weight, self.proj_bias = _param(h, h), _param(h)
        self.ln2_weight, self.ln2_bias = _param(h), _param(h)
        self.fc1_weight, self.fc1_bias = _param(m, h), _param(m)
        self.fc2_weight, self.fc2_bias = _param(h, m), _param(h)

    def attention(self, qkv):
        b, t, h3 = qkv.shape
        h = h3 // 3
        hd = h // self.num_heads
        q, k, v = (part.transpose(1, 2) for part in qkv.view(b, t, 3, self.num_heads, hd).unbind(2))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)  # [B, nh, T, hd]
        return y.transpose(1, 2).reshape(b, t, h)

    def forward(self, x):
        h = x.size(-1)
        a = F.layer_norm(x, (h,), self.ln1_weight, self.ln1_bias, LAYER_NORM_EPS)
        y = x + F.linear(self.attention(F.linear(a, self.qkv_weight, self.qkv_bias)), self.proj_weight, self.proj_bias)
        a = F.layer_norm(y, (h,), self.ln2_weight, self.ln2_bias, LAYER_NORM_EPS)
        a = F.gelu(F.linear(a, self.fc1_weight, self.fc1_bias))
        return y + F.linear(a, self.fc2_weight, self.fc2_bias)


class Head(nn.Module):
    """Final LayerNorm + LM head (no bias): [B, T, H] -> logits [B, T, V]."""

    def __init__(self, shape):
        super().__init__()
        self.ln_weight, self.ln_bias = _param(shape.hidden_size), _param(shape.hidden_size)
        self.weight = _param(shape.vocab_size, shape.hidden_size)

    def forward(self, x):
        return F.linear(F.layer_norm(x, (x.size(-1),), self.ln_weight, self.ln_bias, LAYER_NORM_EPS), self.weight)


class Stage(nn.Module):
    """One stage: ids [B, T] -> hidden [B, T, H] (first), hidden -> hidden (middle),
    hidden -> logits [B, T, V] (last)."""

    def __init__(self, shape, stage):
        super().__init__()
        if not 0 <= stage < shape.num_stages:
            raise ValueError(f"stage {stage} outside [0, {shape.num_stages})")
        self.embed = Embedding(shape) if stage == 0 else None
        per_stage = 1 if shape.shared_layers else shape.layers_per_stage
        self.blocks = nn.ModuleDict({str(shape.block_index(stage, j)): Block(shape) for j in range(per_stage)})
        self.head = Head(shape) if stage == shape.num_stages - 1 else None
        self.layers = shape.layers_per_stage  # a shared block is applied this many times

    def forward(self, x):
        if self.embed is not None:
            x = self.embed(x)
        blocks = list(self.blocks.values())
        for j in range(self.layers):
            x = blocks[0 if len(blocks) == 1 else j](x)
        if self.head is not None:
            x = self.head(x)
        return x

    def load_exported(self, exported):
        """Copies this stage's parameters out of an exported file (a SafetensorsFile), by name."""
        with torch.no_grad():
            for name, p in self.named_parameters():
                t = exported.get(name)
                if t is None:
                    raise ValueError(f"{exported.path}: no tensor {name} (was it exported from this job?)")
                if tuple(t.shape) != tuple(p.shape):
                    raise ValueError(f"{exported.path}: tensor {name} has shape {list(t.shape)}, "
                                     f"the job's model {list(p.shape)}")
                p.copy_(t)


def lm_loss(logits, targets):
    """Mean cross-entropy of logits [B, T, V] against the next tokens [B, T]."""
    return F.cross_entropy(logits.reshape(-1, logits.size(-1)), targets.reshape(-1))
