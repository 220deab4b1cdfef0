#!/usr/bin/env python3
"""A small byte-level BPE tokenizer.json trained with the `tokenizers` library on a text file:
tests/data/hf_tokenize_test.cc's stand-in for a model's tokenizer (no hub here).

    make_hf_tokenizer.py TEXT_FILE VOCAB_SIZE OUT.json
"""

import sys

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers


def main(text_file, vocab_size, out):
    with open(text_file, encoding="utf-8") as f:
        text = f.read()
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=int(vocab_size), special_tokens=["<|endoftext|>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator([text[i:i + 4096] for i in range(0, len(text), 4096)], trainer)
    tok.save(out)
    print(f"{out}: {tok.get_vocab_size(with_added_tokens=True)} tokens")


if __name__ == "__main__":
    main(*sys.argv[1:])
