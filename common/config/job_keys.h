// Every key of the job YAML, declared once: KEY(C++ type, name, default, rule, one-line doc), one
// list per section. The list declares the member of the section struct (job_config.h), drives
// the parser and its messages (job_config.cpp), `lorafleet-coordinator --list-keys`, and the test
// that docs/configuration.md lists exactly these keys with these defaults. Names follow kohya
// sd-scripts (train_network.py arguments) where kohya has the key. A rule is a KeyRule
// (key_rule.h); rules across keys (kohya's preconditions) are checked after parsing.
//
// The kohya dataset keys of `dataset:`, `datasets:` and a kohya .toml (resolution, batch_size,
// caption and bucket keys, ...) have their own table in dataset_keys.cpp, as they are resolved
// through kohya's levels.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/config/key_rule.h"
#include "common/config/steps_or_ratio.h"

// model: (architecture's values mirror the worker's lf::model_preset(), so that a typo fails
// before any process starts)
#define LF_MODEL_KEYS(KEY)                                                                    \
  KEY(std::string, pretrained_model_name_or_path, "",                                         \
      KeyRule::non_empty().unit("path to a .safetensors checkpoint"),                         \
      "single-file SD 1.x / 2.x / SDXL checkpoint in the original (ldm/sgm) key layout")      \
  KEY(std::string, architecture, "auto",                                                      \
      KeyRule::one_of({"auto", "tiny", "tiny-sd2", "tiny-sdxl", "sd15", "sd2", "sdxl"}),      \
      "model preset: auto detects the family from the checkpoint; a name forces one")         \
  KEY(bool, v_parameterization, false, KeyRule::any(),                                        \
      "kohya --v_parameterization: the UNet predicts v (SD 2.x 768-v) instead of the noise")  \
  KEY(bool, disable_mmap_load_safetensors, false, KeyRule::any(),                             \
      "kohya --disable_mmap_load_safetensors: plain reads instead of mapping the checkpoint") \
  KEY(std::string, tokenizer_vocab, ".deps/bpe_simple_vocab_16e6.txt.gz",                     \
      KeyRule::non_empty().unit("path to bpe_simple_vocab_16e6.txt.gz"),                      \
      "CLIP BPE vocabulary, shipped by open_clip_torch")                                      \
  KEY(std::string, vae_dtype, "fp32", KeyRule::one_of({"fp32", "fp16", "bf16"}),              \
      "dtype of the VAE encoder that fills the latent cache (kohya --no_half_vae: fp32)")     \
  KEY(bool, fp8_base, false, KeyRule::any(),                                                  \
      "kohya --fp8_base: frozen UNet matrices stored as float8_e4m3fn, upcast per layer")

// dataset: lorafleet's own keys and kohya's folder form (the kohya dataset keys of this section
// are in dataset_keys.cpp).
#define LF_DATASET_KEYS(KEY)                                                               \
  KEY(std::string, train_data_dir, "", KeyRule::any(),                                     \
      "folder of kohya <num_repeats>_<class tokens> subsets (form 1)")                     \
  KEY(std::string, reg_data_dir, "", KeyRule::any(),                                       \
      "folder of regularization subsets, same layout (empty: none)")                       \
  KEY(std::string, dataset_config, "", KeyRule::any(),                                     \
      "a kohya dataset-config .toml file (form 3)")                                        \
  KEY(std::string, reg_selection, "first", KeyRule::one_of({"first", "random", "rotate"}), \
      "which reg images an epoch uses: kohya's first prefix, random, or rotating")         \
  KEY(std::string, on_bad_image, "error", KeyRule::one_of({"error", "skip"}),              \
      "an unusable image stops the scan (error) or is left out with a warning (skip)")     \
  KEY(std::int64_t, max_image_pixels, 178956970, KeyRule::at_least(1),                     \
      "larger images are refused from their header (Pillow's decompression-bomb limit)")   \
  KEY(int, scan_threads, 0, KeyRule::at_least(0).note("0 = all cores"),                    \
      "threads that decode images during the scan")                                        \
  KEY(bool, cache_latents_to_disk, false, KeyRule::any(),                                  \
      "kohya --cache_latents_to_disk: keep encoded latents in cache_dir between runs")     \
  KEY(bool, cache_text_encoder_outputs_to_disk, false, KeyRule::any(),                     \
      "kohya --cache_text_encoder_outputs_to_disk: the same for text-encoder outputs")     \
  KEY(std::string, cache_dir, "", KeyRule::any(),                                          \
      "where disk caches go (empty: <output_dir>/cache)")

// network: kohya --network_* arguments and networks.lora's network_args.
#define LF_NETWORK_KEYS(KEY)                                                                     \
  KEY(int, network_dim, 4, KeyRule::at_least(1),                                                 \
      "LoRA rank (kohya --network_dim); OFT: the number of blocks per layer")                    \
  KEY(double, network_alpha, 1.0, KeyRule::at_least(0),                                          \
      "LoRA alpha: scale = alpha / rank, 0 = the rank; OFT: constraint / out_dim (kohya)")       \
  KEY(std::string, network_weights, "", KeyRule::any(),                                          \
      "an existing LoRA file to continue training from (kohya --network_weights)")               \
  KEY(int, conv_dim, 0, KeyRule::at_least(0).note("0 = no conv LoRA"),                           \
      "rank of the 3x3-conv LoRA (LoCon, kohya network_args conv_dim)")                          \
  KEY(double, conv_alpha, 1.0, KeyRule::at_least(0),                                             \
      "alpha of the 3x3-conv LoRA; 0 means conv_dim (kohya network_args conv_alpha)")            \
  KEY(bool, network_train_unet_only, false, KeyRule::any(),                                      \
      "kohya --network_train_unet_only: no text-encoder modules")                                \
  KEY(bool, network_train_text_encoder_only, false, KeyRule::any(),                              \
      "kohya --network_train_text_encoder_only: no UNet modules")                                \
  KEY(std::optional<double>, loraplus_lr_ratio, std::nullopt, KeyRule::at_least(0),              \
      "LoRA+ (Hayou et al. 2024): lora_up weights train at this times their part's lr")          \
  KEY(std::optional<double>, loraplus_unet_lr_ratio, std::nullopt, KeyRule::at_least(0),         \
      "LoRA+ ratio of the UNet's lora_up weights (over loraplus_lr_ratio)")                      \
  KEY(std::optional<double>, loraplus_text_encoder_lr_ratio, std::nullopt, KeyRule::at_least(0), \
      "LoRA+ ratio of the text encoders' lora_up weights")                                       \
  KEY(std::optional<double>, unet_lr, std::nullopt, KeyRule::at_least(0),                        \
      "kohya --unet_lr: unset = learning_rate; 0 leaves the UNet out of the network")            \
  KEY(std::optional<double>, text_encoder_lr, std::nullopt, KeyRule::at_least(0),                \
      "kohya --text_encoder_lr: unset = learning_rate; 0 leaves the text encoders out")          \
  KEY(std::string, down_lr_weight, "", KeyRule::any(),                                           \
      "kohya's block lr weights of the down blocks: a preset (sine, ...+offset) or numbers")     \
  KEY(std::string, mid_lr_weight, "", KeyRule::any(),                                            \
      "kohya's block lr weight(s) of the mid block: comma-separated numbers")                    \
  KEY(std::string, up_lr_weight, "", KeyRule::any(),                                             \
      "kohya's block lr weights of the up blocks: a preset (sine, ...+offset) or numbers")       \
  KEY(double, block_lr_zero_threshold, 0.0, KeyRule::at_least(0),                                \
      "kohya's: block lr weights not above this become 0 (the block gets no modules)")           \
  KEY(std::string, block_dims, "", KeyRule::any(),                                               \
      "kohya's per-block ranks of the UNet's Linear / 1x1 modules (25 or 23 integers)")          \
  KEY(std::string, block_alphas, "", KeyRule::any(),                                             \
      "kohya's per-block alphas of those modules (25 or 23 numbers)")                            \
  KEY(std::string, conv_block_dims, "", KeyRule::any(),                                          \
      "kohya's per-block ranks of the UNet's 3x3 convs (LoCon; 25 or 23 integers)")              \
  KEY(std::string, conv_block_alphas, "", KeyRule::any(),                                        \
      "kohya's per-block alphas of the 3x3-conv modules (25 or 23 numbers)")                     \
  KEY(std::optional<double>, network_dropout, std::nullopt, KeyRule::in_half_open(0, 1),         \
      "kohya --network_dropout: dropout of each module's lora_down output while training")       \
  KEY(std::optional<double>, rank_dropout, std::nullopt, KeyRule::in_half_open(0, 1),            \
      "kohya's rank_dropout: each rank of a module dropped per sample while training")           \
  KEY(std::optional<double>, module_dropout, std::nullopt, KeyRule::in_half_open(0, 1),          \
      "kohya's module_dropout: a whole module skipped with this probability while training")     \
  KEY(bool, dim_from_weights, false, KeyRule::any(),                                             \
      "kohya --dim_from_weights: the modules, ranks and alphas of network_weights")              \
  KEY(std::string, algo, "lora", KeyRule::one_of({"lora", "loha", "lokr", "oft"}),               \
      "adapter algorithm: lora (networks.lora), loha / lokr (LyCORIS), oft (networks.oft)")      \
  KEY(int, factor, -1, KeyRule::at_least(-1).note("-1 = the most balanced split"),               \
      "LyCORIS LoKr factor: the size of the Kronecker product's first factor")                   \
  KEY(bool, decompose_both, false, KeyRule::any(),                                               \
      "LyCORIS LoKr decompose_both: the first Kronecker factor low-rank too")                    \
  KEY(bool, dora_wd, false, KeyRule::any(),                                                      \
      "LyCORIS dora_wd: DoRA weight decomposition, a trained magnitude per output row")          \
  KEY(bool, enable_all_linear, false, KeyRule::any(),                                            \
      "kohya networks.oft: every Linear / 1x1 conv of the transformers, not only attention")     \
  KEY(bool, enable_conv, false, KeyRule::any(),                                                  \
      "kohya networks.oft: the ResBlock, Downsample and Upsample layers too")

// training: kohya train_network.py's training arguments.
#define LF_TRAINING_KEYS(KEY)                                                                      \
  KEY(std::uint64_t, seed, 42, KeyRule::any(),                                                     \
      "the shared seed: data order, noise, timesteps, LoRA init (kohya --seed)")                   \
  KEY(int, train_batch_size, 1, KeyRule::at_least(1),                                              \
      "images per batch per rank, the default of every dataset's batch_size")                      \
  KEY(int, gradient_accumulation_steps, 1, KeyRule::at_least(1),                                   \
      "global batches per optimizer step (kohya / accelerate)")                                    \
  KEY(double, learning_rate, 1e-4, KeyRule::at_least(0),                                           \
      "base learning rate (kohya --learning_rate)")                                                \
  KEY(std::string, lr_scheduler, "cosine",                                                         \
      KeyRule::one_of({"constant", "constant_with_warmup", "linear", "cosine",                     \
                       "cosine_with_restarts", "polynomial", "inverse_sqrt", "cosine_with_min_lr", \
                       "warmup_stable_decay", "piecewise_constant", "adafactor"}),                 \
      "learning-rate schedule, transformers' and diffusers' formulas (kohya --lr_scheduler)")      \
  KEY(StepsOrRatio, lr_warmup_steps, StepsOrRatio{}, KeyRule::any(),                               \
      "linear warmup steps, or a ratio of the total steps (kohya --lr_warmup_steps)")              \
  KEY(StepsOrRatio, lr_decay_steps, StepsOrRatio{}, KeyRule::any(),                                \
      "warmup_stable_decay's decay steps, or a ratio of the total (kohya --lr_decay_steps)")       \
  KEY(int, lr_scheduler_num_cycles, 1, KeyRule::at_least(1),                                       \
      "cosine_with_restarts' cycles; half of it is the cosine waves of cosine_with_min_lr "        \
      "and warmup_stable_decay (kohya --lr_scheduler_num_cycles)")                                 \
  KEY(double, lr_scheduler_power, 1.0, KeyRule::any(),                                             \
      "the polynomial schedule's power (kohya --lr_scheduler_power)")                              \
  KEY(int, lr_scheduler_timescale, 0,                                                              \
      KeyRule::at_least(0).note("0 = lr_warmup_steps, or 10000 without a warmup"),                 \
      "inverse_sqrt's timescale (kohya --lr_scheduler_timescale)")                                 \
  KEY(std::optional<double>, lr_scheduler_min_lr_ratio, std::nullopt, KeyRule::in_range(0, 1),     \
      "the floor of cosine_with_min_lr and warmup_stable_decay, a ratio of the lr (kohya)")        \
  KEY(std::vector<std::string>, lr_scheduler_args, {}, KeyRule::any(),                             \
      "kohya --lr_scheduler_args: \"key=value\" strings (lr_end, min_lr, step_rules, ...)")        \
  KEY(int, max_train_steps, 1600, KeyRule::any(),                                                  \
      "total optimizer steps (kohya --max_train_steps)")                                           \
  KEY(int, max_train_epochs, 0, KeyRule::at_least(0),                                              \
      "when > 0, the steps of that many epochs instead of max_train_steps")                        \
  KEY(int, save_every_n_steps, 0, KeyRule::at_least(0),                                            \
      "checkpoint period in optimizer steps; 0 saves only at the end")                             \
  KEY(int, validate_every_n_steps, 0, KeyRule::at_least(0).note("0 = off"),                        \
      "kohya --validate_every_n_steps: the validation loss after every N optimizer steps")         \
  KEY(int, validate_every_n_epochs, 0,                                                             \
      KeyRule::at_least(0).note("0 = every epoch, as kohya's unset"),                              \
      "kohya --validate_every_n_epochs: the validation loss after every Nth epoch (with a "        \
      "validation_split)")                                                                         \
  KEY(int, max_validation_steps, 0, KeyRule::at_least(0).note("0 = all"),                          \
      "kohya --max_validation_steps: at most this many validation batches each time")              \
  KEY(int, save_every_n_epochs, 0, KeyRule::at_least(0).note("0 = off"),                           \
      "kohya --save_every_n_epochs: a checkpoint and <output_name>-NNNNNN after every Nth epoch")  \
  KEY(int, save_n_epoch_ratio, 0, KeyRule::at_least(0).note("0 = off"),                            \
      "kohya --save_n_epoch_ratio: at least this many epoch saves (over save_every_n_epochs)")     \
  KEY(int, save_last_n_epochs, 0, KeyRule::at_least(0).note("0 keeps all"),                        \
      "kohya --save_last_n_epochs: keep only the last N epoch LoRA files")                         \
  KEY(int, save_last_n_steps, 0, KeyRule::at_least(0).note("0 keeps all"),                         \
      "kohya --save_last_n_steps: remove step LoRA files older than N steps")                      \
  KEY(double, prior_loss_weight, 1.0, KeyRule::at_least(0),                                        \
      "loss weight of regularization samples (kohya --prior_loss_weight)")                         \
  KEY(std::optional<double>, scale_weight_norms, std::nullopt, KeyRule::at_least(0),               \
      "kohya --scale_weight_norms: max-norm of each module's delta W after every step")            \
  KEY(double, max_grad_norm, 1.0, KeyRule::at_least(0).note("0 disables clipping"),                \
      "gradient clipping after the allreduce (kohya --max_grad_norm)")                             \
  KEY(double, adam_beta1, 0.9, KeyRule::in_half_open(0, 1), "AdamW beta1")                         \
  KEY(double, adam_beta2, 0.999, KeyRule::in_half_open(0, 1), "AdamW beta2")                       \
  KEY(double, adam_epsilon, 1e-8, KeyRule::at_least(0), "AdamW eps")                               \
  KEY(double, adam_weight_decay, 0.01, KeyRule::at_least(0),                                       \
      "AdamW weight decay (torch.optim.AdamW's default)")                                          \
  KEY(std::string, optimizer_type, "AdamW",                                                        \
      KeyRule::any().note("kohya's spellings, case-insensitive"),                                  \
      "kohya --optimizer_type: AdamW, Lion, SGDNesterov, AdaFactor, Prodigy, DAdaptAdam, ...")     \
  KEY(std::vector<std::string>, optimizer_args, {}, KeyRule::any(),                                \
      "kohya --optimizer_args: \"key=value\" strings (betas=0.9,0.99 weight_decay=0.01 ...)")      \
  KEY(int, clip_skip, 0, KeyRule::at_least(0).note("0 = the model family's default layer"),        \
      "kohya / A1111 clip skip; 0 keeps the family's layer")                                       \
  KEY(int, max_token_length, 75, KeyRule::in_range(75, 225).note("75, 150 or 225"),                \
      "kohya --max_token_length: caption tokens, in 75-token windows; 75 = kohya's unset")         \
  KEY(std::string, mixed_precision, "no",                                                          \
      KeyRule::one_of({"no", "fp16", "bf16"}).note("kohya --mixed_precision"),                     \
      "frozen weights in that dtype, forward under autocast, fp32 loss and LoRA")                  \
  KEY(bool, full_fp16, false, KeyRule::any(),                                                      \
      "kohya --full_fp16: LoRA weights and gradients in fp16 (needs mixed_precision fp16)")        \
  KEY(bool, full_bf16, false, KeyRule::any(),                                                      \
      "kohya --full_bf16: LoRA weights and gradients in bf16 (needs mixed_precision bf16)")        \
  KEY(bool, gradient_checkpointing, false, KeyRule::any(),                                         \
      "kohya --gradient_checkpointing: recompute each block in backward")                          \
  KEY(std::string, loss_type, "l2", KeyRule::one_of({"l2", "l1", "huber", "smooth_l1"}),           \
      "kohya --loss_type: the element-wise loss")                                                  \
  KEY(std::string, huber_schedule, "snr", KeyRule::one_of({"constant", "exponential", "snr"}),     \
      "kohya --huber_schedule: each sample's Huber c from its timestep")                           \
  KEY(double, huber_c, 0.1, KeyRule::in_range(0, 1), "kohya --huber_c: in (0, 1]")                 \
  KEY(double, huber_scale, 1.0, KeyRule::at_least(0), "kohya --huber_scale")                       \
  KEY(std::optional<double>, min_snr_gamma, std::nullopt, KeyRule::at_least(0),                    \
      "kohya --min_snr_gamma: min-SNR loss weighting (Hang et al. 2023; 5 is common)")             \
  KEY(bool, scale_v_pred_loss_like_noise_pred, false, KeyRule::any(),                              \
      "kohya --scale_v_pred_loss_like_noise_pred (needs v_parameterization)")                      \
  KEY(std::optional<double>, v_pred_like_loss, std::nullopt, KeyRule::at_least(0),                 \
      "kohya --v_pred_like_loss: adds a v-prediction-like loss times this")                        \
  KEY(bool, debiased_estimation_loss, false, KeyRule::any(), "kohya --debiased_estimation_loss")   \
  KEY(double, noise_offset, 0.0, KeyRule::at_least(0).note("0 = off"),                             \
      "kohya --noise_offset (crosslabs' offset noise)")                                            \
  KEY(bool, noise_offset_random_strength, false, KeyRule::any(),                                   \
      "kohya --noise_offset_random_strength: the offset ~ U[0, noise_offset) per batch")           \
  KEY(std::optional<double>, adaptive_noise_scale, std::nullopt, KeyRule::any(),                   \
      "kohya --adaptive_noise_scale: offset + scale * |latent mean| per channel")                  \
  KEY(int, multires_noise_iterations, 0, KeyRule::at_least(0).note("0 = off"),                     \
      "kohya --multires_noise_iterations: pyramid noise levels")                                   \
  KEY(double, multires_noise_discount, 0.3, KeyRule::in_range(0, 1),                               \
      "kohya --multires_noise_discount")                                                           \
  KEY(double, ip_noise_gamma, 0.0, KeyRule::at_least(0).note("0 = off"),                           \
      "kohya --ip_noise_gamma: input perturbation noise (Ning et al. 2023)")                       \
  KEY(bool, ip_noise_gamma_random_strength, false, KeyRule::any(),                                 \
      "kohya --ip_noise_gamma_random_strength: gamma ~ U[0, ip_noise_gamma) per batch")            \
  KEY(int, min_timestep, 0, KeyRule::in_range(0, 999), "kohya --min_timestep")                     \
  KEY(int, max_timestep, 1000, KeyRule::in_range(1, 1000),                                         \
      "kohya --max_timestep: timesteps are drawn from [min_timestep, max_timestep)")               \
  KEY(bool, zero_terminal_snr, false, KeyRule::any(),                                              \
      "kohya --zero_terminal_snr: rescale the betas to zero terminal SNR (Lin et al. 2023)")       \
  KEY(bool, deterministic, false, KeyRule::any(),                                                  \
      "LibTorch's deterministic algorithms on CUDA (CPU runs are bit-exact either way)")

// output:
#define LF_OUTPUT_KEYS(KEY)                                                                   \
  KEY(std::string, output_dir, "output", KeyRule::non_empty().unit("folder path"),            \
      "where checkpoints, LoRA files and metric snapshots go (kohya --output_dir)")           \
  KEY(std::string, output_name, "lora", KeyRule::file_name(),                                 \
      "LoRA file name stem: <output_name>.safetensors (kohya --output_name)")                 \
  KEY(int, keep_last_n_checkpoints, 0, KeyRule::at_least(0).note("0 keeps all"),              \
      "keep only the newest N committed checkpoints")                                         \
  KEY(std::string, training_comment, "", KeyRule::any(),                                      \
      "kohya --training_comment: recorded as ss_training_comment")                            \
  KEY(bool, no_metadata, false, KeyRule::any(),                                               \
      "kohya --no_metadata: the LoRA file keeps only the keys loaders need and modelspec.*")  \
  KEY(std::string, metadata_title, "", KeyRule::any(),                                        \
      "kohya --metadata_title: modelspec.title (empty: output_name)")                         \
  KEY(std::string, metadata_author, "", KeyRule::any(), "kohya --metadata_author")            \
  KEY(std::string, metadata_description, "", KeyRule::any(), "kohya --metadata_description")  \
  KEY(std::string, metadata_license, "", KeyRule::any(), "kohya --metadata_license")          \
  KEY(std::string, metadata_tags, "", KeyRule::any(), "kohya --metadata_tags")                \
  KEY(std::string, save_precision, "",                                                        \
      KeyRule::one_of({"float", "fp16", "bf16"})                                              \
          .note("kohya --save_precision")                                                     \
          .or_unset("the training dtype"),                                                    \
      "dtype of the LoRA files; the .alpha scalars stay float32")                             \
  KEY(std::string, logging_dir, "", KeyRule::any().note("empty: no TensorBoard logs"),        \
      "kohya --logging_dir: rank 0 writes TensorBoard event files under it")                  \
  KEY(std::string, log_with, "",                                                              \
      KeyRule::one_of({"tensorboard"}).or_unset("tensorboard when logging_dir is set"),       \
      "kohya --log_with (wandb is not available: nothing leaves the cluster)")                \
  KEY(std::string, log_prefix, "", KeyRule::any(),                                            \
      "kohya --log_prefix: the run folder is <logging_dir>/<log_prefix><YYYYmmddHHMMSS>")     \
  KEY(std::string, log_tracker_name, "", KeyRule::any().note("empty: network_train"),         \
      "kohya --log_tracker_name: the subfolder of the run folder holding the event files")    \
  KEY(bool, log_config, false, KeyRule::any(),                                                \
      "kohya --log_config: the job config, secrets scrubbed, as TensorBoard text 'config'")   \
  KEY(std::string, sample_prompts, "", KeyRule::any().note("empty: no sample images"),        \
      "kohya --sample_prompts: a .txt, .toml or .json file of prompts for sample images")     \
  KEY(int, sample_every_n_steps, 0, KeyRule::at_least(0).note("0 = off"),                     \
      "kohya --sample_every_n_steps: sample images after every N optimizer steps")            \
  KEY(int, sample_every_n_epochs, 0, KeyRule::at_least(0).note("0 = off"),                    \
      "kohya --sample_every_n_epochs: sample images after every N epochs (steps ignored)")    \
  KEY(bool, sample_at_first, false, KeyRule::any(),                                           \
      "kohya --sample_at_first: sample images before the first step of a fresh run")          \
  KEY(std::string, sample_sampler, "ddim",                                                    \
      KeyRule::one_of({"ddim", "euler", "k_euler", "euler_a", "k_euler_a", "dpmsolver++",     \
                       "k_dpm_2", "dpm_2"}),                                                  \
      "kohya --sample_sampler: the sampler of the sample images (a prompt's --ss overrides)") \
  KEY(bool, sample_use_karras_sigmas, false, KeyRule::any(),                                  \
      "Karras sigmas (diffusers use_karras_sigmas) for euler, dpmsolver++ and k_dpm_2")

// coordinator:
#define LF_COORDINATOR_KEYS(KEY)                                                                   \
  KEY(std::string, listen_address, "127.0.0.1:50051",                                              \
      KeyRule::non_empty().unit("host:port address"),                                              \
      "gRPC address of the control plane (loopback unless configured otherwise)")                  \
  KEY(std::string, metrics_address, "127.0.0.1:9400", KeyRule::any(),                              \
      "/metrics address; empty turns it off")                                                      \
  KEY(int, linger_seconds, 0, KeyRule::at_least(0),                                                \
      "seconds /metrics keeps serving after the job ends")                                         \
  KEY(int, worker_timeout_seconds, 120, KeyRule::at_least(10).note("workers heartbeat every 5 s"), \
      "a rank silent this long is presumed dead and its group is ended")                           \
  KEY(std::string, job_token_file, "", KeyRule::any(),                                             \
      "file holding the job token (else LF_JOB_TOKEN); required off loopback")                     \
  KEY(std::string, tls_cert_file, "", KeyRule::any(),                                              \
      "PEM certificate chain of the control plane")                                                \
  KEY(std::string, tls_key_file, "", KeyRule::any(), "PEM private key of the control plane")

// worker:
#define LF_WORKER_KEYS(KEY)                                                                        \
  KEY(std::string, metrics_host, "127.0.0.1", KeyRule::any(),                                      \
      "host each worker's /metrics binds to")                                                      \
  KEY(int, metrics_port_base, 9410, KeyRule::in_range(0, 65535).unit("a port").note("0 disables"), \
      "rank r serves /metrics on metrics_port_base + r")                                           \
  KEY(int, num_threads, 1, KeyRule::at_least(1), "intra-op threads per rank on the CPU")           \
  KEY(std::string, device, "auto", KeyRule::one_of({"auto", "cpu", "cuda"}),                       \
      "auto: CUDA if visible, else the CPU; a rank uses GPU local_rank mod GPUs")                  \
  KEY(double, vram_budget_gb, 0.0, KeyRule::at_least(0).unit("GiB").note("0 = no budget"),         \
      "device memory the training may use; UNet blocks that do not fit are streamed")              \
  KEY(int, offload_streams, 2, KeyRule::in_range(1, 8),                                            \
      "streamed UNet blocks on the device at once under vram_budget_gb")

// cluster: how the group is launched, supervised and kept from hanging (docs/cluster.md).
#define LF_CLUSTER_KEYS(KEY)                                                                    \
  KEY(int, world_size, 0, KeyRule::at_least(0).note("0: from the launcher"),                    \
      "ranks of the job; 0 takes it from mpirun or lorafleet-coordinator --world-size")         \
  KEY(int, collective_timeout, 60, KeyRule::at_least(1).unit("seconds"),                        \
      "seconds a collective may take before the rank reports the failure and exits")            \
  KEY(int, preempt_grace_seconds, 25, KeyRule::at_least(1).unit("seconds"),                     \
      "seconds from SIGTERM to exit 143, for the last step and its checkpoint")                 \
  KEY(int, max_restarts, 3, KeyRule::at_least(0),                                               \
      "group restarts from the last checkpoint before the job fails (torchrun --max-restarts)") \
  KEY(double, restart_backoff_seconds, 2.0, KeyRule::at_least(0).unit("seconds"),               \
      "wait before restart k: restart_backoff_seconds * 2^(k-1)")                               \
  KEY(double, restart_backoff_max_seconds, 60.0, KeyRule::any(), "the cap of that wait")        \
  KEY(int, rendezvous_timeout_seconds, 300, KeyRule::at_least(1).unit("seconds"),               \
      "seconds to wait for every rank of a group to register (torchrun --rdzv-timeout)")

namespace lf {

// One key of the list, for --list-keys and the documentation check.
struct JobKeyInfo {
  std::string section;  // "training"
  std::string name;     // "learning_rate"
  KeyValueKind kind;
  std::string default_text;  // the default as YAML would write it ("" for an empty string)
  bool has_default = true;   // false: unset by default (std::nullopt)
  KeyRule rule;
  std::string doc;
};

// Every key of every section, in declaration order.
const std::vector<JobKeyInfo>& job_keys();

}  // namespace lf
