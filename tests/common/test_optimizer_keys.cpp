// training.optimizer_type / optimizer_args read as kohya's train_util.get_optimizer reads them
// (common/config/optimizer_keys.h), through parse_job_config: names case-insensitive, class
// paths, refusals with their reason, "key=value" Python literals, and kohya's rules across keys.
#include <gtest/gtest.h>

#include "common/config/job_config.h"
#include "common/config/optimizer_keys.h"
#include "common/config/python_literal.h"

#include <cmath>

namespace lf {
namespace {

std::string job(const std::string& training, const std::string& network = "") {
  return "model:\n  pretrained_model_name_or_path: /m/model.safetensors\n"
         "dataset:\n  train_data_dir: /d/train\n" +
         (network.empty() ? "" : "network:\n" + network) + "training:\n" + training;
}

std::string error_of(const std::string& yaml) {
  try {
    parse_job_config(yaml, "job.yaml");
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "<no ConfigError>";
}

OptimizerChoice choice_of(const std::string& training) {
  const JobConfig c = parse_job_config(job(training), "job.yaml");
  return read_optimizer(c.training).first;
}

TEST(PythonLiteral, ReadsTheLiteralsKohyaArgumentsUse) {
  const auto betas = parse_py_literal("0.9,0.99");
  ASSERT_TRUE(betas);
  EXPECT_EQ(betas->kind, PyLiteral::Kind::Numbers);
  EXPECT_EQ(betas->numbers, (std::vector<double>{0.9, 0.99}));
  EXPECT_EQ(parse_py_literal("(0.9, 0.999)")->numbers, (std::vector<double>{0.9, 0.999}));
  EXPECT_EQ(parse_py_literal("True")->numbers, std::vector<double>{1.0});
  EXPECT_EQ(parse_py_literal("None")->kind, PyLiteral::Kind::None);
  EXPECT_EQ(parse_py_literal("1e-4")->numbers, std::vector<double>{1e-4});
  EXPECT_EQ(parse_py_literal("'1:10,0.1'")->text, "1:10,0.1");  // a quoted comma is a string
  EXPECT_TRUE(std::isinf(parse_py_literal("float('inf')")->numbers[0]));
  EXPECT_FALSE(parse_py_literal("0.9,x"));
  EXPECT_FALSE(parse_py_literal(""));
  const auto kv = split_kohya_arg(" d_coef = 2 ");
  ASSERT_TRUE(kv);
  EXPECT_EQ(kv->key, "d_coef");
  EXPECT_EQ(kv->value, "2");
  EXPECT_FALSE(split_kohya_arg("no_equals"));
}

TEST(OptimizerKeys, KohyasNamesCaseInsensitiveAndClassPaths) {
  EXPECT_EQ(choice_of("  optimizer_type: prodigy\n").type, "Prodigy");
  EXPECT_EQ(choice_of("  optimizer_type: AdaFactor\n").type, "AdaFactor");
  EXPECT_EQ(choice_of("  optimizer_type: adafactor\n  lr_scheduler: adafactor\n").type,
            "AdaFactor");
  EXPECT_EQ(choice_of("  optimizer_type: torch.optim.SGD\n").type, "SGD");
  EXPECT_EQ(choice_of("  optimizer_type: schedulefree.AdamWScheduleFree\n  lr_scheduler: "
                      "constant\n")
                .type,
            "AdamWScheduleFree");
  EXPECT_EQ(choice_of("  optimizer_type: LION\n").type, "Lion");
  EXPECT_EQ(choice_of("").type, "AdamW");
}

TEST(OptimizerKeys, ArgumentsAsPythonLiteralsOverTheReferenceDefaults) {
  // AdamW: lorafleet's adam_* keys are the defaults, optimizer_args win.
  const OptimizerChoice a =
      choice_of("  adam_beta2: 0.99\n  optimizer_args: [\"weight_decay=0.1\"]\n");
  EXPECT_EQ(a.args.at("betas"), (std::vector<double>{0.9, 0.99}));
  EXPECT_EQ(a.args.at("weight_decay"), std::vector<double>{0.1});
  EXPECT_EQ(a.args.at("eps"), std::vector<double>{1e-8});
  const OptimizerChoice p = choice_of(
      "  learning_rate: 1.0\n  optimizer_type: Prodigy\n  optimizer_args: [\"betas=0.9,0.99\", "
      "\"decouple=True\", \"d_coef=2\", \"beta3=None\"]\n");
  EXPECT_EQ(p.args.at("betas"), (std::vector<double>{0.9, 0.99}));
  EXPECT_EQ(p.args.at("decouple"), std::vector<double>{1.0});
  EXPECT_EQ(p.args.at("d_coef"), std::vector<double>{2.0});
  EXPECT_FALSE(p.args.count("beta3"));  // None: prodigyopt's default, sqrt(beta2)
  // kohya's AdaFactor defaults to relative_step True; warmup_init turns it on.
  EXPECT_TRUE(choice_of("  optimizer_type: AdaFactor\n  lr_scheduler: adafactor\n").relative_step);
  EXPECT_FALSE(choice_of("  optimizer_type: AdaFactor\n  lr_scheduler: constant_with_warmup\n"
                         "  lr_warmup_steps: 10\n  optimizer_args: [\"relative_step=False\", "
                         "\"scale_parameter=False\"]\n")
                   .relative_step);
  EXPECT_TRUE(choice_of("  optimizer_type: AdaFactor\n  optimizer_args: [\"relative_step=False\","
                        " \"warmup_init=True\"]\n")
                  .relative_step);
}

TEST(OptimizerKeys, RefusalsNameTheKeyTheArgumentAndWhy) {
  EXPECT_EQ(error_of(job("  optimizer_type: AdamW8bit\n")),
            "job.yaml:6: key 'training.optimizer_type': 'AdamW8bit': bitsandbytes' 8-bit and "
            "paged optimizers are not implemented in lorafleet, and it never substitutes another "
            "optimizer silently. A LoRA's float32 optimizer state is small (two moments of 4 "
            "bytes per LoRA parameter: about 0.2 GB for a dim-128 SDXL LoRA), so use "
            "optimizer_type AdamW");
  EXPECT_NE(error_of(job("  optimizer_type: DAdaptation\n"))
                .find("kohya's DAdaptation is dadaptation's experimental DAdaptAdamPreprint"),
            std::string::npos);
  EXPECT_EQ(error_of(job("  optimizer_type: bitsandbytes.optim.Foo\n")),
            "job.yaml:6: key 'training.optimizer_type': 'bitsandbytes.optim.Foo': expected one "
            "of AdamW, Lion, SGDNesterov, SGD, AdaFactor, Prodigy, DAdaptAdam, "
            "AdamWScheduleFree (kohya's names, case-insensitive)");
  EXPECT_EQ(error_of(job("  optimizer_type: Lion\n  optimizer_args: [\"d_coef=2\"]\n")),
            "job.yaml:7: key 'training.optimizer_args': 'd_coef' is not an argument of Lion "
            "(lion_pytorch.Lion takes here: betas, weight_decay)");
  EXPECT_EQ(error_of(job("  optimizer_type: Lion\n  optimizer_args: [\"betas=0.9\"]\n")),
            "job.yaml:7: key 'training.optimizer_args': expected betas=<two numbers, e.g. "
            "0.9,0.999> for Lion, got '0.9'");
  EXPECT_EQ(error_of(job("  optimizer_type: Prodigy\n  optimizer_args: [\"decouple=yes\"]\n")),
            "job.yaml:7: key 'training.optimizer_args': expected decouple=<True or False> for "
            "Prodigy, got 'yes'");
  EXPECT_NE(error_of(job("  optimizer_args: [\"weight_decay\"]\n"))
                .find("expected \"key=value\" (as kohya's optimizer_args), got 'weight_decay'"),
            std::string::npos);
}

TEST(OptimizerKeys, ValuesTheReferencesRefuseAreRefusedAtConfigTime) {
  EXPECT_EQ(error_of(job("  optimizer_type: AdamWScheduleFree\n  lr_scheduler: constant\n"
                         "  optimizer_args: [\"betas=0,0.999\"]\n")),
            "job.yaml:8: key 'training.optimizer_args': expected betas with beta1 > 0, got beta1 "
            "0 for AdamWScheduleFree (as its reference checks)");
  EXPECT_NE(error_of(job("  learning_rate: 1.0\n  optimizer_type: Prodigy\n"
                         "  optimizer_args: [\"d0=0\"]\n"))
                .find("expected d0 > 0, got 0 for Prodigy"),
            std::string::npos);
  EXPECT_NE(error_of(job("  learning_rate: 1.0\n  optimizer_type: Prodigy\n"
                         "  optimizer_args: [\"betas=1.5,0.999\"]\n"))
                .find("expected betas in [0, 1), got 1.5,0.999"),
            std::string::npos);
  EXPECT_NE(error_of(job("  learning_rate: 1.0\n  optimizer_type: Prodigy\n"
                         "  optimizer_args: [\"slice_p=1.5\"]\n"))
                .find("expected slice_p an integer >= 1, got 1.5"),
            std::string::npos);
  EXPECT_NE(error_of(job("  optimizer_type: SGDNesterov\n  optimizer_args: [\"momentum=0\"]\n"))
                .find("key 'training.optimizer_args': Nesterov momentum needs momentum > 0 and "
                      "dampening 0"),
            std::string::npos);
  // kohya's spellings: "" is AdamW, a list is a tuple, bitsandbytes' class path its reason.
  EXPECT_EQ(choice_of("  optimizer_type: \"\"\n").type, "AdamW");
  EXPECT_EQ(choice_of("  optimizer_type: Lion\n  optimizer_args: [\"betas=[0.95, 0.98]\"]\n")
                .args.at("betas"),
            (std::vector<double>{0.95, 0.98}));
  EXPECT_NE(error_of(job("  optimizer_type: bitsandbytes.optim.AdamW8bit\n"))
                .find("bitsandbytes' 8-bit and paged optimizers are not implemented"),
            std::string::npos);
}

TEST(OptimizerKeys, KohyasMetadataNamesTheOptimizerAndItsArguments) {
  auto training_of = [](const std::string& keys) {
    return parse_job_config(job(keys), "job.yaml").training;
  };
  EXPECT_FALSE(kohya_ss_optimizer(training_of("")));  // plain AdamW: its adam_* keys
  EXPECT_EQ(kohya_ss_optimizer(training_of("  learning_rate: 1.0\n  optimizer_type: prodigy\n"
                                           "  optimizer_args: [\"d_coef=2\", \"betas=0.9,0.99\", "
                                           "\"decouple=True\"]\n")),
            "prodigyopt.prodigy.Prodigy(d_coef=2,betas=(0.9, 0.99),decouple=True)");
  EXPECT_EQ(kohya_ss_optimizer(training_of("  optimizer_type: SGDNesterov\n")),
            "torch.optim.sgd.SGD(momentum=0.9)");
  const TrainingSection ada = training_of("  optimizer_type: AdaFactor\n  learning_rate: 0.0001\n");
  EXPECT_EQ(kohya_ss_optimizer(ada), "transformers.optimization.Adafactor(relative_step=True)");
  EXPECT_EQ(kohya_ss_lr_scheduler(ada, "0.0001"), "adafactor:0.0001");
  EXPECT_EQ(kohya_ss_lr_scheduler(training_of(""), "0.0001"), "cosine");
}

TEST(OptimizerKeys, KohyasRulesAcrossKeys) {
  // AdaFactor's relative_step: no warmup (kohya raises), and 'adafactor' needs it.
  EXPECT_NE(error_of(job("  optimizer_type: AdaFactor\n  lr_warmup_steps: 10\n"))
                .find("key 'training.lr_warmup_steps': expected 0 with AdaFactor's relative_step"),
            std::string::npos);
  EXPECT_NE(error_of(job("  optimizer_type: AdaFactor\n  lr_scheduler: adafactor\n"
                         "  optimizer_args: [\"relative_step=False\"]\n"))
                .find("'adafactor' reports the lr of AdaFactor's relative_step, which "
                      "optimizer_args turn off"),
            std::string::npos);
  // prodigyopt / dadaptation raise for two different group lrs.
  EXPECT_NE(error_of(job("  learning_rate: 1.0\n  optimizer_type: Prodigy\n",
                         "  unet_lr: 1.0\n  text_encoder_lr: 0.5\n"))
                .find("key 'training.optimizer_type': Prodigy needs one lr for every trained "
                      "part, or 0"),
            std::string::npos);
  EXPECT_NE(error_of(job("  learning_rate: 1.0\n  optimizer_type: DAdaptAdam\n",
                         "  loraplus_lr_ratio: 16\n"))
                .find("DAdaptAdam needs one lr for every trained part, or 0 (DAdaptAdam raises "
                      "otherwise); got LoRA+ ratios"),
            std::string::npos);
  EXPECT_NE(error_of(job("  learning_rate: 1.0\n  optimizer_type: Prodigy\n",
                         "  down_lr_weight: sine\n"))
                .find("got block lr weights (network.down_lr_weight / mid_lr_weight / "
                      "up_lr_weight) other than 0 and 1"),
            std::string::npos);
  // A text-encoder lr of 0 freezes that part: allowed, as the references allow lr 0 groups.
  EXPECT_NO_THROW(parse_job_config(
      job("  learning_rate: 1.0\n  optimizer_type: Prodigy\n", "  text_encoder_lr: 0\n"),
      "job.yaml"));
  // kohya's warnings.
  const JobConfig low = parse_job_config(job("  optimizer_type: Prodigy\n"), "job.yaml");
  ASSERT_EQ(low.dataset_warnings.size(), 1u);
  EXPECT_NE(low.dataset_warnings[0].find("'training.learning_rate': the lr 0.0001 is low for "
                                         "Prodigy"),
            std::string::npos);
  const JobConfig low_unet = parse_job_config(
      job("  optimizer_type: Prodigy\n", "  unet_lr: 0.01\n  text_encoder_lr: 0.01\n"), "job.yaml");
  ASSERT_EQ(low_unet.dataset_warnings.size(), 1u);
  EXPECT_NE(low_unet.dataset_warnings[0].find("key 'network.unet_lr': the lr 0.01 is low"),
            std::string::npos)
      << low_unet.dataset_warnings[0];
  // kohya tests the first group's lr: unet_lr 1 is not low.
  EXPECT_TRUE(parse_job_config(
                  job("  optimizer_type: Prodigy\n", "  unet_lr: 1.0\n  text_encoder_lr: 1.0\n"),
                  "job.yaml")
                  .dataset_warnings.empty());
  const JobConfig ada =
      parse_job_config(job("  optimizer_type: AdaFactor\n  lr_warmup_steps: 0\n"), "job.yaml");
  ASSERT_EQ(ada.dataset_warnings.size(), 1u);
  EXPECT_NE(ada.dataset_warnings[0].find("'cosine' is replaced by 'adafactor'"), std::string::npos);
  const JobConfig sf = parse_job_config(job("  optimizer_type: AdamWScheduleFree\n"), "job.yaml");
  ASSERT_EQ(sf.dataset_warnings.size(), 1u);
  EXPECT_NE(sf.dataset_warnings[0].find("is not used with AdamWScheduleFree"), std::string::npos);
  EXPECT_TRUE(parse_job_config(job("  optimizer_type: AdamWScheduleFree\n  lr_scheduler: "
                                   "constant\n"),
                               "job.yaml")
                  .dataset_warnings.empty());
}

}  // namespace
}  // namespace lf
