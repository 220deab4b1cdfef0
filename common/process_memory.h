// This process's memory as the kernel counts it (/proc/self/status): the resident set now (VmRSS)
// and its peak so far (VmHWM), for the figures a worker logs and reports (a worker importing one
// stage of a Hugging Face checkpoint holds that stage, not the model: docs/benchmarks.md).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace swarm {

// The value in bytes of a "Name:   1234 kB" line of a /proc/<pid>/status text; nullopt if absent.
std::optional<int64_t> status_kib_field_bytes(const std::string& status_text, const std::string& name);

// VmRSS and VmHWM of this process; nullopt where /proc cannot be read.
std::optional<int64_t> resident_bytes();
std::optional<int64_t> peak_resident_bytes();

}  // namespace swarm
