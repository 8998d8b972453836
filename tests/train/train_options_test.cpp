// The training options declared once (train/train_options.h): flags and keywords make the same
// TrainConfig, a preset's recipe takes the options over it, and the rules every door shares
// (exclusions, a length replacing the budget, normalisation of other data, resume) with one set of
// messages.
#include "train/train_options.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "support/errors.h"

namespace vit::train {
namespace {

void expect_error(const std::function<void()>& fn, const std::string& message) {
  const std::string what = testing::error_of(fn);
  EXPECT_NE(what.find(message), std::string::npos) << what << "\n  wanted: " << message;
}

TrainConfig from_flags(const std::vector<std::string>& flags) { return make_train_config(parse_train_flags(flags)); }

TEST(TrainOptions, FlagsAndKeywordsMakeTheSameConfig) {
  const TrainConfig a = from_flags({"--preset", "vit_digits", "--data", "d", "--epochs", "3", "--lr=0.01", "--hflip",
                                    "--mean", "0.5", "--std", "0.25", "--dim", "32", "--no-qkv-bias", "--seed", "7"});
  TrainArgs k;
  k.spelling = Spelling::Keywords;
  k.set("preset", {"vit_digits"});
  k.set("data", {"d"});
  k.set("epochs", {"3"});
  k.set("lr", {"0.01"});
  k.set("hflip", {"true"});
  k.set("mean", {"0.5"});
  k.set("std", {"0.25"});
  k.set("dim", {"32"});
  k.set("qkv_bias", {"false"});
  k.set("seed", {"7"});
  const TrainConfig b = make_train_config(k);
  EXPECT_EQ(a.to_json(), b.to_json());
  EXPECT_EQ(a.model.to_json(), b.model.to_json());
  EXPECT_EQ(a.epochs, 3);
  EXPECT_EQ(a.lr, 0.01);
  EXPECT_TRUE(a.augment.hflip);
  EXPECT_EQ(a.seed, 7u);
  EXPECT_EQ(a.model.dim, 32);
  EXPECT_FALSE(a.model.qkv_bias);
  EXPECT_EQ(a.time_budget, 0.0);  // a length given replaces the budget
  EXPECT_EQ(a.normalization.mean, std::vector<double>{0.5});
  EXPECT_EQ(a.given_model_fields, std::vector<std::string>{"*"});  // a preset: every model field
  EXPECT_TRUE(a.model_explicit);
}

// Mixed precision is one option of the table: the flag and the keyword set it, a run saves it.
TEST(TrainOptions, PrecisionIsAnOptionOfTheRun) {
  EXPECT_EQ(from_flags({}).precision, "fp32");
  const TrainConfig a = from_flags({"--precision", "bf16"});
  TrainArgs k;
  k.spelling = Spelling::Keywords;
  k.set("precision", {"bf16"});
  const TrainConfig b = make_train_config(k);
  EXPECT_EQ(a.precision, "bf16");
  EXPECT_EQ(a.to_json(), b.to_json());
  EXPECT_EQ(TrainConfig::from_json(a.to_json()).precision, "bf16");
  nlohmann::json older = nlohmann::json::parse(a.to_json());  // a checkpoint from before the option: fp32
  older.erase("precision");
  EXPECT_EQ(TrainConfig::from_json(older.dump()).precision, "fp32");
}

TEST(TrainOptions, APresetsRecipeTakesTheOptionsOverItAndOtherDataItsOwnNormalisation) {
  const TrainConfig digits = recipe_for("vit_digits");
  const TrainConfig a = from_flags({"--preset", "vit_digits", "--batch-size", "64"});
  EXPECT_EQ(a.batch_size, 64);
  EXPECT_EQ(a.lr, digits.lr);
  EXPECT_EQ(a.data_dir, digits.data_dir);
  EXPECT_EQ(a.normalization.mean, digits.normalization.mean);  // its own data: the recipe's statistics
  const TrainConfig other = from_flags({"--preset", "vit_digits", "--data", "elsewhere"});
  EXPECT_TRUE(other.normalization.mean.empty());  // other data: computed from its images
  // No preset: the main job, and model options make a "custom" model.
  const TrainConfig fashion = from_flags({});
  EXPECT_EQ(fashion.to_json(), fashion_recipe().to_json());
  EXPECT_FALSE(fashion.model_explicit);
  // Model options without a preset apply over the main job's hybrid; --conv-stages 0 makes it plain.
  const TrainConfig hybrid = from_flags({"--dim", "32"});
  EXPECT_EQ(hybrid.model.name, "custom");
  EXPECT_EQ(hybrid.model.conv_stages, fashion_recipe().model.conv_stages);
  EXPECT_EQ(hybrid.model.dim, 32);
  const TrainConfig plain = from_flags({"--conv-stages", "0", "--patch-size", "7"});
  EXPECT_FALSE(plain.model.hybrid());
  EXPECT_EQ(plain.model.conv_channels, 0);
  EXPECT_EQ(plain.model.conv_stem_stride, 1);
  EXPECT_NO_THROW(plain.model.validate());
  const TrainConfig custom = from_flags({"--depth", "2", "--pre-norm"});
  EXPECT_EQ(custom.model.name, "custom");
  EXPECT_EQ(custom.model.depth, 2);
  EXPECT_TRUE(custom.model.pre_norm);
  EXPECT_EQ(custom.given_model_fields, (std::vector<std::string>{"depth", "pre_norm"}));
  EXPECT_EQ(from_flags({"--no-augment"}).augment.any(), false);
  EXPECT_EQ(from_flags({"--plain"}).progress, 0);
  EXPECT_EQ(from_flags({"--time-budget", "1h30m"}).time_budget, 5400.0);
}

TEST(TrainOptions, GivenFlagsAndResumeAreRecorded) {
  const TrainConfig a = from_flags({"--resume", "runs/x", "--threads", "2", "--preset", "vit_digits"});
  EXPECT_TRUE(a.resume);
  EXPECT_EQ(a.out_dir, "runs/x");
  EXPECT_EQ(a.epochs, 0);  // continue the checkpoint's schedule
  EXPECT_EQ(a.threads, 2);
  EXPECT_EQ(a.given_flags, (std::vector<std::string>{"--threads", "--resume"}));
  expect_error(
      [] {
        from_flags({"--resume", "runs/x", "--out", "runs/y"});
      },
      "[train] --out runs/y with --resume runs/x: a resumed run continues in its own folder");
}

TEST(TrainOptions, BadOptionsAndValuesAreRefusedWithOneSetOfMessages) {
  expect_error([] { from_flags({"--lrr", "1"}); }, "[train] unknown option --lrr (`vit train --help` lists them)");
  expect_error([] { from_flags({"--help"}); }, "[train] unknown option --help");
  expect_error([] { from_flags({"data"}); }, "[train] 'data' is not an option");
  expect_error([] { from_flags({"--lr", "fast"}); }, "[train] --lr: must be a number, got 'fast'");
  expect_error([] { from_flags({"--lr"}); }, "[train] --lr needs a value");
  expect_error([] { from_flags({"--lr", "1", "2"}); }, "[train] --lr: takes one value, got 2");
  expect_error([] { from_flags({"--hflip=no"}); }, "[train] --hflip: takes true or false, got 'no'");
  expect_error([] { from_flags({"--seed", "-1"}); }, "[train] --seed: must be a whole number >= 0, got -1");
  expect_error([] { from_flags({"--batch-size", "2.5"}); }, "[train] --batch-size: must be a whole number, got '2.5'");
  expect_error([] { from_flags({"--threads", "100000"}); }, "or a thread count up to 1024, got 100000");
  expect_error(
      [] {
        from_flags({"--optimizer", "adam"});
      },
      "[train] --optimizer: must be one of adamw, sgd, got 'adam'");
  expect_error([] { from_flags({"--comm-timeout", "0"}); }, "[train] --comm-timeout: must be a number in [1, 86400]");
  expect_error(
      [] {
        from_flags({"--precision", "fp16"});
      },
      "[train] --precision: must be one of fp32, bf16, got 'fp16'");
  expect_error([] { from_flags({"--steps", "0"}); }, "[train] --steps must be >= 1, got 0");
  expect_error(
      [] {
        from_flags({"--epochs", "2", "--time-budget", "10m"});
      },
      "[train] --time-budget excludes --epochs");
  expect_error([] { from_flags({"--steps", "2", "--epochs", "1"}); }, "[train] --steps excludes --epochs");
  expect_error([] { from_flags({"--no-augment", "--rotate", "5"}); }, "[train] --rotate excludes --no-augment");
  expect_error([] { from_flags({"--mean", "0.5"}); }, "[train] --mean needs --std");
  expect_error([] { from_flags({"--dim", ""}); }, "[model] --dim: must not be empty");
  expect_error([] { from_flags({"--depth", "x"}); }, "[model] --depth: must be a whole number, got 'x'");
  // Keywords are named as given.
  TrainArgs k;
  k.spelling = Spelling::Keywords;
  k.set("hflip", {"no"});
  expect_error([&] { make_train_config(k); }, "[train] hflip: takes true or false, got 'no'");
  k.given.clear();
  k.set("no_such_flag", {"3"});
  expect_error([&] { make_train_config(k); }, "[train] unknown option no_such_flag");
}

TEST(TrainOptions, NegativeNumbersAreValuesAndEveryOptionHasHelp) {
  EXPECT_EQ(from_flags({"--weight-decay", "-0"}).weight_decay, 0.0);
  expect_error(
      [] {
        from_flags({"--clip-grad", "-1"}).validate();
      },
      "[train] --clip-grad must be >= 0 (0 turns clipping off), got -1");
  for (const TrainOption& o : train_options()) {
    EXPECT_FALSE(o.help.empty()) << o.name;
    EXPECT_EQ(o.name.find('-'), std::string::npos) << o.name;  // keywords use '_'
  }
}

}  // namespace
}  // namespace vit::train
