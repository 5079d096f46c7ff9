// A metric family: one name/help/type, constant labels, and one metric per variable label set
// (mirrors prometheus-cpp core/include/prometheus/family.h). Metrics are heap objects that never
// move, so callers keep the T& from Add() and update it without touching the family's mutex.
#pragma once

#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "common/metrics/counter.h"
#include "common/metrics/gauge.h"
#include "common/metrics/histogram.h"
#include "common/metrics/text_format.h"

namespace lf {
namespace metrics {

enum class MetricType { Counter, Gauge, Histogram };

// "counter", "gauge", "histogram" (the # TYPE keyword).
const char* MetricTypeName(MetricType type);

template <class T>
struct MetricTypeOf;
template <>
struct MetricTypeOf<Counter> {
  static constexpr MetricType value = MetricType::Counter;
};
template <>
struct MetricTypeOf<Gauge> {
  static constexpr MetricType value = MetricType::Gauge;
};
template <>
struct MetricTypeOf<Histogram> {
  static constexpr MetricType value = MetricType::Histogram;
};

class FamilyBase {
 public:
  // Throws std::invalid_argument naming the family if the name or a constant label is invalid.
  FamilyBase(std::string name, std::string help, Labels constant_labels, MetricType type);
  virtual ~FamilyBase() = default;
  FamilyBase(const FamilyBase&) = delete;
  FamilyBase& operator=(const FamilyBase&) = delete;

  const std::string& name() const { return name_; }
  const std::string& help() const { return help_; }
  const Labels& constant_labels() const { return constant_labels_; }
  MetricType type() const { return type_; }

  // Appends "# HELP" (when help is non-empty), "# TYPE" and every sample; nothing when the family
  // has no metrics yet.
  virtual void Serialize(std::string& out) const = 0;

 protected:
  // Constant + variable labels, after checking names, UTF-8 values and clashes. Throws
  // std::invalid_argument naming the family and the label.
  Labels MergeLabels(const Labels& labels) const;
  void AppendHeader(std::string& out) const;

 private:
  std::string name_;
  std::string help_;
  Labels constant_labels_;
  MetricType type_;
};

template <class T>
class Family : public FamilyBase {
 public:
  Family(std::string name, std::string help, Labels constant_labels)
      : FamilyBase(std::move(name), std::move(help), std::move(constant_labels),
                   MetricTypeOf<T>::value) {}

  // Returns the metric for `labels`, creating it with T(args...) on first use (later calls with
  // the same labels return the same object and ignore args, as prometheus-cpp does). The
  // reference stays valid until Remove() or the registry is destroyed. Slow (mutex + map): call
  // at start-up and keep the reference. Throws std::invalid_argument for bad labels (see
  // MergeLabels) and whatever T's constructor throws.
  template <typename... Args>
  T& Add(const Labels& labels, Args&&... args) {
    Labels merged = MergeLabels(labels);
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto& entry : metrics_) {
      if (entry.first == merged) return *entry.second;
    }
    metrics_.emplace_back(std::move(merged), std::make_unique<T>(std::forward<Args>(args)...));
    return *metrics_.back().second;
  }

  // Histogram convenience so a braced list works: Add({{"rank", "0"}}, {0.1, 1, 10}).
  template <class U = T, typename std::enable_if<std::is_same<U, Histogram>::value, int>::type = 0>
  Histogram& Add(const Labels& labels, const Histogram::BucketBoundaries& buckets) {
    return Add<const Histogram::BucketBoundaries&>(labels, buckets);
  }

  // Drops a metric returned by Add(); its reference dangles afterwards. Unknown pointers are
  // ignored.
  void Remove(T* metric) {
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto it = metrics_.begin(); it != metrics_.end(); ++it) {
      if (it->second.get() == metric) {
        metrics_.erase(it);
        return;
      }
    }
  }

  bool Has(const Labels& labels) const {
    Labels merged = MergeLabels(labels);
    std::lock_guard<std::mutex> lock(mutex_);
    for (const auto& entry : metrics_) {
      if (entry.first == merged) return true;
    }
    return false;
  }

  // Samples in the order their label sets were first added.
  void Serialize(std::string& out) const override {
    std::lock_guard<std::mutex> lock(mutex_);
    if (metrics_.empty()) return;
    AppendHeader(out);
    for (const auto& entry : metrics_) entry.second->AppendSamples(out, name(), entry.first);
  }

 private:
  mutable std::mutex mutex_;
  std::vector<std::pair<Labels, std::unique_ptr<T>>> metrics_;
};

}  // namespace metrics
}  // namespace lf
