// Fuzz target: vit's own checkpoint format on top of the safetensors reader -- every metadata
// value's validation (model config, normalisation, class names, progress, optimizer, checksum
// syntax), the config-against-shapes checks, the one-pass checksum and NaN/Inf scan, and
// building the model the checkpoint describes (and, for an int8 one, running it). The seeds (corpus/checkpoint/seed_*)
// are a tiny checkpoint written by checkpoint::save_checkpoint (tests/support/tiny_checkpoint.h) and copies with one
// metadata value edited, as each file's name says.
#include <memory>
#include <vector>

#include "checkpoint/checkpoint.h"
#include "fuzz_target.h"
#include "infer/inference.h"

VIT_FUZZ_TARGET({
  auto bytes = std::make_shared<std::vector<char>>(data, data + size);
  const vit::io::WeightsFile file = vit::io::parse_safetensors(bytes, "fuzz.safetensors");
  const vit::checkpoint::LoadedCheckpoint checkpoint = vit::checkpoint::parse_checkpoint(file);
  // The weights' element count equals the config's parameter count: building allocates at most
  // about the input's size.
  auto model = vit::checkpoint::model_from_checkpoint(
      checkpoint, checkpoint.ema.empty() ? vit::checkpoint::WeightSet::Raw : vit::checkpoint::WeightSet::Ema);
  // An int8 model: pack it for the int8 kernel (which checks every value and scale again) and run it.
  if (!checkpoint.scales.empty()) {
    vit::infer::InferenceSession session(*model);
    const vit::model::ViTConfig& c = model->config();
    (void)session.forward(vit::Tensor::zeros({1, c.in_channels, c.image_size, c.image_size}));
  }
})
