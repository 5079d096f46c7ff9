// Serves registries over HTTP for Prometheus to scrape (mirrors prometheus-cpp
// pull/include/prometheus/exposer.h, built on cpp-httplib instead of civetweb). GET /metrics
// returns every registered registry's text (format 0.0.4); other methods on /metrics get 405.
// Routes given at construction (the coordinator's status page) are served beside it; any other
// path gets 404. /metrics itself is read-only.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/metrics/registry.h"

namespace lf {
namespace metrics {

// One HTTP request as a route's handler sees it (no cpp-httplib types in this header).
struct HttpRequest {
  std::string method;                          // "GET", "POST", ...
  std::string path;                            // without the query string
  std::map<std::string, std::string> params;   // query string and urlencoded form fields
  std::map<std::string, std::string> headers;  // names in lower case
  std::string body;
  std::string remote_address;
};

struct HttpReply {
  int status = 200;
  std::string content_type = "text/plain; charset=utf-8";
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;  // e.g. Location, Set-Cookie
};

// A route: exact `path`, or every name under it when `path` ends in '/' (e.g. "/sample/"; "/"
// itself is exact);
// `method` is "GET" (also answers HEAD) or "POST". Handlers run on the server's worker threads.
struct HttpRoute {
  std::string method;
  std::string path;
  std::function<HttpReply(const HttpRequest&)> handler;
};

class Exposer {
 public:
  // Binds "host:port" ("0.0.0.0:9400", "127.0.0.1:0", "[::1]:9400"); port 0 picks a free port
  // (see port()). Starts a server thread with `num_threads` request workers. Throws
  // std::runtime_error "metrics exposer: cannot bind <address> (...)" when the address is
  // malformed or taken.
  explicit Exposer(const std::string& bind_address, size_t num_threads = 2,
                   std::vector<HttpRoute> routes = {});
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
