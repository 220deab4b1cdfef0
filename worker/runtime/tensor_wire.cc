#include "worker/runtime/tensor_wire.h"

#include <stdexcept>

#include "worker/net/blockwise8.h"

namespace swarm::runtime {

net::DType wire_dtype(torch::ScalarType t) {
  switch (t) {
    case torch::kFloat32: return net::DType::Float32;
    case torch::kFloat16: return net::DType::Float16;
    case torch::kBFloat16: return net::DType::BFloat16;
    case torch::kInt64: return net::DType::Int64;
    case torch::kInt32: return net::DType::Int32;
    case torch::kUInt8: return net::DType::UInt8;
    case torch::kFloat64: return net::DType::Float64;
    case torch::kInt8: return net::DType::Int8;
    default: throw std::invalid_argument(std::string("tensor dtype not sendable: ") + c10::toString(t));
  }
}

torch::ScalarType torch_dtype(net::DType t) {
  switch (t) {
    case net::DType::Float32: return torch::kFloat32;
    case net::DType::Float16: return torch::kFloat16;
    case net::DType::BFloat16: return torch::kBFloat16;
    case net::DType::Int64: return torch::kInt64;
    case net::DType::Int32: return torch::kInt32;
    case net::DType::UInt8: return torch::kUInt8;
    case net::DType::Float64: return torch::kFloat64;
    case net::DType::Int8: return torch::kInt8;
    case net::DType::Blockwise8: break;
  }
  throw std::invalid_argument(std::string("no torch dtype for wire dtype ") + net::dtype_name(t));
}

net::WireTensor to_wire(const torch::Tensor& t) {
  auto c = t.detach().to(torch::kCPU).contiguous();
  auto holder = std::make_shared<torch::Tensor>(c);
  std::vector<int64_t> shape(c.sizes().begin(), c.sizes().end());
  return net::WireTensor::view(wire_dtype(c.scalar_type()), shape, c.data_ptr(), holder);
}

torch::Tensor from_wire(const net::WireTensor& w) {
  auto owner = w.owner;
  return torch::from_blob(
      w.data, w.shape, [owner](void*) mutable { owner.reset(); },
      torch::TensorOptions().dtype(torch_dtype(w.dtype)));
}

WireCodec pipeline_codec(const JobSpec& spec) {
  return {spec.pipeline.compression, static_cast<uint32_t>(spec.pipeline.block_size)};
}

WireCodec averaging_codec(const JobSpec& spec) {
  return {spec.averaging.compression, static_cast<uint32_t>(spec.averaging.block_size)};
}

net::WireTensor encode_float(const torch::Tensor& t, const WireCodec& codec, const std::string& what) {
  switch (codec.compression) {
    case Compression::None: return to_wire(t.to(torch::kFloat32));
    case Compression::Fp16: return to_wire(t.to(torch::kFloat16));
    case Compression::Blockwise8: {
      auto c = t.detach().to(torch::kCPU, torch::kFloat32).contiguous();
      std::vector<int64_t> shape(c.sizes().begin(), c.sizes().end());
      return net::blockwise8_tensor(c.data_ptr<float>(), std::move(shape), codec.block, what);
    }
  }
  throw std::invalid_argument(what + ": unknown compression");
}

torch::Tensor decode_float(const net::WireTensor& w, const std::string& what) {
  switch (w.dtype) {
    case net::DType::Float32: return from_wire(w);
    case net::DType::Float16:
    case net::DType::BFloat16: return from_wire(w).to(torch::kFloat32);
    case net::DType::Blockwise8: {
      auto out = torch::empty(w.shape, torch::kFloat32);
      net::blockwise8_decode(w.data, static_cast<uint64_t>(w.numel()), w.block, out.data_ptr<float>(), what);
      return out;
    }
    default:
      throw std::invalid_argument(what + ": expected float32, float16, bfloat16 or blockwise8, got " +
                                  net::dtype_name(w.dtype));
  }
}

}  // namespace swarm::runtime
