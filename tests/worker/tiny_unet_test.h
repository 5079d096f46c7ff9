// Shared by the adapter tests on the tiny UNet (test_lycoris_network.cpp, test_oft_network.cpp):
// the tiny preset's UNet with fixed weights (torch seed 11) and a fixed batch to run and train on.
#pragma once

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <string>
#include <vector>

#include "common/config/job_config.h"
#include "model/model_config.h"
#include "model/unet.h"
#include "train/seeding.h"

namespace lf::test {

// Same shape, dtype and values.
inline bool same_bytes(const torch::Tensor& a, const torch::Tensor& b) {
  return a.sizes() == b.sizes() && a.scalar_type() == b.scalar_type() &&
         torch::equal(a.contiguous(), b.contiguous());
}

// A job config with a placeholder model and dataset and `network` (indented YAML lines) as its
// network section; throws ConfigError as parse_job_config does.
inline JobConfig network_job_config(const std::string& network) {
  return parse_job_config(
      "model:\n  pretrained_model_name_or_path: /m/base.safetensors\n"
      "dataset:\n  train_data_dir: /d\nnetwork:\n" +
          network,
      "t.yaml");
}

class TinyUNetTest : public ::testing::Test {
 protected:
  TinyUNetTest() : unet_(nullptr) {
    torch::manual_seed(11);
    unet_ = UNetModel(model_preset("tiny").unet);
    at::Generator gen = make_cpu_generator(5);
    x_ = torch::randn({2, 4, 8, 8}, gen);       // latents
    context_ = torch::randn({2, 7, 64}, gen);   // text-encoder hidden states
    target_ = torch::randn({2, 4, 8, 8}, gen);  // the loss target
  }
  // The UNet's output at timesteps 10 and 981.
  torch::Tensor run() { return unet_->forward(x_, torch::tensor({10, 981}), context_); }
  // Four plain SGD steps at `lr` on the MSE to target_; from step `grads_from` on, expects every
  // parameter (named by `names`) to have a non-zero gradient. Returns the losses.
  std::vector<double> train_sgd(std::vector<torch::Tensor> params,
                                const std::vector<std::string>& names, double lr, int grads_from) {
    std::vector<double> losses;
    for (int step = 0; step < 4; ++step) {
      torch::Tensor loss = (run() - target_).square().mean();
      losses.push_back(loss.item<double>());
      loss.backward();
      torch::NoGradGuard no_grad;
      for (std::size_t i = 0; i < params.size(); ++i) {
        if (step >= grads_from) {
          EXPECT_GT(params[i].grad().abs().max().item<double>(), 0.0) << names[i];
        }
        params[i].sub_(params[i].grad() * lr);
        params[i].grad().zero_();
      }
    }
    return losses;
  }
  UNetModel unet_;
  torch::Tensor x_, context_, target_;
};

}  // namespace lf::test
