// Collective checkpoint writing (see header).
#include "worker/train/checkpoint_writer.h"

#include <torch/torch.h>

#include <filesystem>

#include "common/data/dataset_metadata.h"
#include "common/util/log.h"
#include "worker/io/lora_file.h"
#include "worker/train/rng_streams.h"

namespace fs = std::filesystem;

namespace lf {

CheckpointWriter::Written CheckpointWriter::write(const TrainState& state, SaveReason reason,
                                                  const EpochPlan& plan) {
  const int rank = comm.rank();
  const fs::path out_dir(config.output.output_dir);
  const fs::path root = out_dir / "checkpoints";
  const std::string name = checkpoint_dir_name(state.global_step);
  const std::string staging = staging_dir_path(root.string(), state.global_step);

  if (rank == 0) prepare_staging_dir(root.string(), state.global_step);
  comm.barrier();
  // The generator that step `global_step` will draw from, as the resume check expects.
  auto gen = make_noise_generator(job.shared_seed, rank, state.global_step);
  // A failed write (disk full, I/O error) throws naming the file; the staging dir goes, the
  // previous checkpoint stays the newest committed one, and worker_app aborts the job.
  auto discard_on_error = [&](auto&& write) {
    try {
      write();
    } catch (...) {
      discard_staging_dir(staging);
      throw;
    }
  };
  // Digests of what this rank wrote, so COMMITTED does not read the files back to hash them.
  WrittenFiles written_files;
  discard_on_error([&] {
    written_files[rng_state_file(rank)] = save_rng_state(staging, rank, gen.get_state());
  });

  // Schedule-free optimizers save what they evaluate (x), as kohya calls optimizer.eval()
  // before saving, on every rank so the ranks stay identical; training resumes at y.
  struct EvalWeights {
    LoRAOptimizer& optimizer;
    explicit EvalWeights(LoRAOptimizer& o) : optimizer(o) { optimizer.use_eval_weights(); }
    ~EvalWeights() { optimizer.use_train_weights(); }
  } eval_weights(optimizer);
  Written written;
  written.checkpoint_dir = (root / name).string();
  if (rank == 0) {
    LoRATrainingFacts facts;
    facts.session_id = state.session_id;
    facts.training_started_at = state.training_started_at;
    facts.epoch = state.step_in_epoch == 0 ? state.epoch : state.epoch + 1;
    facts.steps = state.global_step;
    facts.max_train_steps = job.max_train_steps;
    facts.num_epochs = job.num_epochs;
    facts.num_batches_per_epoch = static_cast<std::int64_t>(plan.batches.size());
    facts.num_train_images = dataset.num_train_samples;
    facts.num_reg_images = dataset.num_reg_samples_raw;
    facts.num_validation_images = dataset.num_validation_images;
    facts.world_size = comm.world_size();
    facts.family = family;
    facts.v_parameterization = config.model.v_parameterization;
    facts.clip_skip = config.training.clip_skip;
    facts.bucket_info_json = kohya_bucket_info_json(dataset, plan);
    bool capped = false;
    facts.tag_frequency_json =
        kohya_tag_frequency_json(dataset, -1, kTagFrequencyBudgetBytes, &capped);
    if (capped && !tag_cap_logged) {
      LF_WARN("ss_tag_frequency is capped at " << kTagFrequencyBudgetBytes / (1024 * 1024)
                                               << " MiB of JSON: every folder keeps its most "
                                                  "frequent tags, the rarer ones are left out");
      tag_cap_logged = true;
    }
    facts.dataset_dirs_json = kohya_dataset_dirs_json(dataset, /*reg=*/false);
    // The folder form is one dataset read from train_data_dir; anything else is a dataset
    // config (a datasets: list or a kohya TOML), described as kohya's ss_datasets.
    const bool folder_form =
        config.datasets.size() == 1 && !config.datasets[0].train_data_dir.empty();
    if (folder_form) {
      facts.reg_dataset_dirs_json = kohya_dataset_dirs_json(dataset, /*reg=*/true);
    } else {
      facts.datasets_json = kohya_datasets_json(dataset, plan);
    }
    const auto lora_state = lora.state_dict();
    const auto metadata = kohya_lora_metadata(config, facts);
    discard_on_error([&] {
      written_files[kCheckpointLoraFile] =
          save_kohya_lora((fs::path(staging) / kCheckpointLoraFile).string(), lora_state, metadata);
      TrainState to_save = state;
      to_save.optimizer = optimizer.state_dict(param_names);
      to_save.plan_epoch = plan.epoch;
      to_save.plan_digest = epoch_plan_digest(plan);
      written_files[kCheckpointStateFile] = save_train_state(staging, to_save);
    });
    comm.barrier();  // every rank's RNG file is durable
    // Renames the staging dir into place and writes COMMITTED last (cleans up itself on error).
    publish_staging_dir(staging, root.string(), state.global_step, written_files);
    const std::string& stem = config.output.output_name;
    const std::string copy_name = lora_copy_name(stem, reason, state.global_step, state.epoch);
    // The user's file in output.save_precision; the checkpoint's copy above keeps the training
    // dtype, so a resume continues exactly.
    // kohya --no_metadata thins the user's file only; the checkpoint's copy keeps everything.
    save_kohya_lora((out_dir / copy_name).string(),
                    tensors_in_save_precision(lora_state, config.output.save_precision),
                    config.output.no_metadata ? kohya_minimum_metadata(metadata) : metadata);
    prune_checkpoints(root.string(), config.output.keep_last_n_checkpoints);
    written.lora_path = (out_dir / copy_name).string();
    const auto older =
        lora_copy_to_remove(config.training, stem, reason, state.global_step, state.epoch,
                            epoch_save_period(config.training, job.num_epochs));
    std::error_code ec;
    if (older && fs::remove(out_dir / *older, ec))
      LF_INFO("removed " << (out_dir / *older).string());
  } else {
    comm.barrier();
  }
  comm.barrier();  // published before anyone reports it
  // Waiting longer than a collective may take only outlives the peers (see commit_checkpoint).
  const auto ack =
      coordinator.commit_checkpoint(rank, state.global_step, written.checkpoint_dir,
                                    std::chrono::seconds(config.cluster.collective_timeout));
  if (rank == 0) {
    LF_INFO("checkpoint " << written.checkpoint_dir
                          << (ack == CoordinatorClient::CommitAck::kCommitted ? " committed"
                                                                              : " written"));
  }
  return written;
}

}  // namespace lf
