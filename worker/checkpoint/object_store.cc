#include "worker/checkpoint/object_store.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "common/crypto.h"
#include "common/s3_url.h"

namespace swarm::runtime {
namespace {

using json = nlohmann::json;
constexpr char kManifestFormat[] = "swarm-checkpoint-manifest/v1";
constexpr char kManifestSuffix[] = ".manifest.json";

std::string stage_prefix(const S3Url& u, int stage) { return u.key("stage-" + std::to_string(stage) + "/"); }

std::string manifest_key_of(const std::string& object_key) {
  return object_key.substr(0, object_key.size() - 5) + kManifestSuffix;  // "....ckpt" -> "....manifest.json"
}

// The step of "<stage prefix>step-<digits><suffix>" exactly, or -1.
int64_t step_of(const std::string& key, const std::string& prefix, const std::string& suffix) {
  if (key.rfind(prefix, 0) != 0 || key.size() < suffix.size() ||
      key.compare(key.size() - suffix.size(), suffix.size(), suffix) != 0)
    return -1;
  const std::string name = key.substr(prefix.size());
  long long step = -1;
  if (std::sscanf(name.c_str(), "step-%lld", &step) != 1 || step < 0) return -1;
  const std::string ckpt = checkpoint_step_name(step);  // "step-000000123.ckpt"
  return name == ckpt.substr(0, ckpt.size() - 5) + suffix ? step : -1;
}

std::string read_local(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw std::runtime_error("cannot read " + path);
  std::ostringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

}  // namespace

std::unique_ptr<storage::S3Client> s3_client_for(const CheckpointS3Spec& spec) {
  try {
    return std::make_unique<storage::S3Client>(storage::S3Settings::resolve(spec));
  } catch (const std::invalid_argument& e) {
    throw std::runtime_error(e.what());
  }
}

namespace s3_checkpoints {

std::string write(const CheckpointLocation& where, int stage, int64_t step, const std::string& bytes, int64_t keep,
                  const std::vector<std::string>& owned) {
  const S3Url u = parse_s3_url(where.path);
  auto client = s3_client_for(where.s3);
  const std::string prefix = stage_prefix(u, stage);
  const std::string key = prefix + checkpoint_step_name(step);
  client->put(u.bucket, key, bytes);
  const json manifest = {{"format", kManifestFormat}, {"stage", stage},   {"step", step},
                         {"object", checkpoint_step_name(step)}, {"bytes", bytes.size()},
                         {"sha256", crypto::sha256_hex(bytes)}, {"keyId", owned.back()}};
  client->put(u.bucket, manifest_key_of(key), manifest.dump());
  // Prune this job's checkpoints: its manifests (keyId one of `owned`) beyond `keep`, newest first
  // kept, and their objects. Another instance's (another keyId, or a manifest without one) are
  // never counted nor removed. Objects without a manifest that are older than the newest kept one
  // (half-written by a writer of this job that died) go too, unless another instance has a
  // manifest of that step.
  std::set<int64_t> with_manifest;
  std::vector<std::pair<int64_t, std::string>> objects;
  for (const auto& o : client->list(u.bucket, prefix)) {
    if (int64_t s = step_of(o.key, prefix, kManifestSuffix); s >= 0) with_manifest.insert(s);
    if (int64_t s = step_of(o.key, prefix, ".ckpt"); s >= 0) objects.emplace_back(s, o.key);
  }
  std::vector<int64_t> mine;
  std::set<int64_t> foreign;
  for (auto it = with_manifest.rbegin(); it != with_manifest.rend(); ++it) {
    std::string id;
    if (*it == step) {
      id = owned.back();
    } else if (auto m = client->get(u.bucket, manifest_key_of(prefix + checkpoint_step_name(*it)))) {
      const json j = json::parse(*m, nullptr, false);
      if (j.is_object() && j.contains("keyId") && j["keyId"].is_string()) id = j["keyId"].get<std::string>();
    }
    if (std::find(owned.begin(), owned.end(), id) != owned.end()) mine.push_back(*it);
    else foreign.insert(*it);
  }
  std::set<int64_t> kept(mine.begin(), mine.begin() + std::min<size_t>(mine.size(), std::max<int64_t>(keep, 1)));
  for (int64_t s : mine)
    if (!kept.count(s)) client->remove(u.bucket, manifest_key_of(prefix + checkpoint_step_name(s)));
  for (const auto& [s, k] : objects)
    if (!kept.count(s) && !foreign.count(s) && s < step) client->remove(u.bucket, k);
  return u.url_of(key);
}

std::vector<CheckpointFile> list(const CheckpointLocation& where, int stage) {
  const S3Url u = parse_s3_url(where.path);
  auto client = s3_client_for(where.s3);
  const std::string prefix = stage_prefix(u, stage);
  std::vector<CheckpointFile> out;
  for (const auto& o : client->list(u.bucket, prefix))
    if (int64_t s = step_of(o.key, prefix, kManifestSuffix); s >= 0)
      out.push_back({u.url_of(prefix + checkpoint_step_name(s)), s, ""});  // key id: in the object (open_checkpoint)
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.step > b.step; });
  return out;
}

std::string read(const CheckpointLocation& where, const CheckpointFile& f) {
  const S3Url u = parse_s3_url(where.path);
  const S3Url obj = parse_s3_url(f.path);
  auto client = s3_client_for(where.s3);
  const std::string key = obj.prefix;
  const std::string what = "checkpoint " + f.path + ": ";
  const auto m = client->get(u.bucket, manifest_key_of(key));
  if (!m) throw std::runtime_error(what + "no manifest (not completely written)");
  json manifest;
  try {
    manifest = json::parse(*m);
  } catch (const json::exception& e) {
    throw std::runtime_error(what + "manifest is not JSON: " + e.what());
  }
  if (!manifest.is_object() || manifest.value("format", "") != kManifestFormat || !manifest["bytes"].is_number_unsigned() ||
      !manifest["sha256"].is_string() || !manifest["step"].is_number_integer())
    throw std::runtime_error(what + "manifest lacks format \"" + kManifestFormat + "\", bytes, sha256 or step: " +
                             m->substr(0, 200));
  if (manifest["step"].get<int64_t>() != f.step)
    throw std::runtime_error(what + "manifest names step " + manifest["step"].dump() + ", not " + std::to_string(f.step));
  auto bytes = client->get(u.bucket, key);
  if (!bytes) throw std::runtime_error(what + "the manifest is there but the object is gone");
  const auto expected = manifest["bytes"].get<uint64_t>();
  if (bytes->size() != expected)
    throw std::runtime_error(what + std::to_string(bytes->size()) + " bytes, its manifest says " +
                             std::to_string(expected));
  if (crypto::sha256_hex(*bytes) != manifest["sha256"].get<std::string>())
    throw std::runtime_error(what + "SHA-256 differs from its manifest's (changed after it was written)");
  return std::move(*bytes);
}

}  // namespace s3_checkpoints

void upload_file(const CheckpointS3Spec& spec, const std::string& local_path, const std::string& url) {
  const S3Url u = parse_s3_url(url);
  if (u.prefix.empty()) throw std::runtime_error("upload: " + url + " names a bucket, not an object");
  s3_client_for(spec)->put(u.bucket, u.prefix, read_local(local_path));
}

void download_file(const CheckpointS3Spec& spec, const std::string& url, const std::string& local_path) {
  const S3Url u = parse_s3_url(url);
  auto bytes = s3_client_for(spec)->get(u.bucket, u.prefix);
  if (!bytes) throw std::runtime_error("download: " + url + " does not exist");
  const std::string tmp = local_path + ".part";
  {
    std::ofstream out(tmp, std::ios::binary);
    out.write(bytes->data(), static_cast<std::streamsize>(bytes->size()));
    if (!out) throw std::runtime_error("download: cannot write " + tmp);
  }
  std::filesystem::rename(tmp, local_path);
}

}  // namespace swarm::runtime
