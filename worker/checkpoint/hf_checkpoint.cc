#include "worker/checkpoint/hf_checkpoint.h"

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>

namespace swarm::runtime {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr uintmax_t kMaxJsonFile = uintmax_t{64} << 20;  // config.json and the index are kilobytes

std::string read_small_file(const std::string& path, const std::string& what) {
  std::error_code ec;
  const uintmax_t size = fs::file_size(path, ec);
  if (ec) throw std::runtime_error(what + " " + path + ": cannot read: " + ec.message());
  if (size > kMaxJsonFile)
    throw std::runtime_error(what + " " + path + ": " + std::to_string(size) + " bytes, more than a " + what + " has");
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  if (!in) throw std::runtime_error(what + " " + path + ": cannot read");
  return text.str();
}

// A shard's name as the index gives it must be a file of the folder itself: no path.
bool plain_file_name(const std::string& f) {
  return !f.empty() && f != "." && f != ".." && f.find('/') == std::string::npos && f.find('\0') == std::string::npos;
}

// model.safetensors.index.json: {"metadata": {...}, "weight_map": {tensor: shard file}}.
std::map<std::string, std::string> read_index(const std::string& path) {
  const json j = json::parse(read_small_file(path, "index"), nullptr, false);
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

}  // namespace

HfCheckpoint::HfCheckpoint(const std::string& dir) : dir_(dir) {
  if (!fs::is_directory(dir)) throw std::runtime_error("checkpoint " + dir + ": not a folder");
  config_path_ = (fs::path(dir) / "config.json").string();
  try {
    config_ = parse_hf_config(read_small_file(config_path_, "config"), config_path_);
  } catch (const HfConfigError& e) {
    throw std::runtime_error(e.what());
  }
  const std::string index = (fs::path(dir) / "model.safetensors.index.json").string();
  const std::string single = (fs::path(dir) / "model.safetensors").string();
  if (fs::exists(index)) {
    shard_of_ = read_index(index);
  } else if (fs::exists(single)) {
    for (const auto& e : shard("model.safetensors").header().tensors) shard_of_[e.name] = "model.safetensors";
  } else {
    throw std::runtime_error("checkpoint " + dir + ": has neither model.safetensors nor model.safetensors.index.json");
  }
}

std::string HfCheckpoint::file_of(const std::string& name) const {
  const auto it = shard_of_.find(name);
  return it == shard_of_.end() ? "" : (fs::path(dir_) / it->second).string();
}

const SafetensorsReader& HfCheckpoint::shard(const std::string& file) const {
  swarm::MutexLock lock(mu_);
  auto& r = open_[file];
  if (!r) r = std::make_unique<SafetensorsReader>((fs::path(dir_) / file).string());
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
