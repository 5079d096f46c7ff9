// Field-by-field mapping between lorafleet's plain dataset/plan types and lorafleet.v1 messages.
// Sizes stay in pixels and indices stay positions in Dataset::images on both sides.
#include "proto/proto_convert.h"

namespace lf {
namespace pb = lorafleet::v1;

static void set_bucket(const BucketReso& b, pb::Bucket* out) {
  out->set_width(b.width);
  out->set_height(b.height);
}

static BucketReso bucket_from(const pb::Bucket& b) { return BucketReso{b.width(), b.height()}; }

void to_proto(const Dataset& dataset, pb::DatasetManifest* out) {
  out->Clear();
  out->mutable_images()->Reserve(static_cast<int>(dataset.images.size()));
  for (const ImageRecord& image : dataset.images) {
    pb::ImageEntry* e = out->add_images();
    e->set_index(image.index);
    e->set_path(image.path);
    e->set_caption(image.caption);
    e->set_is_reg(image.is_reg);
    e->set_width(image.width);
    e->set_height(image.height);
    set_bucket(image.bucket.bucket, e->mutable_bucket());
    e->set_resized_width(image.bucket.resized_width);
    e->set_resized_height(image.bucket.resized_height);
  }
  out->set_num_train_samples(dataset.num_train_samples);
  out->set_num_reg_samples_raw(dataset.num_reg_samples_raw);
  for (const BucketReso& b : dataset.predefined_buckets) set_bucket(b, out->add_buckets());
}

void to_proto(const EpochPlan& plan, int train_batch_size, pb::EpochPlan* out) {
  out->Clear();
  out->set_epoch(plan.epoch);
  out->set_train_batch_size(train_batch_size);
  out->mutable_batches()->Reserve(static_cast<int>(plan.batches.size()));
  for (const GlobalBatch& batch : plan.batches) {
    pb::GlobalBatch* gb = out->add_batches();
    set_bucket(batch.bucket, gb->mutable_bucket());
    gb->mutable_samples()->Reserve(static_cast<int>(batch.samples.size()));
    for (const PlanSample& s : batch.samples) {
      pb::PlanSample* ps = gb->add_samples();
      ps->set_image_index(s.image_index);
      ps->set_loss_weight(s.loss_weight);
    }
  }
  out->mutable_reg_indices()->Add(plan.reg_indices.begin(), plan.reg_indices.end());
}

Dataset dataset_from_proto(const pb::DatasetManifest& manifest) {
  Dataset d;
  d.images.reserve(manifest.images_size());
  for (const pb::ImageEntry& e : manifest.images()) {
    ImageRecord r;
    r.index = e.index();
    r.path = e.path();
    r.caption = e.caption();
    r.is_reg = e.is_reg();
    r.width = e.width();
    r.height = e.height();
    r.bucket.bucket = bucket_from(e.bucket());
    r.bucket.resized_width = e.resized_width();
    r.bucket.resized_height = e.resized_height();
    d.images.push_back(std::move(r));
  }
  d.num_train_samples = manifest.num_train_samples();
  d.num_reg_samples_raw = manifest.num_reg_samples_raw();
  for (const pb::Bucket& b : manifest.buckets()) d.predefined_buckets.push_back(bucket_from(b));
  return d;
}

EpochPlan epoch_plan_from_proto(const pb::EpochPlan& plan) {
  EpochPlan p;
  p.epoch = plan.epoch();
  p.batches.reserve(plan.batches_size());
  for (const pb::GlobalBatch& gb : plan.batches()) {
    GlobalBatch b;
    b.bucket = bucket_from(gb.bucket());
    b.samples.reserve(gb.samples_size());
    for (const pb::PlanSample& s : gb.samples()) {
      b.samples.push_back({s.image_index(), s.loss_weight()});
    }
    p.batches.push_back(std::move(b));
  }
  p.reg_indices.assign(plan.reg_indices().begin(), plan.reg_indices().end());
  return p;
}

}  // namespace lf
