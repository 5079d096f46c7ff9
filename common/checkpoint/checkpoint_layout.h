// Checkpoint directories without LibTorch: naming, staging, publishing with a commit marker,
// resolving the newest complete checkpoint and pruning. The training position a checkpoint's
// train state records is common/checkpoint/train_position.h. Shared by the workers
// (worker/io/checkpoint.h adds the tensor files) and the coordinator, which must not link torch.
//
//   <output_dir>/checkpoints/step-<global_step, 8 digits>/
//     lora.safetensors          the kohya-format LoRA at that step
//     train_state.safetensors   optimizer state tensors + position metadata (train_position.h)
//     rng/rank-<r>.safetensors  each rank's RNG state
//     COMMITTED                 the commit marker, written last
//
// Write order, so a crash at any point leaves either a complete checkpoint or one that is
// recognisably torn: every file is written into the hidden staging dir .step-XXXXXXXX.tmp with
// write_file_atomic (temp file, fsync, rename, fsync dir); the staging dir is renamed to
// step-XXXXXXXX and the parent fsynced; then COMMITTED is written atomically, last.
// COMMITTED is JSON: {"format":"lorafleet-checkpoint","version":1,"global_step":N,
//   "files":[{"path":"lora.safetensors","size":<bytes>,"sha256":"<64 hex>"},...]}
// listing every other file of the directory (paths relative to it, '/'-separated, sorted).
//
// A checkpoint is complete only when COMMITTED parses, names the directory's step, lists
// lora.safetensors and train_state.safetensors, and every listed file exists with the listed
// size. Everything else is torn: no marker (an interrupted write; also every checkpoint written
// before markers existed, which are deliberately not trusted), a missing or truncated file, an
// unparsable marker, a leftover staging dir. Resolution skips torn directories with a warning.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/io/sha256.h"

namespace lf {

inline constexpr const char* kCheckpointMarkerFile = "COMMITTED";
inline constexpr const char* kCheckpointLoraFile = "lora.safetensors";
inline constexpr const char* kCheckpointStateFile = "train_state.safetensors";

// "step-00000050". Steps of 10^8 and more get more digits (still parsed by step, not by name).
std::string checkpoint_dir_name(std::int64_t global_step);
// The step of a "step-<digits>" name; nullopt for anything else.
std::optional<std::int64_t> checkpoint_step_of(const std::string& dir_name);

// The hidden staging directory root/.step-XXXXXXXX.tmp of `global_step` (every rank writes its
// files there; resolution skips such directories).
std::string staging_dir_path(const std::string& root, std::int64_t global_step);
// Makes an empty staging dir (with rng/) for `global_step` under `root`, removing a torn earlier
// attempt at the same step; returns its path. Run by rank 0 only.
std::string prepare_staging_dir(const std::string& root, std::int64_t global_step);
// Publishes a staging dir whose files are all durable: fsyncs it, renames it to
// root/step-XXXXXXXX (replacing an existing one of the same step), fsyncs root, then writes
// COMMITTED (sizes + sha256 of every file). Returns the checkpoint path. On failure the new
// directory is removed best-effort, a replaced same-step one is put back, and the
// std::runtime_error (naming the file and strerror, e.g. "No space left on device") is rethrown.
// `written` carries the digests the writers computed as they wrote (save_safetensors,
// save_kohya_lora...), by path relative to the checkpoint dir, so those files are not read back
// to be hashed; the others (other ranks' RNG files) are.
using WrittenFiles = std::map<std::string, FileDigest>;
std::string publish_staging_dir(const std::string& staging, const std::string& root,
                                std::int64_t global_step, const WrittenFiles& written = {});
// Removes a staging dir after a failed write; never throws (best-effort cleanup on an error
// path, which must not hide the original error).
void discard_staging_dir(const std::string& staging) noexcept;

// One file of a commit marker.
struct CheckpointFileEntry {
  std::string path;        // relative to the checkpoint dir, e.g. "rng/rank-0.safetensors"
  std::uint64_t size = 0;  // bytes
  std::string sha256;      // 64 lowercase hex
};
struct CheckpointManifest {
  std::int64_t global_step = 0;
  std::vector<CheckpointFileEntry> files;  // sorted by path
};

// Lists every regular file under `dir` (except COMMITTED) with its size and SHA-256 and writes
// dir/COMMITTED atomically. A file in `written` whose size on disk is the written size takes the
// writer's digest (the bytes handed to write(2), which a read-back would get from the page cache
// anyway); every other file is hashed from disk. publish_staging_dir calls it last; exposed for
// tests and tools. Throws std::runtime_error naming the file on I/O errors.
CheckpointManifest write_commit_marker(const std::string& dir, std::int64_t global_step,
                                       const WrittenFiles& written = {});
// Parses dir/COMMITTED. Throws std::runtime_error naming the file and what was expected.
CheckpointManifest read_commit_marker(const std::string& dir);

enum class CheckpointCheck {
  kSizes,         // marker + every listed file exists with its size (cheap: stat only)
  kSizesAndHash,  // also re-hashes every file against the marker's sha256 (reads all bytes)
};
// Why `dir` is not a complete checkpoint ("no COMMITTED marker...", "lora.safetensors is 100
// bytes, COMMITTED lists 124"...), or nullopt when it is complete. Never throws for a torn dir.
std::optional<std::string> checkpoint_torn_reason(const std::string& dir,
                                                  CheckpointCheck check = CheckpointCheck::kSizes);

struct CommittedCheckpoint {
  std::string dir;  // absolute path of root/step-XXXXXXXX
  std::int64_t global_step = 0;
};
// The newest complete checkpoint directly under `root` (<output_dir>/checkpoints); torn
// directories newer than it are skipped with one LF_WARN each naming the directory and the
// reason. nullopt when `root` is missing or holds no complete checkpoint.
std::optional<CommittedCheckpoint> find_latest_committed(const std::string& root);

// Resolves --resume: a checkpoint directory itself (an error naming it and the reason if torn),
// or a folder holding step-* checkpoints directly or under checkpoints/ (the newest complete one
// is taken, see find_latest_committed). Returns an absolute path. Throws std::runtime_error
// naming the path if it does not exist or no complete checkpoint is found.
std::string resolve_checkpoint(const std::string& path);

// Keeps the newest `keep` complete checkpoints under `root` and removes older complete ones, plus
// torn directories and leftover staging dirs older than the newest complete one (they can never
// be resumed from). Torn directories newer than it are left alone. keep <= 0: removes nothing.
void prune_checkpoints(const std::string& root, int keep);

}  // namespace lf
