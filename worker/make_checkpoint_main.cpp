// lorafleet-make-checkpoint: writes a seeded random-weight single-file checkpoint of a model
// preset (original ldm key layout), e.g. the demo's tiny model. Real checkpoints are loaded by
// the same loader; this tool only exists because weights cannot be downloaded here.
#include "worker/app/make_checkpoint.h"

int main(int argc, char** argv) { return lf::run_make_checkpoint(argc, argv); }
