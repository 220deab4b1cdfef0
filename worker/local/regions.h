// Regions of `swarm local --regions a,b`: which region each process of the run is in. Pure.
//
// Worker i of each stage (counted from 0 in --workers-per-stage order) is in region i mod R, trainer
// t in region t mod R, and a joiner started after a preemption in the region of the worker it
// replaces, as a node pool refills (JoinerRegions; the j-th joiner in region j mod R otherwise). So every
// region holds every stage when each stage has at least R workers, and a stage with fewer workers
// than regions has no home pool in the last regions: their trainers route it to another region.
#pragma once

#include <cstdint>
#include <deque>
#include <string>
#include <utility>
#include <vector>

namespace swarm::runtime {

// "a,b" -> {"a", "b"}: 1..64 distinct names, each a valid region (registry/wire.h). Throws
// std::invalid_argument naming --regions and the value otherwise.
std::vector<std::string> parse_regions(const std::string& list);

// The region of the `index`-th process of a kind (see above); "" when there are no regions.
std::string region_of(const std::vector<std::string>& regions, int64_t index);

// The regions of preempted workers, each handed to the next joiner in order.
class JoinerRegions {
 public:
  explicit JoinerRegions(std::vector<std::string> regions) : regions_(std::move(regions)) {}
  void preempted(const std::string& region) { lost_.push_back(region); }
  // The region of the next joiner: the oldest preempted worker's not yet refilled, else round robin.
  std::string next();

 private:
  std::vector<std::string> regions_;
  std::deque<std::string> lost_;
  int64_t joiners_ = 0;
};

}  // namespace swarm::runtime
