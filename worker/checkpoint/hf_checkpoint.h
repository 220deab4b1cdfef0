// A Hugging Face checkpoint folder as `save_pretrained` writes it (a local folder, or an
// s3://bucket/prefix with the same objects under it): config.json, and either one
// model.safetensors or model.safetensors.index.json ({"weight_map": {tensor: shard file}}) with
// its shards. Opening reads config.json and the index (or the single file's header) only; a
// shard's header is read the first time one of its tensors is asked for, and a tensor's bytes
// when it is read (SafetensorsReader: offset reads, or ranged GETs in object storage; never a
// whole file). So whoever reads one
// stage's tensors holds that stage, not the model, and opens only the shards that hold them.
#pragma once

#include <ATen/core/Tensor.h>

#include <map>
#include <memory>
#include <string>

#include "common/hf_config.h"
#include "common/job_spec.h"
#include "common/thread_annotations.h"
#include "worker/checkpoint/safetensors.h"

namespace swarm::runtime {

// Where the checkpoint's files are: a local folder or an object-storage prefix.
class CheckpointFolder {
 public:
  virtual ~CheckpointFolder() = default;
  // The path or URL of `name` in the folder.
  virtual std::string path_of(const std::string& name) const = 0;
  virtual bool exists(const std::string& name) const = 0;
  // A small file's text (config.json, the index): throws naming it when it is missing or larger
  // than such a file is.
  virtual std::string read_text(const std::string& name) const = 0;
  virtual std::unique_ptr<ByteSource> open(const std::string& name) const = 0;
};

class HfCheckpoint {
 public:
  // `dir`: a folder, or s3://bucket/prefix (object storage settings from `s3` over the AWS_*
  // variables, as spec.checkpoint.s3). Throws std::runtime_error naming the file: no folder, no
  // config.json, config.json refused (parse_hf_config), neither model.safetensors nor
  // model.safetensors.index.json, an index that is not {"weight_map": {name: file}} or names a
  // file outside the folder.
  explicit HfCheckpoint(const std::string& dir, const CheckpointS3Spec& s3 = {});

  const std::string& dir() const { return dir_; }
  const std::string& config_path() const { return config_path_; }
  const HfModelConfig& config() const { return config_; }
  // Whether the folder has a file `name` (tokenizer.model, tokenizer.json...), and its path or URL.
  bool has_file(const std::string& name) const { return folder_->exists(name); }
  std::string path_of(const std::string& name) const { return folder_->path_of(name); }
  // Whether the index (or the single file) lists `name`.
  bool has(const std::string& name) const { return shard_of_.count(name) > 0; }
  // The path of the file that holds `name`; "" when none does.
  std::string file_of(const std::string& name) const;
  // `name`'s header entry, its shard opened (header only) if it was not yet. Throws naming the
  // tensor when it is not listed, or when its shard's header does not have it.
  TensorEntry entry(const std::string& name) const EXCLUDES(mu_);
  // `name`'s values as a float32 CPU tensor (converted from BF16 or F16).
  at::Tensor read(const std::string& name) const EXCLUDES(mu_);

 private:
  const SafetensorsReader& shard(const std::string& file) const EXCLUDES(mu_);
  const SafetensorsReader& reader_of(const std::string& name, TensorEntry& entry) const EXCLUDES(mu_);

  std::string dir_, config_path_;
  std::unique_ptr<CheckpointFolder> folder_;
  HfModelConfig config_;
  std::map<std::string, std::string> shard_of_;  // tensor name -> file name in dir_
  mutable swarm::Mutex mu_;
  // Shards opened so far (file name -> reader); a reader lives as long as the checkpoint.
  mutable std::map<std::string, std::unique_ptr<SafetensorsReader>> open_ GUARDED_BY(mu_);
};

}  // namespace swarm::runtime
