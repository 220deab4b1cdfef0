#include "worker/checkpoint/checkpoint.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "common/crypto.h"
#include "common/s3_url.h"
#include "worker/checkpoint/object_store.h"

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

constexpr char kTrailerMagicV1[] = "SWCKPT01";  // read only: no key id
constexpr char kTrailerMagic[] = "SWCKPT02";
constexpr size_t kKeyIdBytes = 8;
constexpr size_t kTrailerBytesV1 = 8 + 8 + 8 + crypto::kMacBytes;
constexpr size_t kTrailerBytes = 8 + 8 + 8 + kKeyIdBytes + crypto::kMacBytes;

std::string hex(const std::string& raw) {
  static const char* d = "0123456789abcdef";
  std::string out;
  for (unsigned char c : raw) {
    out.push_back(d[c >> 4]);
    out.push_back(d[c & 15]);
  }
  return out;
}

std::string raw_key_id(const std::string& key) {
  crypto::Hmac h(key);
  static const std::string label = "swarm checkpoint key id";
  h.update(label.data(), label.size());
  const crypto::Mac m = h.finish();
  return std::string(reinterpret_cast<const char*>(m.data()), kKeyIdBytes);
}

// The key id in a file's trailer, read from its last bytes alone; "" for a format-1 file or one
// too short or not a checkpoint (open_checkpoint says which).
std::string file_key_id(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) return "";
  std::string tail(kTrailerBytes, '\0');
  const off_t size = ::lseek(fd, 0, SEEK_END);
  ssize_t n = -1;
  if (size >= static_cast<off_t>(kTrailerBytes)) n = ::pread(fd, tail.data(), kTrailerBytes, size - kTrailerBytes);
  ::close(fd);
  if (n != static_cast<ssize_t>(kTrailerBytes) || tail.compare(0, 8, kTrailerMagic) != 0) return "";
  return hex(tail.substr(24, kKeyIdBytes));
}

void put_i64(std::string& s, int64_t v) {
  for (int i = 0; i < 8; ++i) s.push_back(static_cast<char>(static_cast<uint64_t>(v) >> (8 * i)));
}

int64_t get_i64(const char* p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= static_cast<uint64_t>(static_cast<uint8_t>(p[i])) << (8 * i);
  return static_cast<int64_t>(v);
}

crypto::Mac trailer_mac(const std::string& key, const char* state, size_t n, const std::string& head) {
  crypto::Hmac h(key);
  h.update(state, n);
  h.update(head.data(), head.size());
  return h.finish();
}

std::vector<CheckpointFile> list_files(const std::string& dir, int stage);

// Retention: the newest `keep` of the checkpoints this job wrote stay, older ones of it go. Only a
// file whose key id is the job's counts: another instance's (another secret) and one without a key
// id (format 1, or not a checkpoint at all) are never counted nor removed: a few format-1 files of
// the job itself, from before the upgrade, stay until removed by hand.
void prune_files(const std::vector<CheckpointFile>& all, int64_t keep, const std::vector<std::string>& owned) {
  int64_t kept = 0;
  std::error_code ec;
  for (const auto& f : all) {
    if (f.key_id.empty() || std::find(owned.begin(), owned.end(), f.key_id) == owned.end()) continue;
    if (++kept > std::max<int64_t>(keep, 1)) fs::remove(f.path, ec);
  }
}

std::string write_file(const std::string& dir, int stage, int64_t step, const std::string& bytes, int64_t keep,
                       const std::vector<std::string>& owned) {
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
  prune_files(list_files(dir, stage), keep, owned);
  return final_path;
}

std::vector<CheckpointFile> list_files(const std::string& dir, int stage) {
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
      out.push_back({e.path().string(), step, file_key_id(e.path().string())});
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.step > b.step; });
  return out;
}

// The bytes and the checks of open_checkpoint, whatever the bytes came from.
std::string authenticate(std::string bytes, const std::string& path, int64_t step, int stage, const std::string& key) {
  const std::string where = "checkpoint " + path + ": ";
  size_t trailer = 0;
  if (bytes.size() >= kTrailerBytes && bytes.compare(bytes.size() - kTrailerBytes, 8, kTrailerMagic) == 0)
    trailer = kTrailerBytes;
  else if (bytes.size() >= kTrailerBytesV1 && bytes.compare(bytes.size() - kTrailerBytesV1, 8, kTrailerMagicV1) == 0)
    trailer = kTrailerBytesV1;
  if (trailer == 0)
    throw std::runtime_error(where + "no authentication trailer (" + std::to_string(bytes.size()) +
                             " bytes; truncated, or not written by this version)");
  const size_t n = bytes.size() - trailer;
  const size_t head_bytes = trailer - crypto::kMacBytes;
  const std::string head = bytes.substr(n, head_bytes);
  if (trailer == kTrailerBytes && head.compare(24, kKeyIdBytes, raw_key_id(key)) != 0)
    throw ForeignCheckpoint(where + "written by another job instance (key id " + hex(head.substr(24, kKeyIdBytes)) +
                             ", this job's " + hex(raw_key_id(key)) +
                             "): a job deleted and re-created with a new secret; left untouched (spec.secret)");
  const crypto::Mac mac = trailer_mac(key, bytes.data(), n, head);
  if (!crypto::mac_equal(mac.data(), reinterpret_cast<const uint8_t*>(bytes.data() + n + head_bytes), mac.size()))
    throw std::runtime_error(where + "authentication failed: changed since it was written, or written by a job "
                                     "with another secret (spec.secret)");
  const int64_t st = get_i64(head.data() + 8), sp = get_i64(head.data() + 16);
  if (st != stage || sp != step)
    throw std::runtime_error(where + "holds stage " + std::to_string(st) + " step " + std::to_string(sp) +
                             ", not stage " + std::to_string(stage) + " step " + std::to_string(step) +
                             " as its place says (moved or copied)");
  bytes.resize(n);
  return bytes;
}

}  // namespace

bool CheckpointLocation::object_storage() const { return is_s3_url(path); }

std::string checkpoint_step_name(int64_t step) { return step_name(step); }

std::string checkpoint_key(const std::string& secret) {
  return crypto::hkdf_sha256(secret, "", "swarm checkpoint v1");
}

std::string checkpoint_key_id(const std::string& key) { return hex(raw_key_id(key)); }

bool written_by_another(const CheckpointFile& f, const std::vector<std::string>& key_ids) {
  return !f.key_id.empty() && std::find(key_ids.begin(), key_ids.end(), f.key_id) == key_ids.end();
}

std::string write_checkpoint(const CheckpointLocation& where, int stage, int64_t step, std::string state,
                             int64_t keep, const std::string& key, const std::vector<std::string>& also_owned) {
  std::vector<std::string> owned = also_owned;
  owned.push_back(checkpoint_key_id(key));
  std::string head(kTrailerMagic, 8);
  put_i64(head, stage);
  put_i64(head, step);
  head += raw_key_id(key);
  const crypto::Mac mac = trailer_mac(key, state.data(), state.size(), head);
  // In place: model::save_state leaves room for the trailer, so this does not reallocate.
  state.append(head).append(reinterpret_cast<const char*>(mac.data()), mac.size());
  if (where.object_storage()) return s3_checkpoints::write(where, stage, step, state, keep, owned);
  return write_file(where.path, stage, step, state, keep, owned);
}

std::vector<CheckpointFile> list_checkpoints(const CheckpointLocation& where, int stage) {
  if (where.object_storage()) return s3_checkpoints::list(where, stage);
  return list_files(where.path, stage);
}

std::string read_checkpoint(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw std::runtime_error("checkpoint: cannot read " + path);
  std::ostringstream ss;
  ss << f.rdbuf();
  if (!f.good() && !f.eof()) throw std::runtime_error("checkpoint: read error in " + path);
  return ss.str();
}

std::string read_checkpoint(const CheckpointLocation& where, const CheckpointFile& f) {
  if (where.object_storage()) return s3_checkpoints::read(where, f);
  return read_checkpoint(f.path);
}

std::string open_checkpoint(const CheckpointLocation& where, const CheckpointFile& f, int stage, const std::string& key) {
  return authenticate(read_checkpoint(where, f), f.path, f.step, stage, key);
}

std::string authenticate_checkpoint(std::string bytes, const CheckpointFile& f, int stage, const std::string& key) {
  return authenticate(std::move(bytes), f.path, f.step, stage, key);
}

std::string open_checkpoint(const CheckpointFile& f, int stage, const std::string& key) {
  return authenticate(read_checkpoint(f.path), f.path, f.step, stage, key);
}

}  // namespace swarm::runtime
