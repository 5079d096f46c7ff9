// Translation between lorafleet's plain data types (Dataset, EpochPlan, CheckpointPosition) and the
// lorafleet.v1 protobuf messages the coordinator serves. Kept apart from the service so the
// mapping is tested on its own and reusable by any client that already links protobuf.
#pragma once

#include "common/checkpoint/train_position.h"
#include "common/data/dataset.h"
#include "common/data/epoch_plan.h"
#include "lorafleet/v1/coordinator.pb.h"

namespace lf {

// Largest DatasetManifest / EpochPlan message a worker accepts (its gRPC receive limit, bytes).
// The coordinator refuses, at start-up, an epoch plan that would not fit.
constexpr int kMaxPlanMessageBytes = 256 * 1024 * 1024;

// Fills `out` (cleared first) with every image of `dataset` (bucket, resize target, content
// hash), the subsets' data options, the datasets' bucket options and batch sizes, and the sample
// counts. Pure; never throws except std::bad_alloc.
void to_proto(const Dataset& dataset, lorafleet::v1::DatasetManifest* out);

// Fills `out` (cleared first) with the plan's batches in order (with each sample's crop, flip
// and processed caption), its reg selection and cursors. Pure; never throws except bad_alloc.
void to_proto(const EpochPlan& plan, lorafleet::v1::EpochPlan* out);

// Inverse mappings. Fields the manifest does not carry (warnings, bad images, the subsets'
// origin) are left at their defaults.
Dataset dataset_from_proto(const lorafleet::v1::DatasetManifest& manifest);
EpochPlan epoch_plan_from_proto(const lorafleet::v1::EpochPlan& plan);

// A group's resume point: the checkpoint directory and its whole position as the train state's
// header metadata (train_position_metadata), both directions, so the coordinator's and the
// workers' view of a resume cannot differ by a field. The inverse throws std::runtime_error
// naming `what` (e.g. "RegisterResponse.resume_point") and the key when the position does not
// parse.
void to_proto(const CheckpointPosition& position, lorafleet::v1::ResumePoint* out);
CheckpointPosition checkpoint_position_from_proto(const lorafleet::v1::ResumePoint& point,
                                                  const std::string& what);

}  // namespace lf
