// The validation loss's fixed parts (worker/train/validation.h): kohya's timesteps
// linspace(min, max, 6)[1:-1] truncated to integers, and the validation batches of the held-out
// images: grouped by (dataset, bucket), the dataset's batch_size each, at most
// max_validation_steps of them.
#include "worker/train/validation.h"

#include <gtest/gtest.h>

#include <vector>

namespace lf {
namespace {

TEST(Validation, TimestepsAreKohyasLinspace) {
  EXPECT_EQ(Validation::timesteps(0, 1000), (std::vector<std::int64_t>{200, 400, 600, 800}));
  // np.linspace(100, 900, 6, dtype=int) = [100, 260, 420, 580, 740, 900]
  EXPECT_EQ(Validation::timesteps(100, 900), (std::vector<std::int64_t>{260, 420, 580, 740}));
  // np.linspace(0, 999, 6, dtype=int) = [0, 199, 399, 599, 799, 999]
  EXPECT_EQ(Validation::timesteps(0, 999), (std::vector<std::int64_t>{199, 399, 599, 799}));
}

Dataset held_out(const std::vector<std::pair<int, BucketReso>>& images) {
  Dataset ds;
  ds.datasets.resize(2);
  ds.datasets[0].batch_size = 2;
  ds.datasets[1].batch_size = 3;
  for (const auto& [dataset, bucket] : images) {
    ImageRecord r;
    r.index = static_cast<int>(ds.images.size());
    r.dataset_index = dataset;
    r.bucket.bucket = bucket;
    r.is_validation = true;
    ds.images.push_back(r);
  }
  ImageRecord trained;  // not held out: in no validation batch
  trained.index = static_cast<int>(ds.images.size());
  ds.images.push_back(trained);
  return ds;
}

TEST(Validation, BatchesGroupByDatasetAndBucketInTheDatasetsBatchSize) {
  const BucketReso a{64, 64}, b{96, 64};
  // Images 0..5: (d0, b), (d0, a), (d0, a), (d0, a), (d1, a), (d0, b)
  const Dataset ds = held_out({{0, b}, {0, a}, {0, a}, {0, a}, {1, a}, {0, b}});
  const std::vector<GlobalBatch> all = Validation::make_batches(ds, 0);
  ASSERT_EQ(all.size(), 4u);
  auto indices = [](const GlobalBatch& g) {
    std::vector<int> out;
    for (const PlanSample& s : g.samples) out.push_back(s.image_index);
    return out;
  };
  // dataset 0, bucket 64x64: images 1, 2, 3 in batches of 2; then 96x64: 0, 5; then dataset 1.
  EXPECT_EQ(indices(all[0]), (std::vector<int>{1, 2}));
  EXPECT_EQ(indices(all[1]), (std::vector<int>{3}));
  EXPECT_EQ(indices(all[2]), (std::vector<int>{0, 5}));
  EXPECT_EQ(all[2].bucket, b);
  EXPECT_EQ(indices(all[3]), (std::vector<int>{4}));
  EXPECT_EQ(all[3].dataset_index, 1);
  EXPECT_EQ(all[3].batch_size, 3);
  for (const GlobalBatch& g : all) {
    for (const PlanSample& s : g.samples) {
      EXPECT_FALSE(s.crop_flip.flip);  // no augmentation draws
      EXPECT_FLOAT_EQ(s.loss_weight, 1.0f);
    }
  }
  // max_validation_steps 2: the first two batches.
  const std::vector<GlobalBatch> two = Validation::make_batches(ds, 2);
  ASSERT_EQ(two.size(), 2u);
  EXPECT_EQ(indices(two[1]), (std::vector<int>{3}));
}

// A subset with random captions has no prefix in its base caption (it is added when a sample
// is planned); its validation samples carry the caption processed without the randomness: prefix
// and suffix joined, the tags in their written order. A subset with fixed captions keeps its
// (already processed) base caption.
TEST(Validation, RandomCaptionSubsetsAreScoredWithTheirFixedParts) {
  Dataset ds = held_out({{0, {64, 64}}, {0, {64, 64}}});
  ds.subsets.resize(2);
  CaptionOptions& random = ds.subsets[0].config.caption;
  random.shuffle_caption = true;
  random.caption_prefix = "sks";
  random.caption_suffix = "photo";
  random.keep_tokens_separator = "|||";
  random.caption_dropout_rate = 0.5;
  ds.images[0].subset_index = 0;
  ds.images[0].caption = "a dog ||| red, blue";
  ds.images[1].subset_index = 1;  // fixed captions: the base caption is final
  ds.images[1].caption = "a cat";
  const std::vector<GlobalBatch> batches = Validation::make_batches(ds, 0);
  ASSERT_EQ(batches.size(), 1u);
  ASSERT_EQ(batches[0].samples.size(), 2u);
  const PlanSample& dog = batches[0].samples[0];
  EXPECT_TRUE(dog.has_caption);
  EXPECT_EQ(dog.caption, "sks a dog ||| red, blue photo");
  EXPECT_FALSE(batches[0].samples[1].has_caption);
  // The same every time it is built.
  EXPECT_EQ(Validation::make_batches(ds, 0)[0].samples[0].caption, dog.caption);
}

}  // namespace
}  // namespace lf
