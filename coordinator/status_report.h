// Renderings of lorafleet.v1.JobStatus: JSON for /api/v1/status and `lorafleet-ctl status
// --json`, and the short text `lorafleet-ctl status` prints.
#pragma once

#include <string>

#include "lorafleet/v1/control.pb.h"

namespace lf {

// Protobuf's canonical JSON mapping with the proto field names (snake_case, as the rest of
// lorafleet's keys) and every field present, defaults included; int64 values are JSON strings
// as the mapping says. Throws std::runtime_error when protobuf cannot print it.
std::string status_json(const lorafleet::v1::JobStatus& status);
// The same mapping for the answer to a stop / cancel / sample-now.
std::string control_reply_json(const lorafleet::v1::ControlReply& reply);

// A few lines for a terminal: job, state, progress and ETA, the last checkpoint, restarts and
// one line per rank.
std::string status_text(const lorafleet::v1::JobStatus& status);

}  // namespace lf
