#include "worker/storage/s3_client.h"

#include <curl/curl.h>
#include <pugixml.hpp>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <mutex>
#include <thread>

#include "common/crypto.h"
#include "common/percent_encode.h"
#include "common/thread_annotations.h"

namespace swarm::storage {
namespace {

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr ? "" : v;
}

std::string first_env(std::initializer_list<const char*> names) {
  for (const char* n : names)
    if (auto v = env(n); !v.empty()) return v;
  return "";
}

void curl_init_once() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

// One request and what came back.
struct Request {
  std::string method, bucket, key;
  std::vector<std::pair<std::string, std::string>> query;  // sorted by name before sending
  const std::string* body = nullptr;
  std::string range = "";  // "first-last" (bytes, inclusive) for a ranged GET; "" for the whole object
};

struct Response {
  long status = 0;
  std::string body;
  std::map<std::string, std::string> headers;  // lower-case names
};

size_t on_body(char* p, size_t size, size_t n, void* out) {
  static_cast<std::string*>(out)->append(p, size * n);
  return size * n;
}

size_t on_header(char* p, size_t size, size_t n, void* out) {
  std::string line(p, size * n);
  const auto colon = line.find(':');
  if (colon != std::string::npos) {
    std::string name = line.substr(0, colon), value = line.substr(colon + 1);
    std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return std::tolower(c); });
    const auto b = value.find_first_not_of(" \t"), e = value.find_last_not_of(" \t\r\n");
    value = b == std::string::npos ? "" : value.substr(b, e - b + 1);
    (*static_cast<std::map<std::string, std::string>*>(out))[name] = value;
  }
  return size * n;
}

struct ReadCursor {
  const std::string* data;
  size_t off = 0;
};

size_t on_read(char* p, size_t size, size_t n, void* in) {
  auto* c = static_cast<ReadCursor*>(in);
  const size_t k = std::min(size * n, c->data->size() - c->off);
  std::copy_n(c->data->data() + c->off, k, p);
  c->off += k;
  return k;
}

// S3's <Error><Code>..</Code><Message>..</Message></Error>, if the body is one.
std::pair<std::string, std::string> s3_error_of(const std::string& body) {
  pugi::xml_document doc;
  if (body.empty() || !doc.load_buffer(body.data(), body.size())) return {};
  auto e = doc.child("Error");
  return {e.child_value("Code"), e.child_value("Message")};
}

bool transient(long status, const std::string& code) {
  return status == 0 || status >= 500 || status == 429 || code == "SlowDown" || code == "InternalError" ||
         code == "RequestTimeout";
}

}  // namespace

std::string s3_encode(const std::string& s, bool keep_slash) { return percent_encode(s, keep_slash); }

S3Settings S3Settings::resolve(const CheckpointS3Spec& spec) {
  S3Settings s;
  s.region = !spec.region.empty() ? spec.region : first_env({"AWS_REGION", "AWS_DEFAULT_REGION"});
  if (s.region.empty()) s.region = "us-east-1";
  const std::string endpoint = !spec.endpoint.empty() ? spec.endpoint : first_env({"AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL"});
  s.path_style = spec.path_style.value_or(!endpoint.empty());
  s.endpoint = !endpoint.empty() ? endpoint : "https://s3." + s.region + ".amazonaws.com";
  while (!s.endpoint.empty() && s.endpoint.back() == '/') s.endpoint.pop_back();
  if (s.endpoint.rfind("http://", 0) != 0 && s.endpoint.rfind("https://", 0) != 0)
    throw std::invalid_argument("s3 endpoint must start with http:// or https://, got \"" + s.endpoint + "\"");
  if (s.endpoint.find('/', s.endpoint.find("//") + 2) != std::string::npos)
    throw std::invalid_argument("s3 endpoint must have no path, got \"" + s.endpoint + "\"");
  s.access_key = env("AWS_ACCESS_KEY_ID");
  s.secret_key = env("AWS_SECRET_ACCESS_KEY");
  s.session_token = env("AWS_SESSION_TOKEN");
  if (s.access_key.empty() || s.secret_key.empty())
    throw std::invalid_argument(
        "s3: no credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (on Kubernetes, name a Secret "
        "holding them in spec.checkpoint.s3.credentialsSecret)");
  s.part_size = spec.part_size_mib << 20;
  return s;
}

struct S3Client::Impl {
  const S3Settings& s;
  // mu: one try at a time on the handle (a libcurl handle is not shared), and the figures. Held
  // for one try, never across a retry's back-off: another thread's request goes on meanwhile.
  swarm::Mutex mu;
  CURL* curl GUARDED_BY(mu) = nullptr;
  S3Traffic traffic GUARDED_BY(mu);

  explicit Impl(const S3Settings& settings) : s(settings) {
    curl_init_once();
    curl = curl_easy_init();
    if (curl == nullptr) throw std::runtime_error("s3: curl_easy_init failed");
  }
  ~Impl() { curl_easy_cleanup(curl); }

  std::string url_of(const Request& r) const {
    const auto scheme_end = s.endpoint.find("//") + 2;
    std::string url = s.path_style ? s.endpoint + "/" + r.bucket
                                   : s.endpoint.substr(0, scheme_end) + r.bucket + "." + s.endpoint.substr(scheme_end);
    url += "/" + s3_encode(r.key, true);
    auto q = r.query;
    std::sort(q.begin(), q.end());
    for (size_t i = 0; i < q.size(); ++i)
      url += (i == 0 ? "?" : "&") + s3_encode(q[i].first, false) + "=" + s3_encode(q[i].second, false);
    return url;
  }

  // One try: the HTTP status (0 when none came) and curl's error text in `failure`.
  Response send_once(const Request& r, std::string& failure) REQUIRES(mu) {
    Response out;
    curl_easy_reset(curl);
    const std::string url = url_of(r);
    const std::string sigv4 = "aws:amz:" + s.region + ":s3";
    const std::string userpwd = s.access_key + ":" + s.secret_key;
    const std::string empty;
    const std::string& body = r.body != nullptr ? *r.body : empty;
    curl_slist* headers = nullptr;
    headers = curl_slist_append(headers, ("x-amz-content-sha256: " + crypto::sha256_hex(body)).c_str());
    if (!s.session_token.empty())
      headers = curl_slist_append(headers, ("x-amz-security-token: " + s.session_token).c_str());
    if (r.method == "POST") headers = curl_slist_append(headers, "Content-Type: application/xml");
    ReadCursor cursor{&body};
    curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
    curl_easy_setopt(curl, CURLOPT_AWS_SIGV4, sigv4.c_str());
    curl_easy_setopt(curl, CURLOPT_USERPWD, userpwd.c_str());
    curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
    curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
    // No 100-continue round trip per part. (An empty "Expect:" header would remove it too, but
    // libcurl 7.88 signs that empty header, and the server's signature then differs.)
    curl_easy_setopt(curl, CURLOPT_EXPECT_100_TIMEOUT_MS, 0L);
    curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(s.connect_timeout_seconds * 1000));
    curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, static_cast<long>(s.request_timeout_seconds * 1000));
    curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(curl, CURLOPT_WRITEDATA, &out.body);
    curl_easy_setopt(curl, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(curl, CURLOPT_HEADERDATA, &out.headers);
    if (r.method == "PUT") {
      curl_easy_setopt(curl, CURLOPT_UPLOAD, 1L);
      curl_easy_setopt(curl, CURLOPT_READFUNCTION, on_read);
      curl_easy_setopt(curl, CURLOPT_READDATA, &cursor);
      curl_easy_setopt(curl, CURLOPT_INFILESIZE_LARGE, static_cast<curl_off_t>(body.size()));
    } else if (r.method == "POST") {
      curl_easy_setopt(curl, CURLOPT_POST, 1L);
      curl_easy_setopt(curl, CURLOPT_POSTFIELDS, body.data());
      curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(body.size()));
    } else if (r.method == "HEAD") {
      curl_easy_setopt(curl, CURLOPT_NOBODY, 1L);
    } else if (r.method != "GET") {
      curl_easy_setopt(curl, CURLOPT_CUSTOMREQUEST, r.method.c_str());
    }
    if (!r.range.empty()) curl_easy_setopt(curl, CURLOPT_RANGE, r.range.c_str());
    const CURLcode rc = curl_easy_perform(curl);
    curl_slist_free_all(headers);
    if (rc != CURLE_OK) {
      failure = curl_easy_strerror(rc);
      return out;
    }
    curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &out.status);
    traffic.bytes_up += static_cast<int64_t>(body.size());
    traffic.bytes_down += static_cast<int64_t>(out.body.size());
    return out;
  }

  // Sends with retries; throws S3Error unless the answer is 2xx (or 404 with allow_404).
  // CompleteMultipartUpload may answer 200 with an <Error> body: that counts as a failure.
  Response send(const Request& r, const std::string& what, bool allow_404 = false) EXCLUDES(mu) {
    std::string failure, code, message;
    long status = 0;
    for (int attempt = 1;; ++attempt) {
      Response resp;
      {
        swarm::MutexLock lock(mu);
        ++traffic.requests;
        failure.clear();
        resp = send_once(r, failure);
      }
      status = resp.status;
      const bool ok2xx = status >= 200 && status < 300;
      // An object's bytes are never read as XML; an error answer and a POST's answer are.
      code.clear();
      message.clear();
      if (!ok2xx || r.method == "POST") std::tie(code, message) = s3_error_of(resp.body);
      if ((ok2xx && code.empty()) || (allow_404 && status == 404)) return resp;
      if (ok2xx) status = 500;  // an <Error> inside a 200 answer (CompleteMultipartUpload): retry
      if (!transient(status, code) || attempt >= s.attempts) break;
      {
        swarm::MutexLock lock(mu);
        ++traffic.retries;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(200 << (attempt - 1)));  // unlocked
    }
    std::string where = what + " s3://" + r.bucket + "/" + r.key + " at " + s.endpoint + ": ";
    if (status == 0) throw S3Error(where + "no answer (" + failure + ")", 0, "");
    throw S3Error(where + "HTTP " + std::to_string(status) + (code.empty() ? "" : " " + code) +
                      (message.empty() ? "" : ": " + message),
                  status, code);
  }
};

S3Client::S3Client(S3Settings settings) : impl_(nullptr), settings_(std::move(settings)) {
  if (settings_.part_size < (5 << 20)) throw std::invalid_argument("s3: part size must be >= 5 MiB");
  impl_ = new Impl(settings_);
}

S3Client::~S3Client() { delete impl_; }

S3Traffic S3Client::traffic() const {
  swarm::MutexLock lock(impl_->mu);
  return impl_->traffic;
}

void S3Client::put(const std::string& bucket, const std::string& key, const std::string& bytes) {
  if (static_cast<int64_t>(bytes.size()) <= settings_.part_size) {
    impl_->send({"PUT", bucket, key, {}, &bytes}, "PUT");
    return;
  }
  auto created = impl_->send({"POST", bucket, key, {{"uploads", ""}}, nullptr}, "CreateMultipartUpload");
  pugi::xml_document doc;
  doc.load_buffer(created.body.data(), created.body.size());
  const std::string upload_id = doc.child("InitiateMultipartUploadResult").child_value("UploadId");
  if (upload_id.empty())
    throw S3Error("CreateMultipartUpload s3://" + bucket + "/" + key + ": no UploadId in the answer", 0, "");
  try {
    std::string complete = "<CompleteMultipartUpload>";
    const size_t part = static_cast<size_t>(settings_.part_size);
    for (size_t off = 0, n = 1; off < bytes.size(); off += part, ++n) {
      const std::string chunk = bytes.substr(off, part);
      auto r = impl_->send({"PUT", bucket, key, {{"partNumber", std::to_string(n)}, {"uploadId", upload_id}}, &chunk},
                           "UploadPart " + std::to_string(n) + " of");
      const auto etag = r.headers.find("etag");
      if (etag == r.headers.end())
        throw S3Error("UploadPart s3://" + bucket + "/" + key + ": no ETag in the answer", r.status, "");
      complete += "<Part><PartNumber>" + std::to_string(n) + "</PartNumber><ETag>" + etag->second + "</ETag></Part>";
    }
    complete += "</CompleteMultipartUpload>";
    impl_->send({"POST", bucket, key, {{"uploadId", upload_id}}, &complete}, "CompleteMultipartUpload");
  } catch (...) {
    try {
      impl_->send({"DELETE", bucket, key, {{"uploadId", upload_id}}, nullptr}, "AbortMultipartUpload", true);
    } catch (const S3Error&) {
      // The upload stays incomplete and invisible; a bucket lifecycle rule removes it.
    }
    throw;
  }
}

std::optional<std::string> S3Client::get(const std::string& bucket, const std::string& key) {
  auto r = impl_->send({"GET", bucket, key, {}, nullptr}, "GET", true);
  if (r.status == 404) return std::nullopt;
  return std::move(r.body);
}

std::optional<int64_t> S3Client::size(const std::string& bucket, const std::string& key) {
  auto r = impl_->send({"HEAD", bucket, key, {}, nullptr}, "HEAD", true);
  if (r.status == 404) return std::nullopt;
  const auto len = r.headers.find("content-length");
  if (len == r.headers.end())
    throw S3Error("HEAD s3://" + bucket + "/" + key + ": no Content-Length in the answer", r.status, "");
  return std::atoll(len->second.c_str());
}

std::string S3Client::get_range(const std::string& bucket, const std::string& key, uint64_t offset, uint64_t length) {
  if (length == 0) return "";
  Request req{"GET", bucket, key, {}, nullptr};
  req.range = std::to_string(offset) + "-" + std::to_string(offset + length - 1);
  auto r = impl_->send(req, "GET (bytes " + req.range + ") of", true);
  const std::string where = "GET s3://" + bucket + "/" + key + " bytes " + req.range;
  if (r.status == 404) throw S3Error(where + ": the object does not exist", 404, "NoSuchKey");
  // 206 with exactly the bytes asked for; a server that ignored the range answers 200 with all.
  if (r.status != 206 || r.body.size() != length)
    throw S3Error(where + ": the answer held " + std::to_string(r.body.size()) + " bytes (HTTP " +
                      std::to_string(r.status) + "), not the " + std::to_string(length) + " asked for",
                  r.status, "");
  return std::move(r.body);
}

std::vector<S3Object> S3Client::list(const std::string& bucket, const std::string& prefix) {
  std::vector<S3Object> out;
  std::string token;
  for (;;) {
    Request req{"GET", bucket, "", {{"list-type", "2"}, {"max-keys", std::to_string(settings_.list_page_size)}, {"prefix", prefix}}, nullptr};
    if (!token.empty()) req.query.emplace_back("continuation-token", token);
    auto r = impl_->send(req, "ListObjectsV2 of");
    pugi::xml_document doc;
    if (!doc.load_buffer(r.body.data(), r.body.size()))
      throw S3Error("ListObjectsV2 s3://" + bucket + "/" + prefix + ": the answer is not XML", r.status, "");
    auto root = doc.child("ListBucketResult");
    for (auto c : root.children("Contents"))
      out.push_back({c.child_value("Key"), std::atoll(c.child_value("Size"))});
    token = root.child_value("NextContinuationToken");
    if (std::string(root.child_value("IsTruncated")) != "true" || token.empty()) break;
  }
  std::sort(out.begin(), out.end(), [](const S3Object& a, const S3Object& b) { return a.key < b.key; });
  return out;
}

void S3Client::remove(const std::string& bucket, const std::string& key) {
  impl_->send({"DELETE", bucket, key, {}, nullptr}, "DELETE", true);
}

void S3Client::create_bucket(const std::string& bucket) {
  try {
    impl_->send({"PUT", bucket, "", {}, nullptr}, "CreateBucket");
  } catch (const S3Error& e) {
    if (e.code != "BucketAlreadyOwnedByYou" && e.code != "BucketAlreadyExists") throw;
  }
}

}  // namespace swarm::storage
