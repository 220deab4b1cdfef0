// The reports of `swarm local`: trainers' report files merged into one, the live progress line, the
// run's summary file, and the log tail shown when a child fails. Pure formatting and file I/O; no
// processes.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace swarm::runtime {

// The last `lines` lines of a text file, each indented by four spaces ("" when unreadable).
std::string tail_of(const std::string& path, size_t lines);

// A JSON file's value; null when it is missing or not JSON (a report being rewritten).
nlohmann::json read_json(const std::string& path);

// Sums or averages the trainers' reports into one (steps: the most; counts: summed; losses:
// averaged; finished: all of them). cross_region_share: cross_region_hops / microbatch_hops.
nlohmann::json merge_reports(const std::vector<nlohmann::json>& reports);

// The workers' own counts, from their report files (StageServer's write_report): {"events":
// {kind: sum}, "events_unacknowledged": {kind: sum}} over the reports that are JSON objects. A
// worker killed outright writes none, so these are what the workers that stopped counted.
nlohmann::json sum_worker_events(const std::vector<nlohmann::json>& worker_reports);

// The progress line of a report: redrawn in place on a terminal, one line per call otherwise.
void show(const nlohmann::json& report, int64_t max_steps, bool tty, bool final_line);

// Writes the summary as indented JSON; nothing when `path` is empty. Throws naming the path.
void write_summary(const std::string& path, const nlohmann::json& summary);

}  // namespace swarm::runtime
