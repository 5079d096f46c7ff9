// Metric registry and the BuildCounter/BuildGauge/BuildHistogram builders (mirrors prometheus-cpp
// core/include/prometheus/{registry,counter,gauge,histogram}.h). Serialize() renders the text
// exposition format 0.0.4 that Exposer serves and promtool checks.
//
//   auto registry = std::make_shared<lf::metrics::Registry>();
//   auto& steps = lf::metrics::BuildCounter().Name("trainer_steps_total")
//                     .Help("Optimizer steps").Register(*registry).Add({{"rank", "0"}});
//   steps.Increment();
#pragma once

#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/metrics/family.h"

namespace lf {
namespace metrics {

class Registry {
 public:
  Registry() = default;
  Registry(const Registry&) = delete;
  Registry& operator=(const Registry&) = delete;

  // The family called `name`, created on first use. Registering the same name again with the
  // same type, help and constant labels returns the existing family; anything else throws
  // std::invalid_argument naming the family (as prometheus-cpp's InsertBehavior::Merge).
  template <class T>
  Family<T>& Add(const std::string& name, const std::string& help, const Labels& constant_labels) {
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto& f : families_) {
      if (f->name() != name) continue;
      if (f->type() != MetricTypeOf<T>::value || f->help() != help ||
          f->constant_labels() != constant_labels) {
        throw std::invalid_argument("metric family '" + name +
                                    "' is already registered with a different type, help or "
                                    "constant labels");
      }
      return static_cast<Family<T>&>(*f);
    }
    families_.push_back(std::make_unique<Family<T>>(name, help, constant_labels));
    return static_cast<Family<T>&>(*families_.back());
  }

  // All families in registration order, in the text exposition format 0.0.4 (every line ends
  // with '\n'). Thread-safe; metric values are read without stopping writers.
  std::string Serialize() const;

 private:
  mutable std::mutex mutex_;
  std::vector<std::unique_ptr<FamilyBase>> families_;
};

namespace detail {

// prometheus::detail::Builder<T>.
template <class T>
class Builder {
 public:
  Builder& Labels(const std::map<std::string, std::string>& labels) {
    labels_ = labels;
    return *this;
  }
  Builder& Name(const std::string& name) {
    name_ = name;
    return *this;
  }
  Builder& Help(const std::string& help) {
    help_ = help;
    return *this;
  }
  // Throws std::invalid_argument (see Registry::Add and FamilyBase).
  Family<T>& Register(Registry& registry) { return registry.Add<T>(name_, help_, labels_); }

 private:
  std::map<std::string, std::string> labels_;
  std::string name_;
  std::string help_;
};

}  // namespace detail

inline detail::Builder<Counter> BuildCounter() { return {}; }
inline detail::Builder<Gauge> BuildGauge() { return {}; }
inline detail::Builder<Histogram> BuildHistogram() { return {}; }

}  // namespace metrics
}  // namespace lf
