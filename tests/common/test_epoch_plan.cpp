// Tests for kohya's reg-image balancing and the epoch plan: sample counts, single-bucket
// batches, batch sizes, rank slices, determinism, and a golden order cross-checked against an
// independent Python re-implementation (SplitMix64 -> mt19937_64 -> Fisher-Yates).
#include "common/data/epoch_plan.h"

#include <gtest/gtest.h>

#include <map>
#include <set>
#include <stdexcept>
#include <vector>

namespace lf {
namespace {

struct Img {
  bool is_reg;
  int repeats;
  BucketReso bucket;
};

Dataset make_dataset(const std::vector<Img>& imgs) {
  Dataset ds;
  for (const auto& i : imgs) {
    ImageRecord r;
    r.index = static_cast<int>(ds.images.size());
    r.is_reg = i.is_reg;
    r.num_repeats = i.repeats;
    r.bucket.bucket = i.bucket;
    (i.is_reg ? ds.num_reg_samples_raw : ds.num_train_samples) += i.repeats;
    ds.images.push_back(r);
  }
  return ds;
}

// Train-only images with `n_train` samples (one image with that many repeats) plus reg images.
std::vector<int> reg_repeats_for(int n_train, const std::vector<int>& reg) {
  std::vector<Img> imgs;
  if (n_train > 0) imgs.push_back({false, n_train, {512, 512}});
  for (int r : reg) imgs.push_back({true, r, {512, 512}});
  return kohya_reg_repeats(make_dataset(imgs));
}

TEST(KohyaRegRepeats, HandComputedCases) {
  // N=10, [1,1,1]: first pass n=3, then +1 cycles i0,i1,i2,i0,i1,i2,i0 -> [4,3,3].
  EXPECT_EQ(reg_repeats_for(10, {1, 1, 1}), (std::vector<int>{4, 3, 3}));
  // N=5, [3,3,3]: first pass stops at n=6 >= 5; the third image is unused.
  EXPECT_EQ(reg_repeats_for(5, {3, 3, 3}), (std::vector<int>{3, 3, 0}));
  // N=4, [2]: n=2, then +1, +1.
  EXPECT_EQ(reg_repeats_for(4, {2}), (std::vector<int>{4}));
  // N=7, [2,1]: n=3, then i0,i1,i0,i1 -> [4,3].
  EXPECT_EQ(reg_repeats_for(7, {2, 1}), (std::vector<int>{4, 3}));
  // N=0: nothing is registered.
  EXPECT_EQ(reg_repeats_for(0, {2, 5}), (std::vector<int>{0, 0}));
  // No reg images.
  EXPECT_TRUE(reg_repeats_for(6, {}).empty());
}

// Images: 0..3 train, 4..5 reg. N_train = 3+2+1+4 = 10; reg [1,1] -> [5,5].
const std::vector<Img> kImgs = {{false, 3, {512, 512}}, {false, 2, {640, 384}},
                                {false, 1, {512, 512}}, {false, 4, {384, 640}},
                                {true, 1, {512, 512}},  {true, 1, {640, 384}}};

PlanOptions options(std::uint64_t seed = 42) {
  PlanOptions o;
  o.seed = seed;
  o.world_size = 2;
  o.train_batch_size = 2;
  o.prior_loss_weight = 0.5;
  return o;
}

std::vector<int> flat_order(const EpochPlan& p) {
  std::vector<int> out;
  for (const auto& b : p.batches) {
    for (const auto& s : b.samples) out.push_back(s.image_index);
  }
  return out;
}

TEST(EpochPlan, EverySampleExactlyOnceWithWeights) {
  const Dataset ds = make_dataset(kImgs);
  const EpochPlan plan = build_epoch_plan(ds, options(), 0);
  EXPECT_EQ(plan.epoch, 0);
  EXPECT_EQ(plan.num_samples(), 20);
  std::map<int, int> counts;
  for (const auto& b : plan.batches) {
    for (const auto& s : b.samples) {
      ++counts[s.image_index];
      EXPECT_FLOAT_EQ(s.loss_weight, s.image_index >= 4 ? 0.5f : 1.0f);
    }
  }
  EXPECT_EQ(counts, (std::map<int, int>{{0, 3}, {1, 2}, {2, 1}, {3, 4}, {4, 5}, {5, 5}}));
  EXPECT_EQ(plan.reg_indices, (std::vector<int>{4, 4, 4, 4, 4, 5, 5, 5, 5, 5}));
}

TEST(EpochPlan, BatchesAreSingleBucketWithGlobalBatchSizes) {
  const Dataset ds = make_dataset(kImgs);
  const EpochPlan plan = build_epoch_plan(ds, options(), 0);
  // Buckets: 384x640 has 4 samples -> [4]; 512x512 has 9 -> [4,4,1]; 640x384 has 7 -> [4,3].
  std::map<BucketReso, std::multiset<std::size_t>> sizes;
  for (const auto& b : plan.batches) {
    for (const auto& s : b.samples) {
      EXPECT_EQ(ds.images[s.image_index].bucket.bucket, b.bucket);
    }
    sizes[b.bucket].insert(b.samples.size());
  }
  const std::map<BucketReso, std::multiset<std::size_t>> want = {
      {{384, 640}, {4}}, {{512, 512}, {1, 4, 4}}, {{640, 384}, {3, 4}}};
  EXPECT_EQ(sizes, want);
}

TEST(EpochPlan, GoldenOrderSeed42) {
  // Computed by tests' independent Python model of the same algorithm (mt19937_64 checked
  // against the C++ standard's 10000th-output value 9981545732273789042).
  const Dataset ds = make_dataset(kImgs);
  const EpochPlan e0 = build_epoch_plan(ds, options(), 0);
  ASSERT_EQ(e0.batches.size(), 6u);
  EXPECT_EQ(e0.batches[0].bucket, (BucketReso{512, 512}));
  EXPECT_EQ(e0.batches[2].bucket, (BucketReso{640, 384}));
  EXPECT_EQ(e0.batches[5].bucket, (BucketReso{384, 640}));
  EXPECT_EQ(flat_order(e0), (std::vector<int>{0, 4, 0, 2, 4, 0, 4, 4, 5, 1, 5, 4, 5, 5, 1, 5,
                                                3, 3, 3, 3}));
  const EpochPlan e1 = build_epoch_plan(ds, options(), 1);
  EXPECT_EQ(flat_order(e1), (std::vector<int>{3, 3, 3, 3, 4, 4, 2, 0, 4, 1, 5, 1, 5, 0, 0, 4,
                                                4, 5, 5, 5}));
}

TEST(EpochPlan, DeterministicPerSeedAndEpoch) {
  const Dataset ds = make_dataset(kImgs);
  const EpochPlan a = build_epoch_plan(ds, options(7), 3);
  const EpochPlan b = build_epoch_plan(ds, options(7), 3);
  ASSERT_EQ(a.batches.size(), b.batches.size());
  for (std::size_t i = 0; i < a.batches.size(); ++i) {
    EXPECT_EQ(a.batches[i].bucket, b.batches[i].bucket);
    ASSERT_EQ(a.batches[i].samples.size(), b.batches[i].samples.size());
    for (std::size_t j = 0; j < a.batches[i].samples.size(); ++j) {
      EXPECT_EQ(a.batches[i].samples[j].image_index, b.batches[i].samples[j].image_index);
      EXPECT_EQ(a.batches[i].samples[j].loss_weight, b.batches[i].samples[j].loss_weight);
    }
  }
  EXPECT_NE(flat_order(a), flat_order(build_epoch_plan(ds, options(7), 4)));
  EXPECT_NE(flat_order(a), flat_order(build_epoch_plan(ds, options(8), 3)));
}

TEST(EpochPlan, RankSlicesAreDisjointAndCover) {
  const Dataset ds = make_dataset(kImgs);
  PlanOptions o = options();
  o.world_size = 3;
  o.train_batch_size = 2;
  const EpochPlan plan = build_epoch_plan(ds, o, 0);
  int covered = 0;
  for (const auto& b : plan.batches) {
    const int n = static_cast<int>(b.samples.size());
    EXPECT_LE(n, 6);
    int next = 0;
    for (int rank = 0; rank < o.world_size; ++rank) {
      const auto [begin, end] = rank_slice(b, rank, o.train_batch_size);
      EXPECT_EQ(begin, next);  // contiguous, in rank order, no overlap
      EXPECT_LE(end - begin, o.train_batch_size);
      EXPECT_LE(begin, end);
      next = end;
    }
    EXPECT_EQ(next, n);
    covered += n;
  }
  EXPECT_EQ(covered, 20);

  GlobalBatch three;
  three.samples.resize(3);
  EXPECT_EQ(rank_slice(three, 0, 2), (std::pair<int, int>{0, 2}));
  EXPECT_EQ(rank_slice(three, 1, 2), (std::pair<int, int>{2, 3}));
  EXPECT_EQ(rank_slice(three, 2, 2), (std::pair<int, int>{3, 3}));
  EXPECT_THROW(rank_slice(three, -1, 2), std::invalid_argument);
}

TEST(EpochPlan, WithoutRegImages) {
  const Dataset ds = make_dataset({{false, 5, {512, 512}}, {false, 2, {640, 384}}});
  PlanOptions o = options();
  o.world_size = 1;
  o.train_batch_size = 3;
  const EpochPlan plan = build_epoch_plan(ds, o, 2);
  EXPECT_TRUE(plan.reg_indices.empty());
  EXPECT_EQ(plan.num_samples(), 7);
  EXPECT_EQ(plan.batches.size(), 3u);  // 512x512: 3 + 2; 640x384: 2
}

TEST(EpochPlan, RejectsBadOptions) {
  const Dataset ds = make_dataset(kImgs);
  PlanOptions o = options();
  o.world_size = 0;
  EXPECT_THROW(build_epoch_plan(ds, o, 0), std::invalid_argument);
  o = options();
  o.reg_selection = "random";
  EXPECT_THROW(build_epoch_plan(ds, o, 0), std::invalid_argument);
  EXPECT_THROW(build_epoch_plan(ds, options(), -1), std::invalid_argument);
}

}  // namespace
}  // namespace lf
