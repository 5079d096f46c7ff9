// lorafleet-ctl (see header): flags, one JobControl RPC, its answer on stdout.
#include "coordinator/ctl/ctl_app.h"

#include <unistd.h>
#include <CLI/CLI.hpp>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <string>

#include "common/util/exit_codes.h"
#include "coordinator/status_report.h"
#include "lorafleet/v1/control.grpc.pb.h"
#include "worker/rpc/coordinator_channel.h"

namespace lf {

namespace pb = lorafleet::v1;

namespace {

constexpr auto kDeadline = std::chrono::seconds(10);

// "lorafleet-ctl on <host> (user <name>)", for the coordinator's log.
std::string requester() {
  char host[256] = {0};
  gethostname(host, sizeof(host) - 1);
  const char* user = std::getenv("USER");
  return std::string("lorafleet-ctl on ") + host +
         (user ? std::string(" (user ") + user + ")" : "");
}

// Exit code and message for a failed RPC.
int rpc_failed(const std::string& address, const char* rpc, const grpc::Status& s) {
  std::cerr << "lorafleet-ctl: error: " << rpc << " to " << address << ": " << describe_status(s);
  if (s.error_code() == grpc::StatusCode::UNAUTHENTICATED) {
    std::cerr << std::endl;
    return kExitBadInput;
  }
  if (s.error_code() == grpc::StatusCode::UNAVAILABLE ||
      s.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED) {
    std::cerr << " (is the coordinator running and is --coordinator its gRPC address?)";
  }
  std::cerr << std::endl;
  return 1;
}

}  // namespace

int ctl_main(int argc, char** argv) {
  CLI::App app{"lorafleet-ctl: see where a lorafleet job stands, stop or cancel it"};
  std::string address;
  std::string token_file;
  std::string tls_ca_file;
  std::string tls_server_name;
  bool json = false;
  app.add_option("--coordinator", address, "the coordinator's gRPC HOST:PORT")
      ->envname("LF_COORDINATOR")
      ->required();
  app.add_option("--job-token-file", token_file, "file holding the job token (else LF_JOB_TOKEN)");
  app.add_option("--tls-ca-file", tls_ca_file, "PEM CA that signed the coordinator's certificate");
  app.add_option("--tls-server-name", tls_server_name,
                 "name in the coordinator's certificate, when not the dialled host");
  app.require_subcommand(1);
  CLI::App* status = app.add_subcommand("status", "where the job stands");
  status->add_flag("--json", json, "print lorafleet.v1.JobStatus as JSON (as /api/v1/status)");
  app.add_subcommand("stop",
                     "the ranks agree on a last step, commit a checkpoint, write the LoRA and "
                     "exit 0; --resume continues from there");
  app.add_subcommand("cancel",
                     "the ranks exit at once (exit 4); the last committed checkpoint stays the "
                     "resume point");
  app.add_subcommand("sample-now", "sample images (output.sample_prompts) after the next step");
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::cerr << "lorafleet-ctl: error: " << e.what() << " (see --help)" << std::endl;
    return kExitBadInput;
  }
  ClientSecurity security;
  try {
    security = load_client_security(token_file, tls_ca_file, tls_server_name);
  } catch (const std::exception& e) {
    std::cerr << "lorafleet-ctl: error: " << e.what() << std::endl;
    return kExitBadInput;
  }
  auto stub = pb::JobControl::NewStub(make_coordinator_channel(address, security));
  grpc::ClientContext ctx;
  add_job_token(&ctx, security.job_token);
  ctx.set_deadline(std::chrono::system_clock::now() + kDeadline);
  const std::string command = app.get_subcommands().front()->get_name();
  if (command == "status") {
    pb::JobStatus reply;
    const grpc::Status s = stub->GetStatus(&ctx, pb::GetStatusRequest{}, &reply);
    if (!s.ok()) return rpc_failed(address, "GetStatus", s);
    std::cout << (json ? status_json(reply) + "\n" : status_text(reply)) << std::flush;
    return 0;
  }
  pb::ControlRequest request;
  request.set_requested_by(requester());
  pb::ControlReply reply;
  grpc::Status s;
  if (command == "stop") s = stub->Stop(&ctx, request, &reply);
  if (command == "cancel") s = stub->Cancel(&ctx, request, &reply);
  if (command == "sample-now") s = stub->SampleNow(&ctx, request, &reply);
  if (!s.ok()) return rpc_failed(address, command.c_str(), s);
  if (!reply.accepted()) {
    std::cerr << "lorafleet-ctl: " << command << " refused: " << reply.detail() << std::endl;
    return 1;
  }
  std::cout << command << ": " << reply.detail() << std::endl;
  return 0;
}

}  // namespace lf
