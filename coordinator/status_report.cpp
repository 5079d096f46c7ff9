// status_json, status_text (see header).
#include "coordinator/status_report.h"

#include <google/protobuf/util/json_util.h>

#include <cstdio>
#include <sstream>
#include <stdexcept>

namespace lf {

namespace pb = lorafleet::v1;

namespace {

std::string message_json(const google::protobuf::Message& message) {
  google::protobuf::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;
  options.always_print_primitive_fields = true;
  std::string out;
  const auto st = google::protobuf::util::MessageToJsonString(message, &out, options);
  if (!st.ok()) {
    throw std::runtime_error("cannot print " + message.GetTypeName() +
                             " as JSON: " + st.ToString());
  }
  return out;
}

}  // namespace

std::string status_json(const pb::JobStatus& status) { return message_json(status); }

std::string control_reply_json(const pb::ControlReply& reply) { return message_json(reply); }

namespace {

std::string duration_text(double seconds) {
  if (seconds < 0) return "unknown";
  const long long s = static_cast<long long>(seconds + 0.5);
  char buf[32];
  if (s >= 3600) {
    std::snprintf(buf, sizeof(buf), "%lldh%02lldm", s / 3600, (s / 60) % 60);
  } else if (s >= 60) {
    std::snprintf(buf, sizeof(buf), "%lldm%02llds", s / 60, s % 60);
  } else {
    std::snprintf(buf, sizeof(buf), "%llds", s);
  }
  return buf;
}

}  // namespace

std::string status_text(const pb::JobStatus& s) {
  std::ostringstream out;
  out << "job        " << s.job_name() << ": " << s.state();
  if (!s.end_reason().empty()) out << " (" << s.end_reason() << ")";
  out << "\n";
  out << "progress   global_step " << s.global_step() << "/" << s.max_train_steps() << ", epoch "
      << s.epoch() + 1 << "/" << s.num_epochs() << ", loss " << s.loss() << ", lr "
      << s.learning_rate() << ", " << s.samples_per_second() << " samples/s, elapsed "
      << duration_text(s.elapsed_seconds()) << ", ETA " << duration_text(s.eta_seconds()) << "\n";
  out << "checkpoint ";
  if (s.last_committed_step() >= 0) {
    out << "global_step " << s.last_committed_step() << " " << s.last_committed_checkpoint();
  } else {
    out << "none committed yet";
  }
  out << "\n";
  out << "group      world_size " << s.world_size() << ", generation " << s.generation();
  for (const pb::Restart& r : s.restarts()) out << ", " << r.count() << " restart(s) " << r.cause();
  out << "\n";
  for (const pb::RankStatus& r : s.ranks()) {
    out << "rank " << r.rank() << "     " << r.state();
    if (!r.hostname().empty())
      out << " on " << r.hostname() << " (" << r.device() << ", pid " << r.pid() << ")";
    out << ", global_step " << r.global_step();
    if (r.last_seen_seconds_ago() >= 0) {
      char buf[32];
      std::snprintf(buf, sizeof(buf), "%.1f", r.last_seen_seconds_ago());
      out << ", seen " << buf << " s ago";
    }
    if (!r.error().empty()) out << ": " << r.error();
    out << "\n";
  }
  return out.str();
}

}  // namespace lf
