#include "worker/checkpoint/hf_checkpoint.h"

#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>

#include "common/s3_url.h"
#include "worker/checkpoint/object_store.h"

namespace swarm::runtime {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr uint64_t kMaxJsonFile = uint64_t{64} << 20;  // config.json and the index are kilobytes

class LocalFolder : public CheckpointFolder {
 public:
  explicit LocalFolder(std::string dir) : dir_(std::move(dir)) {
    if (!fs::is_directory(dir_)) throw std::runtime_error("checkpoint " + dir_ + ": not a folder");
  }
  std::string path_of(const std::string& name) const override { return (fs::path(dir_) / name).string(); }
  bool exists(const std::string& name) const override { return fs::exists(path_of(name)); }
  std::string read_text(const std::string& name) const override {
    const std::string path = path_of(name);
    std::error_code ec;
    const uintmax_t size = fs::file_size(path, ec);
    if (ec) throw std::runtime_error(path + ": cannot read: " + ec.message());
    if (size > kMaxJsonFile) throw std::runtime_error(path + ": " + std::to_string(size) + " bytes, more than such a file has");
    std::ifstream in(path, std::ios::binary);
    std::ostringstream text;
    text << in.rdbuf();
    if (!in) throw std::runtime_error(path + ": cannot read");
    return text.str();
  }
  std::unique_ptr<ByteSource> open(const std::string& name) const override { return open_file_source(path_of(name)); }

 private:
  std::string dir_;
};

// One object read by ranged GETs: a tensor's bytes come in one request, into the caller's buffer.
class ObjectSource : public ByteSource {
 public:
  ObjectSource(std::shared_ptr<storage::S3Client> client, std::string bucket, std::string key, uint64_t size)
      : client_(std::move(client)), bucket_(std::move(bucket)), key_(std::move(key)), size_(size) {}
  uint64_t size() const override { return size_; }
  void read_at(char* dst, uint64_t n, uint64_t offset) const override {
    if (offset > size_ || n > size_ - offset)
      throw std::runtime_error("s3://" + bucket_ + "/" + key_ + ": bytes " + std::to_string(offset) + ".." +
                               std::to_string(offset + n) + " lie past its " + std::to_string(size_) + " bytes");
    const std::string bytes = client_->get_range(bucket_, key_, offset, n);
    std::memcpy(dst, bytes.data(), n);
  }

 private:
  std::shared_ptr<storage::S3Client> client_;
  std::string bucket_, key_;
  uint64_t size_;
};

class ObjectFolder : public CheckpointFolder {
 public:
  ObjectFolder(const std::string& url, const CheckpointS3Spec& s3) : url_(parse_s3_url(url)), client_(s3_client_for(s3)) {}
  std::string path_of(const std::string& name) const override { return url_.url_of(url_.key(name)); }
  bool exists(const std::string& name) const override { return client_->size(url_.bucket, url_.key(name)).has_value(); }
  std::string read_text(const std::string& name) const override {
    const auto size = client_->size(url_.bucket, url_.key(name));
    if (!size) throw std::runtime_error(path_of(name) + ": cannot read: it does not exist");
    if (static_cast<uint64_t>(*size) > kMaxJsonFile)
      throw std::runtime_error(path_of(name) + ": " + std::to_string(*size) + " bytes, more than such a file has");
    return client_->get_range(url_.bucket, url_.key(name), 0, static_cast<uint64_t>(*size));
  }
  std::unique_ptr<ByteSource> open(const std::string& name) const override {
    const auto size = client_->size(url_.bucket, url_.key(name));
    if (!size) throw std::runtime_error("safetensors " + path_of(name) + ": cannot open: it does not exist");
    return std::make_unique<ObjectSource>(client_, url_.bucket, url_.key(name), static_cast<uint64_t>(*size));
  }

 private:
  S3Url url_;
  std::shared_ptr<storage::S3Client> client_;
};

// A shard's name as the index gives it must be a file of the folder itself: no path.
bool plain_file_name(const std::string& f) {
  return !f.empty() && f != "." && f != ".." && f.find('/') == std::string::npos && f.find('\0') == std::string::npos;
}

// model.safetensors.index.json: {"metadata": {...}, "weight_map": {tensor: shard file}}.
std::map<std::string, std::string> read_index(const std::string& text, const std::string& path) {
  const json j = json::parse(text, nullptr, false);
  if (!j.is_object() || !j.contains("weight_map") || !j["weight_map"].is_object())
    throw std::runtime_error("index " + path + ": weight_map: must be an object {tensor: file}");
  std::map<std::string, std::string> out;
  for (const auto& [name, file] : j["weight_map"].items()) {
    if (!file.is_string() || !plain_file_name(file.get<std::string>()))
      throw std::runtime_error("index " + path + ": weight_map." + name + ": must name a file in the folder, got " +
                               file.dump(-1, ' ', false, json::error_handler_t::replace));
    out[name] = file.get<std::string>();
  }
  return out;
}

std::unique_ptr<CheckpointFolder> folder_of(const std::string& dir, const CheckpointS3Spec& s3) {
  if (is_s3_url(dir)) return std::make_unique<ObjectFolder>(dir, s3);
  return std::make_unique<LocalFolder>(dir);
}

}  // namespace

HfCheckpoint::HfCheckpoint(const std::string& dir, const CheckpointS3Spec& s3) : dir_(dir), folder_(folder_of(dir, s3)) {
  config_path_ = folder_->path_of("config.json");
  std::string text;
  try {
    text = folder_->read_text("config.json");
  } catch (const std::exception& e) {
    throw std::runtime_error(std::string("config ") + e.what());
  }
  try {
    config_ = parse_hf_config(text, config_path_);
  } catch (const HfConfigError& e) {
    throw std::runtime_error(e.what());
  }
  if (folder_->exists("model.safetensors.index.json")) {
    shard_of_ = read_index(folder_->read_text("model.safetensors.index.json"), folder_->path_of("model.safetensors.index.json"));
  } else if (folder_->exists("model.safetensors")) {
    for (const auto& e : shard("model.safetensors").header().tensors) shard_of_[e.name] = "model.safetensors";
  } else {
    throw std::runtime_error("checkpoint " + dir + ": has neither model.safetensors nor model.safetensors.index.json");
  }
}

std::string HfCheckpoint::file_of(const std::string& name) const {
  const auto it = shard_of_.find(name);
  return it == shard_of_.end() ? "" : folder_->path_of(it->second);
}

const SafetensorsReader& HfCheckpoint::shard(const std::string& file) const {
  swarm::MutexLock lock(mu_);
  auto& r = open_[file];
  if (!r) r = std::make_unique<SafetensorsReader>(folder_->open(file), folder_->path_of(file));
  return *r;
}

const SafetensorsReader& HfCheckpoint::reader_of(const std::string& name, TensorEntry& entry) const {
  const auto it = shard_of_.find(name);
  if (it == shard_of_.end()) throw std::runtime_error("checkpoint " + dir_ + ": tensor " + name + " is missing");
  const SafetensorsReader& r = shard(it->second);
  const TensorEntry* e = r.header().find(name);
  if (e == nullptr)
    throw std::runtime_error("checkpoint " + dir_ + ": tensor " + name + ": the index names " + r.path() +
                             ", whose header does not have it");
  entry = *e;
  return r;
}

TensorEntry HfCheckpoint::entry(const std::string& name) const {
  TensorEntry e;
  reader_of(name, e);
  return e;
}

at::Tensor HfCheckpoint::read(const std::string& name) const {
  TensorEntry e;
  const SafetensorsReader& r = reader_of(name, e);
  return r.read(e);
}

}  // namespace swarm::runtime
