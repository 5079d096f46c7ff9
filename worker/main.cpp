// lorafleet-worker: see worker/app/worker_app.h.
#include "worker/app/worker_app.h"

int main(int argc, char** argv) { return lf::run_worker(argc, argv); }
