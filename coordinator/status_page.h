// The coordinator's status page (GET / on the metrics address): one self-contained HTML page
// drawn from lorafleet.v1.JobStatus, with the loss, validation-loss and lr curves as inline SVG,
// the latest sample images, the ranks, restarts and the last committed checkpoint, and the
// stop / cancel / sample-now forms. No JavaScript and no external assets; it reloads itself
// every few seconds (<meta http-equiv="refresh">). Values carry element ids (`state`,
// `global-step`, `rank-<r>-state`, ...) so a browser test can check them against
// /api/v1/status.
#pragma once

#include <string>
#include <vector>

#include "lorafleet/v1/control.pb.h"

namespace lf {

struct StatusPageOptions {
  // File names under /sample/ (newest first) to show.
  std::vector<std::string> sample_images;
  // Show the operator forms (the viewer holds the token, or none is required) and whether the
  // job still takes requests.
  bool forms = true;
  int refresh_seconds = 5;
};

// The page, UTF-8 HTML. Every text from the status is HTML-escaped.
std::string render_status_page(const lorafleet::v1::JobStatus& status,
                               const StatusPageOptions& options);

// An SVG line chart of (x, y) points, `width` x `height` px, with the y range and the last x as
// labels; non-finite values are skipped. An empty series draws the frame and "no data yet".
std::string svg_line_chart(const std::string& id, const std::string& title,
                           const std::vector<std::pair<double, double>>& points, int width,
                           int height);

// &, <, >, " and ' as entities.
std::string html_escape(const std::string& text);

}  // namespace lf
