#include "worker/data/text_dataset.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <system_error>

#include <nlohmann/json.hpp>

#include "worker/data/token_file.h"
#include "worker/data/tokenizer.h"

namespace swarm::data {
namespace {

namespace fs = std::filesystem;

constexpr size_t kSniffBytes = 8192;  // a NUL byte in this prefix marks a binary file

struct Candidate {
  fs::path path;
  bool symlink = false;
};

bool hidden(const fs::path& p) {
  const std::string name = p.filename().string();
  return !name.empty() && name[0] == '.';
}

// fortune's strfile index: `X.dat` next to the text file `X`.
bool strfile_index(const fs::path& p) {
  if (p.extension() != ".dat") return false;
  fs::path text = p;
  text.replace_extension();
  std::error_code ec;
  return fs::is_regular_file(text, ec);
}

// Reads `p`; returns false (and leaves `out` unspecified) for a binary file.
bool read_text(const fs::path& p, std::string& out) {
  std::ifstream in(p, std::ios::binary);
  if (!in) throw DatasetError("dataset: cannot open " + p.string() + ": " + std::strerror(errno));
  out.clear();
  out.resize(kSniffBytes);
  in.read(out.data(), static_cast<std::streamsize>(out.size()));
  out.resize(static_cast<size_t>(in.gcount()));
  if (out.find('\0') != std::string::npos) return false;
  if (in) {
    std::string rest((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    out += rest;
  }
  if (in.bad()) throw DatasetError("dataset: error reading " + p.string());
  return true;
}

std::vector<Candidate> walk(const fs::path& root) {
  std::vector<Candidate> out;
  std::error_code ec;
  fs::recursive_directory_iterator it(root, fs::directory_options::skip_permission_denied, ec);
  if (ec) throw DatasetError("dataset: cannot list " + root.string() + ": " + ec.message());
  const fs::recursive_directory_iterator end;
  for (; it != end; it.increment(ec)) {
    if (ec) break;
    const fs::path& p = it->path();
    std::error_code sec;
    const fs::file_status own = it->symlink_status(sec);
    if (hidden(p)) {
      if (fs::is_directory(own)) it.disable_recursion_pending();
      continue;
    }
    if (fs::is_symlink(own)) {
      if (fs::is_regular_file(fs::status(p, sec))) out.push_back({p, true});  // broken: skipped
    } else if (fs::is_regular_file(own)) {
      out.push_back({p, false});
    }
  }
  if (ec) throw DatasetError("dataset: cannot list under " + root.string() + ": " + ec.message());
  return out;
}

// One file per canonical path: real files win over symlinks, then the smaller path.
std::vector<fs::path> dedupe(std::vector<Candidate> candidates) {
  std::sort(candidates.begin(), candidates.end(), [](const Candidate& a, const Candidate& b) {
    if (a.symlink != b.symlink) return !a.symlink;
    return a.path < b.path;
  });
  std::map<fs::path, fs::path> by_canonical;
  for (const auto& c : candidates) {
    std::error_code ec;
    const fs::path canon = fs::canonical(c.path, ec);
    by_canonical.emplace(ec ? c.path : canon, c.path);
  }
  std::vector<fs::path> out;
  out.reserve(by_canonical.size());
  for (const auto& kv : by_canonical) out.push_back(kv.second);
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

namespace {

// One file's contribution: text (bytes), or ids (a token file).
struct Part {
  std::string path;
  bool ids = false;
  uint64_t vocab = 0;  // a token file's vocabulary
  std::optional<Sha256> tokenizer_sha256;  // and its tokenizer's identity (absent in version 1)
  std::string text;
  std::vector<uint32_t> tokens;
  size_t size() const { return ids ? tokens.size() : text.size(); }
};

std::string a_type(const nlohmann::json& j) {
  const std::string t = j.type_name();
  return (t[0] == 'a' || t[0] == 'o' ? "an " : "a ") + t;
}

bool jsonl_name(const fs::path& p) { return p.extension() == ".jsonl" || p.extension() == ".ndjson"; }

// The documents of a JSON Lines file, each `field` followed by a newline.
std::string read_jsonl(const fs::path& p, const std::string& field) {
  std::ifstream in(p, std::ios::binary);
  if (!in) throw DatasetError("dataset: cannot open " + p.string() + ": " + std::strerror(errno));
  std::string out, line;
  for (int64_t number = 1; std::getline(in, line); ++number) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::string where = "dataset " + p.string() + ": line " + std::to_string(number) + ": ";
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(line);
    } catch (const nlohmann::json::parse_error& e) {
      throw DatasetError(where + "not JSON (" + e.what() + ")");
    }
    if (!j.is_object()) throw DatasetError(where + "must be a JSON object, got " + a_type(j));
    const auto it = j.find(field);
    if (it == j.end() || !it->is_string())
      throw DatasetError(where + "needs a string field \"" + field + "\" (spec.training.dataset.textField), got " +
                         (it == j.end() ? std::string("none") : a_type(*it)));
    out += it->get_ref<const std::string&>();
    out += '\n';
  }
  if (in.bad()) throw DatasetError("dataset: error reading " + p.string());
  return out;
}

// Reads `p` as `format` says; false for a file to skip (binary or empty). `alone`: named by the
// dataset path itself, where a binary file is an error rather than skipped.
bool read_part(const fs::path& p, const DatasetOptions& o, bool alone, Part& part) {
  part = Part();
  part.path = p.string();
  DatasetFormat f = o.format;
  if (f == DatasetFormat::Auto) {
    f = is_token_file(p.string()) ? DatasetFormat::Tokens : jsonl_name(p) ? DatasetFormat::Jsonl : DatasetFormat::Text;
  }
  switch (f) {
    case DatasetFormat::Tokens: {
      if (!is_token_file(p.string()))
        throw DatasetError("dataset " + p.string() + ": not a token file (spec.training.dataset.format is tokens)");
      TokenFile t = read_token_file(p.string());
      part.ids = true;
      part.tokens = std::move(t.ids);
      part.vocab = t.vocab_size;  // checked against the tokenizer by load()
      part.tokenizer_sha256 = t.tokenizer_sha256;
      break;
    }
    case DatasetFormat::Jsonl:
      part.text = read_jsonl(p, o.text_field);
      break;
    default:
      if (!read_text(p, part.text)) {
        if (alone) throw DatasetError("dataset file is binary, not text: " + p.string());
        return false;
      }
  }
  return part.size() > 0;
}

// A part must be what the job's tokenizer reads: text it can encode, or a token file it wrote
// (the same SHA-256 where the file records one, the same vocabulary).
void check_written_by(const Part& pt, const Tokenizer& t) {
  const std::string job = "spec.training.tokenizer (" + t.describe() + ")";
  if (!pt.ids) {
    if (t.kind() == TokenizerKind::HuggingFace)
      throw DatasetError("dataset " + pt.path + ": is text, but " + job +
                         " reads token files only: pre-tokenise it with scripts/hf_tokenize.py --tokenizer FILE " +
                         pt.path + " --out FILE.tok");
    return;
  }
  if (pt.tokenizer_sha256 && *pt.tokenizer_sha256 != t.sha256())
    throw DatasetError("dataset " + pt.path + ": written by the tokenizer with SHA-256 " + hex(*pt.tokenizer_sha256) +
                       ", but " + job + " has SHA-256 " + hex(t.sha256()) + ": tokenize it again with the job's");
  if (!pt.tokenizer_sha256 && t.kind() == TokenizerKind::HuggingFace)
    throw DatasetError("dataset " + pt.path + ": a version-1 token file records no tokenizer hash, and " + job +
                       " needs one: write it again with scripts/hf_tokenize.py");
  if (pt.vocab != static_cast<uint64_t>(t.vocab_size()))
    throw DatasetError("dataset " + pt.path + ": written with a vocabulary of " + std::to_string(pt.vocab) + ", but " +
                       job + " has " + std::to_string(t.vocab_size()));
}

}  // namespace

TextDataset TextDataset::load(const std::string& path, const DatasetOptions& o, const Tokenizer* tokenizer) {
  if (path.empty()) throw DatasetError("dataset: empty path");
  const double fraction = o.validation_fraction;
  if (!(fraction >= 0 && fraction < 1)) {
    throw DatasetError("dataset " + path + ": validation fraction " + std::to_string(fraction) + " is not in [0, 1)");
  }
  const fs::path root(path);
  std::error_code ec;
  const fs::file_status st = fs::status(root, ec);
  if (!fs::exists(st)) throw DatasetError("dataset path does not exist: " + path);
  std::vector<fs::path> paths;
  const bool single_file = fs::is_regular_file(st);
  if (single_file) {
    paths.push_back(root);
  } else if (fs::is_directory(st)) {
    paths = dedupe(walk(root));
  } else {
    throw DatasetError("dataset path is neither a file nor a directory: " + path);
  }

  std::vector<Part> parts;
  Part part;
  for (const auto& p : paths) {
    if (!single_file && strfile_index(p)) continue;
    if (read_part(p, o, single_file, part)) parts.push_back(std::move(part));
  }
  if (parts.empty()) throw DatasetError("dataset " + path + ": no data found (text, JSON Lines or token files)");

  auto data = std::make_shared<Data>();
  data->path = path;
  data->tokenized = tokenizer != nullptr && tokenizer->kind() != TokenizerKind::Bytes;
  const Tokenizer bytes = Tokenizer::bytes();
  const Tokenizer& encoder = tokenizer ? *tokenizer : bytes;
  for (const auto& pt : parts) {
    data->files.push_back(pt.path);
    check_written_by(pt, encoder);
    data->tokenized = data->tokenized || pt.ids;
  }
  size_t before = 0;
  const auto cut = [&](size_t n) { return static_cast<size_t>(std::floor(static_cast<double>(n) * fraction)); };
  for (const auto& pt : parts) {
    const size_t n = pt.size();
    const size_t val = std::min(n, cut(before + n) - cut(before));
    before += n;
    if (pt.ids) {
      data->train_ids.insert(data->train_ids.end(), pt.tokens.begin(), pt.tokens.end() - static_cast<std::ptrdiff_t>(val));
      data->validation_ids.insert(data->validation_ids.end(), pt.tokens.end() - static_cast<std::ptrdiff_t>(val),
                                  pt.tokens.end());
      continue;
    }
    data->train_bytes += n - val;
    data->validation_bytes += val;
    if (data->tokenized) {
      encoder.encode(std::string_view(pt.text).substr(0, n - val), data->train_ids);
      encoder.encode(std::string_view(pt.text).substr(n - val), data->validation_ids);
    } else {
      data->train.append(pt.text, 0, n - val);
      data->validation.append(pt.text, n - val, val);
    }
  }
  return TextDataset(std::move(data));
}

size_t TextDataset::train_bytes() const { return data_->train_bytes; }
size_t TextDataset::validation_bytes() const { return data_->validation_bytes; }
std::vector<std::string> TextDataset::files() const { return data_->files; }
const std::string& TextDataset::path() const { return data_->path; }
std::string_view TextDataset::train() const { return data_->train; }
std::string_view TextDataset::validation() const { return data_->validation; }
size_t TextDataset::train_tokens() const { return data_->train_tokens(); }
size_t TextDataset::validation_tokens() const { return data_->validation_tokens(); }

}  // namespace swarm::data
