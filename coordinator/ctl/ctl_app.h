// lorafleet-ctl: an operator's view of and control over a running job, through the
// coordinator's lorafleet.v1.JobControl service (proto/lorafleet/v1/control.proto):
//   lorafleet-ctl --coordinator HOST:PORT status [--json] | stop | cancel | sample-now
// It authenticates like a worker (--job-token-file, else LF_JOB_TOKEN; --tls-ca-file,
// --tls-server-name). Exit codes: 0 done (the request was accepted); 1 refused by the
// coordinator (the job has ended, no sample prompts, ...) or the coordinator is unreachable;
// 3 bad flags or token file, or a token the coordinator does not accept (UNAUTHENTICATED).
#pragma once

namespace lf {

int ctl_main(int argc, char** argv);

}  // namespace lf
