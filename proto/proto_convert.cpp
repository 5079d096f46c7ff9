// Field-by-field mapping between lorafleet's plain dataset/plan types and lorafleet.v1 messages.
// Sizes stay in pixels and indices stay positions in Dataset::images on both sides.
#include "proto/proto_convert.h"

#include <map>
#include <string>

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
    e->set_dataset_index(image.dataset_index);
    e->set_subset_index(image.subset_index);
    e->set_num_repeats(image.num_repeats);
    e->set_has_alpha(image.has_alpha);
    e->set_content_sha256(image.content_sha256);
    e->set_ar_error(image.bucket.ar_error);
    e->set_is_validation(image.is_validation);
  }
  for (const SubsetInfo& s : dataset.subsets) {
    pb::SubsetEntry* e = out->add_subsets();
    e->set_name(s.name);
    e->set_image_dir(s.image_dir);
    e->set_dataset_index(s.dataset_index);
    e->set_image_count(s.image_count);
    e->set_validation_count(s.validation_count);
    e->set_num_repeats(s.config.num_repeats);
    e->set_is_reg(s.config.is_reg);
    e->set_class_tokens(s.config.class_tokens);
    e->set_flip_aug(s.config.flip_aug);
    e->set_random_crop(s.config.random_crop);
    e->set_alpha_mask(s.config.alpha_mask);
    const CaptionOptions& c = s.config.caption;
    e->set_caption_extension(s.config.caption_extension);
    e->set_shuffle_caption(c.shuffle_caption);
    e->set_keep_tokens(c.keep_tokens);
    e->set_keep_tokens_separator(c.keep_tokens_separator);
    e->set_caption_prefix(c.caption_prefix);
    e->set_caption_suffix(c.caption_suffix);
    e->set_caption_separator(c.caption_separator);
    e->set_caption_dropout_rate(c.caption_dropout_rate);
    e->set_caption_dropout_every_n_epochs(c.caption_dropout_every_n_epochs);
    e->set_caption_tag_dropout_rate(c.caption_tag_dropout_rate);
  }
  for (const DatasetInfo& d : dataset.datasets) {
    pb::DatasetEntry* e = out->add_datasets();
    e->set_batch_size(d.batch_size);
    for (const BucketReso& b : d.predefined_buckets) set_bucket(b, e->add_predefined_buckets());
    e->set_num_train_samples(d.num_train_samples);
    e->set_num_reg_samples_raw(d.num_reg_samples_raw);
    e->set_resolution_width(d.buckets.resolution_w);
    e->set_resolution_height(d.buckets.resolution_h);
    e->set_enable_bucket(d.buckets.enable_bucket);
    e->set_min_bucket_reso(d.buckets.min_bucket_reso);
    e->set_max_bucket_reso(d.buckets.max_bucket_reso);
    e->set_bucket_reso_steps(d.buckets.bucket_reso_steps);
    e->set_bucket_no_upscale(d.buckets.bucket_no_upscale);
    e->set_num_validation_images(d.num_validation_images);
  }
  out->set_num_train_samples(dataset.num_train_samples);
  out->set_num_reg_samples_raw(dataset.num_reg_samples_raw);
}

void to_proto(const EpochPlan& plan, pb::EpochPlan* out) {
  out->Clear();
  out->set_epoch(plan.epoch);
  out->mutable_batches()->Reserve(static_cast<int>(plan.batches.size()));
  for (const GlobalBatch& batch : plan.batches) {
    pb::GlobalBatch* gb = out->add_batches();
    set_bucket(batch.bucket, gb->mutable_bucket());
    gb->set_dataset_index(batch.dataset_index);
    gb->set_batch_size(batch.batch_size);
    gb->mutable_samples()->Reserve(static_cast<int>(batch.samples.size()));
    for (const PlanSample& s : batch.samples) {
      pb::PlanSample* ps = gb->add_samples();
      ps->set_image_index(s.image_index);
      ps->set_loss_weight(s.loss_weight);
      ps->set_crop_left(s.crop_flip.crop_left);
      ps->set_crop_top(s.crop_flip.crop_top);
      ps->set_flip(s.crop_flip.flip);
      if (s.has_caption) {
        ps->set_has_caption(true);
        ps->set_caption(s.caption);
      }
    }
  }
  out->mutable_reg_indices()->Add(plan.reg_indices.begin(), plan.reg_indices.end());
  out->set_reg_images_used(plan.reg_images_used);
  out->set_reg_images_unused(plan.reg_images_unused);
  out->mutable_reg_cursor_begin()->Add(plan.reg_cursor_begin.begin(), plan.reg_cursor_begin.end());
  out->mutable_reg_cursor_end()->Add(plan.reg_cursor_end.begin(), plan.reg_cursor_end.end());
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
    r.dataset_index = e.dataset_index();
    r.subset_index = e.subset_index();
    r.num_repeats = e.num_repeats();
    r.has_alpha = e.has_alpha();
    r.content_sha256 = e.content_sha256();
    r.bucket.ar_error = e.ar_error();
    r.is_validation = e.is_validation();
    d.images.push_back(std::move(r));
  }
  for (const pb::SubsetEntry& e : manifest.subsets()) {
    SubsetInfo s;
    s.name = e.name();
    s.image_dir = e.image_dir();
    s.dataset_index = e.dataset_index();
    s.image_count = e.image_count();
    s.validation_count = e.validation_count();
    s.config.image_dir = e.image_dir();
    s.config.num_repeats = e.num_repeats();
    s.config.is_reg = e.is_reg();
    s.config.class_tokens = e.class_tokens();
    s.config.flip_aug = e.flip_aug();
    s.config.random_crop = e.random_crop();
    s.config.alpha_mask = e.alpha_mask();
    CaptionOptions& c = s.config.caption;
    s.config.caption_extension = e.caption_extension();
    c.shuffle_caption = e.shuffle_caption();
    c.keep_tokens = e.keep_tokens();
    c.keep_tokens_separator = e.keep_tokens_separator();
    c.caption_prefix = e.caption_prefix();
    c.caption_suffix = e.caption_suffix();
    c.caption_separator = e.caption_separator();
    c.caption_dropout_rate = e.caption_dropout_rate();
    c.caption_dropout_every_n_epochs = e.caption_dropout_every_n_epochs();
    c.caption_tag_dropout_rate = e.caption_tag_dropout_rate();
    d.subsets.push_back(std::move(s));
  }
  for (const pb::DatasetEntry& e : manifest.datasets()) {
    DatasetInfo info;
    info.batch_size = e.batch_size();
    for (const pb::Bucket& b : e.predefined_buckets()) {
      info.predefined_buckets.push_back(bucket_from(b));
    }
    info.num_train_samples = e.num_train_samples();
    info.num_reg_samples_raw = e.num_reg_samples_raw();
    info.buckets.resolution_w = e.resolution_width();
    info.buckets.resolution_h = e.resolution_height();
    info.buckets.enable_bucket = e.enable_bucket();
    info.buckets.min_bucket_reso = e.min_bucket_reso();
    info.buckets.max_bucket_reso = e.max_bucket_reso();
    info.buckets.bucket_reso_steps = e.bucket_reso_steps();
    info.buckets.bucket_no_upscale = e.bucket_no_upscale();
    info.num_validation_images = e.num_validation_images();
    d.num_validation_images += info.num_validation_images;
    d.datasets.push_back(std::move(info));
  }
  d.num_train_samples = manifest.num_train_samples();
  d.num_reg_samples_raw = manifest.num_reg_samples_raw();
  return d;
}

EpochPlan epoch_plan_from_proto(const pb::EpochPlan& plan) {
  EpochPlan p;
  p.epoch = plan.epoch();
  p.batches.reserve(plan.batches_size());
  for (const pb::GlobalBatch& gb : plan.batches()) {
    GlobalBatch b;
    b.bucket = bucket_from(gb.bucket());
    b.dataset_index = gb.dataset_index();
    b.batch_size = gb.batch_size();
    b.samples.reserve(gb.samples_size());
    for (const pb::PlanSample& s : gb.samples()) {
      PlanSample ps;
      ps.image_index = s.image_index();
      ps.loss_weight = s.loss_weight();
      ps.crop_flip.crop_left = s.crop_left();
      ps.crop_flip.crop_top = s.crop_top();
      ps.crop_flip.flip = s.flip();
      ps.has_caption = s.has_caption();
      ps.caption = s.caption();
      b.samples.push_back(std::move(ps));
    }
    p.batches.push_back(std::move(b));
  }
  p.reg_indices.assign(plan.reg_indices().begin(), plan.reg_indices().end());
  p.reg_images_used = plan.reg_images_used();
  p.reg_images_unused = plan.reg_images_unused();
  p.reg_cursor_begin.assign(plan.reg_cursor_begin().begin(), plan.reg_cursor_begin().end());
  p.reg_cursor_end.assign(plan.reg_cursor_end().begin(), plan.reg_cursor_end().end());
  return p;
}

void to_proto(const CheckpointPosition& position, pb::ResumePoint* out) {
  out->Clear();
  out->set_checkpoint(position.dir);
  for (const auto& [key, value] : train_position_metadata(position)) {
    (*out->mutable_position())[key] = value;
  }
}

CheckpointPosition checkpoint_position_from_proto(const pb::ResumePoint& point,
                                                  const std::string& what) {
  CheckpointPosition p;
  const std::map<std::string, std::string> meta(point.position().begin(), point.position().end());
  static_cast<TrainPosition&>(p) = parse_train_position(meta, what);
  p.dir = point.checkpoint();
  return p;
}

}  // namespace lf
