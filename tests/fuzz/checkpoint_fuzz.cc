// Fuzz target: a stage's checkpoint restore (worker/swarm/checkpoint.h): list_checkpoints finds
// the files of a stage folder by name, read_checkpoint reads one, load_state decodes it. The input
// is a file name line, then a flag byte and the file's bytes (state_fixture.h). The target writes
// that one file into a fresh stage folder and restores it as a peer does. Documented refusals:
// std::runtime_error. A listed checkpoint must have a step >= 0 (write_checkpoint writes no
// other).
#include <unistd.h>

#include <cstddef>
#include <cstdlib>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>

#include "tests/fuzz/state_fixture.h"
#include "worker/swarm/checkpoint.h"

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

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view input(reinterpret_cast<const char*>(data), size);
  size_t eol = input.find('\n');
  if (eol == std::string_view::npos) return 0;
  const fs::path stage_dir = fs::path(checkpoint_root()) / ("stage-" + std::to_string(kStage));
  fs::remove_all(stage_dir);
  fs::create_directories(stage_dir);
  {
    std::ofstream f(stage_dir / file_name(input.substr(0, eol)), std::ios::binary);
    std::string blob = fuzz::state_blob(data + eol + 1, size - eol - 1);
    f.write(blob.data(), static_cast<std::streamsize>(blob.size()));
  }
  try {
    for (const auto& ckpt : runtime::list_checkpoints(checkpoint_root(), kStage)) {
      if (ckpt.step < 0) {
        fuzz::finding("list_checkpoints lists " + ckpt.path + " with step " + std::to_string(ckpt.step));
      }
      fuzz::load_or_refuse(runtime::read_checkpoint(ckpt.path));
    }
  } catch (const std::runtime_error&) {
  } catch (const std::exception& e) {
    fuzz::unexpected("list_checkpoints/read_checkpoint", e);
  }
  return 0;
}
