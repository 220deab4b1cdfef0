"""The swarm's training data, token for token: the dataset split and the trainer's batch sampler.

A Python rendering of worker/data/text_dataset.cc (what load() reads and how it splits training
from validation) and worker/data/batch_sampler.cc (epochs of windows in a keyed pseudo-random
order, the fixed validation windows), so that the PyTorch side trains on exactly the microbatches
a `swarm local` trainer draws, in the same order. Supported: the byte tokenizer over text and JSON
Lines files, and `swarm tokenize` token files (ids as written). Text under a SentencePiece
tokenizer is refused: encoding it here would need the tokenizer library.

The contract is the C++ code's; keep the two in step (text_dataset.h documents it).
"""

import array
import json
import math
import os
import stat
import struct

MASK64 = (1 << 64) - 1
SNIFF_BYTES = 8192  # a NUL byte in this prefix marks a binary file
TOKEN_MAGIC = b"SWTOKENS"
TOKEN_HEADER = {1: 32, 2: 64}  # by version: 2 adds the tokenizer's SHA-256 (token_file.h)


class DatasetError(ValueError):
    """A dataset this benchmark cannot reproduce; the message names the path."""


def mix64(x):
    """splitmix64's finalizer (batch_sampler.cc), on 64-bit unsigned integers."""
    x = (x + 0x9E3779B97F4A7C15) & MASK64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & MASK64
    return x ^ (x >> 31)


# ---- which files, in which order ----

def _walk(root):
    """Regular files and symlinks to regular files under root (not following directory symlinks,
    skipping hidden entries, not entering hidden directories): [(path, is_symlink)]."""
    out = []
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        dirnames[:] = [d for d in dirnames if not d.startswith(".")]
        for name in filenames:
            if name.startswith("."):
                continue
            p = os.path.join(dirpath, name)
            own = os.lstat(p)
            if stat.S_ISLNK(own.st_mode):
                if os.path.isfile(p):  # a broken link or a link to a directory: skipped
                    out.append((p, True))
            elif stat.S_ISREG(own.st_mode):
                out.append((p, False))
    return out


def _path_key(p):
    """std::filesystem::path ordering: element by element, not character by character."""
    return tuple(part.encode() for part in p.split("/"))


def _dedupe(candidates):
    """One file per canonical path: real files win over symlinks, then the smaller path."""
    candidates.sort(key=lambda c: (c[1], _path_key(c[0])))
    by_canonical = {}
    for path, _ in candidates:
        by_canonical.setdefault(os.path.realpath(path), path)
    return sorted(by_canonical.values(), key=_path_key)


def _strfile_index(p):
    """fortune's strfile index: `X.dat` next to the text file `X`."""
    return p.endswith(".dat") and len(os.path.basename(p)) > 4 and os.path.isfile(p[:-4])


# ---- reading one file ----

def _is_token_file(p):
    with open(p, "rb") as f:
        return f.read(len(TOKEN_MAGIC)) == TOKEN_MAGIC


def _read_token_file(p, vocab):
    with open(p, "rb") as f:
        raw = f.read()
    if len(raw) < TOKEN_HEADER[1]:
        raise DatasetError(f"dataset {p}: token file shorter than its header")
    version, width, file_vocab, count = struct.unpack_from("<IIQQ", raw, 8)
    header = TOKEN_HEADER.get(version, 0)
    if not header or width not in (2, 4) or len(raw) != header + width * count:
        raise DatasetError(f"dataset {p}: not a version-1 or -2 token file `swarm tokenize` wrote")
    if file_vocab != vocab:
        raise DatasetError(f"dataset {p}: written with a vocabulary of {file_vocab}, the job's is {vocab}")
    return array.array("I", memoryview(raw)[header:].cast("H" if width == 2 else "I"))


def _read_jsonl(p, field):
    out = []
    with open(p, "rb") as f:
        for number, line in enumerate(f, 1):
            if not line.strip(b" \t\r\n"):
                continue
            try:
                doc = json.loads(line)
            except ValueError as e:
                raise DatasetError(f"dataset {p}: line {number}: not JSON ({e})") from None
            if not isinstance(doc, dict) or not isinstance(doc.get(field), str):
                raise DatasetError(f"dataset {p}: line {number}: needs a string field \"{field}\"")
            out.append(doc[field].encode() + b"\n")
    return b"".join(out)


def _read_part(p, fmt, text_field, alone, vocab, tokenizer):
    """A file's tokens: bytes (text, JSON Lines) or an array of ids (a token file); None to skip."""
    if fmt == "auto":
        if _is_token_file(p):
            fmt = "tokens"
        elif p.endswith((".jsonl", ".ndjson")):
            fmt = "jsonl"
        else:
            fmt = "text"
    if fmt == "tokens":
        if not _is_token_file(p):
            raise DatasetError(f"dataset {p}: not a token file (spec.training.dataset.format is tokens)")
        part = _read_token_file(p, vocab)
    else:
        if tokenizer != "bytes":
            raise DatasetError(f"dataset {p}: text under the {tokenizer} tokenizer; this benchmark "
                               "reads byte-level text or `swarm tokenize` token files only")
        if fmt == "jsonl":
            part = _read_jsonl(p, text_field)
        else:
            with open(p, "rb") as f:
                part = f.read()
            if b"\0" in part[:SNIFF_BYTES]:
                if alone:
                    raise DatasetError(f"dataset file is binary, not text: {p}")
                return None
    return part if len(part) > 0 else None


def _concat_ids(arrays):
    out = array.array("I")
    for a in arrays:
        out.extend(a)
    return out


class Dataset:
    """The training and validation tokens of a job's dataset (bytes, or an array of ids)."""

    def __init__(self, path, validation_fraction=0.02, fmt="auto", text_field="text",
                 tokenizer="bytes", vocab=256):
        if not 0 <= validation_fraction < 1:
            raise DatasetError(f"dataset {path}: validation fraction {validation_fraction} is not in [0, 1)")
        if not os.path.exists(path):
            raise DatasetError(f"dataset path does not exist: {path}")
        single = os.path.isfile(path)
        paths = [path] if single else _dedupe(_walk(path))
        parts = []
        for p in paths:
            if not single and _strfile_index(p):
                continue
            part = _read_part(p, fmt, text_field, single, vocab, tokenizer)
            if part is not None:
                parts.append(part)
        if not parts:
            raise DatasetError(f"dataset {path}: no data found (text, JSON Lines or token files)")
        ids = any(isinstance(pt, array.array) for pt in parts)
        if ids and not all(isinstance(pt, array.array) for pt in parts):
            raise DatasetError(f"dataset {path}: mixes token files with text; this benchmark reads one or the other")
        # The last `fraction` of every file is held out; cumulative rounding keeps the total at
        # floor(total * fraction).
        train, val, before = [], [], 0
        cut = lambda n: math.floor(n * validation_fraction)  # noqa: E731
        for pt in parts:
            n = len(pt)
            held = min(n, cut(before + n) - cut(before))
            before += n
            train.append(pt[:n - held])
            val.append(pt[n - held:])
        join = _concat_ids if ids else b"".join
        self.train, self.validation = join(train), join(val)


class WindowPermutation:
    """A keyed permutation of [0, n): a 4-round Feistel network over the next even power of two,
    cycle-walking back into range."""

    def __init__(self, n, key):
        bits = 2
        while bits < 64 and (1 << bits) < n:
            bits += 2
        self.n, self.half = n, bits // 2
        self.keys = [mix64((key + 0x51ED2701 * (r + 1)) & MASK64) for r in range(4)]

    def __call__(self, i):
        mask = (1 << self.half) - 1
        x = i
        while True:
            left, right = x >> self.half, x & mask
            for k in self.keys:
                left, right = right, left ^ (mix64(right ^ k) & mask)
            x = (left << self.half) | right
            if x < self.n:
                return x


class BatchSampler:
    """Trainer `stream` of `shards`: windows of T + 1 tokens at offset + w * T, an epoch visiting
    every w once in the order of (seed, epoch)."""

    def __init__(self, dataset, sequence_length, seed, stream=0, shards=1):
        self.data, self.t, self.seed = dataset, sequence_length, seed & MASK64
        self.stream, self.shards = stream, shards
        n, t = len(dataset.train), sequence_length
        if n < t + 1:
            raise DatasetError(f"training split has {n} tokens, fewer than one sequence ({t + 1})")
        self.windows = (n - t) // t if n >= 2 * t else 1
        self._start_epoch(0)

    def _start_epoch(self, epoch):
        self.epoch, self.taken = epoch, 0
        key = mix64(self.seed ^ mix64(epoch + 0x53574152))  # 'SWAR'
        self.order = WindowPermutation(self.windows, key)
        t = self.t
        self.offset = mix64(key) % t if len(self.data.train) >= 2 * t else 0
        self.shard_size = (self.windows - self.stream + self.shards - 1) // self.shards

    def next_start(self):
        if self.taken == self.shard_size:
            self._start_epoch(self.epoch + 1)
        position = self.stream + self.taken * self.shards
        self.taken += 1
        return self.offset + self.order(position) * self.t

    def next(self, batch):
        """`batch` training windows: (inputs, targets), each `batch` lists of T token ids."""
        rows = [self.data.train[s:s + self.t + 1] for s in (self.next_start() for _ in range(batch))]
        return [list(r[:-1]) for r in rows], [list(r[1:]) for r in rows]

    def validation_windows(self):
        n = len(self.data.validation)
        return 0 if n < self.t + 1 else (n - 1) // self.t

    def validation_batch(self, batch, index):
        """The fixed validation microbatch `index` (windows at stride T, wrapping around)."""
        windows = self.validation_windows()
        if windows == 0:
            raise DatasetError(f"validation split has {len(self.data.validation)} tokens, fewer than "
                               f"one sequence ({self.t + 1})")
        first = (index % windows) * (batch % windows) % windows
        rows = [self.data.validation[w * self.t:w * self.t + self.t + 1]
                for w in ((first + r) % windows for r in range(batch))]
        return [list(r[:-1]) for r in rows], [list(r[1:]) for r in rows]
