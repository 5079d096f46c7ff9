// kohya dataset metadata (see header). JSON through nlohmann::json; the tag-frequency cap keeps
// the most frequent tags of all folders together and drops the rest.
#include "common/data/dataset_metadata.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <map>
#include <tuple>
#include <vector>

#include "common/util/py_format.h"

namespace lf {
namespace {

using json = nlohmann::json;

std::string basename_of(const std::string& dir) {
  std::filesystem::path p(dir);
  if (p.filename().empty()) p = p.parent_path();  // "a/b/" -> "b"
  return p.filename().string();
}

std::string strip(const std::string& s) {
  const char* ws = " \t\r\n\f\v";
  const std::size_t b = s.find_first_not_of(ws);
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(ws) - b + 1);
}

// ASCII lower-casing: Python's str.lower() also folds non-ASCII letters, which would need a
// Unicode table; tags in other scripts keep their case here.
std::string lower_ascii(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

using TagCounts = std::map<std::string, std::map<std::string, long>>;  // dir -> tag -> images

TagCounts count_tags(const Dataset& ds, int dataset_index) {
  TagCounts counts;
  for (const ImageRecord& img : ds.images) {
    if (dataset_index >= 0 && img.dataset_index != dataset_index) continue;
    auto& dir = counts[basename_of(ds.subsets.at(img.subset_index).image_dir)];
    std::size_t begin = 0;
    while (begin <= img.caption.size()) {
      std::size_t end = img.caption.find(',', begin);
      if (end == std::string::npos) end = img.caption.size();
      const std::string tag = strip(img.caption.substr(begin, end - begin));
      if (!tag.empty()) ++dir[lower_ascii(tag)];
      begin = end + 1;
    }
  }
  return counts;
}

json to_json(const TagCounts& counts) {
  json out = json::object();
  for (const auto& [dir, tags] : counts) {
    json t = json::object();
    for (const auto& [tag, n] : tags) t[tag] = n;
    out[dir] = std::move(t);
  }
  return out;
}

// The `keep` entries a fair cap keeps, every folder listed: round by round, each folder's next
// most frequent tag (ties by tag), so every folder keeps its top tags and none takes the whole
// budget; within a round the more frequent entries first (then by dir and tag).
TagCounts most_frequent(const TagCounts& counts, std::size_t keep) {
  // (round within its folder, -count, dir, tag)
  std::vector<std::tuple<std::size_t, long, std::string, std::string>> all;
  for (const auto& [dir, tags] : counts) {
    std::vector<std::pair<long, std::string>> ranked;
    for (const auto& [tag, n] : tags) ranked.emplace_back(-n, tag);
    std::sort(ranked.begin(), ranked.end());
    for (std::size_t r = 0; r < ranked.size(); ++r) {
      all.emplace_back(r, ranked[r].first, dir, ranked[r].second);
    }
  }
  std::sort(all.begin(), all.end());
  TagCounts out;
  for (const auto& [dir, tags] : counts) out[dir];
  for (std::size_t i = 0; i < keep && i < all.size(); ++i) {
    out[std::get<2>(all[i])][std::get<3>(all[i])] = -std::get<1>(all[i]);
  }
  return out;
}

std::size_t entries(const TagCounts& counts) {
  std::size_t n = 0;
  for (const auto& [dir, tags] : counts) n += tags.size();
  return n;
}

// Serialized tag frequencies within max_bytes (a binary search over how many of the most
// frequent entries to keep).
json capped_tag_frequency(const TagCounts& counts, std::size_t max_bytes, bool* truncated) {
  if (truncated) *truncated = false;
  json full = to_json(counts);
  if (full.dump().size() <= max_bytes) return full;
  if (truncated) *truncated = true;
  std::size_t lo = 0, hi = entries(counts);  // the answer is in [lo, hi)
  while (lo + 1 < hi) {
    const std::size_t mid = lo + (hi - lo) / 2;
    if (to_json(most_frequent(counts, mid)).dump().size() <= max_bytes) {
      lo = mid;
    } else {
      hi = mid;
    }
  }
  return to_json(most_frequent(counts, lo));
}

}  // namespace

std::string kohya_tag_frequency_json(const Dataset& dataset, int dataset_index,
                                     std::size_t max_bytes, bool* truncated) {
  return capped_tag_frequency(count_tags(dataset, dataset_index), max_bytes, truncated).dump();
}

std::string kohya_bucket_info_json(const Dataset& dataset, const EpochPlan& plan,
                                   int dataset_index) {
  std::map<BucketReso, std::size_t> counts;
  for (const GlobalBatch& batch : plan.batches) {
    if (dataset_index < 0 || batch.dataset_index == dataset_index) {
      counts[batch.bucket] += batch.samples.size();
    }
  }
  double ar_error_sum = 0.0;
  std::size_t images = 0;
  for (const ImageRecord& img : dataset.images) {
    if (dataset_index >= 0 && img.dataset_index != dataset_index) continue;
    ar_error_sum += std::abs(img.bucket.ar_error);
    ++images;
  }
  std::string s = "{\"buckets\": {";
  int i = 0;
  for (const auto& [reso, n] : counts) {
    if (i) s += ", ";
    s += "\"" + std::to_string(i++) + "\": {\"resolution\": [" + std::to_string(reso.width) +
         ", " + std::to_string(reso.height) + "], \"count\": " + std::to_string(n) + "}";
  }
  const double mean = images == 0 ? 0.0 : ar_error_sum / static_cast<double>(images);
  return s + "}, \"mean_img_ar_error\": " + py_float(mean) + "}";
}

std::string kohya_dataset_dirs_json(const Dataset& dataset, bool reg) {
  json out = json::object();
  for (const SubsetInfo& s : dataset.subsets) {
    if (s.config.is_reg != reg) continue;
    std::string name = basename_of(s.image_dir);
    for (int k = 2; out.contains(name); ++k) {
      name = basename_of(s.image_dir) + " (" + std::to_string(k) + ")";
    }
    out[name] = {{"n_repeats", s.config.num_repeats}, {"img_count", s.image_count}};
  }
  return out.dump();
}

std::string kohya_datasets_json(const Dataset& dataset, const EpochPlan& plan) {
  json list = json::array();
  for (std::size_t d = 0; d < dataset.datasets.size(); ++d) {
    const DatasetInfo& info = dataset.datasets[d];
    json subsets = json::array();
    for (const SubsetInfo& s : dataset.subsets) {
      if (s.dataset_index != static_cast<int>(d)) continue;
      const SubsetConfig& c = s.config;
      subsets.push_back({{"img_count", s.image_count},
                         {"num_repeats", c.num_repeats},
                         {"color_aug", false},
                         {"flip_aug", c.flip_aug},
                         {"random_crop", c.random_crop},
                         {"shuffle_caption", c.caption.shuffle_caption},
                         {"keep_tokens", c.caption.keep_tokens},
                         {"keep_tokens_separator", c.caption.keep_tokens_separator},
                         {"caption_prefix", c.caption.caption_prefix},
                         {"caption_suffix", c.caption.caption_suffix},
                         {"image_dir", basename_of(s.image_dir)},
                         {"class_tokens", c.class_tokens},
                         {"is_reg", c.is_reg}});
    }
    const TagCounts counts = count_tags(dataset, static_cast<int>(d));
    list.push_back(
        {{"is_dreambooth", true},
         {"batch_size_per_device", info.batch_size},
         {"num_train_images", info.num_train_samples},
         {"num_reg_images", info.num_reg_samples_raw},
         {"resolution", {info.buckets.resolution_w, info.buckets.resolution_h}},
         {"enable_bucket", info.buckets.enable_bucket},
         {"min_bucket_reso", info.buckets.min_bucket_reso},
         {"max_bucket_reso", info.buckets.max_bucket_reso},
         {"tag_frequency", capped_tag_frequency(counts, kTagFrequencyBudgetBytes, nullptr)},
         {"bucket_info",
          json::parse(kohya_bucket_info_json(dataset, plan, static_cast<int>(d)))},
         {"subsets", subsets}});
  }
  return list.dump();
}

}  // namespace lf
