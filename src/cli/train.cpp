// `vit train`: the flags of train::train_options() and model::model_options(), parsed by CLI11 as
// text into train::TrainArgs; train::make_train_config applies the rules every door shares.
#include <omp.h>

#include "cli/commands.h"
#include "core/parse.h"
#include "kernels/threads.h"
#include "model/model_options.h"
#include "train/train_options.h"
#include "train/trainer.h"

namespace vit::cli {

void set_threads(int threads) {
  if (threads > 0) kernels::set_num_threads(threads);  // 0: the process's default (all cores)
}

void add_train_command(CLI::App& app) {
  CLI::App* cmd = app.add_subcommand("train",
                                     "train a ViT (default: Fashion-MNIST from data/fashion-mnist, vit_hybrid_fashion "
                                     "preset, a 10-minute budget tuned for 2 "
                                     "CPU cores; --preset vit_digits --data data/mnist: the bundled digits)");
  // Every option keeps the text given: the table's setters parse it, with the messages every door shares.
  auto options = std::make_shared<std::vector<std::pair<std::string, CLI::Option*>>>();
  for (const train::TrainOption& o : train::train_options()) {
    CLI::Option* option =
        o.arity == train::TrainOption::Arity::Flag ? cmd->add_flag(flag_of(o.name)) : cmd->add_option(flag_of(o.name));
    option->description(o.help)->type_name(o.type);
    if (o.arity == train::TrainOption::Arity::List) option->expected(1, 64);
    if (!o.default_text.empty() && o.arity != train::TrainOption::Arity::Flag) option->default_str(o.default_text);
    options->emplace_back(o.name, option);
  }
  for (const model::ModelOption& o : model::model_options()) {
    CLI::Option* option =
        o.toggle ? cmd->add_flag(flag_of(o.name) + ",!" + flag_of(o.negation)) : cmd->add_option(flag_of(o.name));
    option->description("model: " + o.help)->type_name(o.type);
    options->emplace_back(o.name, option);
  }
  cmd->callback([options] {
    train::TrainArgs args;
    for (const auto& [name, option] : *options) {
      if (option->count() > 0) args.set(name, option->results());
    }
    train::train(train::make_train_config(args));
  });
}

}  // namespace vit::cli
