// Pre-tokenized corpora (`swarm tokenize`, scripts/hf_tokenize.py): a flat binary of token ids with
// a small header. Version 2 (what both write):
//
//   offset  size  field
//   0       8     magic "SWTOKENS"
//   8       4     version, 2 (little-endian u32)
//   12      4     width: bytes per id, 2 (vocabulary <= 65536) or 4 (little-endian u32)
//   16      8     vocabulary size of the tokenizer that wrote it (little-endian u64)
//   24      8     count of ids (little-endian u64)
//   32      32    the tokenizer's SHA-256: of its file's bytes (the tokenizer.json, the SentencePiece
//                 .model); all zero for the byte tokenizer
//   64      ...   the ids, little-endian, `width` bytes each
//
// Version 1 (earlier builds) has no hash: its ids start at offset 32. It is still read; only the
// vocabulary size can be checked against the job's tokenizer then.
//
// read_token_file refuses, naming the file and the field or offset: a wrong magic, version or width,
// a count that does not match the file's size, an id >= the vocabulary.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace swarm::data {

inline constexpr char kTokenFileMagic[8] = {'S', 'W', 'T', 'O', 'K', 'E', 'N', 'S'};
inline constexpr size_t kTokenFileHeaderV1 = 32;
inline constexpr size_t kTokenFileHeader = 64;  // version 2

using Sha256 = std::array<uint8_t, 32>;

struct TokenFile {
  uint32_t version = 2;
  uint64_t vocab_size = 0;
  std::optional<Sha256> tokenizer_sha256;  // absent in a version-1 file
  std::vector<uint32_t> ids;
};

// Lowercase hex of a hash (how errors and `describe()` name tokenizers).
std::string hex(const Sha256& h);

// True when the file at `path` starts with the magic (it may still be malformed).
bool is_token_file(const std::string& path);

// Throws DatasetError (text_dataset.h) naming the file.
TokenFile read_token_file(const std::string& path);

// Writes version 2 atomically (a temporary file renamed over `path`). Throws DatasetError when an id
// is >= vocab_size or the file cannot be written.
void write_token_file(const std::string& path, uint64_t vocab_size, const Sha256& tokenizer_sha256,
                      const std::vector<uint32_t>& ids);

}  // namespace swarm::data
