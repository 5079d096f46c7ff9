// Non-template parts of Family (see family.h): validation and the HELP/TYPE header.
#include "common/metrics/family.h"

namespace lf {
namespace metrics {

const char* MetricTypeName(MetricType type) {
  switch (type) {
    case MetricType::Counter:
      return "counter";
    case MetricType::Gauge:
      return "gauge";
    case MetricType::Histogram:
      return "histogram";
  }
  return "untyped";
}

FamilyBase::FamilyBase(std::string name, std::string help, Labels constant_labels, MetricType type)
    : name_(std::move(name)),
      help_(std::move(help)),
      constant_labels_(std::move(constant_labels)),
      type_(type) {
  if (!IsValidMetricName(name_)) {
    throw std::invalid_argument("metric family '" + name_ +
                                "': invalid name (expected [a-zA-Z_:][a-zA-Z0-9_:]*)");
  }
  if (!IsValidUtf8(help_)) {
    throw std::invalid_argument("metric family '" + name_ + "': help is not valid UTF-8");
  }
  for (const auto& kv : constant_labels_) {
    if (!IsValidLabelName(kv.first) || (type_ == MetricType::Histogram && kv.first == "le")) {
      throw std::invalid_argument("metric family '" + name_ + "': invalid constant label name '" +
                                  kv.first + "'");
    }
    if (!IsValidUtf8(kv.second)) {
      throw std::invalid_argument("metric family '" + name_ + "': constant label '" + kv.first +
                                  "' value is not valid UTF-8");
    }
  }
}

Labels FamilyBase::MergeLabels(const Labels& labels) const {
  Labels merged = constant_labels_;
  for (const auto& kv : labels) {
    if (!IsValidLabelName(kv.first) || (type_ == MetricType::Histogram && kv.first == "le")) {
      throw std::invalid_argument("metric family '" + name_ + "': invalid label name '" + kv.first +
                                  "' (expected [a-zA-Z_][a-zA-Z0-9_]*, no __ prefix" +
                                  (type_ == MetricType::Histogram ? ", not le)" : ")"));
    }
    if (!IsValidUtf8(kv.second)) {
      throw std::invalid_argument("metric family '" + name_ + "': label '" + kv.first +
                                  "' value is not valid UTF-8");
    }
    if (!merged.emplace(kv.first, kv.second).second) {
      throw std::invalid_argument("metric family '" + name_ + "': label '" + kv.first +
                                  "' is already a constant label");
    }
  }
  return merged;
}

void FamilyBase::AppendHeader(std::string& out) const {
  if (!help_.empty()) {
    out += "# HELP ";
    out += name_;
    out += ' ';
    out += EscapeHelp(help_);
    out += '\n';
  }
  out += "# TYPE ";
  out += name_;
  out += ' ';
  out += MetricTypeName(type_);
  out += '\n';
}

}  // namespace metrics
}  // namespace lf
