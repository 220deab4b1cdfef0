#!/usr/bin/env python3
"""Pre-tokenise text with a Hugging Face tokenizer.json into a swarm token file.

A job whose tokenizer is a Hugging Face tokenizer.json (spec.training.tokenizer: {kind: huggingface,
file: .../tokenizer.json}) trains on token files: the swarm does not reimplement the tokenizer's
normalisers, pre-tokeniser regexes and merges, so its text is encoded here, by the `tokenizers`
library itself, once. The file this writes is what `swarm tokenize` writes (worker/data/token_file.h,
version 2): a 64-byte header with the tokenizer's vocabulary size and the SHA-256 of the
tokenizer.json's bytes, then the ids. The job reads it as any token file
(spec.training.dataset.path, format auto or tokens) and refuses it, naming both hashes, when its own
tokenizer.json is another one.

    python scripts/hf_tokenize.py --tokenizer DIR/tokenizer.json INPUT... --out corpus.tok
    python scripts/hf_tokenize.py --tokenizer DIR/tokenizer.json --decode corpus.tok > corpus.txt
    python scripts/hf_tokenize.py --tokenizer DIR/tokenizer.json --encode "Once upon"   # 10,3,7: for
                                                     # `swarm generate --prompt-ids`

INPUT: text or JSON Lines files, or directories, read as spec.training.dataset reads them
(worker/data/text_dataset.h): directories recursively in path order, hidden entries, fortune's
strfile indexes (X.dat beside X), empty and binary files skipped, a file reached twice through a
symlink read once; *.jsonl / *.ndjson as one JSON object a line, its --text-field a document
followed by a newline. Text must be UTF-8 (the tokenizer takes characters): a file that is not is
refused naming the byte offset. The text is encoded without the tokenizer's special tokens (no BOS
or EOS added), in pieces of about 1 MiB cut after a newline; decoding the ids gives the text back.
"""

import argparse
import array
import hashlib
import json
import os
import struct
import sys
import time

MAGIC = b"SWTOKENS"
VERSION = 2
SNIFF_BYTES = 8192
CHUNK = 1 << 20


class InputError(Exception):
    pass


def tokenizer_identity(path):
    """(the tokenizers.Tokenizer, its vocabulary size as the swarm counts it, SHA-256 of the file)."""
    try:
        from tokenizers import Tokenizer
    except ImportError as e:
        raise InputError(f"the Python package `tokenizers` is missing ({e}): use the venv of "
                         "scripts/install-python.sh") from e
    try:
        with open(path, "rb") as f:
            raw = f.read()
        tok = Tokenizer.from_str(raw.decode("utf-8"))
    except Exception as e:  # OSError, UnicodeDecodeError, and tokenizers raises plain Exception
        raise InputError(f"--tokenizer {path}: cannot load a Hugging Face tokenizer.json: {e}") from e
    # max id + 1 over the model's vocabulary and the added tokens: what worker/data/hf_vocabulary.h
    # computes from the same file.
    vocab = max(tok.get_vocab(with_added_tokens=True).values()) + 1
    return tok, vocab, hashlib.sha256(raw).digest()


def _hidden(name):
    return name.startswith(".")


def _walk(root):
    """(path, is_symlink) of the regular files under root; hidden entries skipped, symlinked
    directories not followed."""
    out = []
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        dirnames[:] = [d for d in dirnames if not _hidden(d)]
        for name in filenames:
            if _hidden(name):
                continue
            p = os.path.join(dirpath, name)
            if os.path.islink(p):
                if os.path.isfile(p):  # a broken link is skipped
                    out.append((p, True))
            elif os.path.isfile(p):
                out.append((p, False))
    # one file per real path: real files before symlinks, then the smaller path
    out.sort(key=lambda c: (c[1], c[0]))
    by_real = {}
    for p, _ in out:
        by_real.setdefault(os.path.realpath(p), p)
    return sorted(by_real.values())


def _strfile_index(p):
    return p.endswith(".dat") and os.path.isfile(p[:-4])


def _text_of(p, raw):
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise InputError(f"{p}: not UTF-8 at byte {e.start}: the tokenizer reads text") from e


def _read_jsonl(p, raw, field):
    docs = []
    for number, line in enumerate(_text_of(p, raw).split("\n"), 1):
        if not line.strip(" \t\r"):
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as e:
            raise InputError(f"{p}: line {number}: not JSON ({e})") from e
        if not isinstance(obj, dict) or not isinstance(obj.get(field), str):
            raise InputError(f"{p}: line {number}: needs a string field \"{field}\" (--text-field)")
        docs.append(obj[field] + "\n")
    return "".join(docs)


def read_inputs(inputs, text_field):
    """[(path, text)] in the order the swarm would read them."""
    out = []
    for given in inputs:
        if os.path.isfile(given):
            paths, alone = [given], True
        elif os.path.isdir(given):
            paths, alone = [p for p in _walk(given) if not _strfile_index(p)], False
        else:
            raise InputError(f"{given}: no such file or directory")
        for p in paths:
            with open(p, "rb") as f:
                raw = f.read()
            if raw.startswith(MAGIC):
                raise InputError(f"{p}: a token file already; this reads text and JSON Lines")
            if p.endswith((".jsonl", ".ndjson")):
                text = _read_jsonl(p, raw, text_field)
            elif b"\0" in raw[:SNIFF_BYTES]:
                if alone:
                    raise InputError(f"{p}: binary, not text")
                continue
            else:
                text = _text_of(p, raw)
            if text:
                out.append((p, text))
    if not out:
        raise InputError("no text found in " + ", ".join(inputs))
    return out


def pieces(text):
    """The text in pieces of about CHUNK characters, each cut after a newline where there is one."""
    while text:
        n = min(len(text), CHUNK)
        if n < len(text):
            nl = text.rfind("\n", 0, n)
            if nl > 0:
                n = nl + 1
        yield text[:n]
        text = text[n:]


def encode(tok, texts):
    ids = array.array("I")
    batch = [p for t in texts for p in pieces(t)]
    for enc in tok.encode_batch(batch, add_special_tokens=False):
        ids.extend(enc.ids)
    return ids


def write_token_file(path, vocab, sha256, ids):
    """worker/data/token_file.h, version 2, written to a temporary file renamed over `path`."""
    if not 2 <= vocab <= 1 << 32:
        raise InputError(f"vocabulary size {vocab} does not fit a token file")
    width = 2 if vocab <= 65536 else 4
    for i, v in enumerate(ids):
        if v >= vocab:
            raise InputError(f"id {v} at index {i} is >= the vocabulary size {vocab}")
    body = array.array("H" if width == 2 else "I", ids)
    if sys.byteorder != "little":
        body.byteswap()
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<8sIIQQ", MAGIC, VERSION, width, vocab, len(ids)))
        f.write(sha256)
        f.write(body.tobytes())
    os.replace(tmp, path)


def read_token_file(path):
    """(vocab, sha256 or None for version 1, ids) of a token file."""
    with open(path, "rb") as f:
        raw = f.read()
    if len(raw) < 32 or raw[:8] != MAGIC:
        raise InputError(f"{path}: not a token file")
    version, width, vocab, count = struct.unpack_from("<IIQQ", raw, 8)
    if version not in (1, 2) or width not in (2, 4):
        raise InputError(f"{path}: version {version}, width {width}: not a token file this reads")
    header = 32 if version == 1 else 64
    if len(raw) != header + width * count:
        raise InputError(f"{path}: {count} ids of {width} bytes do not match the file's size")
    ids = array.array("H" if width == 2 else "I")
    ids.frombytes(raw[header:])
    if sys.byteorder != "little":
        ids.byteswap()
    return vocab, (raw[32:64] if version == 2 else None), ids


def decode(tok, sha256, path):
    vocab, recorded, ids = read_token_file(path)
    if recorded is not None and recorded != sha256:
        raise InputError(f"{path}: written by the tokenizer with SHA-256 {recorded.hex()}, "
                         f"not this one ({sha256.hex()})")
    return tok.decode(list(ids), skip_special_tokens=False)


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("inputs", nargs="*", help="text or JSON Lines files, or directories")
    ap.add_argument("--tokenizer", required=True, help="the tokenizer.json (the job's spec.training.tokenizer.file)")
    ap.add_argument("--out", help="the token file to write")
    ap.add_argument("--text-field", default="text", help="the JSON Lines field holding the text (default: text)")
    ap.add_argument("--decode", metavar="TOKENS", help="print the text of this token file instead")
    ap.add_argument("--encode", metavar="TEXT", help="print the ids of TEXT, comma-separated, instead")
    a = ap.parse_args(argv)
    try:
        tok, vocab, sha256 = tokenizer_identity(a.tokenizer)
        if a.decode or a.encode is not None:
            if a.inputs or a.out or (a.decode and a.encode is not None):
                ap.error("--decode and --encode take no INPUT or --out, and not each other")
            if a.decode:
                sys.stdout.write(decode(tok, sha256, a.decode))
            else:
                print(",".join(str(i) for i in tok.encode(a.encode, add_special_tokens=False).ids))
            return 0
        if not a.inputs or not a.out:
            ap.error("INPUT... and --out are required")
        started = time.monotonic()
        texts = read_inputs(a.inputs, a.text_field)
        ids = encode(tok, [t for _, t in texts])
        write_token_file(a.out, vocab, sha256, ids)
        chars = sum(len(t) for _, t in texts)
        seconds = time.monotonic() - started
        print(f"hf_tokenize: {len(texts)} files, {chars / 1e6:.1f} M characters -> {len(ids)} tokens "
              f"({a.tokenizer}: vocabulary {vocab}, sha256 {sha256.hex()}) in {seconds:.2f} s -> {a.out}",
              file=sys.stderr)
        return 0
    except InputError as e:
        print(f"hf_tokenize: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
