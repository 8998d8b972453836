// Fine-tuning a model people have (`vit train --init FILE`), as timm's `--pretrained` /
// `--initial-checkpoint` and torchvision's transfer-learning tutorial do it: the model's shape and
// weights come from any file `vit predict` loads (our checkpoints; timm, torchvision and Hugging
// Face layouts; DeiT, DeiT III, DINOv2, CLIP), adapted to the data, each adaptation one line
// (printed when the run starts and recorded in TrainConfig::init_notes):
//   * the head: kept where the file's classes cover the data's (labels then follow the head's
//     order, matched by name); a fresh zero-initialised head (BiT's choice; DeiT's head_dist too)
//     where they are other classes, where the file has none (a feature extractor such as DINOv2,
//     or CLIP, whose image projection is dropped), or with --new-head. Partly covered classes are
//     refused, naming the ones the head does not know.
//   * the resolution: --image-size resamples the position embedding (prefix rows kept), as the
//     loader does for inference.
//   * the channels: the first convolution (the stem's, else the patch embedding's) of an RGB model
//     on grey data is summed over its input channels (timm's adapt_input_conv), a grey model's
//     repeated over RGB and divided by 3; the normalisation follows (mean of the three, or one
//     repeated).
//   * the normalisation: the file's (ImageNet's, CLIP's, the run's own) unless --mean/--std.
// Also the parameter groups of fine-tuning: layer-wise learning-rate decay, a head learning rate,
// and a frozen backbone (a linear probe).
#pragma once

#include <string>
#include <vector>

#include "data/dataset.h"
#include "infer/load_model.h"
#include "optim/optimizer.h"
#include "train/train_config.h"

namespace vit::train {

struct InitSource {
  std::string path;
  infer::LoadedModel loaded;     // the file's model, at the run's resolution
  model::ViTConfig file_config;  // the model as the file has it (before any adaptation, its resolution included)
  bool has_head = false;         // the file has a classifier (not none, not CLIP's projection)
  bool fresh_head = false;       // decided by fit_init_to_data
};

// Reads c.init and makes c.model from it: the file's shape, with the adaptations the options ask
// for (--image-size, --channels, --num-classes, --dropout, --attn-dropout, --drop-path; any other
// model option is refused: the shape is the file's), and c.normalization from the file unless
// --mean was given. An int8 file, a missing file or one that is no model are refused by name.
InitSource read_init(TrainConfig& c);

// With the training data loaded: the channels of data that has its own (IDX grey, CIFAR RGB) and
// the head. Returns the class names the labels must follow (the kept head's), or an empty list
// for a fresh head (sized to the data's classes unless --num-classes). Throws for data whose
// classes the head knows only in part (unless --new-head).
std::vector<std::string> fit_init_to_data(TrainConfig& c, InitSource& src, const data::Dataset& train);

// Copies the file's weights into the run's freshly built model: the input convolution adapted to
// its channels, a fresh head zeroed; checks every parameter was given a value.
void load_init_weights(model::VisionTransformer& m, const InitSource& src, const TrainConfig& c);

// The head's parameters (head.*, head_dist.*): what --freeze backbone trains and --head-lr sets.
bool is_head_parameter(const std::string& name);

// timm's layer id for layer-wise decay (BEiT / MAE fine-tuning): 0 for the embeddings (patch
// embedding, stem, class / distillation / register tokens, position table, CLIP's norm_pre),
// i + 1 for blocks.i, depth + 1 for the rest (final norm, fc_norm, pre-logits, head).
int64_t layer_id(const std::string& name, int64_t depth);

// One lr multiplier per parameter: layer_decay^(depth + 1 - layer_id), and head_lr / lr for the
// head when --head-lr is given; empty when every one is 1.
std::vector<double> lr_scales(const optim::NamedParameters& params, const TrainConfig& c);

}  // namespace vit::train
