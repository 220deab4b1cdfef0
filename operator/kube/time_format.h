// RFC 3339 timestamps as Kubernetes writes them (metav1.Time: seconds; MicroTime: microseconds).
#pragma once

#include <chrono>
#include <string>

namespace swarm::kube {

using SystemTime = std::chrono::system_clock::time_point;

std::string format_time(SystemTime t);        // 2024-05-01T12:00:00Z
std::string format_micro_time(SystemTime t);  // 2024-05-01T12:00:00.123456Z
// Parses either form (and a numeric offset); returns false on bad input.
bool parse_time(const std::string& s, SystemTime& out);
// Seconds since the epoch as a double (for arithmetic in pure code); 0 on bad input.
double to_seconds(const std::string& s);
double to_seconds(SystemTime t);
SystemTime from_seconds(double s);

}  // namespace swarm::kube
