// network.algo loha / lokr (LyCORIS LoHa / LoKr) end to end on the tiny UNet: the network trains
// a few SGD steps (finite loss that falls, every factor gets a gradient, the zero-initialised one
// moves), is saved as a kohya/LyCORIS file (hada_* / lokr_* keys, ss_network_module
// lycoris.kohya, algo in ss_network_args), and reloads as network_weights into a freshly seeded
// network with bitwise the same tensors and output; dim_from_weights reads LoHa's ranks. The
// config refuses the options LoHa / LoKr do not take.
#include <gtest/gtest.h>
#include <torch/torch.h>
#include <unistd.h>

#include <filesystem>

#include "common/config/job_config.h"
#include "model/model_config.h"
#include "model/unet.h"
#include "tests/worker/tiny_unet_test.h"
#include "train/seeding.h"
#include "worker/io/lora_file.h"
#include "worker/io/tensor_file.h"

namespace lf {
namespace {

namespace fs = std::filesystem;

constexpr const char* kToQ = "lora_unet_down_blocks_0_attentions_0_transformer_blocks_0_attn1_to_q";
constexpr const char* kConv = "lora_unet_down_blocks_0_resnets_0_conv1";

JobConfig loha_config(const std::string& extra = "", const std::string& algo = "loha") {
  return test::network_job_config("  algo: " + algo +
                                  "\n  network_dim: 4\n  network_alpha: 2\n  conv_dim: 2\n"
                                  "  conv_alpha: 1\n" +
                                  extra);
}

// LoHa: rank 4 / alpha 2, LoCon rank 2 / alpha 1. LoKr: rank 2 / alpha 1 (rank 4 would make the
// tiny model's 32-wide layers full on both halves), factor 4, decompose_both.
LoRANetworkOptions lycoris_options(LoRAAlgo algo, bool dora = false) {
  LoRANetworkOptions o;
  o.algo = algo;
  o.dora_wd = dora;
  o.network_dim = algo == LoRAAlgo::kLoKr ? 2 : 4;
  o.network_alpha = algo == LoRAAlgo::kLoKr ? 1.0 : 2.0;
  o.conv_dim = 2;
  o.conv_alpha = 1.0;
  o.lokr_factor = algo == LoRAAlgo::kLoKr ? 4 : -1;
  o.decompose_both = algo == LoRAAlgo::kLoKr;
  o.train_text_encoder = false;
  return o;
}

using test::same_bytes;

class TinyLoHa : public test::TinyUNetTest {
 protected:
  std::unique_ptr<LoRANetwork> make(uint64_t seed, LoRAAlgo algo = LoRAAlgo::kLoHa,
                                    bool dora = false) {
    at::Generator gen = make_cpu_generator(seed);
    return std::make_unique<LoRANetwork>(unet_, unet_lora_naming(unet_, false),
                                         std::vector<LoRATextEncoderTarget>{},
                                         lycoris_options(algo, dora), gen);
  }
  // Trains, saves with `config`'s metadata and reloads a network of `algo`; returns the file.
  LoadedTensors train_save_reload(LoRAAlgo algo, const JobConfig& config,
                                  const std::string& variant, bool dora = false);
};

TEST_F(TinyLoHa, InitIsLycorisLohaModulesAndStartsAsTheBase) {
  torch::NoGradGuard no_grad;
  const torch::Tensor base = run();
  auto lora = make(3);
  EXPECT_EQ(lora->module_names().size(), 84u + 31u);  // networks.lora's modules (with conv_dim)
  const auto sd = lora->state_dict();
  EXPECT_EQ(sd.size(), 5u * (84u + 31u));
  const std::string q = kToQ, c = kConv;
  EXPECT_EQ(sd.at(q + ".hada_w1_a").sizes(), torch::IntArrayRef({32, 4}));
  EXPECT_EQ(sd.at(q + ".hada_w1_b").sizes(), torch::IntArrayRef({4, 32}));
  EXPECT_EQ(sd.at(c + ".hada_w2_b").sizes(), torch::IntArrayRef({2, 32 * 3 * 3}));
  EXPECT_EQ(sd.at(q + ".alpha").item<float>(), 2.0f);
  EXPECT_EQ(sd.at(c + ".alpha").item<float>(), 1.0f);
  // LyCORIS LohaModule: w1_b N(0, 1), w1_a N(0, 0.1), w2_b N(0, 1), w2_a 0, drawn in that order
  // per module, the modules in sorted-name order from the one generator.
  const std::string first = lora->module_names().front();
  at::Generator gen = make_cpu_generator(3);
  const torch::Tensor& w1_a = sd.at(first + ".hada_w1_a");
  const torch::Tensor& w1_b = sd.at(first + ".hada_w1_b");
  EXPECT_TRUE(same_bytes(w1_b, torch::empty(w1_b.sizes()).normal_(0.0, 1.0, gen)));
  EXPECT_TRUE(same_bytes(w1_a, torch::empty(w1_a.sizes()).normal_(0.0, 0.1, gen)));
  EXPECT_TRUE(
      same_bytes(sd.at(first + ".hada_w2_b"), torch::empty(w1_b.sizes()).normal_(0.0, 1.0, gen)));
  EXPECT_EQ(sd.at(first + ".hada_w2_a").abs().max().item<double>(), 0.0);
  EXPECT_TRUE(same_bytes(run(), base));  // delta W = 0 at init
  EXPECT_EQ(lora->parameter_names().front(), first + ".hada_w1_a");
  EXPECT_EQ(lora->parameters().size(), 4u * (84u + 31u));
}

LoadedTensors TinyLoHa::train_save_reload(LoRAAlgo algo, const JobConfig& config,
                                          const std::string& variant, bool dora) {
  auto lora = make(3, algo, dora);
  std::map<std::string, torch::Tensor> before;
  for (const auto& [k, v] : lora->state_dict()) before[k] = v.clone();
  // From the second step on (the zero factor no longer 0) every factor has a gradient.
  const std::vector<double> losses =
      train_sgd(lora->parameters(), lora->parameter_names(), 0.05, /*grads_from=*/1);
  for (double l : losses) EXPECT_TRUE(std::isfinite(l));
  EXPECT_LT(losses.back(), losses.front());
  const auto trained = lora->state_dict();
  for (const auto& [k, v] : trained) {
    // The zero-initialised factor (hada_w2_a, lokr_w2_b / lokr_w2) moves off 0; a factor with
    // entries ~1 of a weak-gradient module (attention q / k) may stay below float32's resolution
    // in 4 small steps, so its gradient is what is checked above.
    if (k.find(".alpha") == std::string::npos && before.at(k).abs().max().item<double>() == 0.0) {
      EXPECT_GT(v.abs().max().item<double>(), 0.0) << k;
    }
  }

  const fs::path dir = fs::temp_directory_path() / ("lf_lycoris_" + std::to_string(getpid()));
  fs::create_directories(dir);
  const std::string path = (dir / "adapter.safetensors").string();
  LoRATrainingFacts facts;
  save_kohya_lora(path, trained, kohya_lora_metadata(config, facts));
  LoadedTensors file = load_safetensors(path, /*use_mmap=*/false, kKeepStoredDtype);
  EXPECT_EQ(file.metadata.at("ss_network_module"), "lycoris.kohya");
  EXPECT_EQ(file.tensors.size(), trained.size());

  torch::Tensor y_trained;
  {
    torch::NoGradGuard no_grad;
    y_trained = run();
  }
  lora.reset();
  auto reloaded = make(99, algo, dora);
  const LoRALoadReport report = load_network_weights(*reloaded, path);
  EXPECT_EQ(report.loaded_modules, 84u + 31u);
  EXPECT_TRUE(report.missing_modules.empty());
  EXPECT_EQ(report.variants, variant);
  const auto back = reloaded->state_dict();
  EXPECT_EQ(back.size(), trained.size());
  for (const auto& [k, v] : trained) EXPECT_TRUE(same_bytes(back.at(k), v)) << k;
  {
    torch::NoGradGuard no_grad;
    EXPECT_TRUE(same_bytes(run(), y_trained));
  }
  if (algo == LoRAAlgo::kLoHa) {
    // dim_from_weights: the file's ranks and alphas (rank = hada_w1_b's first dimension).
    const auto dims = network_weights_module_dims(path, reloaded->key_context());
    EXPECT_EQ(dims.size(), 84u + 31u);
    EXPECT_EQ(dims.at(kToQ).rank, 4);
    EXPECT_EQ(dims.at(kToQ).alpha, 2.0);
    EXPECT_EQ(dims.at(kConv).rank, 2);
  }
  fs::remove_all(dir);
  return file;
}

TEST_F(TinyLoHa, TrainsSavesAndReloadsAsNetworkWeights) {
  const LoadedTensors file = train_save_reload(LoRAAlgo::kLoHa, loha_config(), "LyCORIS LoHa");
  EXPECT_EQ(file.metadata.at("ss_network_args"),
            "{\"algo\": \"loha\", \"conv_dim\": \"2\", \"conv_alpha\": \"1.0\"}");
  EXPECT_EQ(file.tensors.count(std::string(kToQ) + ".hada_w2_a"), 1u);
}

TEST_F(TinyLoHa, LoKrTrainsSavesAndReloadsAsNetworkWeights) {
  const LoadedTensors file = train_save_reload(
      LoRAAlgo::kLoKr, loha_config("  factor: 4\n  decompose_both: true\n", "lokr"),
      "LyCORIS LoKr");
  EXPECT_EQ(file.metadata.at("ss_network_args"),
            "{\"algo\": \"lokr\", \"factor\": \"4\", \"decompose_both\": \"True\", "
            "\"conv_dim\": \"2\", \"conv_alpha\": \"1.0\"}");
  // to_q 32 -> 32, factor 4: W1 [4, 4] (rank 2 is not below 4 / 2, so decompose_both keeps it
  // full), W2 = lokr_w2_a [8, 2] @ lokr_w2_b [2, 8]; the 3x3 conv1 32 -> 32: lokr_w2_b [2, 72].
  const std::string q = kToQ, c = kConv;
  EXPECT_EQ(file.tensors.at(q + ".lokr_w1").sizes(), torch::IntArrayRef({4, 4}));
  EXPECT_EQ(file.tensors.at(q + ".lokr_w2_a").sizes(), torch::IntArrayRef({8, 2}));
  EXPECT_EQ(file.tensors.at(q + ".lokr_w2_b").sizes(), torch::IntArrayRef({2, 8}));
  EXPECT_EQ(file.tensors.at(c + ".lokr_w2_b").sizes(), torch::IntArrayRef({2, 72}));
  EXPECT_EQ(file.tensors.at(q + ".alpha").item<float>(), 1.0f);
  EXPECT_EQ(file.tensors.count(q + ".lokr_w1_a"), 0u);
}

// DoRA (dora_wd) on plain LoRA modules: dora_scale starts at the layer's row norms, trains,
// and is saved / reloaded beside lora_down / lora_up.
TEST_F(TinyLoHa, DoRATrainsSavesAndReloadsAsNetworkWeights) {
  {
    auto fresh = make(3, LoRAAlgo::kLoRA, /*dora=*/true);
    const auto sd = fresh->state_dict();
    auto layer = unet_->named_modules()["input_blocks.1.1.transformer_blocks.0.attn1.to_q"]
                     ->as<LoRACompatibleLinearImpl>();
    const torch::Tensor norms = layer->weight().norm(2, {1}).reshape({-1, 1});
    EXPECT_TRUE(torch::allclose(sd.at(std::string(kToQ) + ".dora_scale"), norms, 0, 0));
    EXPECT_EQ(sd.at(std::string(kConv) + ".dora_scale").sizes(), torch::IntArrayRef({32, 1, 1, 1}));
  }
  const LoadedTensors file = train_save_reload(
      LoRAAlgo::kLoRA, loha_config("  dora_wd: true\n", "lora"), "LyCORIS DoRA, kohya",
      /*dora=*/true);
  EXPECT_EQ(file.metadata.at("ss_network_args"),
            "{\"algo\": \"lora\", \"dora_wd\": \"True\", \"conv_dim\": \"2\", "
            "\"conv_alpha\": \"1.0\"}");
  EXPECT_EQ(file.tensors.count(std::string(kToQ) + ".dora_scale"), 1u);
  EXPECT_EQ(file.tensors.count(std::string(kToQ) + ".lora_up.weight"), 1u);
}

TEST_F(TinyLoHa, LoRAFileIntoLoHaNetworkHintsAtAlgo) {
  auto lora = make(3);
  try {
    lora->load_weights({{std::string(kToQ) + ".lora_down.weight", torch::zeros({4, 32})},
                        {std::string(kToQ) + ".lora_up.weight", torch::zeros({32, 4})}});
    FAIL();
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("hint: the file is a LoRA (lora_down / lora_up); set "
                                         "network.algo: lora"),
              std::string::npos)
        << e.what();
  }
}

TEST(LoHaConfig, OptionsLoHaDoesNotTakeAreRefusedByKey) {
  // LoKr's own options need algo lokr; dim_from_weights is refused with it.
  try {
    loha_config("  factor: 4\n");
    ADD_FAILURE();
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("key 'network.factor': is a LyCORIS LoKr option: it "
                                         "needs network.algo lokr"),
              std::string::npos)
        << e.what();
  }
  try {
    loha_config("  dim_from_weights: true\n  network_weights: /x.safetensors\n", "lokr");
    ADD_FAILURE();
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("key 'network.dim_from_weights': not available with "
                                         "network.algo lokr"),
              std::string::npos)
        << e.what();
  }

  EXPECT_EQ(loha_config().network.algo, "loha");
  for (const char* extra : {"  rank_dropout: 0.1\n", "  network_dropout: 0.1\n",
                            "  loraplus_lr_ratio: 16\n", "  down_lr_weight: sine\n"}) {
    try {
      loha_config(extra);
      ADD_FAILURE() << extra;
    } catch (const ConfigError& e) {
      const std::string key = std::string(extra).substr(2, std::string(extra).find(':') - 2);
      EXPECT_NE(std::string(e.what()).find("key 'network." + key +
                                           "': not available with network.algo loha"),
                std::string::npos)
          << e.what();
    }
  }
  EXPECT_THROW(parse_job_config("model:\n  pretrained_model_name_or_path: /m/b.safetensors\n"
                                "dataset:\n  train_data_dir: /d\nnetwork:\n  algo: diag-oft\n",
                                "t.yaml"),
               ConfigError);
}

}  // namespace
}  // namespace lf
