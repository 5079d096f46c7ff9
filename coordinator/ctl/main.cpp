// lorafleet-ctl (see coordinator/ctl/ctl_app.h).
#include "coordinator/ctl/ctl_app.h"

int main(int argc, char** argv) { return lf::ctl_main(argc, argv); }
