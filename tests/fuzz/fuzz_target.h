// Shared by the fuzz targets: every target feeds bytes to one reader and accepts exactly one
// outcome besides success, a vit::Error naming what is wrong. Anything else (a crash, a
// sanitizer report, std::bad_alloc, any other exception) escapes and is a bug.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/check.h"

#define VIT_FUZZ_TARGET(body)                                               \
  extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) { \
    try {                                                                   \
      body;                                                                 \
    } catch (const ::vit::Error&) {                                         \
    }                                                                       \
    return 0;                                                               \
  }
