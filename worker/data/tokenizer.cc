#include "worker/data/tokenizer.h"

#include <dlfcn.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <stdexcept>

#include "common/crypto.h"
#include "worker/data/hf_vocabulary.h"

namespace swarm::data {
namespace {

namespace fs = std::filesystem;

// The C interface of libswarm_sentencepiece.so (sentencepiece_shim.cc).
struct SentencePieceLib {
  void* (*open)(const char*, char*, size_t) = nullptr;
  void (*close)(void*) = nullptr;
  int64_t (*pieces)(void*) = nullptr;
  void (*free)(void*) = nullptr;
  int (*encode)(void*, const char*, size_t, int32_t**, size_t*, char*, size_t) = nullptr;
  int (*decode)(void*, const int32_t*, size_t, char**, size_t*, char*, size_t) = nullptr;
};

std::vector<std::string> shim_candidates() {
  std::vector<std::string> out;
  if (const char* env = std::getenv("SWARM_SENTENCEPIECE_LIB"); env && *env) out.emplace_back(env);
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    out.push_back((exe.parent_path().parent_path() / "lib" / "libswarm_sentencepiece.so").string());
    out.push_back((exe.parent_path() / "libswarm_sentencepiece.so").string());
  }
  out.emplace_back(SWARM_SENTENCEPIECE_BUILD_PATH);
  out.emplace_back("libswarm_sentencepiece.so");
  return out;
}

template <class F>
void bind(void* lib, const char* name, F& fn) {
  fn = reinterpret_cast<F>(::dlsym(lib, name));
  if (!fn) throw DatasetError(std::string("tokenizer: libswarm_sentencepiece.so has no ") + name);
}

// Loaded once per process; throws DatasetError naming every place looked in.
const SentencePieceLib& sentencepiece_lib() {
  static std::once_flag once;
  static SentencePieceLib lib;
  static std::string failure;
  std::call_once(once, [] {
    std::string tried;
    for (const auto& path : shim_candidates()) {
      if (path.find('/') != std::string::npos && !fs::exists(path)) {
        tried += "\n  " + path + ": no such file";
        continue;
      }
      void* h = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND);
      if (!h) {
        tried += "\n  " + path + ": " + ::dlerror();
        continue;
      }
      try {
        bind(h, "swarm_sp_open", lib.open);
        bind(h, "swarm_sp_close", lib.close);
        bind(h, "swarm_sp_pieces", lib.pieces);
        bind(h, "swarm_sp_free", lib.free);
        bind(h, "swarm_sp_encode", lib.encode);
        bind(h, "swarm_sp_decode", lib.decode);
        return;
      } catch (const DatasetError& e) {
        tried += "\n  " + path + ": " + e.what();
      }
    }
    failure = "tokenizer: cannot load libswarm_sentencepiece.so (set SWARM_SENTENCEPIECE_LIB); tried:" + tried;
  });
  if (!failure.empty()) throw DatasetError(failure);
  return lib;
}

// The bytes of a tokenizer's file; throws DatasetError naming it (and `what` it should be).
std::string read_tokenizer_file(const std::string& path, const std::string& what) {
  std::error_code ec;
  if (!fs::is_regular_file(path, ec))
    throw DatasetError("tokenizer: " + what + " " + path + " does not exist or is not a file");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw DatasetError("tokenizer: cannot open " + what + " " + path + ": " + std::strerror(errno));
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) throw DatasetError("tokenizer: error reading " + what + " " + path);
  return bytes;
}

Sha256 sha256_of(const std::string& bytes) { return crypto::sha256(bytes.data(), bytes.size()); }

}  // namespace

struct Tokenizer::Model {
  const SentencePieceLib* lib = nullptr;
  void* handle = nullptr;
  int64_t pieces = 0;
  ~Model() {
    if (handle) lib->close(handle);
  }
};

Tokenizer Tokenizer::bytes() { return Tokenizer(); }

Tokenizer Tokenizer::sentencepiece(const std::string& model_path) {
  const Sha256 hash = sha256_of(read_tokenizer_file(model_path, "SentencePiece model"));
  const auto& lib = sentencepiece_lib();
  auto m = std::make_shared<Model>();
  m->lib = &lib;
  char err[512] = {};
  m->handle = lib.open(model_path.c_str(), err, sizeof(err));
  if (!m->handle) throw DatasetError("tokenizer: " + model_path + " is not a SentencePiece model: " + err);
  m->pieces = lib.pieces(m->handle);
  if (m->pieces < 2) throw DatasetError("tokenizer: " + model_path + " has fewer than 2 pieces");
  Tokenizer t;
  t.kind_ = TokenizerKind::SentencePiece;
  t.model_path_ = model_path;
  t.sha256_ = hash;
  t.sp_ = std::move(m);
  return t;
}

Tokenizer Tokenizer::huggingface(const std::string& tokenizer_json) {
  const std::string bytes = read_tokenizer_file(tokenizer_json, "Hugging Face tokenizer");
  Tokenizer t;
  try {
    t.hf_ = std::make_shared<const HfVocabulary>(parse_hf_tokenizer(bytes));
  } catch (const std::invalid_argument& e) {
    throw DatasetError("tokenizer: " + tokenizer_json + " (spec.training.tokenizer.file): " + e.what());
  }
  t.kind_ = TokenizerKind::HuggingFace;
  t.model_path_ = tokenizer_json;
  t.sha256_ = sha256_of(bytes);
  return t;
}

Tokenizer Tokenizer::from_spec(const TokenizerSpec& spec) {
  switch (spec.kind) {
    case TokenizerKind::SentencePiece:
      return sentencepiece(spec.model);
    case TokenizerKind::HuggingFace:
      return huggingface(spec.file);
    default:
      return bytes();
  }
}

int64_t Tokenizer::vocab_size() const { return sp_ ? sp_->pieces : hf_ ? hf_->size() : 256; }

std::string Tokenizer::describe() const {
  if (sp_) return "sentencepiece " + model_path_ + " (" + std::to_string(vocab_size()) + " pieces, sha256 " + hex(sha256_) + ")";
  if (hf_) return "huggingface " + model_path_ + " (" + std::to_string(vocab_size()) + " tokens, sha256 " + hex(sha256_) + ")";
  return "bytes";
}

void Tokenizer::encode(std::string_view text, std::vector<uint32_t>& out) const {
  if (hf_)
    throw DatasetError("tokenizer " + model_path_ +
                       ": a Hugging Face tokenizer's text is pre-tokenised, not encoded here: write token files with "
                       "scripts/hf_tokenize.py --tokenizer " + model_path_ + " TEXT... --out FILE");
  if (!sp_) {
    out.reserve(out.size() + text.size());
    for (unsigned char c : text) out.push_back(c);
    return;
  }
  int32_t* ids = nullptr;
  size_t n = 0;
  char err[512] = {};
  if (sp_->lib->encode(sp_->handle, text.data(), text.size(), &ids, &n, err, sizeof(err)) != 0)
    throw DatasetError("tokenizer " + model_path_ + ": " + err);
  out.reserve(out.size() + n);
  for (size_t i = 0; i < n; ++i) out.push_back(static_cast<uint32_t>(ids[i]));
  sp_->lib->free(ids);
}

std::vector<uint32_t> Tokenizer::encode(std::string_view text) const {
  std::vector<uint32_t> out;
  encode(text, out);
  return out;
}

std::string Tokenizer::decode(const std::vector<uint32_t>& ids) const {
  const auto n = static_cast<uint32_t>(vocab_size());
  for (size_t i = 0; i < ids.size(); ++i)
    if (ids[i] >= n)
      throw std::invalid_argument("tokenizer " + describe() + ": id " + std::to_string(ids[i]) + " at " +
                                  std::to_string(i) + " is outside the vocabulary (" + std::to_string(n) + ")");
  if (hf_) {
    try {
      return decode_hf(*hf_, ids);
    } catch (const std::invalid_argument& e) {
      throw DatasetError("tokenizer " + model_path_ + ": cannot decode: " + e.what());
    }
  }
  if (!sp_) return std::string(ids.begin(), ids.end());
  const std::vector<int32_t> v(ids.begin(), ids.end());
  char* text = nullptr;
  size_t len = 0;
  char err[512] = {};
  if (sp_->lib->decode(sp_->handle, v.data(), v.size(), &text, &len, err, sizeof(err)) != 0)
    throw DatasetError("tokenizer " + model_path_ + ": " + err);
  std::string out(text, len);
  sp_->lib->free(text);
  return out;
}

void Tokenizer::check_model_vocab(int64_t model_vocab_size) const {
  if (model_vocab_size < vocab_size())
    throw std::invalid_argument("spec.model.vocabSize: " + std::to_string(model_vocab_size) +
                                " is smaller than the vocabulary of the tokenizer " + describe() + " (" +
                                std::to_string(vocab_size()) + "): set it to at least that");
}

TextDataset load_dataset(const JobSpec& spec) {
  const Tokenizer tokenizer = Tokenizer::from_spec(spec.training.tokenizer);
  tokenizer.check_model_vocab(spec.model.vocab_size);
  DatasetOptions o;
  o.validation_fraction = spec.training.dataset.validation_fraction;
  o.format = spec.training.dataset.format;
  o.text_field = spec.training.dataset.text_field;
  return TextDataset::load(spec.training.dataset.path, o, &tokenizer);
}

}  // namespace swarm::data
