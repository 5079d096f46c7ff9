// Tests for the kohya DreamBooth folder scan on a temporary tree of real photos: subset parsing
// and order, ignored folders and files, captions (BOM, CRLF, face-crop names, class tokens),
// sample counts, buckets, and the errors for missing/empty folders and bad files.
#include "common/data/dataset.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <string>

#include "tests/common/fixtures.h"

namespace lf {
namespace {

namespace fs = std::filesystem;

const fs::path kPhotos =
    fs::path(LF_SOURCE_DIR) / ".deps/skimage/usr/lib/python3/dist-packages/skimage/data";

bool has_warning(const Dataset& ds, const std::string& needle) {
  return std::any_of(ds.warnings.begin(), ds.warnings.end(), [&](const std::string& w) {
    return w.find(needle) != std::string::npos;
  });
}

std::string error_of(const ScanOptions& o) {
  try {
    scan_dreambooth_dataset(o);
  } catch (const DatasetError& e) {
    return e.what();
  }
  return "<no DatasetError>";
}

class DatasetScan : public ::testing::Test {
 protected:
  DatasetScan() : dir_("dataset_scan") {
    const fs::path train = dir_.path() / "train";
    const fs::path dog = train / "10_sks dog";
    const fs::path faces = train / "1_faces";
    const fs::path cat = train / "2_cat_with_underscores";
    for (const auto& d : {dog, faces, cat, train / "5_empty", train / "photos", train / "0_zero",
                          train / ".cache", dir_.path() / "reg" / "1_dog"}) {
      fs::create_directories(d);
    }
    fs::copy_file(kPhotos / "chelsea.png", dog / "a.PNG");  // 451x300
    fs::copy_file(kPhotos / "astronaut.png", dog / "b.png");  // 512x512
    fs::copy_file(kPhotos / "rocket.jpg", dog / "c.JPG");  // 640x427
    test::write_text(dog / "a.txt", "\xEF\xBB\xBF" "a photo of sks dog\r\nsecond line\r\n  \r\n");
    test::write_text(dog / "._a.png", "macOS resource fork, not an image");
    test::write_text(dog / ".hidden.png", "hidden, not an image");
    test::write_text(dog / "notes.md", "not an image");
    test::write_pattern_png((faces / "p_10_20_30_40.png").string(), 200, 150);
    test::write_text(faces / "p.txt", "face caption");  // kohya face-crop caption fallback
    fs::copy_file(kPhotos / "coffee.png", cat / "x.png");  // 600x400
    test::write_text(cat / "x.txt", "  coffee cup \n");
    fs::copy_file(kPhotos / "camera.png", train / "photos" / "ignored.png");
    fs::copy_file(kPhotos / "camera.png", train / "0_zero" / "ignored.png");
    fs::copy_file(kPhotos / "camera.png", train / "loose.png");
    fs::copy_file(kPhotos / "camera.png", dir_.path() / "reg" / "1_dog" / "r1.png");  // 512 grey
    fs::copy_file(kPhotos / "horse.png", dir_.path() / "reg" / "1_dog" / "r2.png");  // 400x328
    options_.train_data_dir = (dir_.path() / "train").string();
    options_.reg_data_dir = (dir_.path() / "reg").string();
  }

  test::TempDir dir_;
  ScanOptions options_;
};

TEST_F(DatasetScan, SubsetsImagesCaptionsAndCounts) {
  const Dataset ds = scan_dreambooth_dataset(options_);

  // Subsets sorted by name ("10_..." < "1_..." bytewise); 0_zero, photos, .cache skipped.
  ASSERT_EQ(ds.subsets.size(), 5u);
  EXPECT_EQ(ds.subsets[0].name, "10_sks dog");
  EXPECT_EQ(ds.subsets[0].class_tokens, "sks dog");
  EXPECT_EQ(ds.subsets[0].num_repeats, 10);
  EXPECT_EQ(ds.subsets[0].image_count, 3);
  EXPECT_EQ(ds.subsets[1].name, "1_faces");
  EXPECT_EQ(ds.subsets[2].class_tokens, "cat_with_underscores");
  EXPECT_EQ(ds.subsets[2].num_repeats, 2);
  EXPECT_EQ(ds.subsets[3].name, "5_empty");
  EXPECT_EQ(ds.subsets[3].image_count, 0);
  EXPECT_EQ(ds.subsets[4].name, "1_dog");
  EXPECT_TRUE(ds.subsets[4].is_reg);
  EXPECT_EQ(ds.subsets[4].image_count, 2);

  EXPECT_EQ(ds.num_train_samples, 10 * 3 + 1 * 1 + 2 * 1);
  EXPECT_EQ(ds.num_reg_samples_raw, 2);
  EXPECT_EQ(ds.predefined_buckets.size(), 17u);

  ASSERT_EQ(ds.images.size(), 7u);
  const std::vector<std::string> names = {"a.PNG", "b.png", "c.JPG", "p_10_20_30_40.png",
                                          "x.png", "r1.png", "r2.png"};
  for (std::size_t i = 0; i < names.size(); ++i) {
    EXPECT_EQ(ds.images[i].index, static_cast<int>(i));
    EXPECT_EQ(fs::path(ds.images[i].path).filename().string(), names[i]);
    EXPECT_TRUE(fs::path(ds.images[i].path).is_absolute());
    EXPECT_EQ(ds.images[i].is_reg, i >= 5);
  }
  EXPECT_EQ(ds.images[0].path, (dir_.path() / "train" / "10_sks dog" / "a.PNG").string());

  EXPECT_EQ(ds.images[0].caption, "a photo of sks dog\nsecond line");  // BOM, CRLF, trim
  EXPECT_EQ(ds.images[1].caption, "sks dog");                           // class tokens
  EXPECT_EQ(ds.images[2].caption, "sks dog");
  EXPECT_EQ(ds.images[3].caption, "face caption");
  EXPECT_EQ(ds.images[4].caption, "coffee cup");
  EXPECT_EQ(ds.images[5].caption, "dog");

  EXPECT_EQ(ds.images[0].subset, "10_sks dog");
  EXPECT_EQ(ds.images[0].num_repeats, 10);
  EXPECT_EQ(ds.images[4].num_repeats, 2);

  // Decoded sizes and kohya buckets (upscale mode, resolution 512).
  const struct {
    int w, h, bw, bh, rw, rh;
  } want[] = {{451, 300, 640, 384, 640, 426}, {512, 512, 512, 512, 512, 512},
              {640, 427, 640, 384, 640, 427}, {200, 150, 576, 448, 597, 448},
              {600, 400, 640, 384, 640, 427}, {512, 512, 512, 512, 512, 512},
              {400, 328, 576, 448, 576, 472}};
  for (std::size_t i = 0; i < ds.images.size(); ++i) {
    SCOPED_TRACE(names[i]);
    const auto& r = ds.images[i];
    EXPECT_EQ(r.width, want[i].w);
    EXPECT_EQ(r.height, want[i].h);
    EXPECT_EQ(r.bucket.bucket, (BucketReso{want[i].bw, want[i].bh}));
    EXPECT_EQ(r.bucket.resized_width, want[i].rw);
    EXPECT_EQ(r.bucket.resized_height, want[i].rh);
  }

  EXPECT_TRUE(has_warning(ds, "photos: ignored, the folder name has no repeat count"));
  EXPECT_TRUE(has_warning(ds, "0_zero: ignored, num_repeats is 0"));
  EXPECT_TRUE(has_warning(ds, "5_empty: no images"));
  EXPECT_TRUE(has_warning(ds, "1 image(s) directly in the folder are ignored"));
  EXPECT_FALSE(has_warning(ds, ".cache"));  // hidden folders are skipped silently
  EXPECT_EQ(ds.warnings.size(), 4u);
}

TEST_F(DatasetScan, ScanIsDeterministic) {
  const Dataset a = scan_dreambooth_dataset(options_);
  const Dataset b = scan_dreambooth_dataset(options_);
  ASSERT_EQ(a.images.size(), b.images.size());
  for (std::size_t i = 0; i < a.images.size(); ++i) {
    EXPECT_EQ(a.images[i].path, b.images[i].path);
    EXPECT_EQ(a.images[i].caption, b.images[i].caption);
  }
  EXPECT_EQ(a.warnings, b.warnings);
}

TEST_F(DatasetScan, NoUpscaleBucketsAndCaptionExtension) {
  options_.buckets.bucket_no_upscale = true;
  options_.caption_extension = ".caption";  // no such files: every caption is the class tokens
  options_.reg_data_dir.clear();
  const Dataset ds = scan_dreambooth_dataset(options_);
  ASSERT_EQ(ds.images.size(), 5u);
  EXPECT_TRUE(ds.predefined_buckets.empty());
  EXPECT_EQ(ds.images[0].caption, "sks dog");
  EXPECT_EQ(ds.images[3].caption, "faces");
  EXPECT_EQ(ds.images[0].bucket.bucket, (BucketReso{448, 256}));  // 451x300 kept, floored
  EXPECT_EQ(ds.images[3].bucket.bucket, (BucketReso{192, 128}));  // 200x150 kept, floored
  EXPECT_EQ(ds.images[4].bucket.bucket, (BucketReso{576, 384}));  // 600x400 kept, floored
  EXPECT_EQ(ds.num_reg_samples_raw, 0);
}

TEST_F(DatasetScan, BadImageFailsNamingTheFile) {
  const fs::path bad = dir_.path() / "train" / "1_faces" / "broken.png";
  test::write_text(bad, "garbage bytes");
  const std::string msg = error_of(options_);
  EXPECT_NE(msg.find(bad.string() + ": cannot decode image"), std::string::npos) << msg;
}

TEST_F(DatasetScan, EmptyCaptionFileFails) {
  const fs::path cap = dir_.path() / "train" / "1_faces" / "p.txt";
  test::write_text(cap, " \r\n");
  const std::string msg = error_of(options_);
  EXPECT_NE(msg.find(cap.string() + ": caption file is empty"), std::string::npos) << msg;
}

TEST_F(DatasetScan, TooSmallImageForNoUpscaleFailsNamingTheFile) {
  options_.buckets.bucket_no_upscale = true;
  const fs::path tiny = dir_.path() / "train" / "1_faces" / "tiny.png";
  test::write_pattern_png(tiny.string(), 100, 40);  // height 40 < 64: bucket height 0
  const std::string msg = error_of(options_);
  EXPECT_NE(msg.find(tiny.string() + ": select bucket: image 100x40"), std::string::npos) << msg;
}

TEST_F(DatasetScan, MissingOrEmptyFoldersFail) {
  ScanOptions o = options_;
  o.train_data_dir = (dir_.path() / "nope").string();
  std::string msg = error_of(o);
  EXPECT_NE(msg.find("train_data_dir '" + o.train_data_dir + "': no such directory"),
            std::string::npos) << msg;
  EXPECT_NE(msg.find("<num_repeats>_<class tokens>"), std::string::npos) << msg;

  o.train_data_dir = (dir_.path() / "train" / "loose.png").string();
  msg = error_of(o);
  EXPECT_NE(msg.find("': not a directory"), std::string::npos) << msg;

  // Only ignored folders: no training images at all.
  o.train_data_dir = (dir_.path() / "train" / "photos").string();
  fs::create_directories(dir_.path() / "train" / "photos" / "notanumber_x");
  msg = error_of(o);
  EXPECT_NE(msg.find("': no training images found"), std::string::npos) << msg;
  EXPECT_NE(msg.find("<num_repeats>_<class tokens>"), std::string::npos) << msg;

  o = options_;
  o.reg_data_dir = (dir_.path() / "no_reg").string();
  msg = error_of(o);
  EXPECT_NE(msg.find("reg_data_dir '" + o.reg_data_dir + "': no such directory"),
            std::string::npos) << msg;

  o = options_;
  o.train_data_dir.clear();
  EXPECT_NE(error_of(o).find("train_data_dir is empty"), std::string::npos);
}

TEST(DatasetScanNames, RepeatsOnlyFolderHasEmptyClassTokens) {
  // kohya extract_dreambooth_params: "3" -> 3 repeats, class tokens "".
  test::TempDir dir("dataset_names");
  fs::create_directories(dir.path() / "3");
  test::write_pattern_png((dir.path() / "3" / "img.bmp.png").string(), 64, 64);
  ScanOptions o;
  o.train_data_dir = dir.str();
  const Dataset ds = scan_dreambooth_dataset(o);
  ASSERT_EQ(ds.subsets.size(), 1u);
  EXPECT_EQ(ds.subsets[0].num_repeats, 3);
  EXPECT_EQ(ds.subsets[0].class_tokens, "");
  ASSERT_EQ(ds.images.size(), 1u);
  EXPECT_EQ(ds.images[0].caption, "");
  EXPECT_EQ(ds.num_train_samples, 3);
  EXPECT_TRUE(has_warning(ds, "no caption file and no class tokens"));
}

TEST_F(DatasetScan, EmptyRegFolderWarns) {
  options_.reg_data_dir = (dir_.path() / "train" / "5_empty").string();
  const Dataset ds = scan_dreambooth_dataset(options_);
  EXPECT_EQ(ds.num_reg_samples_raw, 0);
  EXPECT_TRUE(has_warning(ds, "no regularization images found"));
}

TEST_F(DatasetScan, BadBucketOptionsFail) {
  options_.buckets.min_bucket_reso = 640;  // > resolution 512
  EXPECT_NE(error_of(options_).find("dataset bucket options: "), std::string::npos);
}

}  // namespace
}  // namespace lf
