#include "tests/storage/minio_server.h"

#include <stdlib.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "common/job_spec.h"
#include "common/ports.h"
#include "worker/storage/s3_client.h"

namespace swarm::testing {
namespace {

// The cached binary's path: scripts/build-minio.sh prints it (and builds it if it is missing).
std::string minio_binary() {
  const std::string cmd = "bash " SWARM_SOURCE_DIR "/scripts/build-minio.sh 2>/dev/null";
  FILE* p = ::popen(cmd.c_str(), "r");
  if (p == nullptr) throw std::runtime_error("cannot run scripts/build-minio.sh");
  std::array<char, 512> buf{};
  std::string out;
  while (std::fgets(buf.data(), buf.size(), p) != nullptr) out = buf.data();
  if (::pclose(p) != 0 || out.empty()) throw std::runtime_error("scripts/build-minio.sh failed (no MinIO binary)");
  while (!out.empty() && (out.back() == '\n' || out.back() == '\r')) out.pop_back();
  return out;
}

std::string slurp(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

}  // namespace

MinioServer::MinioServer(const std::string& bucket) : bucket_(bucket) {
  std::string templ = (std::filesystem::temp_directory_path() / "swarm-minio.XXXXXX").string();
  if (::mkdtemp(templ.data()) == nullptr) throw std::runtime_error("cannot create a folder for MinIO");
  dir_ = templ;
  data_ = dir_ + "/data";
  std::filesystem::create_directories(data_);
  const int port = runtime::pick_free_port(), console = runtime::pick_free_port();
  endpoint_ = "http://127.0.0.1:" + std::to_string(port);
  ::setenv("MINIO_ROOT_USER", kAccessKey, 1);
  ::setenv("MINIO_ROOT_PASSWORD", kSecretKey, 1);
  ::setenv("MINIO_BROWSER", "off", 1);
  subprocess::SpawnOptions o;
  o.log_path = dir_ + "/minio.log";
  proc_ = subprocess::Subprocess(minio_binary(),
                                 {"server", data_, "--quiet", "--address", "127.0.0.1:" + std::to_string(port),
                                  "--console-address", "127.0.0.1:" + std::to_string(console)},
                                 o);
  // What a worker reads (storage::S3Settings::resolve).
  ::setenv("AWS_ENDPOINT_URL", endpoint_.c_str(), 1);
  ::setenv("AWS_ACCESS_KEY_ID", kAccessKey, 1);
  ::setenv("AWS_SECRET_ACCESS_KEY", kSecretKey, 1);
  ::setenv("AWS_REGION", "us-east-1", 1);
  auto settings = storage::S3Settings::resolve(CheckpointS3Spec{});
  settings.attempts = 1;
  settings.connect_timeout_seconds = 1;
  storage::S3Client client(settings);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  for (;;) {
    try {
      client.create_bucket(bucket_);
      return;
    } catch (const std::exception& e) {
      if (proc_.poll() || std::chrono::steady_clock::now() > deadline)
        throw std::runtime_error(std::string("MinIO did not come up: ") + e.what() + "\n" + slurp(dir_ + "/minio.log"));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
}

MinioServer::~MinioServer() {
  proc_.stop(5);
  std::error_code ec;
  std::filesystem::remove_all(dir_, ec);
}

}  // namespace swarm::testing
