// TrainConfig's JSON, as every checkpoint's "train_config" carries it (and --resume reads it
// back): the text written today is pinned byte for byte, every key is required, and bad JSON is
// refused with the "[train]" prefix naming the key.
#include "train/train_config.h"

#include <gtest/gtest.h>

#include "core/check.h"

namespace vit::train {
namespace {

std::string error_of(const std::string& json) {
  try {
    TrainConfig::from_json(json);
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(TrainConfigJson, TextIsPinnedAndRoundTrips) {
  const std::string recipe =
      R"({"data_dir":"data/mnist","epochs":95,"batch_size":64,"optimizer":"adamw","lr":0.002,"min_lr":1e-05,)"
      R"("weight_decay":0.05,"momentum":0.9,"warmup_epochs":1.0,"label_smoothing":0.1,"clip_grad":1.0,)"
      R"("ema_decay":0.995,"seed":0,"skip_nonfinite":false,"eval_batch_size":500,"augment":{"crop_padding":0,)"
      R"("hflip":false,"rotate_degrees":8.0,"translate":0.08,"scale_min":0.92,"scale_max":1.08,"mixup_alpha":0.0,)"
      R"("cutmix_alpha":0.0,"erase_prob":0.0,"rrc_scale":0.0,"auto_augment":""},"milestones":[0.97,0.985],"time_budget":0.0,"steps":0,)"
      R"("val_split":0,"schedule":[],)"
      R"("teacher":"","teacher_heads":0,"distillation":"hard","distill_alpha":0.5,"distill_tau":1.0,)"
      R"("precision":"fp32","init":"","init_notes":[],"new_head":false,"keep_head":false,"layer_decay":1.0,"head_lr":0.0,)"
      R"("freeze":"none"})";
  EXPECT_EQ(digits_recipe().to_json(), recipe);
  TrainConfig c;
  c.seed = 18446744073709551615ull;
  c.augment.hflip = true;
  c.augment.crop_padding = 4;
  c.augment.mixup_alpha = 0.8;
  c.augment.cutmix_alpha = 1.0;
  c.skip_nonfinite = true;
  c.optimizer = "sgd";
  c.clip_grad = 0;
  c.threads = 3;  // a run's own settings are not saved
  c.out_dir = "elsewhere";
  c.max_pixels = 7;
  const std::string custom =
      R"({"data_dir":"data/mnist","epochs":30,"batch_size":128,"optimizer":"sgd","lr":0.002,"min_lr":1e-05,)"
      R"("weight_decay":0.05,"momentum":0.9,"warmup_epochs":1.0,"label_smoothing":0.1,"clip_grad":0.0,)"
      R"("ema_decay":0.0,"seed":18446744073709551615,"skip_nonfinite":true,"eval_batch_size":500,)"
      R"("augment":{"crop_padding":4,"hflip":true,"rotate_degrees":0.0,"translate":0.0,"scale_min":1.0,)"
      R"("scale_max":1.0,"mixup_alpha":0.8,"cutmix_alpha":1.0,"erase_prob":0.0,"rrc_scale":0.0,"auto_augment":""},)"
      R"("milestones":[],"time_budget":0.0,"steps":0,)"
      R"("val_split":0,"schedule":[],"teacher":"","teacher_heads":0,"distillation":"hard","distill_alpha":0.5,)"
      R"("distill_tau":1.0,"precision":"fp32","init":"","init_notes":[],"new_head":false,"keep_head":false,"layer_decay":1.0,)"
      R"("head_lr":0.0,"freeze":"none"})";
  EXPECT_EQ(c.to_json(), custom);
  // Checkpoints written before distillation (and mixed precision, fine-tuning) existed read with
  // their defaults (no teacher, float32, no --init).
  const std::string before = recipe.substr(0, recipe.find(R"(,"teacher")")) + "}";
  EXPECT_EQ(TrainConfig::from_json(before).to_json(), recipe);
  for (const std::string& json : {recipe, custom}) EXPECT_EQ(TrainConfig::from_json(json).to_json(), json);
  // ... and before the random resized crop (none).
  std::string no_rrc = recipe;
  no_rrc.erase(no_rrc.find(R"(,"rrc_scale":0.0)"), std::string(R"(,"rrc_scale":0.0)").size());
  EXPECT_EQ(TrainConfig::from_json(no_rrc).to_json(), recipe);
  // ... and before the automatic augmentation policies (none).
  std::string no_policy = recipe;
  no_policy.erase(no_policy.find(R"(,"auto_augment":"")"), std::string(R"(,"auto_augment":"")").size());
  EXPECT_EQ(TrainConfig::from_json(no_policy).to_json(), recipe);
  const TrainConfig back = TrainConfig::from_json(custom);
  EXPECT_EQ(back.seed, 18446744073709551615ull);
  EXPECT_EQ(back.threads, 0);
  EXPECT_EQ(back.out_dir, "runs/digits");
  // Checkpoints written before milestones were part of the recipe load with none; the recipe's
  // normalisation is not part of the text (the checkpoint saves the one in use on its own).
  const std::string before_milestones = recipe.substr(0, recipe.find(",\"milestones\"")) + "}";
  EXPECT_TRUE(TrainConfig::from_json(before_milestones).milestones.empty());
  EXPECT_EQ(TrainConfig::from_json(before_milestones).augment.rotate_degrees, 8.0);
  EXPECT_TRUE(TrainConfig::from_json(recipe).normalization.mean.empty());
}

TEST(TrainConfigJson, EveryKeyIsRequired) {
  const std::string prefix = "[train] invalid training config JSON: [json.exception.";
  EXPECT_EQ(error_of("{}"), prefix + "out_of_range.403] key 'data_dir' not found");
  EXPECT_EQ(error_of("[1]"), prefix + "type_error.304] cannot use at() with array");
  EXPECT_EQ(error_of("not json"), prefix +
                                      "parse_error.101] parse error at line 1, column 2: syntax error while parsing "
                                      "value - invalid literal; last read: 'no'");
  const std::string top =
      R"({"data_dir":"d","epochs":1,"batch_size":2,"optimizer":"adamw","lr":0.1,"min_lr":0,"weight_decay":0,)"
      R"("momentum":0,"warmup_epochs":0,"label_smoothing":0,"clip_grad":0,"ema_decay":0,"seed":1,)"
      R"("skip_nonfinite":false,"eval_batch_size":3)";
  EXPECT_EQ(error_of(top + "}"), prefix + "out_of_range.403] key 'augment' not found");
  EXPECT_EQ(error_of(top + R"(,"augment":{"crop_padding":1}})"), prefix + "out_of_range.403] key 'hflip' not found");
  EXPECT_EQ(error_of(top + R"(,"augment":3})"), prefix + "type_error.304] cannot use at() with number");
}

}  // namespace
}  // namespace vit::train

namespace vit::train {
namespace {

std::string validation_error(const TrainConfig& c) {
  try {
    c.validate();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

// A recipe's normalisation needs one mean and one positive std per input channel; milestones are
// accuracies.
TEST(TrainConfigValidate, NormalisationAndMilestones) {
  TrainConfig c = digits_recipe();
  EXPECT_EQ(validation_error(c), "(no error)");
  c.normalization = {{0.5, 0.5, 0.5}, {0.2, 0.2, 0.2}};
  EXPECT_EQ(validation_error(c), "[train] --mean and --std need 1 value each (one per input channel), got 3 and 3");
  c.normalization = {{0.5}, {0.0}};
  EXPECT_EQ(validation_error(c), "[train] --mean must be finite and --std positive, got mean 0.5 std 0");
  c.normalization = {};
  EXPECT_EQ(validation_error(c), "(no error)");
  c.milestones = {0.9, 98.5};
  EXPECT_EQ(validation_error(c), "[train] milestones must be accuracies in (0, 1], got 98.5");
}

}  // namespace
}  // namespace vit::train

namespace vit::train {
namespace {

std::string duration_error(const std::string& text) {
  try {
    parse_duration(text, "--time-budget");
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(TimeBudget, DurationsParseInSecondsMinutesAndHours) {
  EXPECT_EQ(parse_duration("600", "--time-budget"), 600.0);
  EXPECT_EQ(parse_duration("90.5", "--time-budget"), 90.5);
  EXPECT_EQ(parse_duration("10m", "--time-budget"), 600.0);
  EXPECT_EQ(parse_duration("1h", "--time-budget"), 3600.0);
  EXPECT_EQ(parse_duration("1h30m", "--time-budget"), 5400.0);
  EXPECT_EQ(parse_duration("2m30s", "--time-budget"), 150.0);
  EXPECT_EQ(parse_duration("45s", "--time-budget"), 45.0);
  EXPECT_EQ(parse_duration("0.5h", "--time-budget"), 1800.0);
  const std::string expected = "expected seconds or numbers with units h, m, s (600, 10m, 1h, 1h30m, 90s)";
  for (const std::string bad : {"10x", "", "m", "10mm", "1m1h", "-5", "1e3", "10 m", "1h30", "..", "1.2.3m"}) {
    EXPECT_EQ(duration_error(bad), "[train] --time-budget '" + bad + "': " + expected) << bad;
  }
  EXPECT_EQ(duration_error("0"), "[train] --time-budget '0': must be a positive duration");
  EXPECT_EQ(duration_error("0m"), "[train] --time-budget '0m': must be a positive duration");
  EXPECT_EQ(duration_error("99999999999h"), "[train] --time-budget '99999999999h': more than a year");
  EXPECT_EQ(duration_str(600), "10m");
  EXPECT_EQ(duration_str(5430), "1h 30m 30s");
  EXPECT_EQ(duration_str(45.5), "45.5s");
}

TEST(Recipes, EachPresetBringsItsOwn) {
  const TrainConfig fashion = recipe_for("vit_fashion");
  EXPECT_EQ(fashion.data_dir, "data/fashion-mnist");
  EXPECT_EQ(fashion.time_budget, 600.0);
  EXPECT_EQ(fashion.model.name, "vit_fashion");
  EXPECT_TRUE(fashion.normalization.mean.empty());  // computed from the training images
  // The main job is the hybrid; the plain preset keeps the same recipe around its own model.
  EXPECT_EQ(recipe_for("vit_hybrid_fashion").to_json(), fashion_recipe().to_json());
  EXPECT_EQ(fashion_recipe().model.name, "vit_hybrid_fashion");
  // vit_fashion keeps the values screened for it; the hybrid's were screened apart (it underfits).
  EXPECT_EQ(fashion.lr, 2e-3);
  EXPECT_EQ(fashion.label_smoothing, 0.1);
  EXPECT_EQ(fashion.augment.crop_padding, 2);
  EXPECT_EQ(fashion_recipe().lr, 3e-3);
  EXPECT_EQ(fashion_recipe().label_smoothing, 0.0);
  EXPECT_EQ(fashion_recipe().augment.crop_padding, 1);
  EXPECT_EQ(fashion.time_budget, fashion_recipe().time_budget);
  EXPECT_EQ(fashion.ema_decay, fashion_recipe().ema_decay);
  EXPECT_EQ(recipe_for("vit_digits").to_json(), digits_recipe().to_json());
  const TrainConfig other = recipe_for("vit_cifar");
  EXPECT_EQ(other.model.name, "vit_cifar");
  EXPECT_EQ(other.time_budget, 0.0);
  EXPECT_EQ(other.epochs, TrainConfig{}.epochs);
  fashion.validate();
  digits_recipe().validate();
}

}  // namespace
}  // namespace vit::train
