// The table of every job-config key (see job_keys.h), built from the per-section key lists.
#include "common/config/job_keys.h"

#include <sstream>

#include "common/config/job_config.h"

namespace lf {
namespace {

// The default as YAML would write it.
std::string yaml_text(bool v) { return v ? "true" : "false"; }
std::string yaml_text(const std::string& v) { return v; }
std::string yaml_text(const StepsOrRatio& v) { return v.text(); }
std::string yaml_text(const std::vector<std::string>& v) { return v.empty() ? "" : "[...]"; }
template <typename Number>
std::string yaml_text(Number v) {
  std::ostringstream os;
  os << v;
  return os.str();
}

template <typename T>
JobKeyInfo info(const char* section, const char* name, const T& default_value, KeyRule rule,
                const char* doc) {
  return {section,         name, kind_of(default_value), yaml_text(default_value), true,
          std::move(rule), doc};
}

JobKeyInfo info(const char* section, const char* name, const std::optional<double>& default_value,
                KeyRule rule, const char* doc) {
  JobKeyInfo k{section, name, KeyValueKind::kNumber, "", false, std::move(rule), doc};
  if (default_value) k.default_text = yaml_text(*default_value), k.has_default = true;
  return k;
}

}  // namespace

const std::vector<JobKeyInfo>& job_keys() {
#define LF_KEY_INFO(type, name, default_value, rule, doc) \
  info(section, #name, defaults.name, rule, doc),
#define LF_SECTION_INFO(section_name, Section, KEYS)                                               \
  {                                                                                                \
    const char* section = section_name;                                                            \
    const Section defaults;                                                                        \
    for (JobKeyInfo & k : std::vector<JobKeyInfo>{KEYS(LF_KEY_INFO)}) out.push_back(std::move(k)); \
  }
  static const std::vector<JobKeyInfo> keys = [] {
    std::vector<JobKeyInfo> out;
    LF_SECTION_INFO("model", ModelSection, LF_MODEL_KEYS)
    LF_SECTION_INFO("dataset", DatasetSection, LF_DATASET_KEYS)
    LF_SECTION_INFO("network", NetworkSection, LF_NETWORK_KEYS)
    LF_SECTION_INFO("training", TrainingSection, LF_TRAINING_KEYS)
    LF_SECTION_INFO("output", OutputSection, LF_OUTPUT_KEYS)
    LF_SECTION_INFO("coordinator", CoordinatorSection, LF_COORDINATOR_KEYS)
    LF_SECTION_INFO("worker", WorkerSection, LF_WORKER_KEYS)
    LF_SECTION_INFO("cluster", ClusterSection, LF_CLUSTER_KEYS)
    return out;
  }();
#undef LF_SECTION_INFO
#undef LF_KEY_INFO
  return keys;
}

}  // namespace lf
