// Stage checkpoints on a shared directory: <dir>/stage-<s>/step-<000000123>.ckpt, each the bytes of
// model::save_state (parameters, optimizer state, step). Written atomically — a temporary file,
// fsync, rename, fsync of the directory — so a crash mid-write never corrupts the last good one;
// older checkpoints beyond `keep` are pruned after a successful write.
//
// Authenticated: each file is the state bytes followed by a 64-byte trailer,
//   "SWCKPT02" | i64 stage | i64 step | key id (8 bytes) |
//   HMAC-SHA256(K, state bytes || the trailer's first 32 bytes)
// with K = HKDF-SHA256(job secret, "", "swarm checkpoint v1") (checkpoint_key) and the key id the
// first 8 bytes of HMAC-SHA256(K, "swarm checkpoint key id") (checkpoint_key_id). A file changed on
// the volume, written without the job's secret, or renamed to another stage or step is refused on
// restore (open_checkpoint throws, naming the file and why); the restoring peer then tries the next
// older one. Files of format 1 ("SWCKPT01", 56 bytes, no key id) are still read.
//
// Whose a file is: the key id says, from the file's last 64 bytes, without the secret. Retention
// counts and removes only the job's own files; another job instance's (a job deleted and
// re-created with another secret) are never deleted, and a restoring peer skips them
// (written_by_another) instead of refusing them again and again. To resume from checkpoints after
// deleting and re-creating a job, it needs the same secret: the operator keeps a generated secret
// of a job with spec.checkpoint.path when the job is deleted (docs/operator.md), a secretRef is
// the user's, and `swarm local --log-dir` keeps its own in the log folder.
//
// In object storage (spec.checkpoint.path s3://bucket/prefix; worker/checkpoint/object_store.cc) the same bytes go
// to <prefix>/stage-<s>/step-<000000123>.ckpt (a multipart upload above the part size), then a
// manifest <prefix>/stage-<s>/step-<000000123>.manifest.json {stage, step, object, bytes, sha256}
// is written last: only checkpoints with a manifest are listed, and restoring one checks its size
// and SHA-256 against the manifest before its trailer, so a half-uploaded checkpoint is never
// restored (the restoring peer tries the next older one).
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/job_spec.h"

namespace swarm::runtime {

// Where a job's checkpoints are: a directory, or s3://bucket[/prefix] with its settings (the
// credentials come from the environment, storage/s3_client.h).
struct CheckpointLocation {
  std::string path;
  CheckpointS3Spec s3;
  CheckpointLocation(std::string p) : path(std::move(p)) {}  // NOLINT: a directory converts
  CheckpointLocation(const char* p) : path(p) {}             // NOLINT
  explicit CheckpointLocation(const CheckpointSpec& c) : path(c.path), s3(c.s3) {}
  bool object_storage() const;
};

struct CheckpointFile {
  std::string path;
  int64_t step = 0;
  std::string key_id;  // of the key that wrote it (16 hex digits); "" when unknown (format 1, object storage)
};

// Thrown by open_checkpoint for a file written with another key id: another job instance's.
struct ForeignCheckpoint : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// "step-000000123.ckpt": the name of a step's checkpoint in its stage's folder.
std::string checkpoint_step_name(int64_t step);

// The checkpoint key of a job secret (throws std::invalid_argument for an empty secret).
std::string checkpoint_key(const std::string& secret);
// The key id of a checkpoint key, as checkpoints written with it carry it (16 hex digits).
std::string checkpoint_key_id(const std::string& key);
// True when `f`'s key id is known and none of `key_ids`: written by another job instance.
bool written_by_another(const CheckpointFile& f, const std::vector<std::string>& key_ids);

// Writes `bytes` as stage `stage`'s checkpoint of `step`, authenticated with `key`, then prunes the
// job's own checkpoints (written with `key` or a key id in `also_owned`, e.g. the secret's before a
// rotation) beyond `keep`. Throws std::runtime_error naming the path on any I/O failure (the
// previous checkpoints stay intact). Returns where it went (a path or an s3:// URL). `bytes` is
// taken by value and the trailer appended to it in place: moved in (a stage's whole state), the
// checkpoint costs no second copy of it.
std::string write_checkpoint(const CheckpointLocation& where, int stage, int64_t step, std::string bytes,
                             int64_t keep, const std::string& key, const std::vector<std::string>& also_owned = {});

// The stage's checkpoints, newest first. Unfinished temporary files and objects without a manifest
// are ignored.
std::vector<CheckpointFile> list_checkpoints(const CheckpointLocation& where, int stage);

// Reads a checkpoint's bytes as they are (trailer included); throws std::runtime_error naming the
// path (in object storage: also when the object does not match its manifest).
std::string read_checkpoint(const CheckpointLocation& where, const CheckpointFile& f);
std::string read_checkpoint(const std::string& path);  // a file

// Reads and authenticates checkpoint `f` of stage `stage`; returns its state bytes. Throws
// std::runtime_error "checkpoint <path>: ..." when it cannot be read, has no trailer, names another
// stage or step than its place, or fails authentication.
std::string open_checkpoint(const CheckpointLocation& where, const CheckpointFile& f, int stage, const std::string& key);
std::string open_checkpoint(const CheckpointFile& f, int stage, const std::string& key);  // a file
// open_checkpoint's checks of bytes already read (read_checkpoint) with `key`.
std::string authenticate_checkpoint(std::string bytes, const CheckpointFile& f, int stage, const std::string& key);

}  // namespace swarm::runtime
