#include "operator/controller/kueue_sync.h"

#include <spdlog/spdlog.h>

#include "operator/controller/manifests.h"

namespace swarm::op {

using kube::json;
using Kind = kueue::WorkloadWrite::Kind;

std::vector<kueue::WorkloadView> KueueSync::workloads_of(const std::string& ns, const std::string& job) const {
  std::vector<kueue::WorkloadView> out;
  workloads_.for_each([&](const json& w) {
    const auto& md = w["metadata"];
    if (md.value("namespace", "") != ns) return;
    if (md.value("labels", json::object()).value(kLabelJob, "") != job) return;
    out.push_back(kueue::workload_view(w));
  });
  return out;
}

std::map<std::string, kueue::Flavor> KueueSync::flavors() const {
  std::map<std::string, kueue::Flavor> out;
  flavors_.for_each([&](const json& f) {
    kueue::Flavor v = kueue::flavor_view(f);
    out[v.name] = std::move(v);
  });
  return out;
}

std::optional<kueue::Priority> KueueSync::priority(const SwarmJob& job, std::string* problem) const {
  auto it = job.labels.find(kueue::kPriorityClassLabel);
  if (it == job.labels.end()) return std::nullopt;
  auto wpc = priority_classes_.get(it->second);
  if (!wpc || !(*wpc).contains("value") || !(*wpc)["value"].is_number_integer()) {
    if (problem)
      *problem = "WorkloadPriorityClass \"" + it->second + "\" (label " + kueue::kPriorityClassLabel +
                 " on the job) not found: no Workload is made until it exists";
    return std::nullopt;
  }
  return kueue::Priority{it->second, (*wpc)["value"].get<std::int32_t>()};
}

bool KueueSync::write(const std::string& ns, const kueue::WorkloadWrite& w) {
  const std::string collection = kube::resource_path(kueue::kGroupVersion, ns, kueue::kWorkloadsPlural);
  const std::string path = collection + "/" + w.name;
  try {
    switch (w.kind) {
      case Kind::Create:
        workloads_.upsert(client_.create(collection, w.body));
        break;
      case Kind::PatchSpec:
      case Kind::Release:
        workloads_.upsert(client_.patch(path, w.body));
        break;
      case Kind::PatchStatus:
        workloads_.upsert(client_.patch(path + "/status", w.body));
        break;
      case Kind::Delete:
        client_.remove(path);
        break;
    }
  } catch (const kube::ApiError& e) {
    if (e.not_found() && w.kind != Kind::Create) return true;  // gone already: nothing left to do
    if (!e.conflict()) throw;
    // AlreadyExists (a previous pass made it) or a stale resourceVersion: decide again from the
    // object as it is now.
    spdlog::debug("{}/{}: {} refused ({}), deciding again", ns, w.name, static_cast<int>(w.kind), e.what());
    return false;
  }
  return true;
}

bool KueueSync::apply(const SwarmJob& job, const kueue::Decision& d) {
  bool fresh = true;
  for (const auto& w : d.writes) {
    if (!write(job.namespace_, w)) {
      fresh = false;
      break;  // later writes were decided on the same (stale) view
    }
    spdlog::info("{}/{}: Workload {}: {}", job.namespace_, job.name, w.name,
                 w.kind == Kind::Create        ? "created"
                 : w.kind == Kind::PatchSpec   ? "spec " + w.body["spec"].dump()
                 : w.kind == Kind::PatchStatus ? "status written"
                 : w.kind == Kind::Release     ? "finalizer removed"
                                               : "deleted");
  }
  return fresh;
}

void KueueSync::release_all(const std::string& ns, const std::string& job) {
  for (const auto& w : kueue::release_all(workloads_of(ns, job))) write(ns, w);
}

}  // namespace swarm::op
