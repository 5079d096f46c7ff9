// Job configuration: the YAML file under configs/ that the coordinator reads and sends, as text,
// to every worker at registration. Key names follow kohya sd-scripts (train_network.py flags and
// dataset-config keys) so that a kohya user recognises them.
//
// Parsing is strict: an unknown key or a value of the wrong type is a ConfigError whose message
// starts with "<file>:<line>:" and names the key and what was expected.
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/config/dataset_config.h"

namespace lf {

// Thrown for any invalid configuration. what() = "<file>:<line>: <key>: <problem>".
class ConfigError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct ModelSection {
  // Single-file .safetensors checkpoint in the original (ldm/sgm) key layout: SD 1.x, SD 2.x or
  // SDXL, as A1111/ComfyUI/kohya use them.
  std::string pretrained_model_name_or_path;
  // Model class preset. "auto" detects the family from the checkpoint's keys and shapes and uses
  // the full-size preset (sd15, sd2 or sdxl); a name forces one: tiny, tiny-sd2, tiny-sdxl
  // (tests and demo), sd15, sd2, sdxl.
  std::string architecture = "auto";
  // kohya --v_parameterization: the UNet predicts v (SD 2.x 768-v models) instead of the noise.
  bool v_parameterization = false;
  // kohya --disable_mmap_load_safetensors: read the checkpoint with plain reads instead of
  // mapping it (faster or required on some network filesystems).
  bool disable_mmap_load_safetensors = false;
  // CLIP BPE vocabulary (bpe_simple_vocab_16e6.txt.gz), shipped by open_clip_torch.
  std::string tokenizer_vocab = ".deps/bpe_simple_vocab_16e6.txt.gz";
  // dtype of the VAE encoder that fills the latent cache: fp32 | fp16 | bf16. fp32 by default
  // whatever training.mixed_precision says (kohya's --no_half_vae; SDXL's VAE overflows in fp16).
  std::string vae_dtype = "fp32";
  // kohya --fp8_base: the frozen UNet's Linear and Conv weights are stored as float8_e4m3fn and
  // upcast per layer to the compute dtype; needs training.mixed_precision fp16 or bf16.
  bool fp8_base = false;
};

// The job YAML's `dataset:` section. It plays kohya's command line: train_data_dir/reg_data_dir
// (form 1, see dataset_config.h), the fallback level below [general] for every kohya dataset and
// subset key (the kohya caption/augmentation keys it takes are resolved into JobConfig::datasets,
// not stored here), and lorafleet's own dataset options.
struct DatasetSection {
  // Parent folders holding kohya DreamBooth subsets named "<num_repeats>_<class tokens>".
  // Ignored, with a warning, when `datasets:` or dataset_config is given (as kohya).
  std::string train_data_dir;
  std::string reg_data_dir;  // empty: no regularization images
  // A kohya dataset-config .toml (form 3); resolved against the base dir. Empty: none.
  std::string dataset_config;
  int resolution_w = 512;    // "resolution: 512" or "resolution: [W, H]"
  int resolution_h = 512;
  bool enable_bucket = true;
  int min_bucket_reso = 256;
  int max_bucket_reso = 1024;
  int bucket_reso_steps = 64;
  bool bucket_no_upscale = false;
  std::string caption_extension = ".caption";  // kohya's default; "." added if missing
  // How reg images are chosen per epoch: "first" (kohya's rule: the same prefix of reg images
  // every epoch), "random" or "rotate".
  std::string reg_selection = "first";
  std::string on_bad_image = "error";  // error | skip: an unreadable image stops the scan or not
  std::int64_t max_image_pixels = 178956970;  // larger images are refused (PIL's default limit)
  int scan_threads = 0;                       // 0 = all cores
  bool cache_latents_to_disk = false;
  bool cache_text_encoder_outputs_to_disk = false;
  // Where disk caches go; "" in the YAML means <output_dir>/cache, which the parser fills in.
  std::string cache_dir;
};

struct NetworkSection {
  int network_dim = 4;          // LoRA rank
  double network_alpha = 1.0;   // scale = network_alpha / network_dim (kohya default 1.0)
  std::string network_weights;  // existing kohya LoRA to continue from (empty: fresh init)
  // kohya network_args conv_dim / conv_alpha (LoCon): rank and alpha of the 3x3 convs in
  // ResBlocks / Downsample / Upsample; conv_dim 0 = off. conv_alpha defaults to 1.0 as kohya's
  // create_network does when conv_dim is given; 0 means conv_dim.
  int conv_dim = 0;
  double conv_alpha = 1.0;
  bool network_train_unet_only = false;          // kohya --network_train_unet_only
  bool network_train_text_encoder_only = false;  // kohya --network_train_text_encoder_only
  // kohya --unet_lr / --text_encoder_lr: unset means training.learning_rate; 0 leaves that part's
  // LoRA applied but untrained (kohya drops the parameter group).
  std::optional<double> unet_lr;
  std::optional<double> text_encoder_lr;
};

struct TrainingSection {
  std::uint64_t seed = 42;
  int train_batch_size = 1;  // per rank, as kohya's train_batch_size is per device
  // Global batches per optimizer step (kohya/accelerate gradient_accumulation_steps): an epoch
  // of B batches has ceil(B / steps) optimizer steps, the last one over the remaining batches.
  int gradient_accumulation_steps = 1;
  double learning_rate = 1e-4;
  std::string lr_scheduler = "cosine";  // constant | constant_with_warmup | linear | cosine
  int lr_warmup_steps = 0;
  int max_train_steps = 1600;   // kohya default
  int max_train_epochs = 0;     // > 0 overrides max_train_steps
  int save_every_n_steps = 0;   // 0: only at the end
  double prior_loss_weight = 1.0;
  double max_grad_norm = 1.0;   // 0 disables clipping
  double adam_beta1 = 0.9;
  double adam_beta2 = 0.999;
  double adam_epsilon = 1e-8;
  double adam_weight_decay = 0.01;  // torch.optim.AdamW default
  // kohya/A1111 clip_skip: 0 = the family's default layer (SD1: last, SD2: penultimate + final
  // LN, SDXL: penultimate of both encoders); k >= 1 takes the output k layers from the end of
  // the SD1/SD2 encoder, final LN applied, as kohya. Not supported for SDXL (kohya ignores it).
  int clip_skip = 0;
  // kohya --mixed_precision: no | fp16 | bf16. With fp16/bf16 the frozen UNet and text encoders
  // are stored in that dtype (kohya's weight_dtype), the forward passes run under autocast, the
  // loss is fp32, and the LoRA weights and optimizer state stay fp32; fp16 adds dynamic loss
  // scaling (torch.amp.GradScaler's defaults).
  std::string mixed_precision = "no";
  // kohya --full_fp16 / --full_bf16: the LoRA weights, their gradients and the optimizer state
  // in half precision too; each needs the matching mixed_precision.
  bool full_fp16 = false;
  bool full_bf16 = false;
  // kohya --gradient_checkpointing: recompute each UNet ResBlock and transformer block (and each
  // text-encoder layer while it trains) in backward instead of keeping its activations.
  bool gradient_checkpointing = false;
  // LibTorch's deterministic-algorithms mode and CUBLAS_WORKSPACE_CONFIG on CUDA (docs say what
  // is bit-exact on GPU); CPU runs are bit-exact either way.
  bool deterministic = false;
};

struct OutputSection {
  std::string output_dir = "output";
  std::string output_name = "lora";
  int keep_last_n_checkpoints = 0;  // 0 keeps all
  // kohya --save_precision of the LoRA files: float | fp16 | bf16, or "" (unset, kohya's None):
  // the LoRA's training dtype, float32 unless full_fp16 / full_bf16. The .alpha scalars stay
  // float32 and exact. Checkpoints keep the training dtype, so resume stays exact.
  std::string save_precision;
};

struct CoordinatorSection {
  std::string listen_address = "127.0.0.1:50051";  // loopback unless configured otherwise
  std::string metrics_address = "127.0.0.1:9400";  // "" disables /metrics
  // Seconds to keep serving /metrics after the job ends (lets dashboards scrape the end).
  int linger_seconds = 0;
  // A registered rank silent this long (workers heartbeat every few seconds) is presumed dead
  // and the job ends with exit code 1, so a crashed or killed rank never leaves the coordinator
  // waiting forever.
  int worker_timeout_seconds = 120;
  // Cluster mode (a listen_address that is not loopback) requires a job token: read from this
  // file (a mounted Kubernetes Secret), else from the LF_JOB_TOKEN environment variable. Every
  // RPC must carry it; it is never logged, exported as a metric or written to any output.
  std::string job_token_file;
  // Optional TLS for the control plane: the server's PEM certificate chain and private key.
  // Workers then need the CA that signed it (lorafleet-worker --tls-ca-file). Both or neither.
  std::string tls_cert_file;
  std::string tls_key_file;
};

struct WorkerSection {
  std::string metrics_host = "127.0.0.1";
  int metrics_port_base = 9410;  // rank r serves /metrics on base + r; 0 disables
  int num_threads = 1;           // intra-op threads per rank (CPU)
  std::string device = "auto";   // auto | cpu | cuda
  // GiB of device memory the training may use; 0 = no limit. When the frozen UNet does not fit
  // beside the activations, the blocks that cost most to stream stay resident and the others
  // are streamed from pinned host memory ahead of their use (CUDA only; needs
  // training.gradient_checkpointing).
  double vram_budget_gb = 0.0;
  // Blocks in flight on the side stream while streaming (each needs its own device buffer).
  int offload_streams = 2;
};

// How the group is launched, supervised and kept from hanging (docs/cluster.md).
struct ClusterSection {
  // Ranks of the job. 0: from the launcher (mpirun) or `lorafleet-coordinator --world-size`.
  // Kubernetes-native workers (no MPI) learn their rank from the environment and the world size
  // from here, through the coordinator.
  int world_size = 0;
  // Seconds any collective (allreduce, broadcast, barrier) may take before the rank gives up,
  // reports the failure and exits, so that no survivor of a dead peer or a dropped link hangs
  // (torch.distributed's `timeout`; NCCL's is aborted with ncclCommAbort).
  int collective_timeout = 60;
  // Seconds between SIGTERM and the exit (143): the ranks agree on a last step and commit a
  // checkpoint within this. Keep it under the pod's terminationGracePeriodSeconds (default 30).
  int preempt_grace_seconds = 25;
  // Restarts of the whole group from the last committed checkpoint before the job is failed
  // (torchrun --max-restarts). Preemptions (exit 143) do not count.
  int max_restarts = 3;
  // Backoff before restart k (1-based): restart_backoff_seconds * 2^(k-1), capped at
  // restart_backoff_max_seconds.
  double restart_backoff_seconds = 2.0;
  double restart_backoff_max_seconds = 60.0;
  // Seconds the coordinator waits for all ranks of a (re-formed) group to register
  // (torchrun --rdzv-timeout).
  int rendezvous_timeout_seconds = 300;
};

struct JobConfig {
  ModelSection model;
  DatasetSection dataset;
  NetworkSection network;
  TrainingSection training;
  OutputSection output;
  CoordinatorSection coordinator;
  WorkerSection worker;
  ClusterSection cluster;

  // The resolved datasets, whichever of the three forms (dataset_config.h) the YAML uses; never
  // empty after parsing. Form 1 gives one dataset with train_data_dir/reg_data_dir and
  // folder_defaults; forms 2 and 3 give the listed datasets and subsets.
  std::vector<DatasetConfig> datasets;
  // "<file>:<line>: ..." notes for the log: ignored kohya keys, ignored subsets and dirs.
  std::vector<std::string> dataset_warnings;

  std::string source_name;  // file path (or "<string>") the config came from
  std::string yaml_text;    // the text as read, sent to workers verbatim
  std::string dataset_config_text;  // the kohya .toml's text when dataset_config is set
};

// Parses YAML text. Relative paths (model, vocab, data dirs, dataset_config, image_dir of
// `datasets:` subsets, network_weights, output_dir, cache_dir) are resolved against base_dir when
// non-empty; image_dir in a kohya .toml resolves against the current directory, as kohya. As
// kohya, a caption_extension without its leading "." gets one and network_alpha 0 means
// network_dim. With dataset.dataset_config the .toml file is read here, unless its text is
// given as dataset_config_text (workers get it from the coordinator, so the file need not exist
// on their hosts); relative image_dir values in it resolve against base_dir (the coordinator's
// working directory). Throws ConfigError("<source_name>:<line>: ...") (or
// "<toml path>:<line>: ...") on syntax errors, unknown or duplicate keys, wrong types and
// invalid values.
JobConfig parse_job_config(const std::string& yaml_text, const std::string& source_name,
                           const std::string& base_dir = "",
                           const std::string* dataset_config_text = nullptr);

// Reads and parses a file, resolving relative paths against the current working directory (as
// kohya does); throws ConfigError naming the path if it cannot be read.
JobConfig load_job_config(const std::string& path);

}  // namespace lf
