// The unit exchanged between peers: a typed message with JSON metadata and tensors.
#pragma once

#include <cstdint>
#include <exception>
#include <memory>
#include <string>
#include <vector>

#include "worker/net/dtype.h"
#include "worker/net/errors.h"

namespace swarm::net {

// One tensor on the wire: dense, contiguous, row-major.
//
// `data` points either
//   - into memory owned by `owner` (a received tensor, or one made by allocate(): one allocation
//     per tensor, 64-byte aligned, so a torch tensor can wrap it zero-copy with
//     torch::from_blob(data, shape, [owner](void*) {}, options)), or
//   - into caller memory that `owner` keeps alive (a tensor to send, made by view(); it is written
//     to the socket straight from that memory and never modified).
// Copies of a WireTensor share the memory.
struct WireTensor {
  DType dtype = DType::Float32;
  std::vector<int64_t> shape;  // empty = 0-dim scalar (one element); blockwise8: the values' shape
  uint32_t block = 0;          // blockwise8: values per block (blockwise8.h); 0 for every other dtype
  uint8_t* data = nullptr;
  size_t nbytes = 0;
  std::shared_ptr<void> owner;

  // Product of shape (1 for a 0-dim scalar, 0 when any dim is 0).
  int64_t numel() const;

  // A new, uninitialised, 64-byte aligned buffer of numel(shape) * dtype_size(dtype) bytes (for
  // Blockwise8 with its scales: checked_nbytes). Throws std::invalid_argument for an unknown dtype,
  // a negative dim, a size that overflows, or a Blockwise8 block outside [1, 65535].
  static WireTensor allocate(DType dtype, std::vector<int64_t> shape, uint32_t block = 0);

  // Wraps caller memory (at least numel(shape) * dtype_size(dtype) bytes) without copying;
  // `keepalive` must keep it valid for as long as the WireTensor (or a copy) lives.
  static WireTensor view(DType dtype, std::vector<int64_t> shape, const void* data,
                         std::shared_ptr<void> keepalive);
};

// Message types. The set is open: the server hands any type to its handler.
enum MessageType : uint16_t {
  Error = 1,
  Forward = 10,
  ForwardReply = 11,
  Backward = 12,
  BackwardReply = 13,
  ForwardBackward = 14,
  ForwardBackwardReply = 15,
  AveragePush = 20,
  AverageReply = 21,
  StateRequest = 30,
  StateReply = 31,
  Ping = 40,
  Pong = 41,
};

struct Message {
  uint16_t type = 0;
  uint64_t request_id = 0;  // the Client assigns it; a reply carries the request's id
  std::string meta;         // JSON object text (may be empty)
  std::vector<WireTensor> tensors;
};

// An Error message; its meta is {"error":"<what>","code":"<code>"} (see ErrorCode).
Message make_error(uint64_t request_id, const std::string& what, ErrorCode code = ErrorCode::Generic);

// The Error message that answers a request whose handling threw `e`: e's text, and e's code when
// it is a CodedError (ErrorCode::Generic otherwise).
Message error_reply(uint64_t request_id, const std::exception& e);

// What an Error message says.
struct ErrorInfo {
  ErrorCode code = ErrorCode::Generic;
  std::string text;
};

// Decodes an Error message's meta: a flat JSON object with a string "error" (the text) and an
// optional string "code" (absent: ErrorCode::Generic, as peers that predate codes send); other
// members with scalar values are ignored. Throws WireError naming the field and the value for
// anything else, e.g. `error.code: "teapot" is not one of error, bad_frame, ...`.
ErrorInfo decode_error(const Message& m);

// The text of an Error message (the whole meta if decode_error refuses it).
std::string error_text(const Message& m);

// `s` as a JSON string literal, quotes included.
std::string json_quote(const std::string& s);

}  // namespace swarm::net
