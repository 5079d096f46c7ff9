// The coordinator's gRPC handlers fed what a malicious or broken worker holding the job token
// could send: any sequence of decoded messages to Register, GetDataset, GetEpochPlan,
// ReportProgress, CommitCheckpoint and Finish, with any ranks, world sizes, generations, steps,
// epochs and counts. The handlers answer every one with a status (never a crash, an exception
// or a hang), as lorafleet.v1.Coordinator promises a client.
//
// Input: records of [method byte][length, 2 bytes little-endian][length bytes of the message's
// protobuf encoding]; a message that does not parse is skipped. Each input runs against a fresh
// CoordinatorService (no durable state, no token, a 2-image dataset generated once, a
// registration barrier of 0 ms so a Register never waits for ranks that do not come).
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include <grpcpp/server_context.h>

#include "common/config/job_config.h"
#include "common/image/png_encode.h"
#include "coordinator/coordinator_metrics.h"
#include "coordinator/job.h"
#include "coordinator/service.h"
#include "lorafleet/v1/coordinator.pb.h"
#include "tests/fuzz/fuzz_target.h"

namespace fs = std::filesystem;
namespace pb = lorafleet::v1;

namespace {

// A 2-image DreamBooth dataset, a placeholder checkpoint and vocabulary (the coordinator only
// reads the checkpoint's header), in a folder of this process; the job is built once.
lf::CoordinatorJob& fuzz_job() {
  static lf::CoordinatorJob* job = [] {
    setenv("LF_LOG_LEVEL", "error", 0);  // the service logs every registration and refusal
    const fs::path root = fs::temp_directory_path() / "lf_fuzz_coordinator";
    fs::create_directories(root / "train" / "2_photo");
    const std::vector<std::uint8_t> grey(128 * 128 * 3, 128);
    for (const char* name : {"a", "b"}) {
      std::ofstream(root / "train" / "2_photo" / (std::string(name) + ".png"), std::ios::binary)
          << lf::encode_png_rgb(grey, 128, 128, {});
      std::ofstream(root / "train" / "2_photo" / (std::string(name) + ".txt")) << "a photo";
    }
    {
      std::ofstream f(root / "model.safetensors", std::ios::binary);
      const char header_len[8] = {8, 0, 0, 0, 0, 0, 0, 0};
      f.write(header_len, 8);
      f << "{}      ";
    }
    std::ofstream(root / "vocab.txt.gz") << "placeholder";
    const std::string r = root.string();
    const std::string yaml =
        "model:\n  pretrained_model_name_or_path: " + r +
        "/model.safetensors\n  tokenizer_vocab: " + r +
        "/vocab.txt.gz\ndataset:\n  train_data_dir: " + r +
        "/train\n  resolution: 128\n  min_bucket_reso: 64\n  max_bucket_reso: 256\n"
        "  bucket_reso_steps: 64\n  caption_extension: .txt\n"
        "training:\n  seed: 7\n  max_train_steps: 20\n"
        "output:\n  output_dir: " +
        r + "/out\n";
    return new lf::CoordinatorJob(lf::parse_job_config(yaml, "fuzz.yaml"), false);
  }();
  return *job;
}

template <class Request, class Response, class Handler>
void call(const std::uint8_t* bytes, std::size_t n, Handler handler) {
  Request request;
  if (!request.ParseFromArray(bytes, static_cast<int>(n))) return;
  Response response;
  grpc::ServerContext context;
  const grpc::Status status = handler(&context, &request, &response);
  lf::fuzz::require(status.ok() || !status.error_message().empty(), "a refusal says why");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  lf::CoordinatorJob& job = fuzz_job();
  lf::CoordinatorMetrics metrics;
  lf::ServiceOptions options;
  options.registration_timeout = std::chrono::milliseconds(0);
  options.tick = std::chrono::milliseconds(5);
  lf::CoordinatorService service(job, metrics, options);
  std::size_t at = 0;
  for (int calls = 0; at + 3 <= size && calls < 64; ++calls) {
    const std::uint8_t method = data[at];
    std::size_t n = data[at + 1] | (static_cast<std::size_t>(data[at + 2]) << 8);
    at += 3;
    if (n > size - at) n = size - at;
    const std::uint8_t* m = data + at;
    at += n;
    using S = lf::CoordinatorService;
    switch (method % 6) {
      case 0:
        call<pb::RegisterRequest, pb::RegisterResponse>(
            m, n, [&](auto* c, auto* q, auto* r) { return service.S::Register(c, q, r); });
        break;
      case 1:
        call<pb::GetDatasetRequest, pb::DatasetManifest>(
            m, n, [&](auto* c, auto* q, auto* r) { return service.S::GetDataset(c, q, r); });
        break;
      case 2:
        call<pb::GetEpochPlanRequest, pb::EpochPlan>(
            m, n, [&](auto* c, auto* q, auto* r) { return service.S::GetEpochPlan(c, q, r); });
        break;
      case 3:
        call<pb::ProgressReport, pb::ProgressAck>(
            m, n, [&](auto* c, auto* q, auto* r) { return service.S::ReportProgress(c, q, r); });
        break;
      case 4:
        call<pb::CheckpointReport, pb::CheckpointAck>(
            m, n, [&](auto* c, auto* q, auto* r) { return service.S::CommitCheckpoint(c, q, r); });
        break;
      default:
        call<pb::FinishRequest, pb::FinishAck>(
            m, n, [&](auto* c, auto* q, auto* r) { return service.S::Finish(c, q, r); });
        break;
    }
  }
  return 0;
}
