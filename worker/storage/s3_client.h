// An S3 client for checkpoints and exported models: S3, MinIO, GCS's S3 interface, R2.
// Requests go through libcurl and are signed by libcurl's own AWS Signature V4
// (CURLOPT_AWS_SIGV4); the payload's SHA-256 is sent as x-amz-content-sha256, so the server checks
// every byte it stores. Responses are XML (pugixml).
//
// Objects larger than the part size are uploaded in parts (CreateMultipartUpload, UploadPart,
// CompleteMultipartUpload); a failed multipart upload is aborted. Transient failures (connection
// errors, HTTP 5xx, 429, SlowDown) are retried up to `attempts` times with backoff; anything else
// throws S3Error naming the operation, the s3:// location, the HTTP status and S3's error code.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/job_spec.h"

namespace swarm::storage {

struct S3Settings {
  std::string endpoint;  // http(s)://host[:port], no path
  std::string region = "us-east-1";
  bool path_style = true;  // http://host/bucket/key; false: http://bucket.host/key
  std::string access_key, secret_key, session_token;
  int64_t part_size = 16 << 20;  // bytes per part of a multipart upload (>= 5 MiB)
  int attempts = 4;              // tries per request
  int list_page_size = 1000;     // max-keys of one ListObjectsV2 page
  double connect_timeout_seconds = 10;
  double request_timeout_seconds = 600;

  // spec.checkpoint.s3 over the environment: AWS_ENDPOINT_URL_S3 / AWS_ENDPOINT_URL, AWS_REGION /
  // AWS_DEFAULT_REGION, AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN. Throws
  // std::invalid_argument naming what is missing (no credentials) or malformed.
  static S3Settings resolve(const CheckpointS3Spec& spec);
};

struct S3Error : std::runtime_error {
  S3Error(const std::string& what, long http_status, std::string code)
      : std::runtime_error(what), status(http_status), code(std::move(code)) {}
  long status;       // 0 when no HTTP answer came
  std::string code;  // S3's <Code> (NoSuchKey, NoSuchBucket, AccessDenied, ...), or ""
  bool not_found() const { return status == 404; }
};

struct S3Object {
  std::string key;
  int64_t size = 0;
};

// What the client sent and received, for the figures (bytes uploaded per step).
struct S3Traffic {
  int64_t requests = 0, bytes_up = 0, bytes_down = 0, retries = 0;
};

class S3Client {
 public:
  explicit S3Client(S3Settings settings);
  ~S3Client();
  S3Client(const S3Client&) = delete;
  S3Client& operator=(const S3Client&) = delete;

  // Uploads `bytes` as bucket/key: one PUT up to the part size, a multipart upload above it.
  void put(const std::string& bucket, const std::string& key, const std::string& bytes);
  // The object's bytes; nullopt when it does not exist (NoSuchKey).
  std::optional<std::string> get(const std::string& bucket, const std::string& key);
  // The object's size in bytes (HEAD); nullopt when it does not exist.
  std::optional<int64_t> size(const std::string& bucket, const std::string& key);
  // `length` bytes of the object from `offset` (a ranged GET): what reads one tensor of a
  // Hugging Face checkpoint's shard without the rest. Throws S3Error when the object does not
  // exist or the answer does not hold exactly those bytes.
  std::string get_range(const std::string& bucket, const std::string& key, uint64_t offset, uint64_t length);
  // Every object under `prefix` (ListObjectsV2, all pages), in key order.
  std::vector<S3Object> list(const std::string& bucket, const std::string& prefix);
  // Deletes bucket/key (no error when it is already gone).
  void remove(const std::string& bucket, const std::string& key);
  // Creates the bucket (no error when this account already owns it).
  void create_bucket(const std::string& bucket);

  const S3Settings& settings() const { return settings_; }
  S3Traffic traffic() const;

 private:
  struct Impl;
  Impl* impl_;
  S3Settings settings_;
};

// RFC 3986 percent-encoding as SigV4 wants it: unreserved characters (A-Z a-z 0-9 - _ . ~) as they
// are, '/' too when keep_slash, every other byte as %XX (upper-case hex).
std::string s3_encode(const std::string& s, bool keep_slash);

}  // namespace swarm::storage
