// A real MinIO server for the object-storage tests: built from the Go module proxy by
// scripts/build-minio.sh (cached by version), started on a free loopback port with its data in a
// temporary folder, and stopped and removed with the object. The test process's AWS_* variables
// are set to reach it (what a worker reads), and a bucket is created.
#pragma once

#include <string>

#include "common/subprocess.h"

namespace swarm::testing {

class MinioServer {
 public:
  // Starts the server and creates `bucket`; throws std::runtime_error (with the server's log) when
  // it does not come up within 60 s.
  explicit MinioServer(const std::string& bucket = "swarm-test");
  ~MinioServer();

  const std::string& endpoint() const { return endpoint_; }  // http://127.0.0.1:PORT
  const std::string& bucket() const { return bucket_; }
  const std::string& data_dir() const { return data_; }
  static constexpr const char* kAccessKey = "swarm-test-access";
  static constexpr const char* kSecretKey = "swarm-test-secret-key";

 private:
  std::string dir_, endpoint_, bucket_, data_;
  subprocess::Subprocess proc_;
};

}  // namespace swarm::testing
