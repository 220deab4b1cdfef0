// The framed binary wire format (docs/architecture.md, "Wire format"), little-endian, version 2:
//
//   FrameHeader (40 bytes): u32 magic 'SWRM' | u16 version 2 | u16 type | u64 request_id |
//                           u32 meta_len | u32 n_tensors | u64 body_len | u8 reserved[8]
//   meta                    meta_len bytes of JSON
//   n_tensors x { TensorDesc: u8 dtype | u8 ndim | u16 block | u32 reserved2 |
//                             i64 dims[ndim] | u64 nbytes ; data[nbytes] }
//   u8 tag[16]              AES-256-GCM tag over every byte before it (session.h)
//
// body_len counts every TensorDesc and every data block. Reserved fields are written as zero and
// ignored when read. `block` is the values per block of a blockwise8 tensor (blockwise8.h: its data
// is f32 scales[ceil(numel / block)] | i8 codes[numel], and nbytes must be exactly that) and must be
// 0 for every other dtype. Frames travel inside a session (session.h): the header is associated data,
// everything after it is encrypted when the job's transport is "encrypted" and associated data
// when it is "authenticated"; either way a changed byte anywhere fails the tag.
//
// Reading validates every field against the contract and `Limits` and throws WireError naming the
// field and the value (AuthError for the tag). The same reader serves a socket (tensor bytes land
// straight in their final, 64-byte aligned buffer, and are decrypted there) and a byte buffer
// (decode_frame). Nothing read is used before the tag is checked: read_frame returns only then.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "worker/net/auth.h"
#include "worker/net/dtype.h"
#include "worker/net/errors.h"
#include "worker/net/message.h"
#include "worker/net/session.h"

namespace swarm::net {

constexpr uint32_t kMagic = 0x4D525753;  // "SWRM" as little-endian bytes
constexpr uint16_t kVersion = 2;
constexpr size_t kHeaderBytes = 40;
constexpr size_t kDescFixedBytes = 8;  // dtype, ndim, block, reserved2
constexpr size_t kMaxWireNdim = 255;   // ndim is a u8
constexpr size_t kChunkBytes = 64 * 1024;  // tensor bytes are sealed and opened this many at a time

// Bytes of one TensorDesc of rank ndim: fixed part, dims, nbytes.
constexpr uint64_t desc_bytes(size_t ndim) { return kDescFixedBytes + 8 * ndim + 8; }

struct Limits {
  uint32_t max_meta_bytes = 64 * 1024;
  uint32_t max_tensors = 64;
  uint32_t max_ndim = 8;
  uint64_t max_tensor_bytes = 1ull << 31;
  uint64_t max_frame_bytes = 4ull << 30;  // header + meta + body + mac
};

struct FrameHeader {
  uint32_t magic = kMagic;
  uint16_t version = kVersion;
  uint16_t type = 0;
  uint64_t request_id = 0;
  uint32_t meta_len = 0;
  uint32_t n_tensors = 0;
  uint64_t body_len = 0;
};

void encode_header(const FrameHeader& h, uint8_t out[kHeaderBytes]);
FrameHeader parse_header(const uint8_t in[kHeaderBytes]);  // no checks
void validate_header(const FrameHeader& h, const Limits& limits);  // throws WireError

// ---- writing --------------------------------------------------------------------------------

// A contiguous piece of an outgoing frame.
struct Piece {
  const void* data;
  size_t size;
};

// An outgoing frame before it is sealed: header and descriptors built, tensor bytes where they
// are. A connection seals it as it writes (Connection::send); encode_frame into one string.
struct OutFrame {
  std::string head;              // header || meta || desc_0 || ... || desc_{n-1}
  std::vector<size_t> desc_pos;  // where desc_i starts in head; n+1 entries, last = head.size()
  uint64_t total_bytes = 0;      // whole frame on the wire, tag included
};

// Validates `m` (dtype, shape, nbytes, data) and builds its header and descriptors.
// Throws WireError ("encode: tensor[0].nbytes: ...").
OutFrame prepare_frame(const Message& m);

// Calls fn for every byte range after the header, in wire order: meta and desc_0, data_0, desc_1,
// data_1, ...
void for_each_body_piece(const OutFrame& f, const Message& m, const std::function<void(const uint8_t*, size_t)>& fn);

// The whole frame as one string, sealed as the next frame of `tx`'s direction (copies the tensor
// bytes; for tests and tools).
std::string encode_frame(const Message& m, FrameCipher& tx);

// ---- reading --------------------------------------------------------------------------------

// Where a frame is read from. `field`/`index` name what is being read ("header", "meta",
// "desc", "dims", "data", "mac"; index = tensor number or -1), for error messages.
class ByteSource {
 public:
  virtual ~ByteSource() = default;
  // Fills exactly n bytes or throws.
  virtual void read(void* dst, size_t n, const char* field, long index) = 0;
  // Called before a buffer of n bytes is allocated for tensor `index`; a source that already
  // knows it cannot deliver them may throw here instead of after a useless allocation.
  virtual void will_read(uint64_t n, long index) { (void)n; (void)index; }
};

// "tensor[3].data", "meta", "frame.mac", ...
std::string field_name(const char* field, long index);

// Reads and validates one frame. If `header_out` is given it receives the header as soon as the
// header passed validation (so a caller can answer a later error with the right request_id).
// `rx` opens it (the next frame of its direction).
Message read_frame(ByteSource& src, FrameCipher& rx, const Limits& limits, FrameHeader* header_out = nullptr);

// Decodes exactly one complete frame from p[0, n): trailing bytes are an error.
Message decode_frame(const uint8_t* p, size_t n, FrameCipher& rx, const Limits& limits);

}  // namespace swarm::net
