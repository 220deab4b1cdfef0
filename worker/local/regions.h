// Regions of `swarm local --regions a,b`: which region each process of the run is in. Pure.
//
// Worker i of each stage (counted from 0 in --workers-per-stage order) is in region i mod R, trainer
// t in region t mod R, and the j-th joiner started after a preemption in region j mod R. So every
// region holds every stage when each stage has at least R workers, and a stage with fewer workers
// than regions has no home pool in the last regions: their trainers route it to another region.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace swarm::runtime {

// "a,b" -> {"a", "b"}: 1..64 distinct names, each a valid region (registry/wire.h). Throws
// std::invalid_argument naming --regions and the value otherwise.
std::vector<std::string> parse_regions(const std::string& list);

// The region of the `index`-th process of a kind (see above); "" when there are no regions.
std::string region_of(const std::vector<std::string>& regions, int64_t index);

}  // namespace swarm::runtime
