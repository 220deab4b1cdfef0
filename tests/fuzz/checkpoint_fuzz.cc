// Fuzz target: a stage's checkpoint restore (worker/checkpoint/checkpoint.h): list_checkpoints finds
// the files of a stage folder by name, open_checkpoint reads and authenticates one, load_state
// decodes it. The input is a file name line, then a flag byte and the state's bytes
// (state_fixture.h); with bit 1 of the flag the target appends a valid authentication trailer for
// the name's step, so mutated states also get past the trailer into load_state. The target writes
// that one file into a fresh stage folder and restores it as a peer does. Documented refusals:
// std::runtime_error. A listed checkpoint must have a step >= 0 (write_checkpoint writes no
// other).
#include <unistd.h>

#include <cstddef>
#include <cstdlib>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>

#include "tests/fuzz/fuzz_util.h"
#include "tests/fuzz/state_fixture.h"
#include "worker/checkpoint/checkpoint.h"

namespace fs = std::filesystem;
using namespace swarm;

namespace {

constexpr int kStage = 0;

// A folder of this process, removed at exit. The name is never destroyed: the exit handler may
// run after the static objects are gone.
const std::string& checkpoint_root() {
  static const std::string* root = [] {
    const char* tmp = std::getenv("TMPDIR");
    const fs::path base = tmp && *tmp ? tmp : "/tmp";
    auto* p = new std::string((base / ("swarm-fuzz-checkpoint." + std::to_string(::getpid()))).string());
    std::atexit([] {
      std::error_code ec;
      fs::remove_all(checkpoint_root(), ec);
    });
    return p;
  }();
  return *root;
}

// A name the file system can hold in one folder; anything else stands for a well-formed name.
std::string file_name(std::string_view line) {
  bool ok = !line.empty() && line.size() <= 200 && line != "." && line != "..";
  for (char c : line) ok = ok && c != '/' && c != '\0';
  return ok ? std::string(line) : "step-000000001.ckpt";
}

const std::string& key() {
  static const std::string* k = new std::string(runtime::checkpoint_key(fuzz::kSecret));
  return *k;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view input(reinterpret_cast<const char*>(data), size);
  size_t eol = input.find('\n');
  if (eol == std::string_view::npos) return 0;
  const fs::path stage_dir = fs::path(checkpoint_root()) / ("stage-" + std::to_string(kStage));
  fs::remove_all(stage_dir);
  fs::create_directories(stage_dir);
  const std::string name = file_name(input.substr(0, eol));
  const std::string blob = fuzz::state_blob(data + eol + 1, size - eol - 1);
  const bool sign = size > eol + 1 && (data[eol + 1] & 2);
  long long named_step = 0;
  if (sign && std::sscanf(name.c_str(), "step-%lld.ckpt", &named_step) == 1 && named_step >= 0) {
    // The trailer write_checkpoint adds, for this name's step (written under its canonical name).
    runtime::write_checkpoint(checkpoint_root(), kStage, named_step, blob, 1, key());
  } else {
    std::ofstream f(stage_dir / name, std::ios::binary);
    f.write(blob.data(), static_cast<std::streamsize>(blob.size()));
  }
  try {
    for (const auto& ckpt : runtime::list_checkpoints(checkpoint_root(), kStage)) {
      if (ckpt.step < 0) {
        fuzz::finding("list_checkpoints lists " + ckpt.path + " with step " + std::to_string(ckpt.step));
      }
      fuzz::load_or_refuse(runtime::open_checkpoint(ckpt, kStage, key()));
    }
  } catch (const std::runtime_error&) {
  } catch (const std::exception& e) {
    fuzz::unexpected("list_checkpoints/open_checkpoint", e);
  }
  return 0;
}
