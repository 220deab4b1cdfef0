// Stage checkpoints on a shared directory: <dir>/stage-<s>/step-<000000123>.ckpt, each the bytes of
// model::save_state (parameters, optimizer state, step). Written atomically — a temporary file,
// fsync, rename, fsync of the directory — so a crash mid-write never corrupts the last good one;
// older checkpoints beyond `keep` are pruned after a successful write.
//
// Authenticated: each file is the state bytes followed by a 56-byte trailer,
//   "SWCKPT01" | i64 stage | i64 step | HMAC-SHA256(K, state bytes || the trailer's first 24 bytes)
// with K = HKDF-SHA256(job secret, "", "swarm checkpoint v1") (checkpoint_key). A file changed on
// the volume, written without the job's secret, or renamed to another stage or step is refused on
// restore (open_checkpoint throws, naming the file and why); the restoring peer then tries the next
// older one. To resume from checkpoints after deleting and re-creating a job, give it the same
// secret (spec.secret.secretRef; `swarm local --log-dir` keeps its own in the log folder).
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

// The checkpoint key of a job secret (throws std::invalid_argument for an empty secret).
std::string checkpoint_key(const std::string& secret);

// Writes `bytes` as stage `stage`'s checkpoint of `step`, authenticated with `key`. Throws
// std::runtime_error naming the path on any I/O failure (the previous checkpoints stay intact).
std::string write_checkpoint(const std::string& dir, int stage, int64_t step, const std::string& bytes,
                             int64_t keep, const std::string& key);

// The stage's checkpoints, newest first. Unfinished temporary files are ignored.
std::vector<CheckpointFile> list_checkpoints(const std::string& dir, int stage);

// Reads a checkpoint file's bytes as they are (trailer included); throws std::runtime_error naming
// the path.
std::string read_checkpoint(const std::string& path);

// Reads and authenticates checkpoint `f` of stage `stage`; returns its state bytes. Throws
// std::runtime_error "checkpoint <path>: ..." when it cannot be read, has no trailer, names another
// stage or step than its place, or fails authentication.
std::string open_checkpoint(const CheckpointFile& f, int stage, const std::string& key);

}  // namespace swarm::runtime
