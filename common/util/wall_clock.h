// Wall-clock time for what lorafleet writes into its outputs (LoRA metadata timestamps). Honours
// SOURCE_DATE_EPOCH (reproducible-builds.org): with it set, outputs of the same config and seed
// are byte-identical across runs and resumes, timestamps included.
#pragma once

#include <ctime>
#include <string>

namespace lf {

// `t` in local time as "YYYYmmddHHMMSS", kohya's time.strftime("%Y%m%d%H%M%S",
// time.localtime()) for its log folders and sample-image names.
std::string kohya_local_timestamp(std::time_t t);

// SOURCE_DATE_EPOCH (seconds since 1970) when set to a valid integer, else std::time(nullptr).
std::time_t output_timestamp();

}  // namespace lf
