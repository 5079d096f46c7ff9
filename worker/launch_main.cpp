// lorafleet-launch: see worker/launch/launcher.h.
#include "worker/launch/launcher.h"

int main(int argc, char** argv) { return lf::launcher_main(argc, argv); }
