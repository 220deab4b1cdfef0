// Kubernetes resource quantities ("500m", "16Gi", "1.5", "2e3", "1k") as numbers: cpu in cores,
// memory in bytes, counts as counts. Pure.
#pragma once

#include <string>

namespace swarm::op {

// Throws std::invalid_argument with the text and what is wrong with it.
double parse_quantity(const std::string& text);

}  // namespace swarm::op
