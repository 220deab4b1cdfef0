#include "worker/net/frame.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <limits>
#include <functional>
#include <stdexcept>

namespace swarm::net {

namespace {

template <class T>
void put(uint8_t* p, T v) {
  for (size_t i = 0; i < sizeof(T); ++i) p[i] = static_cast<uint8_t>(static_cast<uint64_t>(v) >> (8 * i));
}

template <class T>
T get(const uint8_t* p) {
  uint64_t v = 0;
  for (size_t i = 0; i < sizeof(T); ++i) v |= static_cast<uint64_t>(p[i]) << (8 * i);
  return static_cast<T>(v);
}

std::string hex32(uint32_t v) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%08X", v);
  return buf;
}

std::string shape_text(const int64_t* dims, size_t ndim) {
  std::string s = "[";
  for (size_t i = 0; i < ndim; ++i) s += (i ? "," : "") + std::to_string(dims[i]);
  return s + "]";
}

[[noreturn]] void fail(const std::string& field, const std::string& what) {
  throw WireError(field + ": " + what);
}

// Checks one tensor's dtype/shape/nbytes; `field` is "tensor[i]" (with "encode: " when writing).
uint64_t check_tensor(const std::string& field, uint8_t raw_dtype, const int64_t* dims,
                      size_t ndim, uint64_t nbytes, uint32_t block) {
  if (!dtype_known(raw_dtype)) {
    fail(field + ".dtype", std::to_string(raw_dtype) + " is not a known dtype");
  }
  DType dt = static_cast<DType>(raw_dtype);
  if (dt == DType::Blockwise8 ? block == 0 || block > 0xffff : block != 0) {
    fail(field + ".block", std::to_string(block) + (dt == DType::Blockwise8 ? " is not a block size in [1, 65535]"
                                                                            : std::string(" must be 0 for ") + dtype_name(dt)));
  }
  for (size_t d = 0; d < ndim; ++d) {
    if (dims[d] < 0) fail(field + ".dims[" + std::to_string(d) + "]", std::to_string(dims[d]) + " is negative");
  }
  uint64_t expect = 0;
  if (!checked_nbytes(dt, dims, ndim, &expect, block)) {
    fail(field + ".shape", shape_text(dims, ndim) + " x " + std::to_string(dtype_size(dt)) +
                               " bytes overflows 64 bits");
  }
  if (expect != nbytes) {
    fail(field + ".nbytes", std::to_string(nbytes) + " does not match shape " + shape_text(dims, ndim) + " of " +
                                dtype_name(dt) + (dt == DType::Blockwise8 ? " in blocks of " + std::to_string(block) : "") +
                                " (" + std::to_string(expect) + " bytes)");
  }
  return expect;
}

class BufferSource : public ByteSource {
 public:
  BufferSource(const uint8_t* p, size_t n) : p_(p), n_(n) {}

  void read(void* dst, size_t n, const char* field, long index) override {
    if (n > n_ - pos_) truncated(n, field, index);
    if (n) std::memcpy(dst, p_ + pos_, n);
    pos_ += n;
  }

  void will_read(uint64_t n, long index) override {
    if (n > n_ - pos_) truncated(n, "data", index);
  }

  size_t pos() const { return pos_; }

 private:
  [[noreturn]] void truncated(uint64_t n, const char* field, long index) {
    std::string where = "frame ends at byte " + std::to_string(n_) + ", " + std::to_string(n) +
                        " bytes needed from byte " + std::to_string(pos_);
    if (std::strcmp(field, "tag") == 0) {
      throw AuthError("frame.tag: authentication failed (tag missing: truncated, " + where + ")");
    }
    fail(field_name(field, index), "truncated (" + where + ")");
  }

  const uint8_t* p_;
  size_t n_;
  size_t pos_ = 0;
};

}  // namespace

std::string field_name(const char* field, long index) {
  if (std::strcmp(field, "tag") == 0) return "frame.tag";
  if (index < 0) return field;
  return "tensor[" + std::to_string(index) + "]." + field;
}

void encode_header(const FrameHeader& h, uint8_t out[kHeaderBytes]) {
  std::memset(out, 0, kHeaderBytes);
  put<uint32_t>(out + 0, h.magic);
  put<uint16_t>(out + 4, h.version);
  put<uint16_t>(out + 6, h.type);
  put<uint64_t>(out + 8, h.request_id);
  put<uint32_t>(out + 16, h.meta_len);
  put<uint32_t>(out + 20, h.n_tensors);
  put<uint64_t>(out + 24, h.body_len);
}

FrameHeader parse_header(const uint8_t in[kHeaderBytes]) {
  FrameHeader h;
  h.magic = get<uint32_t>(in + 0);
  h.version = get<uint16_t>(in + 4);
  h.type = get<uint16_t>(in + 6);
  h.request_id = get<uint64_t>(in + 8);
  h.meta_len = get<uint32_t>(in + 16);
  h.n_tensors = get<uint32_t>(in + 20);
  h.body_len = get<uint64_t>(in + 24);
  return h;
}

void validate_header(const FrameHeader& h, const Limits& lim) {
  if (h.magic != kMagic) fail("header.magic", hex32(h.magic) + " is not SWRM (" + hex32(kMagic) + ")");
  if (h.version != kVersion) {
    fail("header.version", std::to_string(h.version) + " is not supported (expected " +
                               std::to_string(kVersion) + ")");
  }
  if (h.meta_len > lim.max_meta_bytes) {
    fail("header.meta_len", std::to_string(h.meta_len) + " exceeds limit " + std::to_string(lim.max_meta_bytes));
  }
  if (h.n_tensors > lim.max_tensors) {
    fail("header.n_tensors", std::to_string(h.n_tensors) + " exceeds limit " + std::to_string(lim.max_tensors));
  }
  uint64_t fixed = kHeaderBytes + h.meta_len + kTagBytes;
  if (lim.max_frame_bytes < fixed || h.body_len > lim.max_frame_bytes - fixed) {
    fail("header.body_len", std::to_string(h.body_len) + " makes the frame exceed max_frame_bytes " +
                                std::to_string(lim.max_frame_bytes));
  }
  if (h.body_len < h.n_tensors * desc_bytes(0)) {
    fail("header.body_len", std::to_string(h.body_len) + " is too small for " +
                                std::to_string(h.n_tensors) + " tensor descriptors");
  }
}

OutFrame prepare_frame(const Message& m) {
  if (m.meta.size() > std::numeric_limits<uint32_t>::max()) {
    fail("encode: meta", std::to_string(m.meta.size()) + " bytes do not fit a u32 meta_len");
  }
  if (m.tensors.size() > std::numeric_limits<uint32_t>::max()) {
    fail("encode: n_tensors", std::to_string(m.tensors.size()) + " do not fit a u32");
  }
  OutFrame f;
  size_t head_len = kHeaderBytes + m.meta.size();
  uint64_t body = 0;
  for (size_t i = 0; i < m.tensors.size(); ++i) {
    const WireTensor& t = m.tensors[i];
    std::string field = "encode: tensor[" + std::to_string(i) + "]";
    if (t.shape.size() > kMaxWireNdim) {
      fail(field + ".ndim", std::to_string(t.shape.size()) + " exceeds the wire maximum 255");
    }
    check_tensor(field, static_cast<uint8_t>(t.dtype), t.shape.data(), t.shape.size(), t.nbytes, t.block);
    if (t.data == nullptr && t.nbytes != 0) fail(field + ".data", "null pointer");
    head_len += desc_bytes(t.shape.size());
    body += desc_bytes(t.shape.size()) + t.nbytes;
  }
  FrameHeader h;
  h.type = m.type;
  h.request_id = m.request_id;
  h.meta_len = static_cast<uint32_t>(m.meta.size());
  h.n_tensors = static_cast<uint32_t>(m.tensors.size());
  h.body_len = body;

  f.head.resize(head_len);
  uint8_t* p = reinterpret_cast<uint8_t*>(f.head.data());
  encode_header(h, p);
  if (!m.meta.empty()) std::memcpy(p + kHeaderBytes, m.meta.data(), m.meta.size());
  size_t pos = kHeaderBytes + m.meta.size();
  f.desc_pos.reserve(m.tensors.size() + 1);
  for (const WireTensor& t : m.tensors) {
    f.desc_pos.push_back(pos);
    uint8_t* d = p + pos;
    std::memset(d, 0, kDescFixedBytes);
    d[0] = static_cast<uint8_t>(t.dtype);
    d[1] = static_cast<uint8_t>(t.shape.size());
    put<uint16_t>(d + 2, static_cast<uint16_t>(t.block));
    for (size_t k = 0; k < t.shape.size(); ++k) put<uint64_t>(d + 8 + 8 * k, static_cast<uint64_t>(t.shape[k]));
    put<uint64_t>(d + 8 + 8 * t.shape.size(), t.nbytes);
    pos += desc_bytes(t.shape.size());
  }
  f.desc_pos.push_back(pos);
  f.total_bytes = kHeaderBytes + m.meta.size() + body + kTagBytes;
  return f;
}

void for_each_body_piece(const OutFrame& f, const Message& m, const std::function<void(const uint8_t*, size_t)>& fn) {
  const auto* head = reinterpret_cast<const uint8_t*>(f.head.data());
  const size_t first_end = f.desc_pos.size() > 1 ? f.desc_pos[1] : f.head.size();
  if (first_end > kHeaderBytes) fn(head + kHeaderBytes, first_end - kHeaderBytes);
  for (size_t i = 0; i < m.tensors.size(); ++i) {
    if (i > 0) fn(head + f.desc_pos[i], f.desc_pos[i + 1] - f.desc_pos[i]);
    if (m.tensors[i].nbytes) fn(m.tensors[i].data, m.tensors[i].nbytes);
  }
}

std::string encode_frame(const Message& m, FrameCipher& tx) {
  OutFrame f = prepare_frame(m);
  std::string out;
  out.reserve(f.total_bytes);
  out.append(f.head, 0, kHeaderBytes);
  tx.begin_seal(reinterpret_cast<const uint8_t*>(f.head.data()));
  for_each_body_piece(f, m, [&](const uint8_t* p, size_t n) {
    const size_t at = out.size();
    out.append(reinterpret_cast<const char*>(p), n);
    auto* q = reinterpret_cast<uint8_t*>(out.data()) + at;
    tx.update(q, q, n);  // encrypts in place, or only authenticates
  });
  const auto tag = tx.finish_seal();
  out.append(reinterpret_cast<const char*>(tag.data()), tag.size());
  return out;
}

Message read_frame(ByteSource& src, FrameCipher& rx, const Limits& lim, FrameHeader* header_out) {
  uint8_t hb[kHeaderBytes];
  src.read(hb, sizeof hb, "header", -1);
  FrameHeader h = parse_header(hb);
  validate_header(h, lim);
  if (header_out) *header_out = h;

  rx.begin_open(hb);
  auto open = [&](void* p, size_t n) { rx.update(p, p, n); };  // decrypts in place, or authenticates
  Message m;
  m.type = h.type;
  m.request_id = h.request_id;
  m.meta.resize(h.meta_len);
  src.read(m.meta.data(), h.meta_len, "meta", -1);
  open(m.meta.data(), m.meta.size());

  uint64_t left = h.body_len;  // body bytes not yet accounted for
  m.tensors.reserve(h.n_tensors);
  uint8_t desc[desc_bytes(kMaxWireNdim)];
  int64_t dims[kMaxWireNdim];
  for (uint32_t i = 0; i < h.n_tensors; ++i) {
    std::string field = "tensor[" + std::to_string(i) + "]";
    if (left < desc_bytes(0)) {
      fail(field, "descriptor overruns header.body_len (" + std::to_string(left) + " bytes left)");
    }
    src.read(desc, kDescFixedBytes, "desc", i);
    open(desc, kDescFixedBytes);
    uint8_t raw_dtype = desc[0];
    size_t ndim = desc[1];
    const uint32_t block = get<uint16_t>(desc + 2);
    if (!dtype_known(raw_dtype)) fail(field + ".dtype", std::to_string(raw_dtype) + " is not a known dtype");
    if (ndim > lim.max_ndim) {
      fail(field + ".ndim", std::to_string(ndim) + " exceeds limit " + std::to_string(lim.max_ndim));
    }
    uint64_t dlen = desc_bytes(ndim);
    if (left < dlen) {
      fail(field, "descriptor of " + std::to_string(dlen) + " bytes overruns header.body_len (" +
                      std::to_string(left) + " bytes left)");
    }
    src.read(desc + kDescFixedBytes, dlen - kDescFixedBytes, "dims", i);
    open(desc + kDescFixedBytes, dlen - kDescFixedBytes);
    left -= dlen;
    for (size_t d = 0; d < ndim; ++d) dims[d] = get<int64_t>(desc + 8 + 8 * d);
    uint64_t nbytes = get<uint64_t>(desc + 8 + 8 * ndim);
    check_tensor(field, raw_dtype, dims, ndim, nbytes, block);
    if (nbytes > lim.max_tensor_bytes) {
      fail(field + ".nbytes", std::to_string(nbytes) + " exceeds limit " + std::to_string(lim.max_tensor_bytes));
    }
    if (nbytes > left) {
      fail(field + ".nbytes", std::to_string(nbytes) + " overruns header.body_len (" +
                                  std::to_string(left) + " bytes left)");
    }
    src.will_read(nbytes, i);
    WireTensor t = WireTensor::allocate(static_cast<DType>(raw_dtype), std::vector<int64_t>(dims, dims + ndim), block);
    // Straight into the tensor's own buffer, a chunk at a time: each chunk is opened (decrypted
    // in place, or authenticated) while it is still in the cache.
    for (uint64_t done = 0; done < t.nbytes;) {
      const size_t k = static_cast<size_t>(std::min<uint64_t>(t.nbytes - done, kChunkBytes));
      src.read(t.data + done, k, "data", i);
      open(t.data + done, k);
      done += k;
    }
    left -= nbytes;
    m.tensors.push_back(std::move(t));
  }
  if (left != 0) {
    fail("header.body_len", std::to_string(h.body_len) + " leaves " + std::to_string(left) +
                                " bytes after the last tensor");
  }
  uint8_t tag[kTagBytes];
  src.read(tag, sizeof tag, "tag", -1);
  rx.finish_open(tag);
  return m;
}

Message decode_frame(const uint8_t* p, size_t n, FrameCipher& rx, const Limits& limits) {
  BufferSource src(p, n);
  Message m = read_frame(src, rx, limits);
  if (src.pos() != n) {
    fail("frame", std::to_string(n - src.pos()) + " trailing bytes after frame.tag");
  }
  return m;
}

}  // namespace swarm::net
