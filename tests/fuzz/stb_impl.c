/* The stb implementations, compiled from Debian's headers into the fuzz build only: the regular
   build links Debian's libstb, which the fuzzer could neither see into (no coverage) nor check
   (no AddressSanitizer instrumentation). */
#define STB_IMAGE_IMPLEMENTATION
#define STB_IMAGE_RESIZE_IMPLEMENTATION
#define STB_IMAGE_WRITE_IMPLEMENTATION
#include <stb/stb_image.h>
#include <stb/stb_image_resize.h>
#include <stb/stb_image_write.h>
