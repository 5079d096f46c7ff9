// Dataset scan (see dataset.h). Mirrors kohya sd-scripts' DreamBooth dataset
// (generate_dreambooth_subsets_config_by_subdirs, glob_images, read_caption, DreamBoothDataset),
// with these deliberate differences, each documented in docs/dataset.md:
//   - subset folders are walked in sorted byte order (kohya: directory order, which differs
//     between machines and would change the sample order);
//   - every image is fully decoded here, on several threads, so a truncated or fake file is
//     reported before any model loads (kohya reads only the header here and fails mid-training);
//   - all bad images are listed together; on_bad_image: skip drops them instead of stopping;
//   - two images with the same stem in one folder are an error (they would share a caption).
#include "common/data/dataset.h"
#include "common/data/validation_split.h"

#include <algorithm>
#include <atomic>
#include <cctype>
#include <filesystem>
#include <map>
#include <mutex>
#include <random>
#include <system_error>
#include <thread>

#include "common/data/caption.h"
#include "common/io/sha256.h"
#include "common/text/utf8.h"

namespace lf {
namespace {

namespace fs = std::filesystem;

// Decode threads of the scan at most (each holds one decoded image).
constexpr int kMaxScanThreads = 32;

const char* const kLayoutHint =
    "expected the kohya DreamBooth layout <train_data_dir>/<num_repeats>_<class tokens>/<image>"
    ".png, e.g. train/10_sks dog/001.png with an optional caption train/10_sks dog/001.txt "
    "(caption_extension), or subsets with image_dir in a datasets: list / dataset_config TOML";

std::string lower(std::string s) {
  for (auto& ch : s) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return s;
}

// The lower-case extension of a file that may be an image; "" for hidden files (".DS_Store")
// and macOS AppleDouble files ("._IMG_1.JPG"), which are never images.
std::string image_extension(const std::string& filename) {
  if (filename.empty() || filename[0] == '.') return "";
  return lower(fs::path(filename).extension().string());
}

bool is_image_name(const std::string& filename) {
  const std::string ext = image_extension(filename);
  return ext == ".png" || ext == ".jpg" || ext == ".jpeg" || ext == ".webp" || ext == ".bmp";
}

// Image formats lorafleet does not decode (OpenCV 4.6 here reads png, jpg, webp and bmp): their
// files are counted in one warning instead of being skipped in silence.
bool is_undecoded_image_name(const std::string& filename) {
  const std::string ext = image_extension(filename);
  for (const char* e : {".jxl", ".avif", ".gif", ".tif", ".tiff", ".heic", ".heif", ".jp2", ".j2k",
                        ".psd", ".ico", ".tga", ".exr", ".hdr", ".svg", ".dng", ".raw"}) {
    if (ext == e) return true;
  }
  return false;
}

// One warning for a list of files: `header`, then up to five of them, then how many more.
std::string file_list_warning(const std::string& header, const std::vector<std::string>& files) {
  std::string msg = header;
  const std::size_t shown = std::min<std::size_t>(files.size(), 5);
  for (std::size_t i = 0; i < shown; ++i) msg += "\n  " + files[i];
  if (files.size() > shown) msg += "\n  and " + std::to_string(files.size() - shown) + " more";
  return msg;
}

// "<int>_<rest>" as kohya extract_dreambooth_params: split at the first '_'; the prefix must be
// all digits. A name that is only an integer has empty class tokens. Returns false when there is
// no integer prefix ("CROP", "x_10").
bool parse_subset_name(const std::string& name, int* num_repeats, std::string* class_tokens) {
  const std::size_t us = name.find('_');
  const std::string head = name.substr(0, us);
  if (head.empty() || head.size() > 9 ||
      !std::all_of(head.begin(), head.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    return false;
  }
  *num_repeats = std::stoi(head);
  *class_tokens = us == std::string::npos ? "" : name.substr(us + 1);
  return true;
}

std::vector<fs::path> sorted_entries(const fs::path& dir) {
  std::vector<fs::path> out;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    out.push_back(it->path());
  }
  if (ec) throw DatasetError(dir.string() + ": cannot list folder: " + ec.message());
  // Byte order of the UTF-8 names: the same on every machine and under every locale.
  std::sort(out.begin(), out.end(), [](const fs::path& a, const fs::path& b) {
    return a.filename().native() < b.filename().native();
  });
  return out;
}

// kohya read_caption: "<stem><ext>", then, for stems with >= 5 '_' tokens (face-crop names
// "<name>_cx_cy_w_h"), the stem without its last four tokens. Returns the caption file's path,
// or "" when there is none.
std::string find_caption_file(const fs::path& image, const std::string& caption_extension) {
  const std::string stem = image.stem().string();
  std::vector<std::string> candidates = {stem};
  std::vector<std::size_t> us;
  for (std::size_t i = 0; i < stem.size(); ++i) {
    if (stem[i] == '_') us.push_back(i);
  }
  if (us.size() >= 4) candidates.push_back(stem.substr(0, us[us.size() - 4]));
  for (const auto& c : candidates) {
    const fs::path cap = image.parent_path() / (c + caption_extension);
    std::error_code ec;
    if (fs::is_regular_file(cap, ec)) return cap.string();
  }
  return "";
}

// An image found by the listing, before decoding.
struct PendingImage {
  ImageRecord record;
  std::string error;  // decode/bucket failure, empty when fine
  std::string profile_warning;  // libpng's first warning about its colour profile, if any
};

struct Scanner {
  const ScanOptions& options;
  Dataset ds;
  std::vector<PendingImage> pending;
  std::vector<BucketManager> managers;  // one per dataset
  std::vector<std::string> same_stem;   // "a.png and a.jpg: ..." over all folders, reported once
  // Reported once each, over all folders (see summarize_files).
  std::vector<std::string> undecoded_images;     // .jxl, .avif, .gif, .tif ...
  std::vector<std::string> empty_captions;       // caption files with no text
  std::vector<std::string> multi_line_captions;  // "<path> (N lines)"

  // Subsets of a kohya DreamBooth parent folder (form 1): "<n>_<tokens>" sub-folders.
  std::vector<SubsetConfig> folder_subsets(const std::string& dir, bool is_reg,
                                           const DatasetConfig& dc) {
    const char* role = is_reg ? "reg_data_dir" : "train_data_dir";
    std::error_code ec;
    if (!fs::is_directory(dir, ec)) {
      throw DatasetError(std::string("dataset.") + role + " '" + dir + "': " +
                         (fs::exists(dir, ec) ? "not a directory" : "no such directory") +
                         "; " + kLayoutHint);
    }
    std::vector<SubsetConfig> out;
    int loose_files = 0;
    for (const fs::path& sub : sorted_entries(fs::absolute(dir).lexically_normal())) {
      const std::string name = sub.filename().string();
      if (name.empty() || name[0] == '.') continue;
      if (!fs::is_directory(sub, ec)) {
        ++loose_files;
        continue;
      }
      if (find_invalid_utf8(name) != std::string::npos) {
        throw DatasetError(sub.string() + ": the folder name is not valid UTF-8 (rename it; "
                           "captions, logs and the job's messages are UTF-8)");
      }
      SubsetConfig s = dc.folder_defaults;
      s.image_dir = sub.string();
      s.is_reg = is_reg;
      s.origin = sub.string();
      if (!parse_subset_name(name, &s.num_repeats, &s.class_tokens)) {
        ds.warnings.push_back(sub.string() + ": ignored, the folder name has no repeat count "
                              "(expected <num_repeats>_<class tokens>, e.g. 10_sks dog)");
        continue;
      }
      if (s.num_repeats < 1) {
        ds.warnings.push_back(sub.string() + ": ignored, num_repeats is " +
                              std::to_string(s.num_repeats) + " (expected an integer >= 1)");
        continue;
      }
      s.has_class_tokens = true;
      if (s.class_tokens.empty()) {
        ds.warnings.push_back(sub.string() + ": no class tokens after the repeat count; images "
                              "without a caption file get an empty caption");
      }
      out.push_back(std::move(s));
    }
    if (loose_files > 0) {
      ds.warnings.push_back(std::string(role) + " '" + dir + "': " +
                            std::to_string(loose_files) +
                            " file(s) directly in the folder are ignored (only "
                            "<num_repeats>_<class tokens> sub-folders are read)");
    }
    return out;
  }

  // Lists one subset's images and captions into `pending`.
  void list_subset(SubsetConfig config, int dataset_index) {
    std::error_code ec;
    const fs::path dir = fs::weakly_canonical(fs::absolute(config.image_dir), ec);
    if (!fs::is_directory(dir, ec)) {
      throw DatasetError((config.origin.empty() ? "" : config.origin + ": ") + "image_dir '" +
                         config.image_dir + "': " +
                         (fs::exists(dir, ec) ? "not a directory" : "no such directory") +
                         " (expected a folder of images)");
    }
    SubsetInfo info;
    info.name = dir.filename().string();
    info.image_dir = dir.string();
    info.dataset_index = dataset_index;
    const int subset_index = static_cast<int>(ds.subsets.size());
    std::map<std::string, std::string> by_stem;  // stem -> first file with it
    for (const fs::path& file : sorted_entries(dir)) {
      const std::string filename = file.filename().string();
      if (!fs::is_regular_file(file, ec)) continue;
      if (!is_image_name(filename)) {
        if (is_undecoded_image_name(filename)) undecoded_images.push_back(file.string());
        continue;
      }
      const std::string stem = file.stem().string();
      auto [it, inserted] = by_stem.emplace(stem, file.string());
      if (!inserted) {
        same_stem.push_back(it->second + " and " + file.string() + ": same name stem '" + stem +
                            "' (they would share a caption file)");
        continue;
      }
      PendingImage p;
      ImageRecord& rec = p.record;
      rec.path = file.string();
      rec.dataset_index = dataset_index;
      rec.subset_index = subset_index;
      rec.is_reg = config.is_reg;
      rec.num_repeats = config.num_repeats;
      if (find_invalid_utf8(filename) != std::string::npos) {
        // Paths travel to the workers in protobuf strings, which must be UTF-8.
        p.error = rec.path + ": the file name is not valid UTF-8 (rename it)";
        pending.push_back(std::move(p));
        continue;
      }
      const std::string caption_path = find_caption_file(file, config.caption_extension);
      if (!caption_path.empty()) {
        bool empty = false;
        int extra_lines = 0;
        try {
          rec.caption = read_caption_file(caption_path, &empty, &extra_lines);
        } catch (const DatasetError& e) {  // listed with the bad images, all at once
          p.error = e.what();
          pending.push_back(std::move(p));
          continue;
        }
        if (empty) {
          // As a missing caption file: the subset's class tokens (counted in one warning).
          empty_captions.push_back(caption_path);
          rec.caption = config.class_tokens;
        } else if (extra_lines > 0) {
          multi_line_captions.push_back(caption_path + " (" + std::to_string(extra_lines + 1) +
                                        " non-empty lines)");
        }
      } else {
        rec.caption = config.class_tokens;
        if (!config.has_class_tokens) {
          ds.warnings.push_back(rec.path + ": no caption file (" + config.caption_extension +
                                ") and no class_tokens; the caption is empty");
        }
      }
      if (!config.caption.is_random()) {
        // A fixed prefix/suffix is part of every epoch's caption: put it in the base caption
        // now, so workers cache its text-encoder output (random captions get it when planned).
        std::mt19937_64 unused_rng(0);
        rec.caption = process_caption(rec.caption, config.caption, 1, unused_rng);
      }
      pending.push_back(std::move(p));
    }
    info.config = std::move(config);
    ds.subsets.push_back(std::move(info));
  }

  // Reads, hashes and decodes every pending image on `threads` threads, then picks buckets.
  void decode_all() {
    int threads = options.threads > 0 ? options.threads
                                      : static_cast<int>(std::thread::hardware_concurrency());
    // Each thread holds one decoded image at a time (up to max_image_pixels * 3 bytes).
    threads = std::max(1, std::min({threads, kMaxScanThreads, static_cast<int>(pending.size())}));
    std::atomic<std::size_t> next{0};
    auto work = [&] {
      for (std::size_t i = next++; i < pending.size(); i = next++) {
        PendingImage& p = pending[i];
        if (!p.error.empty()) continue;  // failed at listing (caption, name)
        ImageRecord& rec = p.record;
        try {
          const std::vector<std::uint8_t> bytes = read_file_bytes(rec.path);
          rec.content_sha256 = sha256_hex(bytes.data(), bytes.size());
          DecodeOptions decode = options.decode;
          decode.keep_alpha = false;  // only whether there is alpha matters here
          const DecodedImage img = decode_image(rec.path, bytes, decode);
          rec.width = img.width;
          rec.height = img.height;
          rec.has_alpha = img.source_has_alpha;
          if (!img.profile_warnings.empty()) p.profile_warning = img.profile_warnings.front();
          rec.bucket = managers[rec.dataset_index].select(rec.width, rec.height);
        } catch (const std::exception& e) {
          p.error = e.what();
        }
      }
    };
    std::vector<std::thread> pool;
    try {
      for (int t = 1; t < threads; ++t) pool.emplace_back(work);
    } catch (const std::system_error&) {
      // Fewer threads than asked (a process limit): the ones started and this one finish it.
    }
    work();
    for (auto& t : pool) t.join();
  }

  std::string same_stem_message() const {
    std::string msg = std::to_string(same_stem.size()) +
                      " pair(s) of images share a name stem in one folder; rename or remove one "
                      "of each:";
    for (const auto& s : same_stem) msg += "\n  " + s;
    return msg;
  }

  // One warning for every PNG whose colour profile libpng warned about (decoded without it),
  // instead of libpng's line per file and decode on stderr.
  void warn_profiles() {
    std::vector<std::string> files;
    for (const PendingImage& p : pending) {
      if (!p.profile_warning.empty())
        files.push_back(p.record.path + " (" + p.profile_warning + ")");
    }
    if (files.empty()) return;
    ds.warnings.push_back(file_list_warning(
        std::to_string(files.size()) +
            " PNG file(s) have a colour profile (iCCP) libpng warns about; profiles are "
            "ignored, as OpenCV and kohya ignore them:",
        files));
  }

  // One counted warning each for undecoded image formats, empty and multi-line caption files.
  void summarize_files() {
    const std::pair<const std::vector<std::string>*, const char*> kinds[] = {
        {&undecoded_images,
         " file(s) in a format lorafleet does not decode are not used (it reads png, jpg, jpeg, "
         "webp and bmp; convert them to train on them):"},
        {&empty_captions,
         " caption file(s) are empty; those images get their subset's class tokens, as without "
         "a caption file:"},
        {&multi_line_captions,
         " caption file(s) have more than one non-empty line; only the first is used:"},
    };
    for (const auto& [files, what] : kinds) {
      if (!files->empty()) {
        ds.warnings.push_back(file_list_warning(std::to_string(files->size()) + what, *files));
      }
    }
  }

  // Keeps the good images (in listing order), lists or throws for the bad ones, and counts.
  void finish() {
    warn_profiles();
    summarize_files();
    std::vector<std::string> bad;
    for (PendingImage& p : pending) {
      if (!p.error.empty()) {
        // Decoder messages already start with the path; bucket errors do not.
        const std::string& msg = p.error;
        const std::string full = msg.compare(0, p.record.path.size(), p.record.path) == 0
                                     ? msg
                                     : p.record.path + ": " + msg;
        bad.push_back(full);
        ds.bad_images.push_back({p.record.path, full});
        continue;
      }
      p.record.index = static_cast<int>(ds.images.size());
      ds.images.push_back(std::move(p.record));
    }
    if (!bad.empty()) {
      if (options.on_bad_image != "skip") {
        std::string msg = std::to_string(bad.size()) + " image(s) cannot be used:";
        for (const auto& b : bad) msg += "\n  " + b;
        msg += "\nfix or remove them, or set dataset.on_bad_image: skip to train without them";
        if (!same_stem.empty()) msg += "\n" + same_stem_message();
        throw DatasetError(msg);
      }
      for (const auto& b : bad) ds.warnings.push_back("skipped (on_bad_image: skip): " + b);
    }
    if (!same_stem.empty()) throw DatasetError(same_stem_message());
    hold_out_validation_images(ds, options.datasets, options.validation_seed);
    for (const ImageRecord& img : ds.images) {
      SubsetInfo& s = ds.subsets[img.subset_index];
      if (img.is_validation) {
        ++s.validation_count;
        ++ds.datasets[s.dataset_index].num_validation_images;
        ++ds.num_validation_images;
      } else {
        ++s.image_count;
      }
    }
    for (const SubsetInfo& s : ds.subsets) {
      if (s.image_count == 0) {
        ds.warnings.push_back(s.image_dir + ": no usable images (expected png, jpg, jpeg, webp "
                              "or bmp files)");
      }
      const std::int64_t samples = static_cast<std::int64_t>(s.config.num_repeats) * s.image_count;
      DatasetInfo& d = ds.datasets[s.dataset_index];
      (s.config.is_reg ? d.num_reg_samples_raw : d.num_train_samples) += samples;
      (s.config.is_reg ? ds.num_reg_samples_raw : ds.num_train_samples) += samples;
    }
  }
};

}  // namespace

Dataset scan_dataset(const ScanOptions& options) {
  if (options.datasets.empty()) {
    throw DatasetError(std::string("no dataset configured; ") + kLayoutHint);
  }
  if (options.on_bad_image != "error" && options.on_bad_image != "skip") {
    throw DatasetError("dataset.on_bad_image '" + options.on_bad_image +
                       "': expected error or skip");
  }
  Scanner sc{options, {}, {}, {}, {}, {}, {}, {}};
  for (std::size_t d = 0; d < options.datasets.size(); ++d) {
    const DatasetConfig& dc = options.datasets[d];
    const std::string where =
        "dataset " + std::to_string(d + 1) + (dc.origin.empty() ? "" : " (" + dc.origin + ")");
    try {
      sc.managers.emplace_back(dc.buckets);
    } catch (const std::invalid_argument& e) {
      throw DatasetError(where + ": bucket options: " + e.what());
    }
    for (const std::string& w : sc.managers.back().warnings()) {
      sc.ds.warnings.push_back(where + ": " + w);
    }
    DatasetInfo info;
    info.buckets = sc.managers.back().options();
    info.batch_size = dc.batch_size;
    info.predefined_buckets = sc.managers.back().predefined();
    sc.ds.datasets.push_back(std::move(info));

    std::vector<SubsetConfig> subsets = dc.subsets;
    if (!dc.train_data_dir.empty()) {
      for (auto& s : sc.folder_subsets(dc.train_data_dir, false, dc)) subsets.push_back(s);
    }
    if (!dc.reg_data_dir.empty()) {
      for (auto& s : sc.folder_subsets(dc.reg_data_dir, true, dc)) subsets.push_back(s);
    }
    std::vector<std::string> seen;  // kohya: a repeated image_dir in one dataset is ignored
    for (SubsetConfig& s : subsets) {
      std::error_code ec;
      const std::string dir = fs::weakly_canonical(fs::absolute(s.image_dir), ec).string();
      if (std::find(seen.begin(), seen.end(), dir) != seen.end()) {
        sc.ds.warnings.push_back(where + ": image_dir '" + s.image_dir +
                                 "' is the folder of an earlier subset; this subset is ignored "
                                 "(kohya ignores repeated image_dir too)");
        continue;
      }
      seen.push_back(dir);
      sc.list_subset(std::move(s), static_cast<int>(d));
    }
  }
  sc.decode_all();
  sc.finish();
  Dataset& ds = sc.ds;
  for (std::size_t d = 0; d < ds.datasets.size(); ++d) {
    if (ds.datasets[d].num_reg_samples_raw > 0 && ds.datasets[d].num_train_samples == 0 &&
        ds.num_train_samples > 0) {
      ds.warnings.push_back(
          "dataset " + std::to_string(d + 1) +
          " has regularization images but no training images, so they are never used: reg "
          "images are balanced against the training images of their own dataset (as kohya); "
          "put the is_reg subsets in the same dataset as the images they regularize");
    }
  }
  if (ds.num_train_samples == 0) {
    std::string dirs;
    for (const SubsetInfo& s : ds.subsets) {
      if (!s.config.is_reg) dirs += (dirs.empty() ? "" : ", ") + s.image_dir;
    }
    for (const DatasetConfig& dc : options.datasets) {
      if (!dc.train_data_dir.empty() && dirs.find(dc.train_data_dir) == std::string::npos) {
        dirs += (dirs.empty() ? "" : ", ") + dc.train_data_dir;
      }
    }
    std::string msg = "no training images found" + (dirs.empty() ? "" : " in " + dirs);
    if (ds.num_reg_samples_raw > 0) {
      msg += " (only regularization subsets hold images: is_reg subsets regularize the training "
             "images of their own dataset)";
    }
    msg += "; " + std::string(kLayoutHint);
    if (!ds.warnings.empty()) {
      msg += "\nwhat the scan noticed:";
      for (const std::string& w : ds.warnings) msg += "\n  " + w;
    }
    throw DatasetError(msg);
  }
  return std::move(sc.ds);
}

}  // namespace lf
