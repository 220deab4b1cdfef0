// Pre-tokenized corpora (`swarm tokenize`): a flat binary of token ids with a small header.
//
//   offset  size  field
//   0       8     magic "SWTOKENS"
//   8       4     version, 1 (little-endian u32)
//   12      4     width: bytes per id, 2 (vocabulary <= 65536) or 4 (little-endian u32)
//   16      8     vocabulary size of the tokenizer that wrote it (little-endian u64)
//   24      8     count of ids (little-endian u64)
//   32      ...   the ids, little-endian, `width` bytes each
//
// read_token_file refuses, naming the file and the field or offset: a wrong magic, version or width,
// a count that does not match the file's size, an id >= the vocabulary.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace swarm::data {

inline constexpr char kTokenFileMagic[8] = {'S', 'W', 'T', 'O', 'K', 'E', 'N', 'S'};
inline constexpr size_t kTokenFileHeader = 32;

struct TokenFile {
  uint64_t vocab_size = 0;
  std::vector<uint32_t> ids;
};

// True when the file at `path` starts with the magic (it may still be malformed).
bool is_token_file(const std::string& path);

// Throws DatasetError (text_dataset.h) naming the file.
TokenFile read_token_file(const std::string& path);

// Writes atomically (a temporary file renamed over `path`). Throws DatasetError when an id is
// >= vocab_size or the file cannot be written.
void write_token_file(const std::string& path, uint64_t vocab_size, const std::vector<uint32_t>& ids);

}  // namespace swarm::data
