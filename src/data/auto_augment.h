// Automatic augmentation policies on 8-bit (C, H, W) images, as torchvision defines them:
//   ta_wide      TrivialAugmentWide: one operation drawn uniformly, its strength drawn uniformly
//                from 31 bins of the "wide" ranges (shear 0-0.99, translate 0-32 px, rotate
//                0-135 degrees, brightness/colour/contrast/sharpness 0-0.99, posterize 8-2 bits,
//                solarize 255-0), signed operations mirrored half the time.
//   rand-mM-nN   RandAugment: N operations (default 2) drawn uniformly, each at bin M of 31 (default
//                9; 0-30) of RandAugment's ranges (shear 0-0.3, translate 0-150/331 of the side,
//                rotate 0-30 degrees, brightness/colour/contrast/sharpness 0-0.9, posterize 8-4
//                bits, solarize 255-0).
// The operations: identity, shear x/y, translate x/y, rotate (nearest neighbour, filled with 0, as
// torchvision's defaults), brightness, colour (saturation), contrast, sharpness, posterize,
// solarize, autocontrast, equalize. Applied after the crop and flip, before normalisation (timm's
// and torchvision's order).
#pragma once

#include <cstdint>
#include <string>

#include "core/random.h"

namespace vit::data {

struct AutoAugment {
  enum class Kind { None, TrivialWide, Rand };
  Kind kind = Kind::None;
  int64_t magnitude = 9;  // RandAugment's bin (0-30)
  int64_t ops = 2;        // RandAugment's operations per image
};
inline constexpr int64_t kMagnitudeBins = 31;

// "" (none), "ta_wide", "rand", "rand-m9", "rand-m9-n2" (any order of -m / -n); anything else is
// refused naming `what` (the flag) and the accepted forms.
AutoAugment parse_auto_augment(const std::string& text, const std::string& what = "--auto-augment");

enum class AugmentOp {
  Identity,
  ShearX,
  ShearY,
  TranslateX,
  TranslateY,
  Rotate,
  Brightness,
  Color,
  Contrast,
  Sharpness,
  Posterize,
  Solarize,
  AutoContrast,
  Equalize,
  Count
};

// One operation at `magnitude` (signed where the operation has a direction: shear factor, pixels,
// degrees, enhancement delta; bits for posterize, threshold for solarize), in place.
void apply_augment_op(AugmentOp op, double magnitude, uint8_t* pixels, int64_t channels, int64_t height, int64_t width);

// The policy's draws from `gen`, applied in place.
void apply_auto_augment(const AutoAugment& policy, uint8_t* pixels, int64_t channels, int64_t height, int64_t width,
                        Generator& gen);

}  // namespace vit::data
