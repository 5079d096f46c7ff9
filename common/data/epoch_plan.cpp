// Epoch plans: kohya's sample list per dataset (train images x num_repeats plus the reg samples of
// DreamBoothDataset.__init__, or of the randomised / rotating selections modelled on sd-scripts
// PR #2096), grouped by (dataset, bucket) and shuffled with a fully specified RNG (SplitMix64 ->
// mt19937_64 -> own Fisher-Yates), so every machine builds identical plans.
//
// RNG streams of one epoch, all std::mt19937_64 seeded with SplitMix64-mixed values:
//   E            = mix(seed + (epoch + 1) * gamma)             the epoch seed
//   order stream = mt19937_64(E)                               group and batch-order shuffles
//   reg stream d = mt19937_64(sub_seed(E, kRegDomain, d))      reg_selection "random", dataset d
//   sample p     = mt19937_64(sub_seed(E, kSampleDomain, p))   crop/flip/caption of sample p
// with sub_seed(E, domain, i) = mix(mix(E ^ domain) + (i + 1) * gamma). The order stream is the
// single stream of the one-dataset plans before multiple datasets existed, so their orders are
// unchanged.
#include "common/data/epoch_plan.h"

#include <cstring>

#include "common/io/sha256.h"

#include <algorithm>
#include <map>
#include <random>
#include <set>
#include <stdexcept>
#include <utility>

#include "common/data/caption.h"
#include "common/data/plan_rng.h"

namespace lf {
namespace {

// Domain tags keep the derived streams apart from each other and from the order stream
// (ASCII "reg-sel" and "sample" in the high bytes).
constexpr std::uint64_t kRegDomain = 0x7265672D73656C00ULL;
constexpr std::uint64_t kSampleDomain = 0x73616D706C650000ULL;

// The epoch's RNG seed is output number `epoch` (0-based) of a SplitMix64 generator seeded with
// `seed`: mix(seed + (epoch + 1) * gamma). Neighbouring (seed, epoch) pairs give unrelated seeds.
std::uint64_t epoch_rng_seed(std::uint64_t seed, int epoch) {
  return splitmix64_mix(seed + (static_cast<std::uint64_t>(epoch) + 1) * kGoldenGamma);
}

// Seed of stream `index` of a domain within the epoch: output `index` of a SplitMix64 generator
// seeded with the mixed (epoch seed ^ domain).
std::uint64_t sub_seed(std::uint64_t epoch_seed, std::uint64_t domain, std::uint64_t index) {
  return splitmix64_mix(splitmix64_mix(epoch_seed ^ domain) + (index + 1) * kGoldenGamma);
}

// (a * b) mod n without overflow for any non-negative a, b and n >= 1 (double-and-add).
std::int64_t mul_mod(std::int64_t a, std::int64_t b, std::int64_t n) {
  std::uint64_t x = static_cast<std::uint64_t>(a % n);
  std::uint64_t y = static_cast<std::uint64_t>(b % n);
  const std::uint64_t m = static_cast<std::uint64_t>(n);
  std::uint64_t r = 0;
  while (y > 0) {
    if (y & 1) r = (r >= m - x) ? r - (m - x) : r + x;  // r = (r + x) mod m
    x = (x >= m - x) ? x - (m - x) : x + x;             // x = 2x mod m
    y >>= 1;
  }
  return static_cast<std::int64_t>(r);
}

// Indices into Dataset::images of dataset d's reg images, in Dataset::images order.
std::vector<int> reg_images_of(const Dataset& dataset, int d) {
  std::vector<int> out;
  for (const auto& img : dataset.images) {
    if (img.is_reg && img.dataset_index == d) out.push_back(img.index);
  }
  return out;
}

// kohya's rule as image indices in selection order: reg image i repeated counts[i] times.
std::vector<int> select_first(const Dataset& dataset, int d) {
  const std::vector<int> regs = reg_images_of(dataset, d);
  const std::vector<int> counts = kohya_reg_repeats(dataset, d);
  std::vector<int> out;
  for (std::size_t i = 0; i < regs.size(); ++i) out.insert(out.end(), counts[i], regs[i]);
  return out;
}

// The expanded reg list L of dataset d: reg images in Dataset::images order, each num_repeats
// times (PR #2096's index list).
std::vector<int> expanded_reg_list(const Dataset& dataset, int d) {
  std::vector<int> out;
  for (const int i : reg_images_of(dataset, d)) {
    out.insert(out.end(), std::max(0, dataset.images[i].num_repeats), i);
  }
  return out;
}

// "random": R entries as whole passes over a fresh shuffle of L, then the first entries of one
// more fresh shuffle; each image thus appears at most ceil(R / |L|) times per copy in L.
std::vector<int> select_random(const std::vector<int>& list, std::int64_t r,
                               std::mt19937_64& rng) {
  std::vector<int> out;
  if (list.empty()) return out;
  out.reserve(static_cast<std::size_t>(r));
  while (static_cast<std::int64_t>(out.size()) < r) {
    std::vector<int> pass = list;  // every pass shuffles L from its original order
    fisher_yates(pass, rng);
    const std::size_t take = static_cast<std::size_t>(
        std::min<std::int64_t>(r - static_cast<std::int64_t>(out.size()),
                               static_cast<std::int64_t>(pass.size())));
    out.insert(out.end(), pass.begin(), pass.begin() + static_cast<std::ptrdiff_t>(take));
  }
  return out;
}

void check_inputs(const Dataset& dataset, const PlanOptions& options, int epoch) {
  if (options.world_size < 1 || epoch < 0) {
    throw std::invalid_argument("build_epoch_plan: expected world_size >= 1 and epoch >= 0, got " +
                                std::to_string(options.world_size) + " and " +
                                std::to_string(epoch));
  }
  if (options.reg_selection != "first" && options.reg_selection != "random" &&
      options.reg_selection != "rotate") {
    throw std::invalid_argument("build_epoch_plan: unknown reg_selection '" +
                                options.reg_selection + "' (expected first, random or rotate)");
  }
  const int n_datasets = static_cast<int>(dataset.datasets.size());
  for (int d = 0; d < n_datasets; ++d) {
    if (dataset.datasets[d].batch_size < 1) {
      throw std::invalid_argument("build_epoch_plan: dataset " + std::to_string(d) +
                                  " has batch_size " +
                                  std::to_string(dataset.datasets[d].batch_size) +
                                  " (expected >= 1)");
    }
  }
  for (std::size_t i = 0; i < dataset.images.size(); ++i) {
    const ImageRecord& img = dataset.images[i];
    if (img.index != static_cast<int>(i)) {
      throw std::invalid_argument("build_epoch_plan: image " + img.path + " has index " +
                                  std::to_string(img.index) + " at position " +
                                  std::to_string(i) + " (expected equal)");
    }
    if (img.dataset_index < 0 || img.dataset_index >= n_datasets) {
      throw std::invalid_argument("build_epoch_plan: image " + img.path + " has dataset_index " +
                                  std::to_string(img.dataset_index) + " (expected [0, " +
                                  std::to_string(n_datasets) + "))");
    }
    if (img.subset_index < 0 || img.subset_index >= static_cast<int>(dataset.subsets.size())) {
      throw std::invalid_argument("build_epoch_plan: image " + img.path + " has subset_index " +
                                  std::to_string(img.subset_index) + " (expected [0, " +
                                  std::to_string(dataset.subsets.size()) + "))");
    }
  }
}

// The per-sample draws, in this order, from the sample's own stream (kohya __getitem__ order:
// random crop while loading — width first, then height — then flip_aug, then process_caption):
//   random_crop: crop_left = bounded(trim_w + 1), crop_top = bounded(trim_h + 1);
//   flip_aug:    flip = uniform01() < 0.5;
//   caption:     process_caption(caption, options, epoch + 1, stream) when the subset's caption
//                options are random or carry a prefix/suffix.
// A disabled option draws nothing.
// A sample whose subset draws nothing gets no stream at all (seeding mt19937_64 is the costly
// part of planning large datasets).
void draw_sample(const Dataset& dataset, int epoch, std::uint64_t stream_seed, PlanSample* s) {
  const ImageRecord& img = dataset.images[s->image_index];
  const SubsetConfig& cfg = dataset.subsets[img.subset_index].config;
  const CaptionOptions& co = cfg.caption;
  const bool plan_caption =
      co.is_random();  // fixed prefixes/suffixes are already in the scanned caption
  if (!cfg.random_crop && !cfg.flip_aug && !plan_caption) return;
  std::mt19937_64 rng(stream_seed);
  if (cfg.random_crop) {
    const int trim_w = img.bucket.resized_width - img.bucket.bucket.width;
    const int trim_h = img.bucket.resized_height - img.bucket.bucket.height;
    if (trim_w < 0 || trim_h < 0) {
      throw std::invalid_argument(
          "build_epoch_plan: image " + img.path + " resizes to " +
          std::to_string(img.bucket.resized_width) + "x" +
          std::to_string(img.bucket.resized_height) + ", smaller than its bucket " +
          std::to_string(img.bucket.bucket.width) + "x" + std::to_string(img.bucket.bucket.height) +
          " (expected the resized size to cover the bucket)");
    }
    s->crop_flip.crop_left = static_cast<int>(bounded(rng, static_cast<std::uint64_t>(trim_w) + 1));
    s->crop_flip.crop_top = static_cast<int>(bounded(rng, static_cast<std::uint64_t>(trim_h) + 1));
  }
  if (cfg.flip_aug) s->crop_flip.flip = uniform01(rng) < 0.5;
  if (plan_caption) {
    s->has_caption = true;
    s->caption = process_caption(img.caption, co, epoch + 1, rng);
  }
}

}  // namespace

std::int64_t EpochPlan::num_samples() const {
  std::int64_t n = 0;
  for (const auto& b : batches) n += static_cast<std::int64_t>(b.samples.size());
  return n;
}

std::vector<int> kohya_reg_repeats(const Dataset& dataset, int dataset_index) {
  if (dataset_index < 0 || dataset_index >= static_cast<int>(dataset.datasets.size())) {
    throw std::invalid_argument("kohya_reg_repeats: dataset_index " +
                                std::to_string(dataset_index) + " out of [0, " +
                                std::to_string(dataset.datasets.size()) + ")");
  }
  std::vector<int> reg_repeats;  // the reg images' own num_repeats, in dataset order
  for (const auto& img : dataset.images) {
    if (img.is_reg && img.dataset_index == dataset_index) reg_repeats.push_back(img.num_repeats);
  }
  std::vector<int> counts(reg_repeats.size(), 0);
  if (reg_repeats.empty()) return counts;
  const std::int64_t n_train = dataset.datasets[dataset_index].num_train_samples;
  std::int64_t n = 0;
  // First pass: register each image with its own num_repeats until n >= N_train.
  for (std::size_t i = 0; i < reg_repeats.size() && n < n_train; ++i) {
    counts[i] = reg_repeats[i];
    n += reg_repeats[i];
  }
  // Later passes: +1 to each image in order until N_train.
  while (n < n_train) {
    for (std::size_t i = 0; i < counts.size() && n < n_train; ++i) {
      ++counts[i];
      ++n;
    }
  }
  return counts;
}

EpochPlan build_epoch_plan(const Dataset& dataset, const PlanOptions& options, int epoch) {
  check_inputs(dataset, options, epoch);
  EpochPlan plan;
  plan.epoch = epoch;
  const int n_datasets = static_cast<int>(dataset.datasets.size());
  plan.reg_cursor_begin.assign(n_datasets, 0);
  plan.reg_cursor_end.assign(n_datasets, 0);
  const std::uint64_t epoch_seed = epoch_rng_seed(options.seed, epoch);
  const float reg_weight = static_cast<float>(options.prior_loss_weight);

  // The pre-shuffle sample list: per dataset in order, its train images in Dataset::images
  // order x num_repeats, then its reg samples in selection order. A sample's position here keys
  // its crop/flip/caption stream.
  std::vector<PlanSample> samples;
  for (int d = 0; d < n_datasets; ++d) {
    for (const auto& img : dataset.images) {
      // Held-out validation images are in no epoch plan.
      if (img.is_reg || img.is_validation || img.dataset_index != d) continue;
      PlanSample s;
      s.image_index = img.index;
      samples.insert(samples.end(), std::max(0, img.num_repeats), s);
    }
    const std::int64_t r = dataset.datasets[d].num_train_samples;
    std::vector<int> reg;
    if (options.reg_selection == "first") {
      reg = select_first(dataset, d);
    } else {
      const std::vector<int> list = expanded_reg_list(dataset, d);
      const auto n = static_cast<std::int64_t>(list.size());
      if (options.reg_selection == "random") {
        std::mt19937_64 rng(sub_seed(epoch_seed, kRegDomain, static_cast<std::uint64_t>(d)));
        if (r > 0) reg = select_random(list, r, rng);
      } else if (n > 0 && r > 0) {  // rotate: a pure function of the epoch, so resume is exact
        const std::int64_t c = mul_mod(epoch, r, n);
        reg.reserve(static_cast<std::size_t>(r));
        for (std::int64_t i = 0; i < r; ++i) reg.push_back(list[(c + i % n) % n]);
        plan.reg_cursor_begin[d] = c;
        plan.reg_cursor_end[d] = (c + r % n) % n;
      }
    }
    for (const int i : reg) {
      PlanSample s;
      s.image_index = i;
      s.loss_weight = reg_weight;
      samples.push_back(s);
      plan.reg_indices.push_back(i);
    }
  }

  for (std::size_t p = 0; p < samples.size(); ++p) {
    draw_sample(dataset, epoch, sub_seed(epoch_seed, kSampleDomain, p), &samples[p]);
  }

  const std::set<int> used(plan.reg_indices.begin(), plan.reg_indices.end());
  int n_reg_images = 0;
  for (const auto& img : dataset.images) n_reg_images += img.is_reg ? 1 : 0;
  plan.reg_images_used = static_cast<int>(used.size());
  plan.reg_images_unused = n_reg_images - plan.reg_images_used;

  // Group by (dataset, bucket), sorted; each group keeps pre-shuffle order until shuffled.
  std::map<std::pair<int, BucketReso>, std::vector<PlanSample>> groups;
  for (auto& s : samples) {
    const ImageRecord& img = dataset.images[s.image_index];
    groups[{img.dataset_index, img.bucket.bucket}].push_back(std::move(s));
  }
  std::mt19937_64 rng(epoch_seed);
  for (auto& [key, group] : groups) {
    fisher_yates(group, rng);
    const int batch_size = dataset.datasets[key.first].batch_size;
    const std::size_t global_batch = static_cast<std::size_t>(options.world_size) * batch_size;
    for (std::size_t begin = 0; begin < group.size(); begin += global_batch) {
      const std::size_t end = std::min(group.size(), begin + global_batch);
      GlobalBatch batch;
      batch.dataset_index = key.first;
      batch.bucket = key.second;
      batch.batch_size = batch_size;
      const auto first = group.begin() + static_cast<std::ptrdiff_t>(begin);
      const auto last = group.begin() + static_cast<std::ptrdiff_t>(end);
      batch.samples.assign(std::make_move_iterator(first), std::make_move_iterator(last));
      plan.batches.push_back(std::move(batch));
    }
  }
  // All datasets' batches shuffled together, as kohya's concatenated DatasetGroup is sampled.
  fisher_yates(plan.batches, rng);
  return plan;
}

std::string epoch_plan_digest(const EpochPlan& plan) {
  // One line per batch and per sample; the caption is length-prefixed so no text can imitate
  // another field.
  std::string text = "lorafleet-epoch-plan/1 epoch " + std::to_string(plan.epoch) + "\n";
  for (const GlobalBatch& b : plan.batches) {
    text += "batch " + std::to_string(b.dataset_index) + " " + std::to_string(b.bucket.width) +
            "x" + std::to_string(b.bucket.height) + " " + std::to_string(b.batch_size) + "\n";
    for (const PlanSample& s : b.samples) {
      std::uint32_t weight_bits = 0;
      std::memcpy(&weight_bits, &s.loss_weight, sizeof weight_bits);
      text += std::to_string(s.image_index) + " " + std::to_string(weight_bits) + " " +
              std::to_string(s.crop_flip.crop_left) + " " + std::to_string(s.crop_flip.crop_top) +
              " " + (s.crop_flip.flip ? "1" : "0") + " " + (s.has_caption ? "1" : "0") + " " +
              std::to_string(s.caption.size()) + ":" + s.caption + "\n";
    }
  }
  text += "reg";
  for (int i : plan.reg_indices) text += " " + std::to_string(i);
  text += "\ncursors";
  for (std::size_t d = 0; d < plan.reg_cursor_begin.size(); ++d) {
    text += " " + std::to_string(plan.reg_cursor_begin[d]) + "-" +
            std::to_string(d < plan.reg_cursor_end.size() ? plan.reg_cursor_end[d] : 0);
  }
  return sha256_hex(text);
}

std::string format_plan_lineage(const std::vector<PlanSegment>& lineage) {
  std::string out;
  for (const PlanSegment& seg : lineage) {
    out += (out.empty() ? "" : ",") + std::to_string(seg.world_size) + ":" +
           std::to_string(seg.batches);
  }
  return out;
}

std::vector<PlanSegment> parse_plan_lineage(const std::string& text) {
  std::vector<PlanSegment> out;
  std::size_t at = 0;
  while (at < text.size()) {
    std::size_t end = text.find(',', at);
    if (end == std::string::npos) end = text.size();
    const std::string item = text.substr(at, end - at);
    const std::size_t colon = item.find(':');
    PlanSegment seg;
    std::size_t used_ws = 0, used_b = 0;
    bool ok = colon != std::string::npos && colon > 0 && colon + 1 < item.size();
    if (ok) {
      try {
        seg.world_size = std::stoi(item.substr(0, colon), &used_ws);
        seg.batches = std::stoll(item.substr(colon + 1), &used_b);
      } catch (const std::exception&) {
        ok = false;
      }
    }
    if (!ok || used_ws != colon || used_b != item.size() - colon - 1 || seg.world_size < 1 ||
        seg.batches < 0) {
      throw std::invalid_argument("plan lineage '" + text +
                                  "' is not a list of world_size:batches (e.g. 2:3,1:4)");
    }
    out.push_back(seg);
    at = end + 1;
    if (end + 1 == text.size()) {
      throw std::invalid_argument("plan lineage '" + text + "' ends with a comma");
    }
  }
  return out;
}

EpochPlan continue_epoch_plan(const EpochPlan& plan, std::int64_t consumed_batches,
                              int new_world_size) {
  const auto n = static_cast<std::int64_t>(plan.batches.size());
  if (new_world_size < 1 || consumed_batches < 0 || consumed_batches > n) {
    throw std::invalid_argument("continue_epoch_plan: expected new_world_size >= 1 and "
                                "consumed_batches in [0, " + std::to_string(n) + "], got " +
                                std::to_string(new_world_size) + " and " +
                                std::to_string(consumed_batches));
  }
  EpochPlan out;
  out.epoch = plan.epoch;
  out.reg_indices = plan.reg_indices;
  out.reg_images_used = plan.reg_images_used;
  out.reg_images_unused = plan.reg_images_unused;
  out.reg_cursor_begin = plan.reg_cursor_begin;
  out.reg_cursor_end = plan.reg_cursor_end;
  out.batches.assign(plan.batches.begin(), plan.batches.begin() + consumed_batches);
  // Remaining samples per (dataset, bucket), in plan order, with their position among all
  // remaining samples (which orders the new batches).
  struct Group {
    int batch_size = 1;
    std::vector<std::pair<std::int64_t, const PlanSample*>> samples;
  };
  std::map<std::pair<int, BucketReso>, Group> groups;
  std::int64_t position = 0;
  for (std::int64_t k = consumed_batches; k < n; ++k) {
    const GlobalBatch& b = plan.batches[k];
    Group& g = groups[{b.dataset_index, b.bucket}];
    g.batch_size = b.batch_size;
    for (const PlanSample& s : b.samples) g.samples.emplace_back(position++, &s);
  }
  std::vector<std::pair<std::int64_t, GlobalBatch>> fresh;  // (first sample's position, batch)
  for (const auto& [key, g] : groups) {
    const std::size_t global = static_cast<std::size_t>(new_world_size) *
                               static_cast<std::size_t>(std::max(1, g.batch_size));
    for (std::size_t begin = 0; begin < g.samples.size(); begin += global) {
      const std::size_t end = std::min(g.samples.size(), begin + global);
      GlobalBatch batch;
      batch.dataset_index = key.first;
      batch.bucket = key.second;
      batch.batch_size = g.batch_size;
      for (std::size_t i = begin; i < end; ++i) batch.samples.push_back(*g.samples[i].second);
      fresh.emplace_back(g.samples[begin].first, std::move(batch));
    }
  }
  // Positions are distinct, so the order is total.
  std::sort(fresh.begin(), fresh.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  for (auto& [pos, batch] : fresh) out.batches.push_back(std::move(batch));
  return out;
}

EpochPlan build_continued_epoch_plan(const Dataset& dataset, const PlanOptions& options,
                                     int epoch, const std::vector<PlanSegment>& lineage) {
  if (lineage.empty()) return build_epoch_plan(dataset, options, epoch);
  PlanOptions first = options;
  first.world_size = lineage[0].world_size;
  EpochPlan plan = build_epoch_plan(dataset, first, epoch);
  std::int64_t consumed = 0;
  for (std::size_t i = 1; i < lineage.size(); ++i) {
    consumed += lineage[i - 1].batches;
    // The same world size again: that group was served the same plan (see the header).
    if (lineage[i].world_size == lineage[i - 1].world_size) {
      if (consumed < 0 || consumed > static_cast<std::int64_t>(plan.batches.size())) {
        throw std::invalid_argument("build_continued_epoch_plan: the lineage consumes " +
                                    std::to_string(consumed) + " batches of a plan of " +
                                    std::to_string(plan.batches.size()));
      }
      continue;
    }
    plan = continue_epoch_plan(plan, consumed, lineage[i].world_size);
  }
  return plan;
}

std::pair<int, int> rank_slice(const GlobalBatch& batch, int rank) {
  if (rank < 0 || batch.batch_size < 1) {
    throw std::invalid_argument("rank_slice: expected rank >= 0 and batch_size >= 1, got " +
                                std::to_string(rank) + ", " + std::to_string(batch.batch_size));
  }
  const auto n = static_cast<std::int64_t>(batch.samples.size());
  const std::int64_t bs = batch.batch_size;
  const std::int64_t begin = std::min<std::int64_t>(static_cast<std::int64_t>(rank) * bs, n);
  const std::int64_t end = std::min<std::int64_t>((static_cast<std::int64_t>(rank) + 1) * bs, n);
  return {static_cast<int>(begin), static_cast<int>(end)};
}

}  // namespace lf
