#include "operator/api/swarmjob.h"

#include "common/job_spec_json.h"
#include "common/s3_url.h"
#include "operator/api/pod_rules.h"

#include <set>

namespace swarm::op {
namespace {

class Errors {
 public:
  void add(const std::string& path, const std::string& msg) { list.push_back(path + ": " + msg); }
  std::vector<std::string> list;
};

int get_int(const json& obj, const char* key, int def, int lo, int hi, const std::string& path, Errors& e) {
  if (!obj.contains(key)) return def;
  const json& v = obj.at(key);
  if (!v.is_number_integer()) {
    e.add(path + "." + key, "must be an integer, got " + v.dump());
    return def;
  }
  const auto n = v.get<long long>();
  if (n < lo) e.add(path + "." + key, "must be >= " + std::to_string(lo) + ", got " + std::to_string(n));
  if (n > hi) e.add(path + "." + key, "must be <= " + std::to_string(hi) + ", got " + std::to_string(n));
  return static_cast<int>(n);
}

std::string get_string(const json& obj, const char* key, const std::string& def, const std::string& path, Errors& e) {
  if (!obj.contains(key)) return def;
  if (!obj.at(key).is_string()) {
    e.add(path + "." + key, "must be a string, got " + obj.at(key).dump());
    return def;
  }
  return obj.at(key).get<std::string>();
}

PodResources take_resources(json& section, const std::string& path, const std::string& def_image, Errors& e) {
  PodResources r;
  r.image = get_string(section, "image", def_image, path, e);
  if (r.image.empty()) e.add(path + ".image", "must not be empty");
  if (section.contains("resources")) {
    r.resources = section["resources"];
    for (auto& problem : resource_problems(r.resources, path + ".resources")) e.list.push_back(std::move(problem));
  }
  section.erase("image");
  section.erase("resources");
  return r;
}

NodePool parse_pool(const json& p, const std::string& path, Errors& e) {
  NodePool pool;
  if (!p.is_object()) {
    e.add(path, "must be an object");
    return pool;
  }
  pool.name = get_string(p, "name", "", path, e);
  if (!is_dns1123_label(pool.name) || pool.name.size() > 20)
    e.add(path + ".name", "must be a DNS-1123 label of at most 20 characters, got \"" + pool.name + "\"");
  // region and zone become the pods' nodeSelector: label values, and an empty one would select the
  // nodes without the label.
  for (auto [key, value] : {std::pair{"region", &pool.region}, std::pair{"zone", &pool.zone}}) {
    *value = get_string(p, key, "", path, e);
    if (p.contains(key) && p[key].is_string() && (value->empty() || !is_label_value(*value)))
      e.add(path + "." + key, std::string("must be a label value (1 to 63 letters, digits, '-', '_' and '.', starting and "
                                          "ending with a letter or digit): the pods select nodes labelled "
                                          "topology.kubernetes.io/") + key + " with it, got \"" + *value + "\"");
  }
  if (p.contains("zone") && !p.contains("region")) e.add(path + ".zone", "a pool with a zone must name its region");
  if (p.contains("nodeSelector")) {
    if (!p["nodeSelector"].is_object()) {
      e.add(path + ".nodeSelector", "must be an object of strings");
    } else {
      for (auto& [k, v] : p["nodeSelector"].items()) {
        const std::string at = path + ".nodeSelector[" + k + "]";
        if (!is_label_key(k))
          e.add(path + ".nodeSelector", "keys must be label keys ([DNS subdomain/]name, the name 1 to 63 letters, "
                                        "digits, '-', '_' and '.'), got \"" + k + "\"");
        if (!v.is_string()) e.add(at, "must be a string, got " + v.dump());
        else if (!is_label_value(v.get<std::string>()))
          e.add(at, "must be a label value (empty, or letters, digits, '-', '_' and '.', starting and ending with a "
                    "letter or digit), got " + v.dump());
        else pool.node_selector[k] = v.get<std::string>();
      }
    }
  }
  if (p.contains("tolerations")) {
    if (!p["tolerations"].is_array()) e.add(path + ".tolerations", "must be a list");
    else pool.tolerations = p["tolerations"];
  }
  pool.max_workers = get_int(p, "maxWorkers", -1, 0, 65536, path, e);
  if (p.contains("preemptible")) {
    if (!p["preemptible"].is_boolean()) e.add(path + ".preemptible", "must be a boolean");
    else pool.preemptible = p["preemptible"].get<bool>();
  }
  if (p.contains("autoscaled")) {
    if (!p["autoscaled"].is_boolean()) e.add(path + ".autoscaled", "must be a boolean, got " + p["autoscaled"].dump());
    else pool.autoscaled = p["autoscaled"].get<bool>();
  }
  pool.priority = get_int(p, "priority", 0, 0, 1000, path, e);
  pool.reclaim_grace_seconds = get_int(p, "reclaimGraceSeconds", -1, 0, 3600, path, e);
  return pool;
}

void read_metadata(const json& obj, SwarmJob& job) {
  const json& md = obj.value("metadata", json::object());
  job.name = md.value("name", "");
  job.namespace_ = md.value("namespace", "default");
  job.uid = md.value("uid", "");
  job.resource_version = md.value("resourceVersion", "");
  job.generation = md.value("generation", 0LL);
  job.creation_timestamp = md.value("creationTimestamp", "");
  const json labels = md.value("labels", json::object());  // items() must not outlive it
  for (const auto& [k, v] : labels.items())
    if (v.is_string()) job.labels[k] = v.get<std::string>();
  job.status = obj.value("status", json::object());
}

// spec.workers / spec.trainers: image, resources, minPerStage, maxPerStage.
void take_pod_sections(json& spec, OperatorSpec& op, Errors& e) {
  json workers = spec.value("workers", json::object());
  json trainers = spec.value("trainers", json::object());
  op.workers = take_resources(workers, "spec.workers", kDefaultImage, e);
  op.trainers = take_resources(trainers, "spec.trainers", op.workers.image, e);
  op.min_per_stage = get_int(workers, "minPerStage", 1, 1, 1024, "spec.workers", e);
  op.max_per_stage = get_int(workers, "maxPerStage", 0, 1, 1024, "spec.workers", e);
  workers.erase("minPerStage");
  workers.erase("maxPerStage");
  if (spec.contains("workers")) spec["workers"] = workers;
  if (spec.contains("trainers")) spec["trainers"] = trainers;
}

// spec.checkpoint.volumeClaimName and spec.checkpoint.s3.credentialsSecret.
void take_checkpoint_fields(json& spec, OperatorSpec& op, Errors& e) {
  if (!spec.contains("checkpoint") || !spec["checkpoint"].is_object()) return;
  json checkpoint = spec["checkpoint"];
  op.checkpoint_claim = get_string(checkpoint, "volumeClaimName", "", "spec.checkpoint", e);
  if (checkpoint.contains("volumeClaimName") && !is_dns1123_subdomain(op.checkpoint_claim))
    e.add("spec.checkpoint.volumeClaimName",
          "must be a PersistentVolumeClaim name (DNS-1123 subdomain), got \"" + op.checkpoint_claim + "\"");
  checkpoint.erase("volumeClaimName");
  if (checkpoint.contains("s3") && checkpoint["s3"].is_object()) {
    json& s3 = checkpoint["s3"];
    op.s3_credentials_secret = get_string(s3, "credentialsSecret", "", "spec.checkpoint.s3", e);
    if (s3.contains("credentialsSecret") && !is_dns1123_subdomain(op.s3_credentials_secret))
      e.add("spec.checkpoint.s3.credentialsSecret",
            "must be a Secret name (DNS-1123 subdomain), got \"" + op.s3_credentials_secret + "\"");
    s3.erase("credentialsSecret");
  }
  spec["checkpoint"] = checkpoint;
}

// The checkpoint fields of the operator against spec.checkpoint.path.
void check_checkpoint(const SwarmJob& job, Errors& e) {
  const OperatorSpec& op = job.op;
  const std::string& path = job.spec.checkpoint.path;
  if (!op.checkpoint_claim.empty() && path.empty())
    e.add("spec.checkpoint.path", "required with spec.checkpoint.volumeClaimName (\"" + op.checkpoint_claim +
                                      "\"): where the claim is mounted in the worker and trainer pods");
  const bool s3 = checkpoints_in_object_storage(job);
  if (!op.checkpoint_claim.empty() && s3)
    e.add("spec.checkpoint.volumeClaimName",
          "cannot be used with an s3:// spec.checkpoint.path (\"" + path + "\"), got \"" + op.checkpoint_claim +
              "\": object storage needs no volume");
  if (!op.s3_credentials_secret.empty() && !s3)
    e.add("spec.checkpoint.s3.credentialsSecret",
          "applies only to an s3:// spec.checkpoint.path, got \"" + op.s3_credentials_secret + "\" with path \"" +
              path + "\"");
  if (s3) {
    // The job's own folder (a prefix with /<job name> appended) must still be a valid location.
    if (auto why = s3_url_problem(checkpoint_folder(job))) e.add("spec.checkpoint.path", "with the job's name: " + *why);
  }
}

// spec.placement and spec.nodePools.
void take_placement(json& spec, OperatorSpec& op, Errors& e) {
  if (spec.contains("placement")) {
    const json& pl = spec["placement"];
    op.unschedulable_seconds = get_int(pl, "unschedulableSeconds", 60, 1, 86400, "spec.placement", e);
    op.retry_pool_seconds = get_int(pl, "retryPoolSeconds", 300, 1, 86400, "spec.placement", e);
    spec.erase("placement");
  }
  if (!spec.contains("nodePools")) return;
  const json& pools = spec["nodePools"];
  if (!pools.is_array()) {
    e.add("spec.nodePools", "must be a list");
  } else if (pools.empty()) {
    // Not read as "anywhere": the list says no pool, and a template that rendered none by mistake
    // would spread the workers over every node of the cluster.
    e.add("spec.nodePools", "must list at least one pool, got []: leave spec.nodePools out to place workers on any node");
  } else {
    std::map<std::string, int> seen;
    for (size_t i = 0; i < pools.size(); ++i) {
      const std::string path = "spec.nodePools[" + std::to_string(i) + "]";
      op.pools.push_back(parse_pool(pools[i], path, e));
      auto [it, fresh] = seen.emplace(op.pools.back().name, static_cast<int>(i));
      if (!fresh) e.add(path + ".name", "duplicate pool name \"" + it->first + "\"");
    }
  }
  spec.erase("nodePools");
}

// Rules across the operator's fields and the JobSpec (checked once both parse).
void check_across(const SwarmJob& job, Errors& e) {
  const OperatorSpec& op = job.op;
  if (op.min_per_stage > job.spec.workers.per_stage)
    e.add("spec.workers.minPerStage", "must be <= spec.workers.perStage (" +
                                          std::to_string(job.spec.workers.per_stage) + "), got " +
                                          std::to_string(op.min_per_stage));
  check_checkpoint(job, e);
  for (size_t i = 0; i < op.pools.size(); ++i) {
    if (!op.pools[i].preemptible || !job.spec.checkpoint.path.empty()) continue;
    e.add("spec.checkpoint.path",
          "must name a durable checkpoint location when a node pool is preemptible (spec.nodePools[" +
              std::to_string(i) + "] \"" + op.pools[i].name +
              "\"): a stage whose last peer is reclaimed loses its parameters and optimizer state without one");
    break;
  }
  if (op.max_per_stage != 0 && op.max_per_stage < job.spec.workers.per_stage)
    e.add("spec.workers.maxPerStage", "must be >= spec.workers.perStage (" +
                                          std::to_string(job.spec.workers.per_stage) + "), got " +
                                          std::to_string(op.max_per_stage));
}

}  // namespace

SwarmJob parse_swarmjob(const json& obj) {
  Errors e;
  SwarmJob job;
  read_metadata(obj, job);

  // Split the operator-only fields off; what remains is exactly the `swarm local` spec.
  json manifest = obj;
  json spec = obj.value("spec", json::object());
  if (!spec.is_object()) spec = json::object();
  take_pod_sections(spec, job.op, e);
  take_checkpoint_fields(spec, job.op, e);
  take_placement(spec, job.op, e);
  if (spec.contains("suspend")) {
    if (!spec["suspend"].is_boolean()) e.add("spec.suspend", "must be a boolean, got " + spec["suspend"].dump());
    else job.op.suspend = spec["suspend"].get<bool>();
    spec.erase("suspend");
  }
  manifest["spec"] = spec;
  manifest.erase("status");

  try {
    job.spec = job_spec_from_json(manifest);
  } catch (const SpecError& se) {
    for (const auto& m : se.errors()) e.list.push_back(m);
  }
  if (e.list.empty()) check_across(job, e);
  if (!e.list.empty()) throw SpecError(e.list);
  return job;
}

bool checkpoints_in_object_storage(const SwarmJob& job) { return is_s3_url(job.spec.checkpoint.path); }

std::string checkpoint_folder(const SwarmJob& job) {
  const std::string& path = job.spec.checkpoint.path;
  if (checkpoints_in_object_storage(job)) {
    std::string root = path;
    while (root.size() > 5 && root.back() == '/') root.pop_back();  // keep "s3://"
    return root + "/" + job.name;
  }
  if (job.op.checkpoint_claim.empty()) return path;
  return (!path.empty() && path.back() == '/' ? path : path + "/") + job.name;
}

Transport resolved_transport(const SwarmJob& job) {
  if (job.spec.security.transport) return *job.spec.security.transport;
  std::set<std::string> regions;
  for (const NodePool& p : job.op.pools)
    if (!p.region.empty()) regions.insert(p.region);
  return regions.size() > 1 ? Transport::Encrypted : Transport::Authenticated;
}

json process_manifest(const SwarmJob& job) {
  JobSpec spec = job.spec;
  spec.checkpoint.path = checkpoint_folder(job);
  spec.security.transport = resolved_transport(job);
  return to_json(spec);
}

int effective_max_per_stage(const SwarmJob& job) {
  return job.op.max_per_stage > 0 ? job.op.max_per_stage
                                  : static_cast<int>(job.spec.workers.per_stage) + 1;
}

}  // namespace swarm::op
