// Tests for the dataset scan on temporary trees of real photos (Debian's skimage data) and
// generated files: kohya's folder convention (subset parsing and order, ignored folders and
// files), image extensions, captions (BOM, CRLF, face-crop names, class tokens, UTF-8), sample
// counts, buckets, bad images (listed or skipped), same-stem files, unicode names, several
// datasets, and the errors for missing/empty folders.
#include "common/data/dataset.h"
#include "common/data/epoch_plan.h"
#include "common/data/validation_split.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <set>
#include <string>

#include <opencv2/imgcodecs.hpp>

#include "tests/common/fixtures.h"
#include "tests/common/image_fixtures.h"

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

// Form 1 of the dataset config: kohya DreamBooth parent folders, resolution 512, captions .txt.
ScanOptions folder_options(const std::string& train, const std::string& reg = "") {
  DatasetConfig d;
  d.train_data_dir = train;
  d.reg_data_dir = reg;
  d.folder_defaults.caption_extension = ".txt";
  d.buckets.enable_bucket = true;
  ScanOptions o;
  o.datasets = {d};
  o.threads = 2;
  return o;
}

DatasetConfig& first(ScanOptions& o) { return o.datasets[0]; }

std::string error_of(const ScanOptions& o) {
  try {
    scan_dataset(o);
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
    options_ = folder_options((dir_.path() / "train").string(), (dir_.path() / "reg").string());
  }

  test::TempDir dir_;
  ScanOptions options_;
};

TEST_F(DatasetScan, SubsetsImagesCaptionsAndCounts) {
  const Dataset ds = scan_dataset(options_);

  // Subsets sorted by name ("10_..." < "1_..." bytewise); 0_zero, photos, .cache skipped.
  ASSERT_EQ(ds.subsets.size(), 5u);
  EXPECT_EQ(ds.subsets[0].name, "10_sks dog");
  EXPECT_EQ(ds.subsets[0].config.class_tokens, "sks dog");
  EXPECT_EQ(ds.subsets[0].config.num_repeats, 10);
  EXPECT_EQ(ds.subsets[0].image_count, 3);
  EXPECT_EQ(ds.subsets[1].name, "1_faces");
  EXPECT_EQ(ds.subsets[2].config.class_tokens, "cat_with_underscores");
  EXPECT_EQ(ds.subsets[2].config.num_repeats, 2);
  EXPECT_EQ(ds.subsets[3].name, "5_empty");
  EXPECT_EQ(ds.subsets[3].image_count, 0);
  EXPECT_EQ(ds.subsets[4].name, "1_dog");
  EXPECT_TRUE(ds.subsets[4].config.is_reg);
  EXPECT_EQ(ds.subsets[4].image_count, 2);

  EXPECT_EQ(ds.num_train_samples, 10 * 3 + 1 * 1 + 2 * 1);
  EXPECT_EQ(ds.num_reg_samples_raw, 2);
  ASSERT_EQ(ds.datasets.size(), 1u);
  EXPECT_EQ(ds.datasets[0].predefined_buckets.size(), 17u);
  EXPECT_EQ(ds.datasets[0].num_train_samples, ds.num_train_samples);

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

  EXPECT_EQ(ds.images[0].caption, "a photo of sks dog");  // BOM, CRLF, first line, trim
  EXPECT_EQ(ds.images[1].caption, "sks dog");                           // class tokens
  EXPECT_EQ(ds.images[2].caption, "sks dog");
  EXPECT_EQ(ds.images[3].caption, "face caption");
  EXPECT_EQ(ds.images[4].caption, "coffee cup");
  EXPECT_EQ(ds.images[5].caption, "dog");

  EXPECT_EQ(ds.images[0].subset_index, 0);
  EXPECT_EQ(ds.images[6].subset_index, 4);
  EXPECT_EQ(ds.images[0].content_sha256.size(), 64u);
  EXPECT_FALSE(ds.images[0].has_alpha);
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
  EXPECT_TRUE(has_warning(ds, "5_empty: no usable images"));
  EXPECT_TRUE(has_warning(ds, "1 file(s) directly in the folder are ignored"));
  EXPECT_TRUE(has_warning(ds,
                          "1 caption file(s) have more than one non-empty line; only the "
                          "first is used:"));
  EXPECT_TRUE(has_warning(ds, "a.txt (2 non-empty lines)"));
  EXPECT_FALSE(has_warning(ds, ".cache"));  // hidden folders are skipped silently
  // chelsea's and astronaut's colour profiles: one counted warning instead of libpng's lines.
  EXPECT_TRUE(has_warning(ds, "2 PNG file(s) have a colour profile (iCCP) libpng warns about"));
  EXPECT_TRUE(has_warning(ds, "a.PNG (iCCP: known incorrect sRGB profile)"));
  EXPECT_TRUE(has_warning(ds, "b.png (iCCP: known incorrect sRGB profile)"));
  EXPECT_EQ(ds.warnings.size(), 6u);
}

// The decode threads only fill per-image slots: 1 thread and 8 give the same dataset.
TEST_F(DatasetScan, ValidationSplitHoldsOutImagesOfTrainSubsetsOnly) {
  first(options_).validation_split = 0.34;  // 3 images: 1 held out; 1 image: none (one stays)
  options_.validation_seed = 5;
  const Dataset ds = scan_dataset(options_);
  // 10_sks dog keeps 2 of its 3 images; 1_faces and 2_cat (1 image each) and the reg subset
  // keep all.
  EXPECT_EQ(ds.subsets[0].image_count, 2);
  EXPECT_EQ(ds.subsets[0].validation_count, 1);
  EXPECT_EQ(ds.subsets[1].validation_count, 0);
  EXPECT_EQ(ds.subsets[4].validation_count, 0);
  EXPECT_EQ(ds.num_validation_images, 1);
  EXPECT_EQ(ds.datasets[0].num_validation_images, 1);
  EXPECT_EQ(ds.num_train_samples, 10 * 2 + 1 * 1 + 2 * 1);  // kohya's N_train of the rest
  int held = -1;
  for (const ImageRecord& img : ds.images) {
    if (img.is_validation) held = img.index;
  }
  ASSERT_GE(held, 0);
  EXPECT_LT(held, 3);  // one of 10_sks dog's
  EXPECT_EQ(validation_images(ds), std::vector<int>{held});
  // The seed decides which, the same on every scan; validation_seed of the dataset wins.
  EXPECT_EQ(validation_images(scan_dataset(options_)), std::vector<int>{held});
  std::set<int> chosen;
  for (std::int64_t seed = 0; seed < 12; ++seed) {
    first(options_).validation_seed = seed;
    const std::vector<int> v = validation_images(scan_dataset(options_));
    ASSERT_EQ(v.size(), 1u);
    chosen.insert(v[0]);
  }
  EXPECT_EQ(chosen, (std::set<int>{0, 1, 2}));  // every image can be the held-out one
  // The plan never holds a held-out image.
  first(options_).validation_seed = std::nullopt;
  const Dataset again = scan_dataset(options_);
  const std::vector<int> v = validation_images(again);
  ASSERT_EQ(v.size(), 1u);
  const EpochPlan plan = build_epoch_plan(again, PlanOptions{}, 0);
  for (const GlobalBatch& b : plan.batches) {
    for (const PlanSample& sample : b.samples) EXPECT_NE(sample.image_index, v[0]);
  }
}

TEST_F(DatasetScan, ScanIsDeterministicForAnyThreadCount) {
  options_.threads = 1;
  const Dataset a = scan_dataset(options_);
  options_.threads = 8;
  const Dataset b = scan_dataset(options_);
  ASSERT_EQ(a.images.size(), b.images.size());
  for (std::size_t i = 0; i < a.images.size(); ++i) {
    EXPECT_EQ(a.images[i].path, b.images[i].path);
    EXPECT_EQ(a.images[i].caption, b.images[i].caption);
    EXPECT_EQ(a.images[i].content_sha256, b.images[i].content_sha256);
    EXPECT_EQ(a.images[i].bucket.bucket, b.images[i].bucket.bucket);
    EXPECT_EQ(a.images[i].bucket.resized_width, b.images[i].bucket.resized_width);
    EXPECT_EQ(a.images[i].width, b.images[i].width);
  }
  EXPECT_EQ(a.warnings, b.warnings);
}

TEST_F(DatasetScan, NoUpscaleBucketsAndCaptionExtension) {
  first(options_).buckets.bucket_no_upscale = true;
  first(options_).folder_defaults.caption_extension = ".caption";  // none: class tokens
  first(options_).reg_data_dir.clear();
  const Dataset ds = scan_dataset(options_);
  ASSERT_EQ(ds.images.size(), 5u);
  EXPECT_TRUE(ds.datasets[0].predefined_buckets.empty());
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
  EXPECT_NE(msg.find("on_bad_image: skip"), std::string::npos) << msg;
}

TEST_F(DatasetScan, EmptyCaptionFilesFallBackToTheClassTokensInOneWarning) {
  const fs::path cap = dir_.path() / "train" / "1_faces" / "p.txt";
  test::write_text(cap, " \r\n");
  const Dataset ds = scan_dataset(options_);
  EXPECT_EQ(ds.images[3].caption, "faces");  // the folder's class tokens, as without the file
  EXPECT_TRUE(has_warning(ds,
                          "1 caption file(s) are empty; those images get their subset's "
                          "class tokens, as without a caption file:\n  " +
                              cap.string()));
}

TEST_F(DatasetScan, UndecodedImageFormatsAreCountedInOneWarning) {
  const fs::path sub = dir_.path() / "train" / "1_faces";
  for (const char* name : {"x.jxl", "y.AVIF", "z.gif", "t.tif", "h.heic", "p.psd", "q.tiff"}) {
    test::write_text(sub / name, "not decoded");
  }
  test::write_text(sub / "notes.md", "not an image at all");
  const Dataset ds = scan_dataset(options_);
  EXPECT_EQ(ds.images.size(), 7u);  // the fixture's images only
  EXPECT_TRUE(has_warning(ds, "7 file(s) in a format lorafleet does not decode are not used"));
  EXPECT_TRUE(has_warning(ds, "\n  and 2 more"));  // five named, two counted
  EXPECT_FALSE(has_warning(ds, "notes.md"));
}

TEST_F(DatasetScan, CaptionThatIsNotUtf8FailsNamingTheFile) {
  const fs::path cap = dir_.path() / "train" / "1_faces" / "p.txt";
  test::write_text(cap, "ohwx\x92s hat");
  const std::string msg = error_of(options_);
  EXPECT_NE(msg.find(cap.string()), std::string::npos) << msg;
  EXPECT_NE(msg.find("UTF-8"), std::string::npos) << msg;
}

TEST_F(DatasetScan, TooSmallImageForNoUpscaleFailsNamingTheFile) {
  first(options_).buckets.bucket_no_upscale = true;
  const fs::path tiny = dir_.path() / "train" / "1_faces" / "tiny.png";
  test::write_pattern_png(tiny.string(), 100, 40);  // height 40 < 64: bucket height 0
  const std::string msg = error_of(options_);
  EXPECT_NE(msg.find(tiny.string() + ": select bucket: image 100x40"), std::string::npos) << msg;
}

TEST_F(DatasetScan, MissingOrEmptyFoldersFail) {
  ScanOptions o = options_;
  first(o).train_data_dir = (dir_.path() / "nope").string();
  std::string msg = error_of(o);
  EXPECT_NE(msg.find("train_data_dir '" + first(o).train_data_dir + "': no such directory"),
            std::string::npos) << msg;
  EXPECT_NE(msg.find("<num_repeats>_<class tokens>"), std::string::npos) << msg;

  first(o).train_data_dir = (dir_.path() / "train" / "loose.png").string();
  msg = error_of(o);
  EXPECT_NE(msg.find("': not a directory"), std::string::npos) << msg;

  // Only ignored folders: no training images at all, an early error with the layout hint.
  first(o).train_data_dir = (dir_.path() / "train" / "photos").string();
  first(o).reg_data_dir.clear();
  fs::create_directories(dir_.path() / "train" / "photos" / "notanumber_x");
  msg = error_of(o);
  EXPECT_NE(msg.find("no training images found"), std::string::npos) << msg;
  EXPECT_NE(msg.find("<num_repeats>_<class tokens>"), std::string::npos) << msg;
  EXPECT_EQ(msg.find("nan"), std::string::npos) << msg;

  o = options_;
  first(o).reg_data_dir = (dir_.path() / "no_reg").string();
  msg = error_of(o);
  EXPECT_NE(msg.find("reg_data_dir '" + first(o).reg_data_dir + "': no such directory"),
            std::string::npos) << msg;

  o.datasets.clear();
  EXPECT_NE(error_of(o).find("no dataset configured"), std::string::npos);
}

TEST(DatasetScanNames, RepeatsOnlyFolderHasEmptyClassTokens) {
  // kohya extract_dreambooth_params: "3" -> 3 repeats, class tokens "".
  test::TempDir dir("dataset_names");
  fs::create_directories(dir.path() / "3");
  test::write_pattern_png((dir.path() / "3" / "img.bmp.png").string(), 64, 64);
  const Dataset ds = scan_dataset(folder_options(dir.str()));
  ASSERT_EQ(ds.subsets.size(), 1u);
  EXPECT_EQ(ds.subsets[0].config.num_repeats, 3);
  EXPECT_EQ(ds.subsets[0].config.class_tokens, "");
  ASSERT_EQ(ds.images.size(), 1u);
  EXPECT_EQ(ds.images[0].caption, "");
  EXPECT_EQ(ds.num_train_samples, 3);
  EXPECT_TRUE(has_warning(ds, "no class tokens after the repeat count"));
}

TEST_F(DatasetScan, BadBucketOptionsFail) {
  first(options_).buckets.min_bucket_reso = 640;  // > resolution 512
  EXPECT_NE(error_of(options_).find("dataset 1: bucket options: "), std::string::npos);
}

// Issue 3: `10_ohwx woman` (5), `CROP` (3), `0_skip` (2), `3_` (2), `x_10` (1), `007_a_b` (1)
// and a loose png give 5*10 + 2*3 + 1*7 = 63 samples; class tokens "ohwx woman", "" (warned)
// and "a_b".
TEST(DatasetScanNames, KohyaFolderConventionCounts) {
  test::TempDir dir("dataset_convention");
  const std::pair<std::string, int> folders[] = {{"10_ohwx woman", 5}, {"CROP", 3}, {"0_skip", 2},
                                                 {"3_", 2}, {"x_10", 1}, {"007_a_b", 1}};
  for (const auto& [name, n] : folders) {
    fs::create_directories(dir.path() / name);
    for (int i = 0; i < n; ++i) {
      test::write_pattern_png((dir.path() / name / ("img" + std::to_string(i) + ".png")).string(),
                              64, 64);
    }
  }
  test::write_pattern_png((dir.path() / "loose.png").string(), 64, 64);
  const Dataset ds = scan_dataset(folder_options(dir.str()));
  EXPECT_EQ(ds.num_train_samples, 63);
  ASSERT_EQ(ds.subsets.size(), 3u);  // sorted bytewise: "007_a_b" < "10_ohwx woman" < "3_"
  EXPECT_EQ(ds.subsets[0].config.class_tokens, "a_b");
  EXPECT_EQ(ds.subsets[0].config.num_repeats, 7);
  EXPECT_EQ(ds.subsets[1].config.class_tokens, "ohwx woman");
  EXPECT_EQ(ds.subsets[2].config.class_tokens, "");
  EXPECT_EQ(ds.subsets[2].config.num_repeats, 3);
  EXPECT_TRUE(has_warning(ds, "3_: no class tokens"));
  EXPECT_TRUE(has_warning(ds, "CROP: ignored"));
  EXPECT_TRUE(has_warning(ds, "x_10: ignored"));
  EXPECT_TRUE(has_warning(ds, "0_skip: ignored, num_repeats is 0"));
  EXPECT_TRUE(has_warning(ds, "1 file(s) directly in the folder are ignored"));
  EXPECT_EQ(ds.images[0].caption, "a_b");
}

// Issue 3: extensions in any case; AppleDouble, .DS_Store and text files ignored: 4 images x 3.
TEST(DatasetScanNames, ExtensionsAnyCaseAndHiddenFiles) {
  test::TempDir dir("dataset_extensions");
  const fs::path sub = dir.path() / "3_x";
  fs::create_directories(sub);
  const fs::path photo = kPhotos / "rocket.jpg";
  fs::copy_file(photo, sub / "IMG_1.JPG");
  fs::copy_file(photo, sub / "IMG_2.jpeg");
  test::write_pattern_png((sub / "IMG_3.Png").string(), 64, 64);
  // A real WebP from OpenCV's encoder (cv::imwrite picks the codec by the lower-case name).
  ASSERT_TRUE(cv::imwrite((sub / "img_4.webp").string(),
                          cv::imread((kPhotos / "astronaut.png").string())));
  fs::rename(sub / "img_4.webp", sub / "IMG_4.WebP");
  test::write_text(sub / "._IMG_1.JPG", "AppleDouble");
  test::write_text(sub / ".DS_Store", "finder");
  test::write_text(sub / "notes.txt", "notes");
  const Dataset ds = scan_dataset(folder_options(dir.str()));
  ASSERT_EQ(ds.images.size(), 4u);
  EXPECT_EQ(ds.num_train_samples, 12);
  EXPECT_EQ(fs::path(ds.images[3].path).filename().string(), "IMG_4.WebP");
  EXPECT_EQ(ds.images[3].width, 512);
}

// Issue 3: in a 5_x folder of 10 PNGs, one truncated to 60 %, one empty and one a text file are
// all listed at scan; with on_bad_image: skip the epoch has 7 x 5 = 35 samples.
TEST(DatasetScanBadImages, AllListedOrSkipped) {
  test::TempDir dir("dataset_bad");
  const fs::path sub = dir.path() / "5_x";
  fs::create_directories(sub);
  for (int i = 0; i < 10; ++i) {
    fs::copy_file(kPhotos / "chelsea.png", sub / ("p" + std::to_string(i) + ".png"));
  }
  const auto size = fs::file_size(sub / "p3.png");
  fs::resize_file(sub / "p3.png", size * 6 / 10);
  fs::resize_file(sub / "p5.png", 0);
  test::write_text(sub / "p7.png", "this is a text file, not a PNG\n");
  ScanOptions o = folder_options(dir.str());
  const std::string msg = error_of(o);
  EXPECT_NE(msg.find("3 image(s) cannot be used"), std::string::npos) << msg;
  for (const char* name : {"p3.png", "p5.png", "p7.png"}) {
    EXPECT_NE(msg.find((sub / name).string() + ": "), std::string::npos) << name << ": " << msg;
  }
  o.on_bad_image = "skip";
  const Dataset ds = scan_dataset(o);
  EXPECT_EQ(ds.images.size(), 7u);
  EXPECT_EQ(ds.num_train_samples, 35);
  EXPECT_EQ(ds.subsets[0].image_count, 7);
  EXPECT_EQ(ds.bad_images.size(), 3u);
  for (std::size_t i = 0; i < ds.images.size(); ++i) EXPECT_EQ(ds.images[i].index, int(i));
}

// Issue 3: a 4000x3000 JPEG stored with EXIF Orientation 6, at resolution 1024, is bucketed as
// the 3000x4000 portrait it shows: bucket (896,1152), resized 896x1195.
TEST(DatasetScanImages, ExifRotatedPhotoIsBucketedUpright) {
  test::TempDir dir("dataset_exif");
  fs::create_directories(dir.path() / "1_x");
  cv::Mat stored(3000, 4000, CV_8UC3, cv::Scalar(90, 120, 150));
  const test::Bytes jpeg = test::jpeg_with_exif(test::encode_image(stored, ".jpg"),
                                                test::exif_orientation_tiff(6));
  test::write_bytes(dir.str("1_x/phone.jpg"), jpeg);
  ScanOptions o = folder_options(dir.str());
  first(o).buckets.resolution_w = first(o).buckets.resolution_h = 1024;
  first(o).buckets.max_bucket_reso = 2048;
  const Dataset ds = scan_dataset(o);
  ASSERT_EQ(ds.images.size(), 1u);
  EXPECT_EQ(ds.images[0].width, 3000);
  EXPECT_EQ(ds.images[0].height, 4000);
  EXPECT_EQ(ds.images[0].bucket.bucket, (BucketReso{896, 1152}));
  EXPECT_EQ(ds.images[0].bucket.resized_width, 896);
  EXPECT_EQ(ds.images[0].bucket.resized_height, 1195);
}

// Two images with one stem (a.png, a.jpg) share a caption file: an error naming both.
TEST(DatasetScanNames, SameStemIsAnError) {
  test::TempDir dir("dataset_stem");
  const fs::path sub = dir.path() / "1_x";
  fs::create_directories(sub);
  fs::copy_file(kPhotos / "chelsea.png", sub / "a.png");
  fs::copy_file(kPhotos / "rocket.jpg", sub / "a.jpg");
  const std::string msg = error_of(folder_options(dir.str()));
  EXPECT_NE(msg.find((sub / "a.jpg").string()), std::string::npos) << msg;
  EXPECT_NE(msg.find((sub / "a.png").string()), std::string::npos) << msg;
  EXPECT_NE(msg.find("same name stem 'a'"), std::string::npos) << msg;
}

// UTF-8 folder and file names are read as bytes, whatever the locale.
TEST(DatasetScanNames, UnicodeNames) {
  test::TempDir dir("dataset_unicode");
  const fs::path sub = dir.path() / "2_\xC3\xBCn\xC3\xAF \xE5\x86\x99\xE7\x9C\x9F";
  fs::create_directories(sub);
  fs::copy_file(kPhotos / "chelsea.png", sub / "\xE7\x8C\xAB.png");
  test::write_text(sub / "\xE7\x8C\xAB.txt", "\xE7\x8C\xAB, cat");
  const Dataset ds = scan_dataset(folder_options(dir.str()));
  ASSERT_EQ(ds.images.size(), 1u);
  EXPECT_EQ(ds.images[0].caption, "\xE7\x8C\xAB, cat");
  EXPECT_EQ(ds.subsets[0].config.class_tokens, "\xC3\xBCn\xC3\xAF \xE5\x86\x99\xE7\x9C\x9F");
  EXPECT_EQ(ds.num_train_samples, 2);
}

// Everything wrong with the data is reported in one go: undecodable files, a caption that is
// not UTF-8 and a file name that is not UTF-8 are bad images (listed together, or skipped);
// every pair of same-stem images is listed in one error.
TEST(DatasetScanBadImages, CaptionsNamesAndStemsAreReportedTogether) {
  test::TempDir dir("dataset_report_all");
  const fs::path sub = dir.path() / "2_x";
  fs::create_directories(sub);
  for (const char* name : {"a.png", "b.png", "c.png", "d.png"}) {
    fs::copy_file(kPhotos / "chelsea.png", sub / name);
  }
  test::write_text(sub / "b.txt", "ohwx\x92s hat");                      // Windows-1252
  fs::copy_file(kPhotos / "chelsea.png", sub / "caf\xE9.png");            // Latin-1 name
  test::write_text(sub / "c.png", "");                                    // zero bytes
  ScanOptions o = folder_options(dir.str());
  std::string msg = error_of(o);
  EXPECT_NE(msg.find("3 image(s) cannot be used"), std::string::npos) << msg;
  EXPECT_NE(msg.find((sub / "b.txt").string() + ": caption file is not valid UTF-8"),
            std::string::npos) << msg;
  EXPECT_NE(msg.find("file name is not valid UTF-8"), std::string::npos) << msg;
  EXPECT_NE(msg.find((sub / "c.png").string() + ": "), std::string::npos) << msg;
  o.on_bad_image = "skip";
  const Dataset ds = scan_dataset(o);
  ASSERT_EQ(ds.images.size(), 2u);  // a.png, d.png
  EXPECT_EQ(ds.num_train_samples, 4);
  EXPECT_EQ(ds.bad_images.size(), 3u);

  fs::copy_file(kPhotos / "rocket.jpg", sub / "a.jpg");
  fs::copy_file(kPhotos / "rocket.jpg", sub / "d.JPEG");
  msg = error_of(o);
  EXPECT_NE(msg.find("2 pair(s) of images share a name stem"), std::string::npos) << msg;
  EXPECT_NE(msg.find((sub / "a.jpg").string()), std::string::npos) << msg;
  EXPECT_NE(msg.find((sub / "d.png").string()), std::string::npos) << msg;
}

// "No training images" says why: the scan's warnings (here: images lying directly in the
// folder given as train_data_dir, the usual first mistake) come with the error.
TEST(DatasetScanNames, NoTrainingImagesErrorCarriesTheWarnings) {
  test::TempDir dir("dataset_flat");
  fs::copy_file(kPhotos / "chelsea.png", dir.path() / "a.png");
  fs::create_directories(dir.path() / "CROP");
  const std::string msg = error_of(folder_options(dir.str()));
  EXPECT_NE(msg.find("no training images found"), std::string::npos) << msg;
  EXPECT_NE(msg.find("1 file(s) directly in the folder are ignored"), std::string::npos) << msg;
  EXPECT_NE(msg.find("CROP: ignored"), std::string::npos) << msg;
}

// Reg images in a dataset of their own are never used (kohya balances per dataset): warned.
TEST(DatasetScanConfig, RegOnlyDatasetIsWarned) {
  test::TempDir dir("dataset_reg_only");
  fs::create_directories(dir.path() / "a");
  fs::create_directories(dir.path() / "r");
  fs::copy_file(kPhotos / "chelsea.png", dir.path() / "a" / "1.png");
  fs::copy_file(kPhotos / "camera.png", dir.path() / "r" / "1.png");
  SubsetConfig train;
  train.image_dir = dir.str("a");
  SubsetConfig reg;
  reg.image_dir = dir.str("r");
  reg.is_reg = true;
  DatasetConfig d1, d2;
  d1.subsets = {train};
  d2.subsets = {reg};
  ScanOptions o;
  o.datasets = {d1, d2};
  const Dataset ds = scan_dataset(o);
  EXPECT_TRUE(has_warning(ds, "dataset 2 has regularization images but no training images"));
  o.datasets = {d2};
  const std::string msg = error_of(o);
  EXPECT_NE(msg.find("only regularization subsets hold images"), std::string::npos) << msg;
}

// Subsets given with image_dir (dataset config forms 2 and 3), two datasets with their own
// resolution and batch size; a repeated image_dir in one dataset is ignored as in kohya.
TEST(DatasetScanConfig, ExplicitSubsetsAndTwoDatasets) {
  test::TempDir dir("dataset_config_scan");
  fs::create_directories(dir.path() / "a");
  fs::create_directories(dir.path() / "r");
  fs::copy_file(kPhotos / "chelsea.png", dir.path() / "a" / "1.png");
  fs::copy_file(kPhotos / "rocket.jpg", dir.path() / "a" / "2.jpg");
  fs::copy_file(kPhotos / "camera.png", dir.path() / "r" / "1.png");
  SubsetConfig train;
  train.image_dir = dir.str("a");
  train.num_repeats = 4;
  train.has_class_tokens = true;
  train.class_tokens = "ohwx cat";
  SubsetConfig reg = train;
  reg.image_dir = dir.str("r");
  reg.is_reg = true;
  reg.num_repeats = 1;
  reg.class_tokens = "cat";
  DatasetConfig d512;
  SubsetConfig same_folder = train;  // the same folder spelled differently: still a repeat
  same_folder.image_dir = dir.str("a") + "/./";
  d512.subsets = {train, reg, same_folder};
  d512.batch_size = 2;
  DatasetConfig d768;
  d768.buckets.resolution_w = d768.buckets.resolution_h = 768;
  d768.subsets = {train};
  ScanOptions o;
  o.datasets = {d512, d768};
  const Dataset ds = scan_dataset(o);
  ASSERT_EQ(ds.datasets.size(), 2u);
  EXPECT_EQ(ds.datasets[0].batch_size, 2);
  EXPECT_EQ(ds.datasets[0].num_train_samples, 8);
  EXPECT_EQ(ds.datasets[0].num_reg_samples_raw, 1);
  EXPECT_EQ(ds.datasets[1].num_train_samples, 8);
  EXPECT_EQ(ds.num_train_samples, 16);
  ASSERT_EQ(ds.subsets.size(), 3u);
  EXPECT_TRUE(has_warning(ds, "is the folder of an earlier subset"));
  ASSERT_EQ(ds.images.size(), 5u);
  EXPECT_EQ(ds.images[0].caption, "ohwx cat");
  EXPECT_EQ(ds.images[2].caption, "cat");
  EXPECT_EQ(ds.images[3].dataset_index, 1);
  // chelsea 451x300 (ar 1.503): (640,384) of the 512 list; (896,640) of the 768 list, resized
  // 962x640 (scale 640/300).
  EXPECT_EQ(ds.images[0].bucket.bucket, (BucketReso{640, 384}));
  EXPECT_EQ(ds.images[3].bucket.bucket, (BucketReso{896, 640}));
  EXPECT_EQ(ds.images[3].bucket.resized_width, 962);
  EXPECT_EQ(ds.images[3].bucket.resized_height, 640);
  EXPECT_EQ(ds.images[0].content_sha256, ds.images[3].content_sha256);

  o.datasets[0].subsets[0].image_dir = dir.str("missing");
  EXPECT_NE(error_of(o).find("image_dir '" + dir.str("missing") + "': no such directory"),
            std::string::npos);
}

}  // namespace
}  // namespace lf
