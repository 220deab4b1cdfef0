// Stage checkpoints on a shared directory: <dir>/stage-<s>/step-<000000123>.ckpt, each the bytes of
// model::save_state (parameters, optimizer state, step). Written atomically — a temporary file,
// fsync, rename, fsync of the directory — so a crash mid-write never corrupts the last good one;
// older checkpoints beyond `keep` are pruned after a successful write.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace swarm::runtime {

struct CheckpointFile {
  std::string path;
  int64_t step = 0;
};

// Writes `bytes` as stage `stage`'s checkpoint of `step`. Throws std::runtime_error naming the
// path on any I/O failure (the previous checkpoints stay intact).
std::string write_checkpoint(const std::string& dir, int stage, int64_t step, const std::string& bytes,
                             int64_t keep);

// The stage's checkpoints, newest first. Unfinished temporary files are ignored.
std::vector<CheckpointFile> list_checkpoints(const std::string& dir, int stage);

// Reads a checkpoint's bytes; throws std::runtime_error naming the path.
std::string read_checkpoint(const std::string& path);

}  // namespace swarm::runtime
