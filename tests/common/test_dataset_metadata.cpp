// kohya's dataset metadata: tag frequencies per folder (once per image, lower-cased, stripped),
// the dirs tables with kohya's " (2)" suffix, ss_datasets entries, and the cap that keeps the
// most frequent tags when a huge dataset would blow up the LoRA header.
#include "common/data/dataset_metadata.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace lf {
namespace {

using json = nlohmann::json;

Dataset two_folders() {
  Dataset ds;
  SubsetInfo a;
  a.image_dir = "/data/10_ohwx";
  a.image_count = 2;
  a.config.num_repeats = 10;
  a.config.class_tokens = "ohwx";
  a.config.flip_aug = true;
  SubsetInfo r = a;
  r.image_dir = "/reg/1_woman/";
  r.image_count = 1;
  r.config.num_repeats = 1;
  r.config.is_reg = true;
  SubsetInfo same_name = a;
  same_name.image_dir = "/other/10_ohwx";
  same_name.image_count = 1;
  ds.subsets = {a, r, same_name};
  auto image = [&](int subset, const std::string& caption) {
    ImageRecord img;
    img.index = static_cast<int>(ds.images.size());
    img.subset_index = subset;
    img.caption = caption;
    img.bucket.bucket = {512, 512};
    img.bucket.ar_error = subset == 0 ? 0.5 : 0.0;
    ds.images.push_back(img);
  };
  image(0, "ohwx, Red Hat, smile");
  image(0, " ohwx ,smile,, ");
  image(1, "woman");
  image(2, "ohwx");
  DatasetInfo info;
  info.batch_size = 2;
  info.num_train_samples = 21;
  info.num_reg_samples_raw = 1;
  info.buckets.resolution_w = info.buckets.resolution_h = 512;
  ds.datasets = {info};
  return ds;
}

TEST(DatasetMetadata, TagFrequencyCountsImagesPerFolderBasename) {
  const json tf = json::parse(kohya_tag_frequency_json(two_folders(), -1));
  // "/data/10_ohwx" and "/other/10_ohwx" share the basename key, as in kohya.
  EXPECT_EQ(tf["10_ohwx"]["ohwx"], 3);
  EXPECT_EQ(tf["10_ohwx"]["smile"], 2);
  EXPECT_EQ(tf["10_ohwx"]["red hat"], 1);
  EXPECT_EQ(tf["1_woman"]["woman"], 1);
  EXPECT_EQ(tf["10_ohwx"].size(), 3u);
}

TEST(DatasetMetadata, DirsTablesSplitTrainAndRegAndNumberRepeatedNames) {
  const json dirs = json::parse(kohya_dataset_dirs_json(two_folders(), false));
  const json want_dirs = {{"10_ohwx", {{"n_repeats", 10}, {"img_count", 2}}},
                         {"10_ohwx (2)", {{"n_repeats", 10}, {"img_count", 1}}}};
  EXPECT_EQ(dirs, want_dirs);
  const json reg = json::parse(kohya_dataset_dirs_json(two_folders(), true));
  const json want_reg = {{"1_woman", {{"n_repeats", 1}, {"img_count", 1}}}};
  EXPECT_EQ(reg, want_reg);
}

TEST(DatasetMetadata, DatasetsJsonDescribesEveryDatasetAndSubset) {
  const Dataset ds = two_folders();
  EpochPlan plan;
  GlobalBatch b;
  b.bucket = {512, 512};
  b.samples.resize(22);
  plan.batches = {b};
  const json list = json::parse(kohya_datasets_json(ds, plan));
  ASSERT_EQ(list.size(), 1u);
  const json& d = list[0];
  EXPECT_EQ(d["batch_size_per_device"], 2);
  EXPECT_EQ(d["num_train_images"], 21);
  EXPECT_EQ(d["resolution"], json::parse("[512, 512]"));
  EXPECT_EQ(d["bucket_info"]["buckets"]["0"]["count"], 22);
  EXPECT_DOUBLE_EQ(d["bucket_info"]["mean_img_ar_error"].get<double>(), (0.5 * 2) / 4);
  ASSERT_EQ(d["subsets"].size(), 3u);
  EXPECT_EQ(d["subsets"][0]["image_dir"], "10_ohwx");
  EXPECT_EQ(d["subsets"][0]["flip_aug"], true);
  EXPECT_EQ(d["subsets"][1]["is_reg"], true);
  EXPECT_EQ(d["tag_frequency"]["10_ohwx"]["ohwx"], 3);
}

// 20,000 images with a unique tag each plus one shared tag: over a 4 KiB budget only the most
// frequent tags stay, and the shared one (on every image) is among them.
TEST(DatasetMetadata, TagFrequencyIsCappedKeepingTheMostFrequentTags) {
  Dataset ds;
  SubsetInfo s;
  s.image_dir = "/data/1_x";
  ds.subsets = {s};
  for (int i = 0; i < 20000; ++i) {
    ImageRecord img;
    img.subset_index = 0;
    img.caption = "shared, unique tag number " + std::to_string(i);
    ds.images.push_back(img);
  }
  bool truncated = false;
  const std::string text = kohya_tag_frequency_json(ds, -1, 4096, &truncated);
  EXPECT_TRUE(truncated);
  EXPECT_LE(text.size(), 4096u);
  const json tf = json::parse(text);
  EXPECT_EQ(tf["1_x"]["shared"], 20000);
  EXPECT_GT(tf["1_x"].size(), 10u);  // the budget is used, not left empty
  bool small_truncated = true;
  kohya_tag_frequency_json(ds, -1, 64 * 1024 * 1024, &small_truncated);
  EXPECT_FALSE(small_truncated);
}

// One folder of 20,000 images with frequent unique tags and twelve small folders: under a cap
// every folder keeps its most frequent tags (before, the big folder's tags filled the budget
// and the twelve others were listed empty).
TEST(DatasetMetadata, TagFrequencyCapIsSharedFairlyAcrossFolders) {
  Dataset ds;
  for (int f = 0; f < 13; ++f) {
    SubsetInfo s;
    s.image_dir = "/data/1_f" + std::to_string(f);
    ds.subsets.push_back(s);
  }
  for (int i = 0; i < 20000; ++i) {
    ImageRecord img;
    img.subset_index = 0;
    img.caption = "big" + std::to_string(i % 4000);  // 4000 tags on 5 images each
    ds.images.push_back(img);
  }
  for (int f = 1; f < 13; ++f) {
    for (int i = 0; i < 2; ++i) {
      ImageRecord img;
      img.subset_index = f;
      img.caption = "top" + std::to_string(f) + (i == 0 ? ", rare" + std::to_string(f) : "");
      ds.images.push_back(img);
    }
  }
  bool truncated = false;
  const json tf = json::parse(kohya_tag_frequency_json(ds, -1, 4096, &truncated));
  EXPECT_TRUE(truncated);
  for (int f = 1; f < 13; ++f) {
    const std::string dir = "1_f" + std::to_string(f);
    EXPECT_EQ(tf[dir]["top" + std::to_string(f)], 2) << dir;   // its most frequent tag
    EXPECT_EQ(tf[dir]["rare" + std::to_string(f)], 1) << dir;  // and its second
  }
  EXPECT_GT(tf["1_f0"].size(), 50u);  // the big folder takes the rest of the budget
}

}  // namespace
}  // namespace lf
