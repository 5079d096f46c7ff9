// lora_copies (worker/train/lora_copies.h): kohya's file names of the LoRAs saved during
// training and which older one its save_last_n_epochs / save_last_n_steps remove.
#include <gtest/gtest.h>

#include "worker/train/lora_copies.h"

namespace lf {
namespace {

TEST(LoRACopies, NamedAsKohyaNamesThem) {
  EXPECT_EQ(lora_copy_name("mine", SaveReason::kEpoch, 40, 2), "mine-000002.safetensors");
  EXPECT_EQ(lora_copy_name("mine", SaveReason::kStep, 100, 2), "mine-step00000100.safetensors");
  EXPECT_EQ(lora_copy_name("mine", SaveReason::kFinal, 100, 2), "mine.safetensors");
}

TEST(LoRACopies, EpochPeriodFromEveryNOrTheRatio) {
  TrainingSection t;
  EXPECT_EQ(epoch_save_period(t, 10), 0);
  t.save_every_n_epochs = 2;
  EXPECT_EQ(epoch_save_period(t, 10), 2);
  t.save_n_epoch_ratio = 3;  // kohya: floor(10 / 3) = 3, and it wins over save_every_n_epochs
  EXPECT_EQ(epoch_save_period(t, 10), 3);
  t.save_n_epoch_ratio = 20;  // floor(10 / 20) = 0 -> 1
  EXPECT_EQ(epoch_save_period(t, 10), 1);
}

TEST(LoRACopies, RetentionRemovesWhatKohyaRemoves) {
  TrainingSection t;
  t.save_every_n_epochs = 2;
  t.save_last_n_epochs = 2;
  // Epoch saves at 2, 4, 6: the save of epoch 6 removes epoch 2's (6 - 2 * 2).
  EXPECT_FALSE(lora_copy_to_remove(t, "m", SaveReason::kEpoch, 0, 4, 2).has_value());
  EXPECT_EQ(lora_copy_to_remove(t, "m", SaveReason::kEpoch, 0, 6, 2), "m-000002.safetensors");
  // kohya get_remove_step_no: save every 10, keep the last 25 steps: the save at step 50
  // removes step 20's ((50 - 25 - 1) rounded down to a multiple of 10).
  t.save_every_n_steps = 10;
  t.save_last_n_steps = 25;
  EXPECT_EQ(lora_copy_to_remove(t, "m", SaveReason::kStep, 50, 0, 2), "m-step00000020.safetensors");
  EXPECT_FALSE(lora_copy_to_remove(t, "m", SaveReason::kStep, 30, 0, 2).has_value());
  EXPECT_FALSE(lora_copy_to_remove(t, "m", SaveReason::kFinal, 50, 6, 2).has_value());
}

}  // namespace
}  // namespace lf
