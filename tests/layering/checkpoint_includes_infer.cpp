// Must NOT compile: the checkpoint format sits below infer (which reads it), so infer's headers
// are not on checkpoint's include path (tests/CMakeLists.txt builds this against vit_checkpoint
// and expects the missing-header error).
#include "infer/load_model.h"
