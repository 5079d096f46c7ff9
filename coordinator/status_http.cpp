// StatusHttp (see header).
#include "coordinator/status_http.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <utility>

#include "coordinator/status_page.h"
#include "coordinator/status_report.h"

namespace lf {

namespace fs = std::filesystem;
namespace pb = lorafleet::v1;
using metrics::HttpReply;
using metrics::HttpRequest;

namespace {

constexpr const char* kCookie = "lf_job_token";

std::string header(const HttpRequest& r, const std::string& name) {
  const auto it = r.headers.find(name);
  return it == r.headers.end() ? "" : it->second;
}

// The value of cookie `name` in a Cookie header ("a=1; lf_job_token=x").
std::string cookie(const HttpRequest& r, const std::string& name) {
  std::istringstream in(header(r, "cookie"));
  std::string part;
  while (std::getline(in, part, ';')) {
    const std::size_t start = part.find_first_not_of(' ');
    if (start == std::string::npos) continue;
    part = part.substr(start);
    if (part.rfind(name + "=", 0) == 0) return part.substr(name.size() + 1);
  }
  return "";
}

HttpReply text(int status, const std::string& body) {
  HttpReply r;
  r.status = status;
  r.body = body;
  return r;
}

// "http://host:port" -> "host:port".
std::string origin_host(const std::string& origin) {
  const std::size_t scheme = origin.find("://");
  return scheme == std::string::npos ? origin : origin.substr(scheme + 3);
}

// The host part of a Host header ("127.0.0.1:9400", "[::1]:9400", "localhost").
std::string host_name(const std::string& host) {
  if (!host.empty() && host[0] == '[') return host.substr(0, host.find(']') + 1);
  return host.substr(0, host.rfind(':'));
}

// Without a job token the page is only served on loopback: a Host that names anything else is
// a page of another site that rebound its name to 127.0.0.1 (DNS rebinding).
bool loopback_host(const std::string& host) {
  const std::string h = host_name(host);
  return h == "localhost" || h == "[::1]" || h.rfind("127.", 0) == 0;
}

bool safe_sample_name(const std::string& name) {
  if (name.size() < 5 || name.substr(name.size() - 4) != ".png" || name[0] == '.') return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.';
  });
}

}  // namespace

StatusHttp::StatusHttp(const std::string& job_token, CoordinatorService& service,
                       ControlService& control, std::string sample_dir)
    : auth_(job_token), service_(service), control_(control), sample_dir_(std::move(sample_dir)) {}

std::vector<metrics::HttpRoute> StatusHttp::routes() {
  std::vector<metrics::HttpRoute> r;
  r.push_back({"GET", "/", [this](const HttpRequest& q) { return page(q); }});
  r.push_back(
      {"GET", "/api/v1/status", [this](const HttpRequest& q) { return status_json_reply(q); }});
  for (const char* name : {"stop", "cancel", "sample-now"}) {
    r.push_back({"POST", std::string("/api/v1/") + name,
                 [this, name](const HttpRequest& q) { return action(q, name); }});
  }
  r.push_back({"GET", "/sample/", [this](const HttpRequest& q) { return sample_file(q); }});
  return r;
}

bool StatusHttp::authorized(const HttpRequest& r) const {
  if (!auth_.enabled()) return loopback_host(header(r, "host"));
  const std::string authorization = header(r, "authorization");
  if (authorization.size() > 7 &&
      (authorization.rfind("Bearer ", 0) == 0 || authorization.rfind("bearer ", 0) == 0)) {
    return auth_.accepts(authorization.substr(7));
  }
  const std::string from_cookie = cookie(r, kCookie);
  return !from_cookie.empty() && auth_.accepts(from_cookie);
}

static HttpReply unauthorized(bool token_required) {
  if (!token_required) {
    // No token: loopback only, and this request named another host (see loopback_host).
    return text(403,
                "403 forbidden: without a job token the status page answers only requests "
                "addressed to 127.0.0.1, [::1] or localhost\n");
  }
  HttpReply r = text(401,
                     "401 unauthorized: this job's status needs its job token: open "
                     "/?token=<job token> once in a browser, or send \"Authorization: Bearer "
                     "<job token>\"\n");
  r.headers.push_back({"WWW-Authenticate", "Bearer"});
  return r;
}

HttpReply StatusHttp::page(const HttpRequest& r) {
  if (const auto t = r.params.find("token"); t != r.params.end() && auth_.enabled()) {
    if (!auth_.accepts(t->second)) return unauthorized(true);
    // Keep the token out of the address bar and the history: a cookie, then a clean reload.
    HttpReply redirect = text(303, "see /\n");
    redirect.headers.push_back({"Location", "/"});
    redirect.headers.push_back({"Set-Cookie", std::string(kCookie) + "=" + t->second +
                                                  "; Path=/; HttpOnly; SameSite=Strict"});
    return redirect;
  }
  if (!authorized(r)) return unauthorized(auth_.enabled());
  pb::JobStatus status;
  service_.fill_status(&status);
  StatusPageOptions options;
  options.sample_images = latest_samples(sample_dir_, 4);
  HttpReply reply;
  reply.content_type = "text/html; charset=utf-8";
  reply.body = render_status_page(status, options);
  return reply;
}

HttpReply StatusHttp::status_json_reply(const HttpRequest& r) {
  if (!authorized(r)) return unauthorized(auth_.enabled());
  pb::JobStatus status;
  service_.fill_status(&status);
  HttpReply reply;
  reply.content_type = "application/json";
  reply.body = status_json(status) + "\n";
  return reply;
}

HttpReply StatusHttp::action(const HttpRequest& r, const std::string& name) {
  if (!authorized(r)) return unauthorized(auth_.enabled());
  // Browsers name the page that posts (Origin; "null" from sandboxed frames and data: pages)
  // and whether it is another site's (Sec-Fetch-Site): only the status page itself may.
  const std::string origin = header(r, "origin");
  const std::string fetch_site = header(r, "sec-fetch-site");
  if ((!origin.empty() && origin_host(origin) != header(r, "host")) || fetch_site == "cross-site" ||
      fetch_site == "same-site") {
    return text(403, "403 forbidden: a request from another site (Origin " +
                         (origin.empty() ? std::string("not sent") : origin) + ")\n");
  }
  const OperatorControl::Outcome o =
      control_.act(name, "the status page (" + r.remote_address + ")");
  const bool from_form =
      header(r, "content-type").rfind("application/x-www-form-urlencoded", 0) == 0;
  HttpReply reply;
  reply.status = o.accepted ? 200 : 409;
  if (from_form) {
    reply.content_type = "text/html; charset=utf-8";
    reply.body =
        "<!DOCTYPE html><html><head><meta charset=\"utf-8\"><meta http-equiv=\"refresh\" "
        "content=\"2; url=/\"><title>lorafleet: " +
        name + "</title></head><body><p id=\"outcome\">" +
        html_escape(name + (o.accepted ? ": " : " refused: ") + o.detail) +
        "</p><p><a href=\"/\">back</a></p></body></html>\n";
  } else {
    pb::ControlReply c;
    c.set_accepted(o.accepted);
    c.set_detail(o.detail);
    reply.content_type = "application/json";
    reply.body = control_reply_json(c) + "\n";
  }
  return reply;
}

HttpReply StatusHttp::sample_file(const HttpRequest& r) {
  if (!authorized(r)) return unauthorized(auth_.enabled());
  const std::string name = r.path.substr(std::string("/sample/").size());
  if (!safe_sample_name(name)) return text(404, "404 not found\n");
  std::ifstream in(fs::path(sample_dir_) / name, std::ios::binary);
  if (!in) return text(404, "404 not found\n");
  HttpReply reply;
  reply.content_type = "image/png";
  reply.body.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  return reply;
}

std::vector<std::string> StatusHttp::latest_samples(const std::string& sample_dir,
                                                    std::size_t limit) {
  std::vector<std::pair<fs::file_time_type, std::string>> files;
  std::error_code ec;
  for (fs::directory_iterator it(sample_dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (!safe_sample_name(name) || !it->is_regular_file(ec)) continue;
    files.emplace_back(it->last_write_time(ec), name);
  }
  std::sort(files.begin(), files.end(), [](const auto& a, const auto& b) {
    return a.first != b.first ? a.first > b.first : a.second > b.second;
  });
  std::vector<std::string> names;
  for (std::size_t i = 0; i < files.size() && i < limit; ++i) names.push_back(files[i].second);
  return names;
}

}  // namespace lf
