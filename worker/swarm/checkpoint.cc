#include "worker/swarm/checkpoint.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace fs = std::filesystem;

namespace swarm::runtime {
namespace {

std::string stage_dir(const std::string& dir, int stage) {
  return (fs::path(dir) / ("stage-" + std::to_string(stage))).string();
}

std::string step_name(int64_t step) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "step-%09lld.ckpt", static_cast<long long>(step));
  return buf;
}

[[noreturn]] void fail(const std::string& what, const std::string& path, int err = errno) {
  throw std::runtime_error("checkpoint: " + what + " " + path + ": " + std::strerror(err));
}

// Closes (if open) and removes a temporary file after a failed write, then throws with the errno
// of the failure, not of the clean-up (a full disk says "No space left on device").
[[noreturn]] void abandon(int fd, const std::string& tmp, const std::string& what) {
  const int err = errno;
  if (fd >= 0) ::close(fd);
  ::unlink(tmp.c_str());
  fail(what, tmp, err);
}

void fsync_path(const std::string& path, int flags) {
  int fd = ::open(path.c_str(), flags);
  if (fd < 0) fail("cannot open", path);
  if (::fsync(fd) != 0) {
    ::close(fd);
    fail("cannot fsync", path);
  }
  ::close(fd);
}

}  // namespace

std::string write_checkpoint(const std::string& dir, int stage, int64_t step, const std::string& bytes,
                             int64_t keep) {
  const std::string sdir = stage_dir(dir, stage);
  std::error_code ec;
  fs::create_directories(sdir, ec);
  if (ec) throw std::runtime_error("checkpoint: cannot create " + sdir + ": " + ec.message());
  const std::string final_path = sdir + "/" + step_name(step);
  const std::string tmp = final_path + ".tmp." + std::to_string(::getpid());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) fail("cannot create", tmp);
  size_t off = 0;
  while (off < bytes.size()) {
    ssize_t n = ::write(fd, bytes.data() + off, bytes.size() - off);
    if (n < 0) {
      if (errno == EINTR) continue;
      abandon(fd, tmp, "cannot write");
    }
    off += static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0) abandon(fd, tmp, "cannot flush");
  if (::close(fd) != 0) abandon(-1, tmp, "cannot flush");
  if (::rename(tmp.c_str(), final_path.c_str()) != 0) abandon(-1, tmp, "cannot rename to " + final_path + " from");
  fsync_path(sdir, O_RDONLY | O_DIRECTORY);
  auto all = list_checkpoints(dir, stage);
  for (size_t i = static_cast<size_t>(std::max<int64_t>(keep, 1)); i < all.size(); ++i) fs::remove(all[i].path, ec);
  return final_path;
}

std::vector<CheckpointFile> list_checkpoints(const std::string& dir, int stage) {
  std::vector<CheckpointFile> out;
  std::error_code ec;
  const std::string sdir = stage_dir(dir, stage);
  if (!fs::is_directory(sdir, ec)) return out;
  for (const auto& e : fs::directory_iterator(sdir, ec)) {
    const std::string name = e.path().filename().string();
    long long step = 0;
    char tail[8] = {0};
    // Only finished files: "step-<digits>.ckpt" exactly, of a step >= 0 (write_checkpoint's names;
    // "step--00000003.ckpt" would restore a stage to step -3).
    if (std::sscanf(name.c_str(), "step-%lld.ckp%1s", &step, tail) == 2 && step >= 0 && name == step_name(step))
      out.push_back({e.path().string(), step});
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.step > b.step; });
  return out;
}

std::string read_checkpoint(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw std::runtime_error("checkpoint: cannot read " + path);
  std::ostringstream ss;
  ss << f.rdbuf();
  if (!f.good() && !f.eof()) throw std::runtime_error("checkpoint: read error in " + path);
  return ss.str();
}

}  // namespace swarm::runtime
