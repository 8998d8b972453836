// Fuzz target: image decoding (PNG, JPEG, BMP, GIF, ... through stb_image, with the pixel limit)
// followed by both resize paths: the training loader's (grey, 28x28) and `vit predict`'s
// PIL-exact bicubic resize + center crop + normalisation (RGB, 32x32 crop).
#include <vector>

#include "data/image.h"
#include "fuzz_target.h"
#include "infer/preprocess.h"

VIT_FUZZ_TARGET({
  // A small pixel limit keeps every execution fast; the limit itself is exercised by the bombs
  // in the corpus (large declared sizes in tiny files).
  const vit::data::Image image = vit::data::decode_image(data, size, "fuzz.img", 1 << 16);
  const vit::data::Image grey = vit::data::resize(vit::data::convert_channels(image, 1), 28, 28);
  (void)grey.pixels.at(28 * 28 - 1);
  vit::infer::Preprocess p;
  p.resize = 36;
  p.crop = 32;
  std::vector<float> out(3 * 32 * 32);
  vit::infer::preprocess_into(image, p, 3, out.data());
})
