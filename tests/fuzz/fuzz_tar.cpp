// Fuzz target: a WebDataset tar shard (data/shards.h): the tar reader (ustar/pax/GNU headers),
// samples grouped by key, their .cls/.txt labels, then every listed image decoded from where the
// listing says it lies (with a small pixel limit).
#include "data/shards.h"
#include "fuzz_target.h"

VIT_FUZZ_TARGET({
  const vit::data::Dataset d = vit::data::list_shard_bytes(data, size, "fuzz.tar");
  for (const vit::data::ShardMember& m : d.members) {
    if (m.offset > size || m.size > size - m.offset) __builtin_trap();  // a listing past the bytes: a bug
    try {
      (void)vit::data::decode_image(data + m.offset, m.size, "member", 1 << 16);
    } catch (const vit::Error&) {
    }
  }
  for (const int64_t label : d.labels) {
    if (label < 0 || label >= d.num_classes()) __builtin_trap();
  }
})
