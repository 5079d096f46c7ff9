// Serves registries over HTTP for Prometheus to scrape (mirrors prometheus-cpp
// pull/include/prometheus/exposer.h, built on cpp-httplib instead of civetweb). GET /metrics
// returns every registered registry's text (format 0.0.4); other paths get 404, other methods
// on /metrics 405. Read-only: nothing can be changed over HTTP.
#pragma once

#include <memory>
#include <string>

#include "common/metrics/registry.h"

namespace lf {
namespace metrics {

class Exposer {
 public:
  // Binds "host:port" ("0.0.0.0:9400", "127.0.0.1:0", "[::1]:9400"); port 0 picks a free port
  // (see port()). Starts a server thread with `num_threads` request workers. Throws
  // std::runtime_error "metrics exposer: cannot bind <address> (...)" when the address is
  // malformed or taken.
  explicit Exposer(const std::string& bind_address, size_t num_threads = 2);
  // Stops the server and joins its thread.
  ~Exposer();
  Exposer(const Exposer&) = delete;
  Exposer& operator=(const Exposer&) = delete;

  // Adds a registry to /metrics. Held weakly: a registry that has been destroyed is skipped.
  void RegisterCollectable(const std::weak_ptr<Registry>& registry);
  void RemoveCollectable(const std::weak_ptr<Registry>& registry);

  // The bound TCP port.
  int port() const;

  // The body GET /metrics returns now (all live registries, in registration order).
  std::string Collect() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace metrics
}  // namespace lf
