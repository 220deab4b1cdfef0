#include "worker/data/hf_vocabulary.h"

#include <array>
#include <stdexcept>

#include <nlohmann/json.hpp>

namespace swarm::data {
namespace {

using nlohmann::json;

constexpr int64_t kMaxId = 0xfffffffeLL;  // ids are stored as u32 in token files

// The byte-level alphabet (GPT-2's): the printable bytes ('!'..'~', 0xA1..0xAC, 0xAE..0xFF) stand
// for themselves, every other byte b for the code point 256 + (its rank among those others).
// Inverse: code point -> byte, -1 where none.
const std::array<int, 512>& byte_of_codepoint() {
  static const std::array<int, 512> table = [] {
    std::array<int, 512> t{};
    t.fill(-1);
    int next = 256;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      t[static_cast<size_t>(printable ? b : next++)] = b;
    }
    return t;
  }();
  return table;
}

// Appends the bytes a byte-level token's text stands for. A character outside the alphabet (it
// cannot come from a byte-level model) is copied as it is.
void append_byte_level(const std::string& token, std::string& out) {
  const auto& table = byte_of_codepoint();
  for (size_t i = 0; i < token.size();) {
    const auto c = static_cast<unsigned char>(token[i]);
    const size_t n = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xe ? 3 : (c >> 3) == 0x1e ? 4 : 1;
    uint32_t cp = n == 1 ? c : n == 2 ? (c & 0x1fu) : n == 3 ? (c & 0x0fu) : (c & 0x07u);
    bool ok = i + n <= token.size();
    for (size_t k = 1; ok && k < n; ++k) {
      const auto cc = static_cast<unsigned char>(token[i + k]);
      ok = (cc >> 6) == 0x2;
      cp = (cp << 6) | (cc & 0x3fu);
    }
    if (ok && cp < table.size() && table[cp] >= 0) {
      out.push_back(static_cast<char>(table[cp]));
    } else {
      out.append(token, i, ok ? n : 1);
    }
    i += ok ? n : 1;
  }
}

void put(HfVocabulary& v, int64_t id, const std::string& text, bool added, const std::string& where) {
  if (id < 0 || id > kMaxId)
    throw std::invalid_argument(where + ": id " + std::to_string(id) + " is outside [0, " + std::to_string(kMaxId) + "]");
  const auto i = static_cast<size_t>(id);
  if (i >= v.tokens.size()) {
    v.tokens.resize(i + 1);
    v.has_token.resize(i + 1, false);
    v.added.resize(i + 1, false);
  }
  v.tokens[i] = text;
  v.has_token[i] = true;
  v.added[i] = added;
}

bool is_byte_level(const json& decoder) {
  if (!decoder.is_object()) return false;
  const std::string type = decoder.value("type", "");
  if (type == "ByteLevel") return true;
  if (type != "Sequence" || !decoder.contains("decoders") || !decoder["decoders"].is_array()) return false;
  for (const auto& d : decoder["decoders"])
    if (is_byte_level(d)) return true;
  return false;
}

}  // namespace

HfVocabulary parse_hf_tokenizer(std::string_view text) {
  json j;
  try {
    j = json::parse(text.begin(), text.end());
  } catch (const json::parse_error& e) {
    throw std::invalid_argument(std::string("not JSON (") + e.what() + ")");
  }
  if (!j.is_object() || !j.contains("model") || !j["model"].is_object() || !j["model"].contains("vocab"))
    throw std::invalid_argument("no model.vocab: not a Hugging Face tokenizer.json");
  HfVocabulary v;
  const json& vocab = j["model"]["vocab"];
  if (vocab.is_object()) {  // BPE, WordPiece, WordLevel: {"token": id}
    for (const auto& [token, id] : vocab.items()) {
      if (!id.is_number_integer()) throw std::invalid_argument("model.vocab[\"" + token + "\"]: the id is not an integer");
      put(v, id.get<int64_t>(), token, false, "model.vocab[\"" + token + "\"]");
    }
  } else if (vocab.is_array()) {  // Unigram: [[piece, score], ...], the id is the position
    for (size_t i = 0; i < vocab.size(); ++i) {
      if (!vocab[i].is_array() || vocab[i].empty() || !vocab[i][0].is_string())
        throw std::invalid_argument("model.vocab[" + std::to_string(i) + "]: not a [piece, score] pair");
      put(v, static_cast<int64_t>(i), vocab[i][0].get<std::string>(), false, "model.vocab");
    }
  } else {
    throw std::invalid_argument("model.vocab is neither an object nor an array");
  }
  if (j.contains("added_tokens") && !j["added_tokens"].is_null()) {
    const json& added = j["added_tokens"];
    if (!added.is_array()) throw std::invalid_argument("added_tokens is not an array");
    for (size_t i = 0; i < added.size(); ++i) {
      const std::string where = "added_tokens[" + std::to_string(i) + "]";
      const json& a = added[i];
      if (!a.is_object() || !a.contains("id") || !a["id"].is_number_integer() || !a.contains("content") ||
          !a["content"].is_string())
        throw std::invalid_argument(where + ": needs an integer id and a string content");
      put(v, a["id"].get<int64_t>(), a["content"].get<std::string>(), true, where);
    }
  }
  if (v.tokens.size() < 2) throw std::invalid_argument("fewer than 2 tokens");
  v.byte_level = j.contains("decoder") && is_byte_level(j["decoder"]);
  return v;
}

std::string decode_hf(const HfVocabulary& v, const std::vector<uint32_t>& ids) {
  if (!v.byte_level) throw std::invalid_argument("its decoder is not ByteLevel: only byte-level decoding is implemented");
  std::string out;
  for (size_t i = 0; i < ids.size(); ++i) {
    const size_t id = ids[i];
    if (id >= v.tokens.size() || !v.has_token[id])
      throw std::invalid_argument("id " + std::to_string(id) + " at " + std::to_string(i) + " has no token");
    if (v.added[id]) {
      out += v.tokens[id];
    } else {
      append_byte_level(v.tokens[id], out);
    }
  }
  return out;
}

}  // namespace swarm::data
