// The CRD and the job spec must not drift apart: every field of the `swarm local` spec (as
// common/ writes it) is in the CRD schema with the same default, and the CRD has printer columns
// and the status subresource. Runs without an API server.
#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <functional>

#include "common/job_spec.h"
#include "common/job_spec_json.h"

namespace {

using nlohmann::json;

YAML::Node crd_version() {
  YAML::Node crd = YAML::LoadFile(std::string(SWARM_SOURCE_DIR) + "/crds/swarm-operator.io_swarmjobs.yaml");
  return crd["spec"]["versions"][0];
}

TEST(CrdSchema, CoversEveryJobSpecFieldWithTheSameDefault) {
  const YAML::Node spec_schema = crd_version()["schema"]["openAPIV3Schema"]["properties"]["spec"];
  ASSERT_TRUE(spec_schema);
  const json defaults = swarm::to_json(swarm::JobSpec{})["spec"];
  std::function<void(const json&, const YAML::Node&, const std::string&)> walk =
      [&](const json& value, const YAML::Node& schema, const std::string& path) {
        ASSERT_TRUE(schema) << path << " is missing from the CRD schema";
        if (value.is_object()) {
          for (auto& [k, v] : value.items()) {
            if (path == "spec.secret" && k == "secretRef") continue;
            walk(v, schema["properties"][k], path + "." + k);
          }
          return;
        }
        const YAML::Node def = schema["default"];
        ASSERT_TRUE(def) << path << " has no default in the CRD";
        if (value.is_boolean()) EXPECT_EQ(def.as<bool>(), value.get<bool>()) << path;
        else if (value.is_number_integer() || value.is_number_unsigned()) EXPECT_EQ(def.as<long long>(), value.get<long long>()) << path;
        else if (value.is_number()) EXPECT_DOUBLE_EQ(def.as<double>(), value.get<double>()) << path;
        else if (value.is_string()) EXPECT_EQ(def.as<std::string>(), value.get<std::string>()) << path;
        else if (value.is_array()) EXPECT_EQ(def.size(), value.size()) << path;
      };
  walk(defaults, spec_schema, "spec");
}

TEST(CrdSchema, HasStatusSubresourceAndPrinterColumns) {
  const YAML::Node v = crd_version();
  EXPECT_EQ(v["name"].as<std::string>(), "v1alpha1");
  EXPECT_TRUE(v["subresources"]["status"]);
  std::set<std::string> columns;
  for (const auto& c : v["additionalPrinterColumns"]) columns.insert(c["name"].as<std::string>());
  for (const char* c : {"Phase", "Stages", "Workers", "Step", "Samples/s", "Age"}) EXPECT_TRUE(columns.count(c)) << c;
}

}  // namespace
