// libswarm_sentencepiece.so: Debian's libsentencepiece behind a small C interface.
//
// libsentencepiece.so.0 carries its own copy of protobuf-lite with its symbols exported; loaded
// into a process beside libtorch's libprotobuf.so.32, one copy's symbols interpose on the other's
// and the process crashes while starting (protobuf's static initialisers). tokenizer.cc therefore
// dlopens this library with RTLD_LOCAL | RTLD_DEEPBIND: SentencePiece binds to its own protobuf,
// nothing of it enters the process's global scope, and only the functions below are used.
#include <sentencepiece_processor.h>

#include <cstdint>
#include <cstdlib>
#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#define SWARM_SP_EXPORT extern "C" __attribute__((visibility("default")))

namespace {

void set_error(char* err, size_t err_len, const std::string& what) {
  if (err == nullptr || err_len == 0) return;
  std::strncpy(err, what.c_str(), err_len - 1);
  err[err_len - 1] = '\0';
}

// A malloc'd copy of `n` values for the caller (swarm_sp_free): 0, or -1 and the error.
template <class T>
int copy_out(const T* values, size_t n, T** out, size_t* out_n, char* err, size_t err_len) {
  *out = static_cast<T*>(std::malloc(std::max<size_t>(1, n) * sizeof(T)));
  if (*out == nullptr) {
    set_error(err, err_len, "out of memory");
    return -1;
  }
  if (n > 0) std::memcpy(*out, values, n * sizeof(T));
  *out_n = n;
  return 0;
}

sentencepiece::SentencePieceProcessor* sp(void* h) { return static_cast<sentencepiece::SentencePieceProcessor*>(h); }

}  // namespace

SWARM_SP_EXPORT void* swarm_sp_open(const char* path, char* err, size_t err_len) {
  auto* p = new sentencepiece::SentencePieceProcessor();
  const auto status = p->Load(path);
  if (!status.ok()) {
    set_error(err, err_len, status.ToString());
    delete p;
    return nullptr;
  }
  return p;
}

SWARM_SP_EXPORT void swarm_sp_close(void* h) { delete sp(h); }

SWARM_SP_EXPORT int64_t swarm_sp_pieces(void* h) { return sp(h)->GetPieceSize(); }

SWARM_SP_EXPORT void swarm_sp_free(void* buffer) { std::free(buffer); }

// 0 and *ids (malloc'd, swarm_sp_free) on success; -1 and the error otherwise.
SWARM_SP_EXPORT int swarm_sp_encode(void* h, const char* text, size_t len, int32_t** ids, size_t* n, char* err,
                                    size_t err_len) {
  std::vector<int> out;
  const auto status = sp(h)->Encode(std::string_view(text, len), &out);
  if (!status.ok()) {
    set_error(err, err_len, status.ToString());
    return -1;
  }
  const std::vector<int32_t> ids32(out.begin(), out.end());
  return copy_out(ids32.data(), ids32.size(), ids, n, err, err_len);
}

SWARM_SP_EXPORT int swarm_sp_decode(void* h, const int32_t* ids, size_t n, char** text, size_t* len, char* err,
                                    size_t err_len) {
  const std::vector<int> in(ids, ids + n);
  std::string out;
  const auto status = sp(h)->Decode(in, &out);
  if (!status.ok()) {
    set_error(err, err_len, status.ToString());
    return -1;
  }
  return copy_out(out.data(), out.size(), text, len, err, err_len);
}
