// Scan of kohya DreamBooth folders (generate_dreambooth_subsets_config_by_subdirs, glob_images,
// read_caption in sd-scripts): subsets "<num_repeats>_<class tokens>", images sorted by name,
// same-stem caption files, every image decoded once so bad files fail before training starts.
// Unlike kohya, subsets are walked in sorted name order (kohya uses iterdir order).
#include "common/data/dataset.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "common/data/image_ops.h"

namespace lf {
namespace {

namespace fs = std::filesystem;

const char* const kLayoutHint =
    "expected the kohya DreamBooth layout <dir>/<num_repeats>_<class tokens>/<image>.png, "
    "e.g. <dir>/10_sks dog/001.png with optional captions <dir>/10_sks dog/001.txt";

std::string lower(std::string s) {
  for (auto& ch : s) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return s;
}

bool is_image_name(const std::string& filename) {
  if (filename.empty() || filename[0] == '.') return false;  // hidden files, macOS "._*"
  const std::string ext = lower(fs::path(filename).extension().string());
  return ext == ".png" || ext == ".jpg" || ext == ".jpeg" || ext == ".webp" || ext == ".bmp";
}

// "<int>_<rest>" as kohya extract_dreambooth_params: split at the first '_'; a name that is
// only an integer has empty class tokens. Returns false when there is no integer prefix.
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

// Caption text: UTF-8 BOM stripped, CRLF -> LF, surrounding whitespace trimmed.
std::string read_caption_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw DatasetError(path.string() + ": cannot read caption file");
  std::ostringstream ss;
  ss << in.rdbuf();
  std::string text = ss.str();
  if (text.compare(0, 3, "\xEF\xBB\xBF") == 0) text.erase(0, 3);
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '\r' && i + 1 < text.size() && text[i + 1] == '\n') continue;
    out.push_back(text[i]);
  }
  const char* ws = " \t\r\n\f\v";
  const std::size_t b = out.find_first_not_of(ws);
  if (b == std::string::npos) {
    throw DatasetError(path.string() +
                       ": caption file is empty (expected the caption text; delete the file to "
                       "use the folder's class tokens)");
  }
  const std::size_t e = out.find_last_not_of(ws);
  return out.substr(b, e - b + 1);
}

// kohya read_caption: "<stem><ext>", then, for stems with >= 5 '_' tokens (face-crop names
// "<name>_cx_cy_w_h"), the stem without its last four tokens. Empty result: no caption file.
std::string find_caption(const fs::path& image, const std::string& caption_extension,
                         bool* found) {
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
    if (fs::is_regular_file(cap, ec)) {
      *found = true;
      return read_caption_file(cap);
    }
  }
  *found = false;
  return "";
}

std::vector<fs::path> sorted_entries(const fs::path& dir) {
  std::vector<fs::path> out;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    out.push_back(it->path());
  }
  if (ec) throw DatasetError(dir.string() + ": cannot list folder: " + ec.message());
  std::sort(out.begin(), out.end(),
            [](const fs::path& a, const fs::path& b) { return a.filename() < b.filename(); });
  return out;
}

// Scans one parent folder (train or reg) and appends its subsets and images.
void scan_parent(const std::string& dir, bool is_reg, const ScanOptions& options,
                 const BucketManager& buckets, Dataset* ds) {
  const char* role = is_reg ? "reg_data_dir" : "train_data_dir";
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    throw DatasetError(std::string(role) + " '" + dir + "': " +
                       (fs::exists(dir, ec) ? "not a directory" : "no such directory") + "; " +
                       kLayoutHint);
  }
  const fs::path parent = fs::absolute(fs::path(dir)).lexically_normal();
  int loose_images = 0;
  for (const fs::path& sub : sorted_entries(parent)) {
    const std::string name = sub.filename().string();
    if (!fs::is_directory(sub, ec)) {
      if (is_image_name(name)) ++loose_images;
      continue;
    }
    if (name.empty() || name[0] == '.') continue;
    SubsetInfo subset;
    subset.name = name;
    subset.is_reg = is_reg;
    if (!parse_subset_name(name, &subset.num_repeats, &subset.class_tokens)) {
      ds->warnings.push_back(sub.string() + ": ignored, the folder name has no repeat count "
                             "(expected <num_repeats>_<class tokens>, e.g. 10_sks dog)");
      continue;
    }
    if (subset.num_repeats < 1) {
      ds->warnings.push_back(sub.string() + ": ignored, num_repeats is 0 (expected >= 1)");
      continue;
    }
    for (const fs::path& file : sorted_entries(sub)) {
      if (!is_image_name(file.filename().string()) || !fs::is_regular_file(file, ec)) continue;
      ImageRecord rec;
      rec.index = static_cast<int>(ds->images.size());
      rec.path = file.string();
      rec.subset = name;
      rec.is_reg = is_reg;
      rec.num_repeats = subset.num_repeats;
      bool has_caption = false;
      rec.caption = find_caption(file, options.caption_extension, &has_caption);
      if (!has_caption) {
        rec.caption = subset.class_tokens;
        if (rec.caption.empty()) {
          ds->warnings.push_back(rec.path + ": no caption file and no class tokens in the folder "
                                 "name; the caption is empty");
        }
      }
      const RgbImage img = load_rgb_image(rec.path);
      rec.width = img.width;
      rec.height = img.height;
      try {
        rec.bucket = buckets.select(rec.width, rec.height);
      } catch (const std::invalid_argument& e) {
        throw DatasetError(rec.path + ": " + e.what());
      }
      ds->images.push_back(std::move(rec));
      ++subset.image_count;
    }
    if (subset.image_count == 0) {
      ds->warnings.push_back(sub.string() + ": no images (expected png/jpg/jpeg/webp/bmp files)");
    }
    const std::int64_t samples = static_cast<std::int64_t>(subset.num_repeats) *
                                 subset.image_count;
    (is_reg ? ds->num_reg_samples_raw : ds->num_train_samples) += samples;
    ds->subsets.push_back(std::move(subset));
  }
  if (loose_images > 0) {
    ds->warnings.push_back(parent.string() + ": " + std::to_string(loose_images) +
                           " image(s) directly in the folder are ignored; " + kLayoutHint);
  }
}

}  // namespace

Dataset scan_dreambooth_dataset(const ScanOptions& options) {
  if (options.train_data_dir.empty()) {
    throw DatasetError(std::string("train_data_dir is empty; ") + kLayoutHint);
  }
  BucketManager buckets = [&] {
    try {
      return BucketManager(options.buckets);
    } catch (const std::invalid_argument& e) {
      throw DatasetError(std::string("dataset bucket options: ") + e.what());
    }
  }();
  Dataset ds;
  ds.warnings = buckets.warnings();
  scan_parent(options.train_data_dir, false, options, buckets, &ds);
  if (ds.images.empty()) {
    throw DatasetError("train_data_dir '" + options.train_data_dir +
                       "': no training images found; " + kLayoutHint);
  }
  if (!options.reg_data_dir.empty()) {
    const std::size_t before = ds.images.size();
    scan_parent(options.reg_data_dir, true, options, buckets, &ds);
    if (ds.images.size() == before) {
      ds.warnings.push_back("reg_data_dir '" + options.reg_data_dir +
                            "': no regularization images found; training without them");
    }
  }
  ds.predefined_buckets = buckets.predefined();
  return ds;
}

}  // namespace lf
