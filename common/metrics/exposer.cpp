// Exposer on cpp-httplib (see exposer.h). The server runs listen_after_bind() on its own thread;
// the constructor waits until it is running so the destructor's stop() always takes effect.
#include "common/metrics/exposer.h"

#include <httplib.h>
#include <sys/socket.h>

#include <cctype>
#include <chrono>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <vector>

namespace lf {
namespace metrics {

namespace {

constexpr const char* kContentType = "text/plain; version=0.0.4; charset=utf-8";

// Splits "host:port" / "[v6]:port"; returns false when malformed.
bool split_address(const std::string& address, std::string* host, int* port) {
  size_t colon = address.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 >= address.size()) return false;
  std::string h = address.substr(0, colon);
  if (h.size() >= 2 && h.front() == '[' && h.back() == ']') h = h.substr(1, h.size() - 2);
  if (h.empty()) return false;
  long p = 0;
  for (size_t i = colon + 1; i < address.size(); ++i) {
    char c = address[i];
    if (c < '0' || c > '9') return false;
    p = p * 10 + (c - '0');
    if (p > 65535) return false;
  }
  *host = h;
  *port = static_cast<int>(p);
  return true;
}

// Calls `route`'s handler with the request in our own types and copies its reply back.
void serve(const HttpRoute& route, const httplib::Request& req, httplib::Response& res) {
  HttpRequest r;
  r.method = req.method;
  r.path = req.path;
  for (const auto& [k, v] : req.params) r.params.emplace(k, v);
  for (const auto& [k, v] : req.headers) {
    std::string name = k;
    for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    r.headers.emplace(name, v);
  }
  r.body = req.body;
  r.remote_address = req.remote_addr;
  const HttpReply reply = route.handler(r);
  res.status = reply.status;
  for (const auto& [k, v] : reply.headers) res.set_header(k, v);
  res.set_content(reply.body, reply.content_type);
}

}  // namespace

struct Exposer::Impl {
  httplib::Server server;
  std::thread thread;
  int port = 0;
  mutable std::mutex mutex;
  std::vector<std::weak_ptr<Registry>> registries;

  std::string collect() const {
    std::string body;
    std::lock_guard<std::mutex> lock(mutex);
    for (const auto& weak : registries) {
      if (auto reg = weak.lock()) body += reg->Serialize();
    }
    return body;
  }
};

Exposer::Exposer(const std::string& bind_address, size_t num_threads, std::vector<HttpRoute> routes)
    : impl_(new Impl) {
  std::string host;
  int port = 0;
  if (!split_address(bind_address, &host, &port)) {
    throw std::runtime_error("metrics exposer: cannot bind " + bind_address +
                             " (expected host:port)");
  }
  httplib::Server& svr = impl_->server;
  if (num_threads == 0) num_threads = 1;
  svr.new_task_queue = [num_threads] { return new httplib::ThreadPool(num_threads); };
  // SO_REUSEADDR only: httplib's default also sets SO_REUSEPORT, which would let two exposers
  // share a port silently instead of failing here.
  svr.set_socket_options([](socket_t sock) {
    int yes = 1;
    ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
  });
  Impl* impl = impl_.get();
  svr.Get("/metrics", [impl](const httplib::Request&, httplib::Response& res) {
    res.set_content(impl->collect(), kContentType);
  });
  auto not_allowed = [](const httplib::Request&, httplib::Response& res) {
    res.status = 405;
    res.set_header("Allow", "GET, HEAD");
    res.set_content("405 method not allowed: /metrics is read-only\n", "text/plain");
  };
  svr.Post("/metrics", not_allowed);
  svr.Put("/metrics", not_allowed);
  svr.Delete("/metrics", not_allowed);
  svr.Patch("/metrics", not_allowed);
  for (HttpRoute& route : routes) {
    // httplib matches regular expressions: escape the path, and a trailing '/' takes the rest.
    std::string pattern;
    for (char c : route.path) {
      if (std::string("\\^$.|?*+()[]{}").find(c) != std::string::npos) pattern += '\\';
      pattern += c;
    }
    if (route.path.size() > 1 && route.path.back() == '/') pattern += "[^/]+";
    const bool post = route.method == "POST";
    auto handler = [r = std::move(route)](const httplib::Request& req, httplib::Response& res) {
      serve(r, req, res);
    };
    if (post) {
      svr.Post(pattern, handler);
    } else {
      svr.Get(pattern, handler);
    }
  }

  if (port == 0) {
    impl_->port = svr.bind_to_any_port(host);
    if (impl_->port <= 0) {
      throw std::runtime_error("metrics exposer: cannot bind " + bind_address +
                               " (no free port on that host)");
    }
  } else {
    if (!svr.bind_to_port(host, port)) {
      throw std::runtime_error("metrics exposer: cannot bind " + bind_address +
                               " (address in use or not local)");
    }
    impl_->port = port;
  }
  impl_->thread = std::thread([impl] { impl->server.listen_after_bind(); });
  for (int i = 0; i < 2000 && !svr.is_running(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

Exposer::~Exposer() {
  impl_->server.stop();
  if (impl_->thread.joinable()) impl_->thread.join();
}

void Exposer::RegisterCollectable(const std::weak_ptr<Registry>& registry) {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  impl_->registries.push_back(registry);
}

void Exposer::RemoveCollectable(const std::weak_ptr<Registry>& registry) {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  auto target = registry.lock();
  std::vector<std::weak_ptr<Registry>> kept;
  for (const auto& weak : impl_->registries) {
    auto reg = weak.lock();
    if (reg && reg != target) kept.push_back(weak);
  }
  impl_->registries.swap(kept);
}

int Exposer::port() const { return impl_->port; }

std::string Exposer::Collect() const { return impl_->collect(); }

}  // namespace metrics
}  // namespace lf
