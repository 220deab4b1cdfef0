// Stage checkpoints in object storage (the layout is in checkpoint.h), and whole files to and from
// s3:// URLs for exports. Used through checkpoint.h and export.h.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "worker/storage/s3_client.h"
#include "worker/checkpoint/checkpoint.h"

namespace swarm::runtime {

// A client for spec.checkpoint.s3 over the environment (storage::S3Settings::resolve). Throws
// std::runtime_error naming the setting that is missing.
std::unique_ptr<storage::S3Client> s3_client_for(const CheckpointS3Spec& spec);

namespace s3_checkpoints {

// `bytes` (trailer included) as stage `stage`'s checkpoint of `step`: the object, then its manifest
// (with keyId, the last of `owned`: the writer's key id); then this job's checkpoints (a manifest
// whose keyId is one of `owned`) beyond `keep` (manifest first) and older objects that never got a
// manifest are deleted; another job instance's are left alone. Returns the object's s3:// URL.
std::string write(const CheckpointLocation& where, int stage, int64_t step, const std::string& bytes, int64_t keep,
                  const std::vector<std::string>& owned);
// Checkpoints with a manifest, newest first.
std::vector<CheckpointFile> list(const CheckpointLocation& where, int stage);
// The object's bytes after checking them against its manifest (size, SHA-256, stage, step).
std::string read(const CheckpointLocation& where, const CheckpointFile& f);

}  // namespace s3_checkpoints

// Uploads a local file to an s3:// URL / downloads one to a local file (written atomically).
void upload_file(const CheckpointS3Spec& spec, const std::string& local_path, const std::string& url);
void download_file(const CheckpointS3Spec& spec, const std::string& url, const std::string& local_path);

}  // namespace swarm::runtime
