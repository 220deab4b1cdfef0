// A Hugging Face tokenizer.json as far as a job needs it (spec.training.tokenizer.kind huggingface):
// the vocabulary bound its token files are checked against, and byte-level decoding for
// `swarm generate`. Encoding stays with the Python `tokenizers` library (scripts/hf_tokenize.py):
// its pre-tokeniser regexes, normalisers and merges are not reimplemented here.
//
// Pure: parses bytes already read; no I/O.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace swarm::data {

struct HfVocabulary {
  // Token text by id ("" where no token has that id); an added token's text is its content, a
  // model token's is in the byte-level alphabet (GPT-2's printable stand-ins for the 256 bytes).
  std::vector<std::string> tokens;
  std::vector<bool> has_token;  // by id
  std::vector<bool> added;      // by id: an added_tokens entry, decoded as its content
  bool byte_level = false;      // the decoder is ByteLevel (alone or in a Sequence)
  // max id + 1 over model.vocab and added_tokens: the bound every id of a token file stays under,
  // as scripts/hf_tokenize.py computes it.
  int64_t size() const { return static_cast<int64_t>(tokens.size()); }
};

// Throws std::invalid_argument saying what is wrong (the caller names the file): not JSON, no
// model.vocab object or [piece, score] array, an added token without an id and content, an id
// below 0 or above 2^32 - 2.
HfVocabulary parse_hf_tokenizer(std::string_view json);

// The text of `ids`: added tokens as their content, the others' byte-level characters mapped back
// to their bytes. Throws std::invalid_argument for an id with no token, or when the decoder is not
// byte-level (only that decoding is implemented).
std::string decode_hf(const HfVocabulary& v, const std::vector<uint32_t>& ids);

}  // namespace swarm::data
