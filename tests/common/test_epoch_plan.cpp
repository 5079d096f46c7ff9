// Tests for the epoch plan: kohya's reg balancing per dataset, the random and rotating reg
// selections, loss weights, (dataset, bucket) batches with per-dataset batch sizes, rank slices,
// per-sample crop/flip/caption draws, determinism, and a golden order cross-checked against an
// independent Python re-implementation (SplitMix64 -> mt19937_64 -> Fisher-Yates).
#include "common/data/epoch_plan.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <set>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

namespace lf {
namespace {

// Builds a Dataset by hand, images in (dataset, subset, file) order as scan_dataset does.
class Builder {
 public:
  int add_dataset(int batch_size) {
    DatasetInfo info;
    info.batch_size = batch_size;
    ds_.datasets.push_back(info);
    return static_cast<int>(ds_.datasets.size()) - 1;
  }
  int add_subset(int dataset, bool is_reg, int num_repeats, const std::string& name,
                 SubsetConfig cfg = {}) {
    SubsetInfo s;
    s.name = name;
    s.dataset_index = dataset;
    cfg.num_repeats = num_repeats;
    cfg.is_reg = is_reg;
    s.config = cfg;
    ds_.subsets.push_back(s);
    return static_cast<int>(ds_.subsets.size()) - 1;
  }
  // Adds `count` images "<prefix>01".. to the subset; returns the first image index.
  int add_images(int subset, int count, const std::string& prefix, BucketReso bucket = {512, 512},
                 int resized_w = 0, int resized_h = 0, const std::string& caption = "") {
    const int first = static_cast<int>(ds_.images.size());
    SubsetInfo& s = ds_.subsets[subset];
    for (int i = 0; i < count; ++i) {
      ImageRecord r;
      r.index = static_cast<int>(ds_.images.size());
      char name[32];
      std::snprintf(name, sizeof name, "%s%02d", prefix.c_str(), i + 1);
      r.path = std::string("/data/") + s.name + "/" + name + ".png";
      r.caption = caption.empty() ? std::string(name) : caption;
      r.dataset_index = s.dataset_index;
      r.subset_index = subset;
      r.is_reg = s.config.is_reg;
      r.num_repeats = s.config.num_repeats;
      r.bucket.bucket = bucket;
      r.bucket.resized_width = resized_w > 0 ? resized_w : bucket.width;
      r.bucket.resized_height = resized_h > 0 ? resized_h : bucket.height;
      ds_.images.push_back(r);
      ++s.image_count;
    }
    return first;
  }
  Dataset finish() {
    Dataset ds = ds_;
    for (const auto& s : ds.subsets) {
      const std::int64_t n = static_cast<std::int64_t>(s.config.num_repeats) * s.image_count;
      auto& info = ds.datasets[s.dataset_index];
      (s.config.is_reg ? info.num_reg_samples_raw : info.num_train_samples) += n;
      (s.config.is_reg ? ds.num_reg_samples_raw : ds.num_train_samples) += n;
    }
    return ds;
  }

 private:
  Dataset ds_;
};

// One dataset: train subset "<train_repeats>_a" of n_train images, reg "<reg_repeats>_p" of n_reg.
// Images 0..n_train-1 are train, then p01.. are reg.
Dataset train_and_reg(int train_repeats, int n_train, int reg_repeats, int n_reg,
                      int batch_size = 1) {
  Builder b;
  const int d = b.add_dataset(batch_size);
  b.add_images(b.add_subset(d, false, train_repeats, std::to_string(train_repeats) + "_a"),
               n_train, "a");
  if (n_reg > 0) {
    b.add_images(b.add_subset(d, true, reg_repeats, std::to_string(reg_repeats) + "_p"), n_reg,
                 "p");
  }
  return b.finish();
}

PlanOptions opts(const std::string& reg_selection = "first", std::uint64_t seed = 42,
                 int world_size = 1) {
  PlanOptions o;
  o.seed = seed;
  o.world_size = world_size;
  o.reg_selection = reg_selection;
  return o;
}

std::vector<int> flat_order(const EpochPlan& p) {
  std::vector<int> out;
  for (const auto& b : p.batches) {
    for (const auto& s : b.samples) out.push_back(s.image_index);
  }
  return out;
}

std::map<int, int> counts_of(const std::vector<int>& v) {
  std::map<int, int> m;
  for (int i : v) ++m[i];
  return m;
}

// Image indices first..first+n-1.
std::vector<int> range(int first, int n) {
  std::vector<int> v;
  for (int i = 0; i < n; ++i) v.push_back(first + i);
  return v;
}

void expect_same_plan(const EpochPlan& a, const EpochPlan& b) {
  EXPECT_EQ(a.epoch, b.epoch);
  EXPECT_EQ(a.reg_indices, b.reg_indices);
  EXPECT_EQ(a.reg_images_used, b.reg_images_used);
  EXPECT_EQ(a.reg_images_unused, b.reg_images_unused);
  EXPECT_EQ(a.reg_cursor_begin, b.reg_cursor_begin);
  EXPECT_EQ(a.reg_cursor_end, b.reg_cursor_end);
  ASSERT_EQ(a.batches.size(), b.batches.size());
  for (std::size_t i = 0; i < a.batches.size(); ++i) {
    const GlobalBatch& x = a.batches[i];
    const GlobalBatch& y = b.batches[i];
    EXPECT_EQ(x.dataset_index, y.dataset_index);
    EXPECT_EQ(x.bucket, y.bucket);
    EXPECT_EQ(x.batch_size, y.batch_size);
    ASSERT_EQ(x.samples.size(), y.samples.size());
    for (std::size_t j = 0; j < x.samples.size(); ++j) {
      EXPECT_EQ(x.samples[j].image_index, y.samples[j].image_index);
      EXPECT_EQ(x.samples[j].loss_weight, y.samples[j].loss_weight);
      EXPECT_EQ(x.samples[j].crop_flip, y.samples[j].crop_flip);
      EXPECT_EQ(x.samples[j].has_caption, y.samples[j].has_caption);
      EXPECT_EQ(x.samples[j].caption, y.samples[j].caption);
    }
  }
}

// ---- kohya's rule ("first") ----

std::vector<int> reg_repeats_for(int n_train, const std::vector<int>& reg) {
  Builder b;
  const int d = b.add_dataset(1);
  if (n_train > 0) b.add_images(b.add_subset(d, false, n_train, "t"), 1, "t");
  for (int r : reg) b.add_images(b.add_subset(d, true, r, "r"), 1, "r");
  return kohya_reg_repeats(b.finish(), d);
}

TEST(KohyaRegRepeats, HandComputedCases) {
  // N=10, [1,1,1]: first pass n=3, then +1 cycles i0,i1,i2,i0,i1,i2,i0 -> [4,3,3].
  EXPECT_EQ(reg_repeats_for(10, {1, 1, 1}), (std::vector<int>{4, 3, 3}));
  // N=5, [3,3,3]: first pass stops at n=6 >= 5; the third image is unused.
  EXPECT_EQ(reg_repeats_for(5, {3, 3, 3}), (std::vector<int>{3, 3, 0}));
  // N=7, [2,1]: n=3, then i0,i1,i0,i1 -> [4,3].
  EXPECT_EQ(reg_repeats_for(7, {2, 1}), (std::vector<int>{4, 3}));
  EXPECT_EQ(reg_repeats_for(0, {2, 5}), (std::vector<int>{0, 0}));
  EXPECT_TRUE(reg_repeats_for(6, {}).empty());
}

TEST(KohyaRegRepeats, PerDatasetOwnNTrain) {
  // Dataset 0: N_train 3, reg [1,1]; dataset 1: N_train 1, reg [1,1,1]. Independent.
  Builder b;
  const int d0 = b.add_dataset(1);
  const int d1 = b.add_dataset(1);
  b.add_images(b.add_subset(d0, false, 3, "3_a"), 1, "a");
  b.add_images(b.add_subset(d0, true, 1, "1_p"), 2, "p");
  b.add_images(b.add_subset(d1, false, 1, "1_b"), 1, "b");
  b.add_images(b.add_subset(d1, true, 1, "1_q"), 3, "q");
  const Dataset ds = b.finish();
  EXPECT_EQ(kohya_reg_repeats(ds, d0), (std::vector<int>{2, 1}));
  EXPECT_EQ(kohya_reg_repeats(ds, d1), (std::vector<int>{1, 0, 0}));
  EXPECT_THROW(kohya_reg_repeats(ds, 2), std::invalid_argument);
}

// The digest a checkpoint records: equal for equal plans, different when anything differs.
TEST(EpochPlanDigest, ChangesWithAnyField) {
  const Dataset ds = train_and_reg(10, 10, 1, 30);
  const EpochPlan plan = build_epoch_plan(ds, opts(), 0);
  const std::string d = epoch_plan_digest(plan);
  EXPECT_EQ(d.size(), 64u);
  EXPECT_EQ(epoch_plan_digest(build_epoch_plan(ds, opts(), 0)), d);
  EXPECT_NE(epoch_plan_digest(build_epoch_plan(ds, opts(), 1)), d);
  EXPECT_NE(epoch_plan_digest(build_epoch_plan(ds, opts("first", 43), 0)), d);
  EpochPlan changed = plan;
  changed.batches[0].samples[0].crop_flip.flip = !changed.batches[0].samples[0].crop_flip.flip;
  EXPECT_NE(epoch_plan_digest(changed), d);
  changed = plan;
  changed.batches[0].samples[0].has_caption = true;
  changed.batches[0].samples[0].caption = "x";
  EXPECT_NE(epoch_plan_digest(changed), d);
  changed = plan;
  changed.batches[0].samples[0].loss_weight += 1e-6f;
  EXPECT_NE(epoch_plan_digest(changed), d);
}

TEST(RegFirst, TenRepeatsOfTenWithThirtyRegImages) {
  // 10_a x 10 images: N_train = 100. 1_p x 30: first pass 30, then +1 over p01..p30 twice and
  // p01..p10 once more: p01-p10 x4, p11-p30 x3.
  const Dataset ds = train_and_reg(10, 10, 1, 30);
  std::vector<int> want_repeats(30, 3);
  std::fill(want_repeats.begin(), want_repeats.begin() + 10, 4);
  EXPECT_EQ(kohya_reg_repeats(ds, 0), want_repeats);
  const EpochPlan plan = build_epoch_plan(ds, opts(), 0);
  EXPECT_EQ(plan.reg_indices.size(), 100u);
  EXPECT_EQ(plan.num_samples(), 200);
  const auto c = counts_of(plan.reg_indices);
  ASSERT_EQ(c.size(), 30u);
  for (int i = 0; i < 30; ++i) EXPECT_EQ(c.at(10 + i), i < 10 ? 4 : 3) << "p" << i + 1;
  EXPECT_EQ(plan.reg_images_used, 30);
  EXPECT_EQ(plan.reg_images_unused, 0);
  EXPECT_EQ(plan.reg_cursor_begin, (std::vector<std::int64_t>{0}));
  EXPECT_EQ(plan.reg_cursor_end, (std::vector<std::int64_t>{0}));
}

TEST(RegFirst, OnlyTheFirstTenOfTwentyInEveryEpoch) {
  // 1_a x 10: N_train = 10; 1_p x 20: only p01..p10 (images 10..19), every epoch.
  const Dataset ds = train_and_reg(1, 10, 1, 20);
  for (int epoch : {0, 1, 2}) {
    const EpochPlan plan = build_epoch_plan(ds, opts(), epoch);
    EXPECT_EQ(plan.reg_indices, range(10, 10)) << "epoch " << epoch;
    EXPECT_EQ(plan.reg_images_used, 10);
    EXPECT_EQ(plan.reg_images_unused, 10);
  }
}

TEST(RegFirst, ThreeRepeatsOvershootsToOneHundredTwo) {
  // N_train = 100 (10_a x 10), 3_p x 50: first pass stops after p34 at n = 102.
  const Dataset ds = train_and_reg(10, 10, 3, 50);
  const EpochPlan plan = build_epoch_plan(ds, opts(), 0);
  EXPECT_EQ(plan.reg_indices.size(), 102u);
  std::map<int, int> want;
  for (int i = 0; i < 34; ++i) want[10 + i] = 3;
  EXPECT_EQ(counts_of(plan.reg_indices), want);
  EXPECT_EQ(plan.reg_images_used, 34);
  EXPECT_EQ(plan.reg_images_unused, 16);
}

// ---- "rotate" ----

TEST(RegRotate, TwoEpochsCoverAllTwentyOnce) {
  const Dataset ds = train_and_reg(1, 10, 1, 20);
  const EpochPlan e0 = build_epoch_plan(ds, opts("rotate"), 0);
  const EpochPlan e1 = build_epoch_plan(ds, opts("rotate"), 1);
  const EpochPlan e2 = build_epoch_plan(ds, opts("rotate"), 2);
  EXPECT_EQ(e0.reg_indices, range(10, 10));  // p01..p10
  EXPECT_EQ(e1.reg_indices, range(20, 10));  // p11..p20
  std::vector<int> both = e0.reg_indices;
  both.insert(both.end(), e1.reg_indices.begin(), e1.reg_indices.end());
  std::sort(both.begin(), both.end());
  EXPECT_EQ(both, range(10, 20));  // all 20, each exactly once
  EXPECT_EQ(e2.reg_indices, e0.reg_indices);
  EXPECT_EQ(e0.reg_cursor_begin, (std::vector<std::int64_t>{0}));
  EXPECT_EQ(e0.reg_cursor_end, (std::vector<std::int64_t>{10}));
  EXPECT_EQ(e1.reg_cursor_begin, (std::vector<std::int64_t>{10}));
  EXPECT_EQ(e1.reg_cursor_end, (std::vector<std::int64_t>{0}));
  EXPECT_EQ(e0.reg_images_used, 10);
  EXPECT_EQ(e0.reg_images_unused, 10);
}

TEST(RegRotate, WrapsWhenRExceedsTheList) {
  // R = 100 over L = p01..p30: epoch 0 = L x3 + L[0..10); epoch 1 starts at 10, ends at 20.
  const Dataset ds = train_and_reg(10, 10, 1, 30);
  const EpochPlan e0 = build_epoch_plan(ds, opts("rotate"), 0);
  std::vector<int> want;
  for (int pass = 0; pass < 3; ++pass) {
    const auto all = range(10, 30);
    want.insert(want.end(), all.begin(), all.end());
  }
  const auto first10 = range(10, 10);
  want.insert(want.end(), first10.begin(), first10.end());
  EXPECT_EQ(e0.reg_indices, want);
  const EpochPlan e1 = build_epoch_plan(ds, opts("rotate"), 1);
  EXPECT_EQ(e1.reg_cursor_begin, (std::vector<std::int64_t>{10}));
  EXPECT_EQ(e1.reg_cursor_end, (std::vector<std::int64_t>{20}));
  EXPECT_EQ(e1.reg_indices.front(), 20);  // p11
  EXPECT_EQ(e1.reg_indices.back(), 29);   // p20
  const EpochPlan e2 = build_epoch_plan(ds, opts("rotate"), 2);
  EXPECT_EQ(e2.reg_cursor_begin, (std::vector<std::int64_t>{20}));
  EXPECT_EQ(e2.reg_cursor_end, (std::vector<std::int64_t>{0}));
  // Large epochs: the cursor stays a pure function of the epoch.
  const EpochPlan big = build_epoch_plan(ds, opts("rotate"), 1000003);
  EXPECT_EQ(big.reg_cursor_begin, (std::vector<std::int64_t>{(1000003LL * 100) % 30}));
}

TEST(RegRotate, RepeatsExpandTheList) {
  // 2_p x 3 -> L = p1 p1 p2 p2 p3 p3; R = 4: epoch 0 = p1 p1 p2 p2, epoch 1 = p3 p3 p1 p1.
  const Dataset ds = train_and_reg(4, 1, 2, 3);
  EXPECT_EQ(build_epoch_plan(ds, opts("rotate"), 0).reg_indices, (std::vector<int>{1, 1, 2, 2}));
  const EpochPlan e1 = build_epoch_plan(ds, opts("rotate"), 1);
  EXPECT_EQ(e1.reg_indices, (std::vector<int>{3, 3, 1, 1}));
  EXPECT_EQ(e1.reg_cursor_begin, (std::vector<std::int64_t>{4}));
  EXPECT_EQ(e1.reg_cursor_end, (std::vector<std::int64_t>{2}));
}

TEST(RegRotate, EpochLengthChangesWithTheRegBuckets) {
  // R = 2 (1_a x 2, bucket A); reg p1,p2 in bucket A, p3,p4 in bucket B; batch_size 4.
  // Epoch 0: A holds a1 a2 p1 p2 -> 1 batch. Epoch 1: A holds a1 a2, B holds p3 p4 -> 2 batches.
  Builder b;
  const int d = b.add_dataset(4);
  b.add_images(b.add_subset(d, false, 1, "1_a"), 2, "a", {512, 512});
  const int reg = b.add_subset(d, true, 1, "1_p");
  b.add_images(reg, 2, "p", {512, 512});
  b.add_images(reg, 2, "q", {640, 384});
  const Dataset ds = b.finish();
  const EpochPlan e0 = build_epoch_plan(ds, opts("rotate"), 0);
  const EpochPlan e1 = build_epoch_plan(ds, opts("rotate"), 1);
  EXPECT_EQ(e0.batches.size(), 1u);
  EXPECT_EQ(e1.batches.size(), 2u);
  EXPECT_EQ(e0.num_samples(), 4);
  EXPECT_EQ(e1.num_samples(), 4);
  EXPECT_EQ(e1.reg_indices, (std::vector<int>{4, 5}));
}

// ---- "random" ----

TEST(RegRandom, ExactlyRPerEpochBalancedAndFresh) {
  const Dataset ds = train_and_reg(10, 10, 1, 30);  // R = 100, |L| = 30
  std::vector<std::vector<int>> selections;
  for (int epoch = 0; epoch < 4; ++epoch) {
    const EpochPlan plan = build_epoch_plan(ds, opts("random"), epoch);
    ASSERT_EQ(plan.reg_indices.size(), 100u);
    // Three full passes and 10 of a fourth: every image 3 or 4 times (<= ceil(100/30)),
    // exactly 10 images 4 times.
    const auto c = counts_of(plan.reg_indices);
    ASSERT_EQ(c.size(), 30u);
    int fours = 0;
    for (const auto& [img, n] : c) {
      EXPECT_TRUE(img >= 10 && img < 40);
      EXPECT_GE(n, 3);
      EXPECT_LE(n, 4);
      fours += n == 4 ? 1 : 0;
    }
    EXPECT_EQ(fours, 10);
    // Each block of 30 is a full pass (a permutation of the 30 reg images).
    for (int pass = 0; pass < 3; ++pass) {
      std::vector<int> block(plan.reg_indices.begin() + pass * 30,
                             plan.reg_indices.begin() + (pass + 1) * 30);
      std::sort(block.begin(), block.end());
      EXPECT_EQ(block, range(10, 30));
    }
    EXPECT_EQ(plan.reg_images_used, 30);
    selections.push_back(plan.reg_indices);
  }
  for (int i = 0; i < 4; ++i) {
    for (int j = i + 1; j < 4; ++j) EXPECT_NE(selections[i], selections[j]) << i << " " << j;
  }
  expect_same_plan(build_epoch_plan(ds, opts("random"), 2),
                   build_epoch_plan(ds, opts("random"), 2));
  EXPECT_NE(build_epoch_plan(ds, opts("random", 43), 2).reg_indices, selections[2]);
}

TEST(RegRandom, SmallRDrawsDistinctImagesThatChange) {
  const Dataset ds = train_and_reg(1, 10, 1, 20);  // R = 10 of 20
  std::set<int> seen;
  std::vector<int> prev;
  for (int epoch = 0; epoch < 3; ++epoch) {
    const EpochPlan plan = build_epoch_plan(ds, opts("random"), epoch);
    EXPECT_EQ(plan.reg_indices.size(), 10u);
    EXPECT_EQ(counts_of(plan.reg_indices).size(), 10u);  // no repeats within a partial pass
    EXPECT_EQ(plan.reg_images_used, 10);
    EXPECT_EQ(plan.reg_images_unused, 10);
    EXPECT_NE(plan.reg_indices, prev);
    prev = plan.reg_indices;
    seen.insert(plan.reg_indices.begin(), plan.reg_indices.end());
  }
  EXPECT_GT(seen.size(), 10u);  // over three epochs more than the first ten are used
}

TEST(RegSelection, NoRegImagesOrNoTrainSamples) {
  Builder b;
  const int d0 = b.add_dataset(2);
  const int d1 = b.add_dataset(2);
  b.add_images(b.add_subset(d0, false, 3, "3_a"), 2, "a");       // train only
  b.add_images(b.add_subset(d1, true, 1, "1_p"), 5, "p");        // reg only: R = 0
  const Dataset ds = b.finish();
  for (const char* sel : {"first", "random", "rotate"}) {
    const EpochPlan plan = build_epoch_plan(ds, opts(sel), 1);
    EXPECT_TRUE(plan.reg_indices.empty()) << sel;
    EXPECT_EQ(plan.num_samples(), 6) << sel;
    EXPECT_EQ(plan.reg_images_used, 0) << sel;
    EXPECT_EQ(plan.reg_images_unused, 5) << sel;
    EXPECT_EQ(plan.reg_cursor_begin, (std::vector<std::int64_t>{0, 0})) << sel;
    EXPECT_EQ(plan.reg_cursor_end, (std::vector<std::int64_t>{0, 0})) << sel;
  }
}

// ---- loss weights ----

TEST(EpochPlan, PriorLossWeightOnExactlyTheRegSamples) {
  const Dataset ds = train_and_reg(2, 5, 1, 4);  // 10 train samples, reg 3,3,2,2
  for (const char* sel : {"first", "random", "rotate"}) {
    PlanOptions o = opts(sel);
    o.prior_loss_weight = 0.25;
    const EpochPlan plan = build_epoch_plan(ds, o, 0);
    int reg = 0, train = 0;
    for (const auto& b : plan.batches) {
      for (const auto& s : b.samples) {
        if (ds.images[s.image_index].is_reg) {
          EXPECT_EQ(s.loss_weight, 0.25f);
          ++reg;
        } else {
          EXPECT_EQ(s.loss_weight, 1.0f);
          ++train;
        }
      }
    }
    EXPECT_EQ(reg, 10) << sel;
    EXPECT_EQ(train, 10) << sel;
    EXPECT_EQ(plan.reg_indices.size(), 10u) << sel;
  }
}

// ---- batches over several datasets ----

TEST(EpochPlan, TwoDatasetsBatchSizesBucketsAndRankSlices) {
  Builder b;
  const int d0 = b.add_dataset(2);
  const int d1 = b.add_dataset(3);
  // Dataset 0: 3 images x2 in 512x512, 2 images x2 in 640x384 (N_train 10); reg 1 x4 in 512x512.
  const int s0 = b.add_subset(d0, false, 2, "2_a");
  b.add_images(s0, 3, "a", {512, 512});
  b.add_images(s0, 2, "b", {640, 384});
  b.add_images(b.add_subset(d0, true, 1, "1_p"), 4, "p", {512, 512});
  // Dataset 1: 5 images x1 in 512x512 (same bucket as dataset 0's), 4 x1 in 384x640.
  const int s1 = b.add_subset(d1, false, 1, "1_c");
  b.add_images(s1, 5, "c", {512, 512});
  b.add_images(s1, 4, "d", {384, 640});
  const Dataset ds = b.finish();
  const int world = 2;
  const EpochPlan plan = build_epoch_plan(ds, opts("first", 42, world), 0);

  // Reg: N_train 10 over 4 images -> 3,3,2,2 (images 5..8).
  EXPECT_EQ(counts_of(plan.reg_indices), (std::map<int, int>{{5, 3}, {6, 3}, {7, 2}, {8, 2}}));
  // Global batches: dataset 0 of 2 x 2 = 4, dataset 1 of 2 x 3 = 6. Groups:
  // d0/512x512 = 6 train + 10 reg = 16 -> [4,4,4,4]; d0/640x384 = 4 -> [4];
  // d1/384x640 = 4 -> [4]; d1/512x512 = 5 -> [5] (kept apart from dataset 0's 512x512).
  std::map<std::pair<int, BucketReso>, std::multiset<std::size_t>> sizes;
  std::map<int, int> counts;
  std::vector<int> dataset_seq;
  for (const auto& batch : plan.batches) {
    EXPECT_EQ(batch.batch_size, ds.datasets[batch.dataset_index].batch_size);
    for (const auto& s : batch.samples) {
      EXPECT_EQ(ds.images[s.image_index].dataset_index, batch.dataset_index);
      EXPECT_EQ(ds.images[s.image_index].bucket.bucket, batch.bucket);
      ++counts[s.image_index];
    }
    sizes[{batch.dataset_index, batch.bucket}].insert(batch.samples.size());
    dataset_seq.push_back(batch.dataset_index);
    // Rank slices: contiguous, disjoint, each at most batch_size, covering the batch.
    int next = 0;
    for (int rank = 0; rank < world; ++rank) {
      const auto [begin, end] = rank_slice(batch, rank);
      EXPECT_EQ(begin, next);
      EXPECT_LE(begin, end);
      EXPECT_LE(end - begin, batch.batch_size);
      next = end;
    }
    EXPECT_EQ(next, static_cast<int>(batch.samples.size()));
  }
  const std::map<std::pair<int, BucketReso>, std::multiset<std::size_t>> want = {
      {{0, {512, 512}}, {4, 4, 4, 4}},
      {{0, {640, 384}}, {4}},
      {{1, {384, 640}}, {4}},
      {{1, {512, 512}}, {5}}};
  EXPECT_EQ(sizes, want);
  std::map<int, int> want_counts = {{0, 2}, {1, 2}, {2, 2}, {3, 2}, {4, 2},
                                    {5, 3}, {6, 3}, {7, 2}, {8, 2}};
  for (int i = 9; i < 18; ++i) want_counts[i] = 1;
  EXPECT_EQ(counts, want_counts);
  EXPECT_EQ(plan.num_samples(), 29);
  // The batch order mixes the datasets (not all of dataset 0 first), as kohya's shuffled
  // concatenated dataset; for this seed the sequence is not sorted.
  EXPECT_FALSE(std::is_sorted(dataset_seq.begin(), dataset_seq.end()));
  EXPECT_EQ(plan.reg_cursor_begin.size(), 2u);
}

TEST(EpochPlan, RankSliceUsesTheBatchSize) {
  GlobalBatch five;
  five.batch_size = 2;
  five.samples.resize(5);
  EXPECT_EQ(rank_slice(five, 0), (std::pair<int, int>{0, 2}));
  EXPECT_EQ(rank_slice(five, 1), (std::pair<int, int>{2, 4}));
  EXPECT_EQ(rank_slice(five, 2), (std::pair<int, int>{4, 5}));
  EXPECT_EQ(rank_slice(five, 3), (std::pair<int, int>{5, 5}));
  five.batch_size = 3;
  EXPECT_EQ(rank_slice(five, 1), (std::pair<int, int>{3, 5}));
  EXPECT_THROW(rank_slice(five, -1), std::invalid_argument);
  five.batch_size = 0;
  EXPECT_THROW(rank_slice(five, 0), std::invalid_argument);
}

// ---- per-sample draws ----

Dataset augment_dataset(bool flip_aug, bool random_crop) {
  // 100 images x 10 repeats = 1000 samples, resized 600x520 for bucket 512x512: trim 88 and 8.
  Builder b;
  const int d = b.add_dataset(4);
  SubsetConfig cfg;
  cfg.flip_aug = flip_aug;
  cfg.random_crop = random_crop;
  b.add_images(b.add_subset(d, false, 10, "10_a", cfg), 100, "a", {512, 512}, 600, 520);
  return b.finish();
}

TEST(EpochPlan, FlipAndCropDrawsDoNotChangeTheOrder) {
  const EpochPlan off = build_epoch_plan(augment_dataset(false, false), opts(), 3);
  const EpochPlan on = build_epoch_plan(augment_dataset(true, true), opts(), 3);
  const EpochPlan flip_only = build_epoch_plan(augment_dataset(true, false), opts(), 3);
  EXPECT_EQ(flat_order(on), flat_order(off));
  EXPECT_EQ(flat_order(flip_only), flat_order(off));
  ASSERT_EQ(on.num_samples(), 1000);
  int flipped = 0;
  std::set<int> lefts, tops;
  for (const auto& b : off.batches) {
    for (const auto& s : b.samples) EXPECT_EQ(s.crop_flip, CropFlip{});  // centre, no flip
  }
  for (const auto& b : on.batches) {
    for (const auto& s : b.samples) {
      flipped += s.crop_flip.flip ? 1 : 0;
      EXPECT_GE(s.crop_flip.crop_left, 0);
      EXPECT_LE(s.crop_flip.crop_left, 88);
      EXPECT_GE(s.crop_flip.crop_top, 0);
      EXPECT_LE(s.crop_flip.crop_top, 8);
      lefts.insert(s.crop_flip.crop_left);
      tops.insert(s.crop_flip.crop_top);
      EXPECT_FALSE(s.has_caption);
    }
  }
  EXPECT_GE(flipped, 400);
  EXPECT_LE(flipped, 600);
  EXPECT_GT(lefts.size(), 40u);  // spread over [0, 88], not one offset
  EXPECT_EQ(tops.size(), 9u);    // every value of the inclusive range [0, 8] occurs
  for (const auto& b : flip_only.batches) {
    for (const auto& s : b.samples) {
      EXPECT_EQ(s.crop_flip.crop_left, -1);
      EXPECT_EQ(s.crop_flip.crop_top, -1);
    }
  }
  // Draws are fresh per epoch: were they keyed by position alone, the multiset of
  // (image, crop, flip) would be the same in every epoch.
  auto draws = [](const EpochPlan& p) {
    std::multiset<std::tuple<int, int, int, bool>> m;
    for (const auto& b : p.batches) {
      for (const auto& s : b.samples) {
        m.insert({s.image_index, s.crop_flip.crop_left, s.crop_flip.crop_top, s.crop_flip.flip});
      }
    }
    return m;
  };
  EXPECT_NE(draws(on), draws(build_epoch_plan(augment_dataset(true, true), opts(), 4)));
  EXPECT_EQ(draws(on), draws(build_epoch_plan(augment_dataset(true, true), opts(), 3)));
}

TEST(EpochPlan, CropAtTheEdgeOfAnExactFit) {
  // resized == bucket: trim 0, the only offset is 0.
  Builder b;
  const int d = b.add_dataset(1);
  SubsetConfig cfg;
  cfg.random_crop = true;
  b.add_images(b.add_subset(d, false, 1, "1_a", cfg), 3, "a", {512, 512}, 512, 512);
  const EpochPlan plan = build_epoch_plan(b.finish(), opts(), 0);
  for (const auto& batch : plan.batches) {
    EXPECT_EQ(batch.samples[0].crop_flip, (CropFlip{0, 0, false}));
  }
  // A resize target smaller than the bucket is refused, naming the image.
  Builder bad;
  const int d2 = bad.add_dataset(1);
  bad.add_images(bad.add_subset(d2, false, 1, "1_a", cfg), 1, "a", {512, 512}, 500, 512);
  try {
    build_epoch_plan(bad.finish(), opts(), 0);
    FAIL() << "expected std::invalid_argument";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("/data/1_a/a01.png"), std::string::npos) << e.what();
  }
}

std::vector<std::string> split_tags(const std::string& caption) {
  std::vector<std::string> tags;
  std::size_t pos = 0;
  for (;;) {
    const auto next = caption.find(", ", pos);
    tags.push_back(caption.substr(pos, next == std::string::npos ? std::string::npos : next - pos));
    if (next == std::string::npos) break;
    pos = next + 2;
  }
  return tags;
}

Dataset caption_dataset(const CaptionOptions& co) {
  Builder b;
  const int d = b.add_dataset(2);
  SubsetConfig cfg;
  cfg.caption = co;
  b.add_images(b.add_subset(d, false, 5, "5_a", cfg), 4, "a", {512, 512}, 0, 0,
               "red, green, blue, cyan, magenta");
  return b.finish();
}

TEST(EpochPlan, RandomCaptionsArePlannedPerSample) {
  CaptionOptions co;
  co.shuffle_caption = true;
  const EpochPlan on = build_epoch_plan(caption_dataset(co), opts(), 0);
  const EpochPlan off = build_epoch_plan(caption_dataset(CaptionOptions{}), opts(), 0);
  EXPECT_EQ(flat_order(on), flat_order(off));
  const std::vector<std::string> sorted_tags = {"blue", "cyan", "green", "magenta", "red"};
  std::set<std::string> distinct;
  for (const auto& b : on.batches) {
    for (const auto& s : b.samples) {
      EXPECT_TRUE(s.has_caption);
      auto tags = split_tags(s.caption);
      std::sort(tags.begin(), tags.end());
      EXPECT_EQ(tags, sorted_tags) << s.caption;
      distinct.insert(s.caption);
    }
  }
  EXPECT_GT(distinct.size(), 5u);  // 20 samples, 120 orders: shuffled per sample
  for (const auto& b : off.batches) {
    for (const auto& s : b.samples) {
      EXPECT_FALSE(s.has_caption);
      EXPECT_EQ(s.caption, "");
    }
  }
  // A prefix alone is deterministic: the scan puts it into the base caption (cached by the
  // workers), so the plan carries no caption.
  CaptionOptions prefix;
  prefix.caption_prefix = "photo of";
  const EpochPlan pre = build_epoch_plan(caption_dataset(prefix), opts(), 0);
  for (const auto& b : pre.batches) {
    for (const auto& s : b.samples) EXPECT_FALSE(s.has_caption);
  }
  // caption_dropout_every_n_epochs = 2 drops in epoch index 1 (kohya's 1-based epoch 2).
  CaptionOptions every2;
  every2.caption_dropout_every_n_epochs = 2;
  for (const auto& b : build_epoch_plan(caption_dataset(every2), opts(), 1).batches) {
    for (const auto& s : b.samples) EXPECT_EQ(s.caption, "");
  }
  for (const auto& b : build_epoch_plan(caption_dataset(every2), opts(), 0).batches) {
    for (const auto& s : b.samples) EXPECT_EQ(s.caption, "red, green, blue, cyan, magenta");
  }
}

// ---- determinism and golden order ----

TEST(EpochPlan, SameOptionsSamePlan) {
  Builder b;
  const int d0 = b.add_dataset(2);
  const int d1 = b.add_dataset(1);
  SubsetConfig cfg;
  cfg.flip_aug = true;
  cfg.random_crop = true;
  cfg.caption.shuffle_caption = true;
  cfg.caption.caption_tag_dropout_rate = 0.2;
  b.add_images(b.add_subset(d0, false, 3, "3_a", cfg), 4, "a", {512, 512}, 560, 530, "x, y, z");
  b.add_images(b.add_subset(d0, true, 1, "1_p", cfg), 20, "p", {640, 384}, 700, 390, "u, v");
  b.add_images(b.add_subset(d1, false, 2, "2_c", cfg), 3, "c", {384, 640}, 384, 700, "k, l, m");
  b.add_images(b.add_subset(d1, true, 1, "1_q"), 9, "q", {384, 640});
  const Dataset ds = b.finish();
  for (const char* sel : {"first", "random", "rotate"}) {
    const PlanOptions o = opts(sel, 7, 2);
    expect_same_plan(build_epoch_plan(ds, o, 3), build_epoch_plan(ds, o, 3));
    EXPECT_NE(flat_order(build_epoch_plan(ds, o, 3)), flat_order(build_epoch_plan(ds, o, 4)));
    EXPECT_NE(flat_order(build_epoch_plan(ds, o, 3)),
              flat_order(build_epoch_plan(ds, opts(sel, 8, 2), 3)));
  }
}

// The single-dataset plan of the previous implementation: images 0..3 train, 4..5 reg;
// N_train = 3+2+1+4 = 10; reg [1,1] -> [5,5]; world_size 2, batch_size 2.
Dataset golden_dataset() {
  Builder b;
  const int d = b.add_dataset(2);
  b.add_images(b.add_subset(d, false, 3, "3_a"), 1, "a", {512, 512});
  b.add_images(b.add_subset(d, false, 2, "2_b"), 1, "b", {640, 384});
  b.add_images(b.add_subset(d, false, 1, "1_c"), 1, "c", {512, 512});
  b.add_images(b.add_subset(d, false, 4, "4_d"), 1, "d", {384, 640});
  b.add_images(b.add_subset(d, true, 1, "1_p"), 1, "p", {512, 512});
  b.add_images(b.add_subset(d, true, 1, "1_q"), 1, "q", {640, 384});
  return b.finish();
}

TEST(EpochPlan, GoldenOrderSeed42) {
  // tests/common/reference/epoch_plan_model.py (mt19937_64 checked against the C++ standard's
  // 10000th-output value 9981545732273789042); unchanged from the single-dataset implementation
  // because the order stream is the same.
  const Dataset ds = golden_dataset();
  PlanOptions o = opts("first", 42, 2);
  o.prior_loss_weight = 0.5;
  const EpochPlan e0 = build_epoch_plan(ds, o, 0);
  ASSERT_EQ(e0.batches.size(), 6u);
  EXPECT_EQ(e0.batches[0].bucket, (BucketReso{512, 512}));
  EXPECT_EQ(e0.batches[2].bucket, (BucketReso{640, 384}));
  EXPECT_EQ(e0.batches[5].bucket, (BucketReso{384, 640}));
  EXPECT_EQ(flat_order(e0), (std::vector<int>{0, 4, 0, 2, 4, 0, 4, 4, 5, 1, 5, 4, 5, 5, 1, 5,
                                                3, 3, 3, 3}));
  EXPECT_EQ(e0.reg_indices, (std::vector<int>{4, 4, 4, 4, 4, 5, 5, 5, 5, 5}));
  const EpochPlan e1 = build_epoch_plan(ds, o, 1);
  EXPECT_EQ(flat_order(e1), (std::vector<int>{3, 3, 3, 3, 4, 4, 2, 0, 4, 1, 5, 1, 5, 0, 0, 4,
                                                4, 5, 5, 5}));
}

TEST(EpochPlan, GoldenRandomRegAndDrawsSeed5) {
  // tests/common/reference/epoch_plan_model.py, an independent Python model of the documented
  // streams: reg stream sub_seed(E, "reg-sel", d), sample streams sub_seed(E, "sample", p) with
  // crop_left, crop_top, flip drawn in that order, then the order stream E.
  Builder b;
  const int d = b.add_dataset(1);
  SubsetConfig aug;
  aug.flip_aug = true;
  aug.random_crop = true;
  b.add_images(b.add_subset(d, false, 2, "2_a", aug), 2, "a", {512, 512}, 520, 530);
  b.add_images(b.add_subset(d, true, 1, "1_p"), 3, "p", {512, 512}, 520, 530);
  const EpochPlan plan = build_epoch_plan(b.finish(), opts("random", 5, 2), 1);
  EXPECT_EQ(plan.reg_indices, (std::vector<int>{2, 4, 3, 3}));
  struct Want {
    int image, left, top;
    bool flip;
  };
  const std::vector<std::vector<Want>> want = {{{0, 0, 14, true}, {3, -1, -1, false}},
                                               {{0, 7, 2, false}, {4, -1, -1, false}},
                                               {{3, -1, -1, false}, {1, 1, 0, false}},
                                               {{2, -1, -1, false}, {1, 3, 18, true}}};
  ASSERT_EQ(plan.batches.size(), want.size());
  for (std::size_t i = 0; i < want.size(); ++i) {
    ASSERT_EQ(plan.batches[i].samples.size(), want[i].size());
    for (std::size_t j = 0; j < want[i].size(); ++j) {
      const PlanSample& s = plan.batches[i].samples[j];
      EXPECT_EQ(s.image_index, want[i][j].image) << i << "," << j;
      EXPECT_EQ(s.crop_flip, (CropFlip{want[i][j].left, want[i][j].top, want[i][j].flip}))
          << i << "," << j;
    }
  }
}

TEST(EpochPlan, RejectsBadInputs) {
  const Dataset ds = golden_dataset();
  PlanOptions o = opts();
  o.world_size = 0;
  EXPECT_THROW(build_epoch_plan(ds, o, 0), std::invalid_argument);
  EXPECT_THROW(build_epoch_plan(ds, opts("shuffled"), 0), std::invalid_argument);
  EXPECT_THROW(build_epoch_plan(ds, opts(), -1), std::invalid_argument);
  Dataset zero_bs = ds;
  zero_bs.datasets[0].batch_size = 0;
  EXPECT_THROW(build_epoch_plan(zero_bs, opts(), 0), std::invalid_argument);
  Dataset bad_index = ds;
  bad_index.images[2].dataset_index = 1;
  EXPECT_THROW(build_epoch_plan(bad_index, opts(), 0), std::invalid_argument);
  Dataset bad_subset = ds;
  bad_subset.images[2].subset_index = 99;
  EXPECT_THROW(build_epoch_plan(bad_subset, opts(), 0), std::invalid_argument);
}

}  // namespace
}  // namespace lf

namespace lf {
namespace {

// ---- continuing a plan on another world size ----

GlobalBatch hand_batch(BucketReso bucket, std::vector<int> images) {
  GlobalBatch b;
  b.bucket = bucket;
  b.batch_size = 1;
  for (int i : images) b.samples.push_back(PlanSample{i, 1.0f, {}, false, ""});
  return b;
}

std::vector<std::vector<int>> batch_images(const EpochPlan& p) {
  std::vector<std::vector<int>> out;
  for (const auto& b : p.batches) {
    out.emplace_back();
    for (const auto& s : b.samples) out.back().push_back(s.image_index);
  }
  return out;
}

// Every field of a sample, for multiset comparisons.
using SampleKey = std::tuple<int, float, int, int, bool, bool, std::string>;
std::multiset<SampleKey> sample_keys(const EpochPlan& p, std::size_t from_batch) {
  std::multiset<SampleKey> out;
  for (std::size_t k = from_batch; k < p.batches.size(); ++k) {
    for (const PlanSample& s : p.batches[k].samples) {
      out.insert({s.image_index, s.loss_weight, s.crop_flip.crop_left, s.crop_flip.crop_top,
                  s.crop_flip.flip, s.has_caption, s.caption});
    }
  }
  return out;
}

// A plan of world size 2 over buckets A and B, continued after batch 1 on 3 ranks and on 1:
// remaining samples 3 4 | 5 6 | 7 | 8 at positions 0..5; B holds 3 4 7 (first at 0), A holds
// 5 6 8 (first at 2).
TEST(ContinueEpochPlan, HandComputedRebatching) {
  const BucketReso a{512, 512}, b{640, 384};
  EpochPlan plan;
  plan.epoch = 4;
  plan.batches = {hand_batch(a, {1, 2}), hand_batch(b, {3, 4}), hand_batch(a, {5, 6}),
                  hand_batch(b, {7}), hand_batch(a, {8})};
  plan.reg_indices = {7, 8};
  plan.reg_cursor_begin = {3};
  plan.reg_cursor_end = {5};
  const EpochPlan three = continue_epoch_plan(plan, 1, 3);
  EXPECT_EQ(batch_images(three), (std::vector<std::vector<int>>{{1, 2}, {3, 4, 7}, {5, 6, 8}}));
  EXPECT_EQ(three.batches[1].bucket, b);
  EXPECT_EQ(three.batches[2].bucket, a);
  EXPECT_EQ(three.epoch, 4);
  EXPECT_EQ(three.reg_indices, plan.reg_indices);
  EXPECT_EQ(three.reg_cursor_begin, plan.reg_cursor_begin);
  EXPECT_EQ(three.reg_cursor_end, plan.reg_cursor_end);
  const EpochPlan one = continue_epoch_plan(plan, 1, 1);
  EXPECT_EQ(batch_images(one),
            (std::vector<std::vector<int>>{{1, 2}, {3}, {4}, {5}, {6}, {7}, {8}}));
  // Nothing consumed: the whole epoch regrouped; everything consumed: the plan itself.
  EXPECT_EQ(batch_images(continue_epoch_plan(plan, 0, 4)),
            (std::vector<std::vector<int>>{{1, 2, 5, 6}, {3, 4, 7}, {8}}));
  EXPECT_EQ(batch_images(continue_epoch_plan(plan, 5, 3)), batch_images(plan));
  EXPECT_THROW(continue_epoch_plan(plan, 6, 2), std::invalid_argument);
  EXPECT_THROW(continue_epoch_plan(plan, -1, 2), std::invalid_argument);
  EXPECT_THROW(continue_epoch_plan(plan, 1, 0), std::invalid_argument);
}

// Over a real two-dataset plan with flip and crop draws, for every cut point and world sizes
// 1..4 both ways: the consumed prefix is unchanged, the remaining samples are kept exactly
// (multiset of every field), every new batch is one (dataset, bucket) with W x batch_size
// samples except the last of its group, and the result is deterministic.
TEST(ContinueEpochPlan, KeepsTheRemainingSamplesExactly) {
  Builder bld;
  const int d0 = bld.add_dataset(2);
  const int d1 = bld.add_dataset(3);
  SubsetConfig flip;
  flip.flip_aug = true;
  flip.random_crop = true;
  const int s0 = bld.add_subset(d0, false, 2, "2_a", flip);
  bld.add_images(s0, 3, "a", {512, 512}, 560, 540);
  bld.add_images(s0, 2, "b", {640, 384});
  bld.add_images(bld.add_subset(d0, true, 1, "1_p"), 4, "p", {512, 512});
  const int s1 = bld.add_subset(d1, false, 1, "1_c");
  bld.add_images(s1, 5, "c", {512, 512});
  bld.add_images(s1, 4, "d", {384, 640});
  const Dataset ds = bld.finish();
  for (int w0 = 1; w0 <= 4; ++w0) {
    const EpochPlan plan = build_epoch_plan(ds, opts("first", 42, w0), 1);
    for (std::size_t cut = 0; cut <= plan.batches.size(); ++cut) {
      for (int w1 = 1; w1 <= 4; ++w1) {
        SCOPED_TRACE("w0 " + std::to_string(w0) + " cut " + std::to_string(cut) + " w1 " +
                     std::to_string(w1));
        const EpochPlan next = continue_epoch_plan(plan, static_cast<std::int64_t>(cut), w1);
        ASSERT_GE(next.batches.size(), cut);
        for (std::size_t k = 0; k < cut; ++k) {
          EXPECT_EQ(batch_images(next)[k], batch_images(plan)[k]);
        }
        EXPECT_EQ(sample_keys(next, cut), sample_keys(plan, cut));
        EXPECT_EQ(next.num_samples(), plan.num_samples());
        std::map<std::pair<int, BucketReso>, std::vector<std::size_t>> sizes;
        for (std::size_t k = cut; k < next.batches.size(); ++k) {
          const GlobalBatch& b = next.batches[k];
          EXPECT_EQ(b.batch_size, ds.datasets[b.dataset_index].batch_size);
          for (const PlanSample& s : b.samples) {
            EXPECT_EQ(ds.images[s.image_index].dataset_index, b.dataset_index);
            EXPECT_EQ(ds.images[s.image_index].bucket.bucket, b.bucket);
          }
          sizes[{b.dataset_index, b.bucket}].push_back(b.samples.size());
        }
        for (const auto& [key, v] : sizes) {
          const std::size_t global = static_cast<std::size_t>(w1) *
                                     static_cast<std::size_t>(ds.datasets[key.first].batch_size);
          for (std::size_t i = 0; i + 1 < v.size(); ++i) EXPECT_EQ(v[i], global);
          EXPECT_GE(v.back(), 1u);
          EXPECT_LE(v.back(), global);
        }
        expect_same_plan(continue_epoch_plan(plan, static_cast<std::int64_t>(cut), w1), next);
      }
    }
  }
}

// A lineage replays the chain of continuations; the last segment's batches do not shape it.
TEST(ContinueEpochPlan, LineageReplaysTheChain) {
  const Dataset ds = train_and_reg(3, 7, 1, 4);
  const EpochPlan w2 = build_epoch_plan(ds, opts("first", 9, 2), 3);
  const EpochPlan chain = continue_epoch_plan(continue_epoch_plan(w2, 2, 1), 5, 3);
  const EpochPlan replayed =
      build_continued_epoch_plan(ds, opts("first", 9, 8), 3, {{2, 2}, {1, 3}, {3, 1}});
  expect_same_plan(replayed, chain);
  EXPECT_EQ(epoch_plan_digest(replayed), epoch_plan_digest(chain));
  // Consecutive segments of one size are one continuation: 2:1,2:1,1:0 = 2:2,1:0.
  expect_same_plan(
      build_continued_epoch_plan(ds, opts("first", 9, 8), 3, {{2, 1}, {2, 1}, {1, 0}}),
      continue_epoch_plan(w2, 2, 1));
  // No lineage, or one segment: the plain plan of the options' or the segment's world size.
  expect_same_plan(build_continued_epoch_plan(ds, opts("first", 9, 2), 3, {}), w2);
  expect_same_plan(build_continued_epoch_plan(ds, opts("first", 9, 5), 3, {{2, 4}}), w2);
  EXPECT_THROW(build_continued_epoch_plan(ds, opts("first", 9, 1), 3, {{2, 1000}, {1, 0}}),
               std::invalid_argument);
}

TEST(ContinueEpochPlan, LineageText) {
  EXPECT_EQ(format_plan_lineage({{2, 3}, {1, 4}}), "2:3,1:4");
  EXPECT_EQ(format_plan_lineage({}), "");
  EXPECT_EQ(parse_plan_lineage("2:3,1:4"), (std::vector<PlanSegment>{{2, 3}, {1, 4}}));
  EXPECT_EQ(parse_plan_lineage(""), std::vector<PlanSegment>{});
  for (const char* bad : {"2", "2:", ":3", "2:3,", "0:3", "2:-1", "2:3x", "a:b", "2:3;1:4"}) {
    EXPECT_THROW(parse_plan_lineage(bad), std::invalid_argument) << bad;
  }
}

}  // namespace
}  // namespace lf
