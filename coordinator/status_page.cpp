// render_status_page and its parts (see header).
#include "coordinator/status_page.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

namespace lf {

namespace pb = lorafleet::v1;

std::string html_escape(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

namespace {

std::string num(double v, const char* format = "%.6g") {
  char buf[64];
  std::snprintf(buf, sizeof(buf), format, v);
  return buf;
}

std::string duration(double seconds) {
  if (seconds < 0) return "unknown";
  const long long s = std::llround(seconds);
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%lld:%02lld:%02lld", s / 3600, (s / 60) % 60, s % 60);
  return buf;
}

// <td id="id">value</td> with a header cell before it.
std::string row(const char* label, const char* id, const std::string& value) {
  return std::string("<tr><th>") + label + "</th><td id=\"" + id + "\">" + html_escape(value) +
         "</td></tr>\n";
}

const char* kStyle =
    "body{font-family:DejaVu Sans,sans-serif;margin:1.5em;color:#222;background:#fafafa}"
    "h1{font-size:1.4em}h2{font-size:1.1em;margin-top:1.4em}"
    "table{border-collapse:collapse}th,td{padding:3px 10px;text-align:left;"
    "border-bottom:1px solid #ddd}th{color:#555;font-weight:normal}"
    ".state{font-weight:bold;padding:2px 8px;border-radius:4px;background:#dde}"
    ".charts svg{margin-right:12px;background:#fff;border:1px solid #ccc}"
    ".samples img{height:160px;margin-right:8px;border:1px solid #ccc;image-rendering:pixelated}"
    "form{display:inline;margin-right:8px}button{padding:4px 12px}";

std::string progress_table(const pb::JobStatus& s) {
  std::string out = "<table>\n";
  out += row("global_step", "global-step", std::to_string(s.global_step()));
  out += row("max_train_steps", "max-train-steps", std::to_string(s.max_train_steps()));
  out +=
      row("epoch", "epoch", std::to_string(s.epoch() + 1) + " / " + std::to_string(s.num_epochs()));
  out += row("loss", "loss", num(s.loss()));
  out += row("validation loss", "validation-loss",
             s.validation_step() > 0 ? num(s.validation_loss()) + " (global_step " +
                                           std::to_string(s.validation_step()) + ")"
                                     : "none yet");
  out += row("learning rate", "learning-rate", num(s.learning_rate()));
  out += row("samples/s", "samples-per-second", num(s.samples_per_second(), "%.2f"));
  out += row("elapsed", "elapsed", duration(s.elapsed_seconds()));
  out += row("ETA", "eta", duration(s.eta_seconds()));
  out += row("world_size", "world-size", std::to_string(s.world_size()));
  out += row("generation", "generation", std::to_string(s.generation()));
  out += row("last committed checkpoint", "last-committed-step",
             s.last_committed_step() >= 0 ? std::to_string(s.last_committed_step()) : "none");
  out += row("checkpoint directory", "last-committed-checkpoint", s.last_committed_checkpoint());
  return out + "</table>\n";
}

std::string ranks_table(const pb::JobStatus& s) {
  std::ostringstream out;
  out << "<table id=\"ranks\"><tr><th>rank</th><th>state</th><th>host</th><th>device</th>"
         "<th>global_step</th><th>last heartbeat</th><th>error</th></tr>\n";
  for (const pb::RankStatus& r : s.ranks()) {
    const std::string id = "rank-" + std::to_string(r.rank());
    out << "<tr id=\"" << id << "\"><td>" << r.rank() << "</td><td id=\"" << id << "-state\">"
        << html_escape(r.state()) << "</td><td>" << html_escape(r.hostname()) << "</td><td>"
        << html_escape(r.device()) << "</td><td>" << r.global_step() << "</td><td>"
        << (r.last_seen_seconds_ago() >= 0 ? num(r.last_seen_seconds_ago(), "%.1f") + " s ago"
                                           : "never")
        << "</td><td>" << html_escape(r.error()) << "</td></tr>\n";
  }
  out << "</table>\n";
  return out.str();
}

std::string restarts_list(const pb::JobStatus& s) {
  if (s.restarts().empty()) return "<p id=\"restarts\">none</p>\n";
  std::string out = "<ul id=\"restarts\">";
  for (const pb::Restart& r : s.restarts()) {
    out += "<li>" + html_escape(r.cause()) + ": " + std::to_string(r.count()) + "</li>";
  }
  return out + "</ul>\n";
}

std::string charts(const pb::JobStatus& s) {
  std::vector<std::pair<double, double>> loss, lr, validation;
  for (const pb::HistoryPoint& p : s.history()) {
    const auto x = static_cast<double>(p.global_step());
    loss.emplace_back(x, p.loss());
    lr.emplace_back(x, p.learning_rate());
  }
  for (const pb::ValidationPoint& p : s.validation_history()) {
    validation.emplace_back(static_cast<double>(p.global_step()), p.loss());
  }
  std::string out = "<div class=\"charts\">\n";
  out += svg_line_chart("loss-chart", "loss", loss, 420, 200);
  if (!validation.empty()) {
    out += svg_line_chart("validation-loss-chart", "validation loss", validation, 420, 200);
  }
  out += svg_line_chart("lr-chart", "learning rate", lr, 420, 200);
  return out + "</div>\n";
}

std::string samples(const StatusPageOptions& o) {
  if (o.sample_images.empty()) return "<p id=\"samples\">no sample images yet</p>\n";
  std::string out = "<div class=\"samples\" id=\"samples\">";
  for (const std::string& name : o.sample_images) {
    const std::string n = html_escape(name);
    out += "<img src=\"/sample/" + n + "\" alt=\"" + n + "\" title=\"" + n + "\">";
  }
  return out + "</div>\n";
}

std::string forms(const pb::JobStatus& s, const StatusPageOptions& o) {
  const bool ended = s.state() == "done" || s.state() == "stopped" || s.state() == "cancelled" ||
                     s.state() == "failed";
  if (!o.forms || ended) return "";
  std::string out = "<h2>Steer</h2>\n<div id=\"forms\">";
  const char* actions[][2] = {{"stop", "Stop (checkpoint, LoRA, exit 0)"},
                              {"cancel", "Cancel (exit at once)"},
                              {"sample-now", "Sample now"}};
  for (const auto& a : actions) {
    out += std::string("<form method=\"post\" action=\"/api/v1/") + a[0] + "\"><button id=\"" +
           a[0] + "-button\" type=\"submit\">" + a[1] + "</button></form>";
  }
  return out + "</div>\n";
}

}  // namespace

std::string svg_line_chart(const std::string& id, const std::string& title,
                           const std::vector<std::pair<double, double>>& points, int width,
                           int height) {
  const int left = 60, right = 10, top = 22, bottom = 24;
  std::vector<std::pair<double, double>> p;
  for (const auto& q : points) {
    if (std::isfinite(q.first) && std::isfinite(q.second)) p.push_back(q);
  }
  std::ostringstream out;
  out << "<svg id=\"" << html_escape(id) << "\" xmlns=\"http://www.w3.org/2000/svg\" width=\""
      << width << "\" height=\"" << height << "\" viewBox=\"0 0 " << width << " " << height
      << "\"><text x=\"" << left << "\" y=\"15\" font-size=\"13\">" << html_escape(title)
      << "</text><rect x=\"" << left << "\" y=\"" << top << "\" width=\"" << width - left - right
      << "\" height=\"" << height - top - bottom << "\" fill=\"none\" stroke=\"#999\"/>";
  if (p.empty()) {
    out << "<text x=\"" << left + 10 << "\" y=\"" << height / 2
        << "\" font-size=\"12\" fill=\"#888\">no data yet</text></svg>\n";
    return out.str();
  }
  double x0 = p.front().first, x1 = p.back().first;
  double y0 = p.front().second, y1 = y0;
  for (const auto& q : p) {
    x0 = std::min(x0, q.first);
    x1 = std::max(x1, q.first);
    y0 = std::min(y0, q.second);
    y1 = std::max(y1, q.second);
  }
  if (x1 == x0) x1 = x0 + 1;
  if (y1 == y0) y1 = y0 + (y0 == 0 ? 1 : std::abs(y0) * 0.1);
  const double w = width - left - right, h = height - top - bottom;
  out << "<polyline fill=\"none\" stroke=\"#1f6fc5\" stroke-width=\"1.5\" points=\"";
  for (const auto& q : p) {
    out << num(left + (q.first - x0) / (x1 - x0) * w, "%.1f") << ","
        << num(top + (1.0 - (q.second - y0) / (y1 - y0)) * h, "%.1f") << " ";
  }
  out << "\"/><text x=\"2\" y=\"" << top + 10 << "\" font-size=\"11\">" << num(y1, "%.4g")
      << "</text><text x=\"2\" y=\"" << height - bottom << "\" font-size=\"11\">" << num(y0, "%.4g")
      << "</text><text x=\"" << width - right - 90 << "\" y=\"" << height - 6
      << "\" font-size=\"11\">step " << num(x1, "%.0f") << "</text></svg>\n";
  return out.str();
}

std::string render_status_page(const pb::JobStatus& s, const StatusPageOptions& o) {
  std::ostringstream out;
  out << "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
      << "<meta http-equiv=\"refresh\" content=\"" << o.refresh_seconds << "\">"
      << "<title>lorafleet: " << html_escape(s.job_name()) << "</title><style>" << kStyle
      << "</style></head>\n<body>\n<h1>lorafleet job <span id=\"job-name\">"
      << html_escape(s.job_name()) << "</span> <span class=\"state\" id=\"state\">"
      << html_escape(s.state()) << "</span></h1>\n";
  if (!s.end_reason().empty()) {
    out << "<p id=\"end-reason\">" << html_escape(s.end_reason()) << "</p>\n";
  }
  out << "<h2>Progress</h2>\n"
      << progress_table(s) << "<h2>Curves</h2>\n"
      << charts(s) << "<h2>Latest sample images</h2>\n"
      << samples(o) << "<h2>Ranks</h2>\n"
      << ranks_table(s) << "<h2>Restarts</h2>\n"
      << restarts_list(s) << forms(s, o)
      << "<p><a href=\"/api/v1/status\">/api/v1/status</a> · <a href=\"/metrics\">/metrics</a>"
      << "</p>\n</body></html>\n";
  return out.str();
}

}  // namespace lf
