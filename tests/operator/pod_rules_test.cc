// The operator's own check of the SwarmJob fields its pods are made from (operator/api/pod_rules.h,
// parse_swarmjob): node pools, their labels, container resources. The CRD refuses the same jobs
// (tests/operator/crd_validation_test.cc); this is the line behind it, for objects stored under
// an older CRD. Every refusal names the field and the value.
#include "operator/api/pod_rules.h"

#include <gtest/gtest.h>

#include "common/job_spec.h"
#include "operator/api/swarmjob.h"

namespace swarm::op {
namespace {

json job(const json& spec) {
  return {{"apiVersion", kGroupVersion}, {"kind", "SwarmJob"}, {"metadata", {{"name", "j"}, {"namespace", "ns"}}},
          {"spec", spec}};
}

// Every message parse_swarmjob gives `spec`, one a line; "" when it is accepted.
std::string refusal(const json& spec) {
  try {
    parse_swarmjob(job(spec));
  } catch (const SpecError& e) {
    std::string all;
    for (const auto& m : e.errors()) all += m + "\n";
    return all;
  }
  return "";
}

struct Refused {
  const char* what;
  json spec;
  std::string expected;  // the field, the rule and the value
};

json worker_resources(const json& resources) { return {{"workers", {{"resources", resources}}}}; }
json pools(const json& list) { return {{"nodePools", list}}; }

TEST(PodRules, TheJobsThatWouldNeverGetPodsAreRefusedNamingTheFieldAndValue) {
  const std::vector<Refused> cases = {
      {"no pools", pools(json::array()),
       "spec.nodePools: must list at least one pool, got []: leave spec.nodePools out to place workers on any node"},
      {"negative gpu string", worker_resources({{"limits", {{"nvidia.com/gpu", "-1"}}}}),
       "spec.workers.resources.limits[nvidia.com/gpu]: must not be negative, got -1"},
      {"negative gpu integer", worker_resources({{"limits", {{"nvidia.com/gpu", -1}}}}),
       "spec.workers.resources.limits[nvidia.com/gpu]: must not be negative, got -1"},
      {"negative cpu request", {{"trainers", {{"resources", {{"requests", {{"cpu", "-100m"}}}}}}}},
       "spec.trainers.resources.requests[cpu]: must not be negative, got -100m"},
      {"not a quantity", worker_resources({{"limits", {{"memory", "1.2.3Gi"}}}}),
       "spec.workers.resources.limits[memory]: must be a Kubernetes quantity (e.g. 500m, 2, 1.5, 16Gi, 1e3), got "
       "\"1.2.3Gi\""},
      {"a quantity of another type", worker_resources({{"limits", {{"memory", true}}}}),
       "spec.workers.resources.limits[memory]: must be a quantity (a string such as \"500m\", or an integer), got true"},
      {"unknown resource", worker_resources({{"requests", {{"cpus", 1}}}}),
       "spec.workers.resources.requests[cpus]: must name a container resource (cpu, memory, ephemeral-storage, "
       "hugepages-<size>, or an extended resource domain/name such as nvidia.com/gpu), got \"cpus\""},
      {"kubernetes.io resource", worker_resources({{"requests", {{"kubernetes.io/foo", 1}}}}),
       "spec.workers.resources.requests[kubernetes.io/foo]: must name a container resource"},
      {"half a gpu", worker_resources({{"limits", {{"nvidia.com/gpu", "0.5"}}}}),
       "spec.workers.resources.limits[nvidia.com/gpu]: must be a whole number for an extended resource, got 0.5"},
      {"request above limit", worker_resources({{"requests", {{"memory", "2Gi"}}}, {"limits", {{"memory", "1Gi"}}}}),
       "spec.workers.resources.requests[memory]: must not exceed spec.workers.resources.limits[memory] (1Gi), got 2Gi"},
      {"gpu request without limit", worker_resources({{"requests", {{"nvidia.com/gpu", 1}}}}),
       "spec.workers.resources.requests[nvidia.com/gpu]: needs the same value in spec.workers.resources.limits "
       "(extended resources and hugepages cannot be overcommitted), got 1 without a limit"},
      {"gpu request other than limit",
       worker_resources({{"requests", {{"nvidia.com/gpu", 1}}}, {"limits", {{"nvidia.com/gpu", 2}}}}),
       "spec.workers.resources.requests[nvidia.com/gpu]: must equal spec.workers.resources.limits[nvidia.com/gpu] (2): "
       "extended resources and hugepages cannot be overcommitted, got 1"},
      {"hugepages without limit", worker_resources({{"requests", {{"hugepages-2Mi", "1Gi"}}}}),
       "spec.workers.resources.requests[hugepages-2Mi]: needs the same value in spec.workers.resources.limits"},
      {"empty region", pools(json::array({{{"name", "a"}, {"region", ""}}})),
       "spec.nodePools[0].region: must be a label value (1 to 63 letters, digits, '-', '_' and '.', starting and "
       "ending with a letter or digit): the pods select nodes labelled topology.kubernetes.io/region with it, got \"\""},
      {"bad region", pools(json::array({{{"name", "a"}, {"region", "us central"}}})),
       "spec.nodePools[0].region: must be a label value"},
      {"empty zone", pools(json::array({{{"name", "a"}, {"region", "r"}, {"zone", ""}}})),
       "spec.nodePools[0].zone: must be a label value (1 to 63 letters, digits, '-', '_' and '.', starting and ending "
       "with a letter or digit): the pods select nodes labelled topology.kubernetes.io/zone with it, got \"\""},
      {"zone without region", pools(json::array({{{"name", "a"}, {"zone", "z"}}})),
       "spec.nodePools[0].zone: a pool with a zone must name its region"},
      {"bad selector key", pools(json::array({{{"name", "a"}, {"nodeSelector", {{"bad key!", "x"}}}}})),
       "spec.nodePools[0].nodeSelector: keys must be label keys ([DNS subdomain/]name, the name 1 to 63 letters, "
       "digits, '-', '_' and '.'), got \"bad key!\""},
      {"bad selector value", pools(json::array({{{"name", "a"}, {"nodeSelector", {{"k", "bad value!"}}}}})),
       "spec.nodePools[0].nodeSelector[k]: must be a label value (empty, or letters, digits, '-', '_' and '.', "
       "starting and ending with a letter or digit), got \"bad value!\""},
  };
  for (const Refused& c : cases) {
    const std::string all = refusal(c.spec);
    EXPECT_NE(all.find(c.expected), std::string::npos) << c.what << ":\n" << (all.empty() ? "accepted" : all);
  }
}

TEST(PodRules, ValuesJustInsideTheRulesAreAccepted) {
  const std::vector<std::pair<const char*, json>> cases = {
      {"gpu 0", worker_resources({{"limits", {{"nvidia.com/gpu", "0"}}}})},
      {"gpu 1", worker_resources({{"limits", {{"nvidia.com/gpu", 1}}}})},
      {"gpu 1000m equals 1", worker_resources({{"requests", {{"nvidia.com/gpu", "1000m"}}}, {"limits", {{"nvidia.com/gpu", 1}}}})},
      {"minus zero", worker_resources({{"requests", {{"cpu", "-0"}}}})},
      {"request equal to limit, other spellings",
       worker_resources({{"requests", {{"cpu", "100m"}, {"memory", "1Gi"}}}, {"limits", {{"cpu", "0.1"}, {"memory", "1073741824"}}}})},
      {"hugepages equal", worker_resources({{"requests", {{"hugepages-2Mi", "1Gi"}}}, {"limits", {{"hugepages-2Mi", "1Gi"}}}})},
      {"request without limit", worker_resources({{"requests", {{"cpu", "4"}, {"memory", "16Gi"}, {"ephemeral-storage", "1Gi"}}}})},
      {"pool without region", pools(json::array({{{"name", "a"}}}))},
      {"region and zone", pools(json::array({{{"name", "a"}, {"region", "us-central1"}, {"zone", "us-central1-a"}}}))},
      {"selector with an empty value",
       pools(json::array({{{"name", "a"}, {"nodeSelector", {{"cloud.google.com/gke-spot", "true"}, {"dedicated", ""}}}}}))},
  };
  for (const auto& [what, spec] : cases) EXPECT_EQ(refusal(spec), "") << what;
  // Left out, nodePools is one implicit pool: the whole cluster.
  EXPECT_TRUE(parse_swarmjob(job(json::object())).op.pools.empty());
}

TEST(PodRules, LabelKeysValuesAndExtendedResources) {
  for (const char* v : {"", "a", "us-central1", "A_b.c", "x1"}) EXPECT_TRUE(is_label_value(v)) << v;
  for (const char* v : {"-a", "a-", "a b", "a/b", "é"}) EXPECT_FALSE(is_label_value(v)) << v;
  EXPECT_TRUE(is_label_value(std::string(63, 'a')));
  EXPECT_FALSE(is_label_value(std::string(64, 'a')));
  for (const char* k : {"dedicated", "cloud.google.com/gke-spot", "topology.kubernetes.io/zone", "a/B_c"})
    EXPECT_TRUE(is_label_key(k)) << k;
  for (const char* k : {"", "/x", "x/", "Cloud.com/x", "a/b/c", "a b"}) EXPECT_FALSE(is_label_key(k)) << k;
  EXPECT_TRUE(is_extended_resource("nvidia.com/gpu"));
  EXPECT_TRUE(is_extended_resource("example.com/foo"));
  for (const char* r : {"cpu", "memory", "hugepages-2Mi", "kubernetes.io/foo", "node.kubernetes.io/x", "Bad/x"})
    EXPECT_FALSE(is_extended_resource(r)) << r;
}

}  // namespace
}  // namespace swarm::op
