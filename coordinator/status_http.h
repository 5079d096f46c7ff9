// The status page's HTTP routes, served beside /metrics on the coordinator's metrics address:
//   GET  /                  the status page (coordinator/status_page.h)
//   GET  /api/v1/status     lorafleet.v1.JobStatus as JSON (coordinator/status_report.h)
//   POST /api/v1/stop | /api/v1/cancel | /api/v1/sample-now   as lorafleet-ctl
//   GET  /sample/<file>.png the latest sample images from <output_dir>/sample/
// Whenever the control plane requires the job token, every route but /metrics does too:
// "Authorization: Bearer <token>", or the cookie a browser gets from opening /?token=<token>
// once (HttpOnly, SameSite=Strict; the page then reloads without the token in its address).
// A POST whose Origin names another host (or "null"), or that a browser marks Sec-Fetch-Site
// cross-site / same-site, is refused (403). Without the token: 401, naming both ways, never
// echoing what was sent. Without a token required (a loopback coordinator), only requests
// whose Host is loopback are answered (403 otherwise: a DNS-rebinding page).
#pragma once

#include <string>
#include <vector>

#include "common/metrics/exposer.h"
#include "coordinator/auth.h"
#include "coordinator/control_service.h"
#include "coordinator/service.h"

namespace lf {

class StatusHttp {
 public:
  // `job_token` as ServiceOptions::job_token ("" = no token required); `sample_dir` is
  // <output_dir>/sample (it may not exist, or not be visible from the coordinator's host).
  // `service` and `control` must outlive the routes.
  StatusHttp(const std::string& job_token, CoordinatorService& service, ControlService& control,
             std::string sample_dir);

  // The routes to give metrics::Exposer.
  std::vector<metrics::HttpRoute> routes();

  // The newest sample PNGs of `sample_dir` (at most `limit`, newest first, by modification
  // time then name); empty when the folder is missing.
  static std::vector<std::string> latest_samples(const std::string& sample_dir, std::size_t limit);

 private:
  bool authorized(const metrics::HttpRequest& request) const;
  metrics::HttpReply page(const metrics::HttpRequest& request);
  metrics::HttpReply status_json_reply(const metrics::HttpRequest& request);
  metrics::HttpReply action(const metrics::HttpRequest& request, const std::string& name);
  metrics::HttpReply sample_file(const metrics::HttpRequest& request);

  JobTokenAuth auth_;
  CoordinatorService& service_;
  ControlService& control_;
  std::string sample_dir_;
};

}  // namespace lf
