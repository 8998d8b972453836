// Every weights file people download, read into one shape (io/weights.h: named tensors, metadata,
// the format), told apart by content, never by extension:
//   - safetensors (io/safetensors.h);
//   - torch.save files (.pth, .pt, Hugging Face's pytorch_model.bin): the zip format of PyTorch
//     >= 1.6 (<archive>/data.pkl, <archive>/data/<key>, <archive>/version), read by torch_zip.cpp
//     with the restricted unpickler (io/torch_pickle.h) and the zip reader (io/zip.h). Each storage
//     is read once, over the elements its tensors view, and every tensor is a view of it by its
//     offset, size and stride, as torch.load gives them: tensors that share a storage share its
//     memory (forty keys over one storage cost it once; a model's parameters still never alias:
//     nn::Module::load_state_dict). float32 is borrowed from the file mapping where aligned,
//     float16 / bfloat16 widened to float32 once, integer types read as int64.
//     The state dict is the top level, or the entry named state_dict, model, module,
//     model_state_dict or model_state; an EMA copy under state_dict_ema, model_ema or ema_state_dict
//     is kept as `ema`; every other top-level entry (optimizer, epoch, args...) is skipped and
//     listed. A common "module." (DDP) or "_orig_mod." (torch.compile) prefix is removed.
//     Refused by name: the legacy pre-1.6 format (a bare pickle stream), TorchScript archives,
//     big-endian files, and any global outside the unpickler's allow-list.
//   - NumPy .npz (np.savez / savez_compressed): a zip of <key>.npy arrays, stored or deflated;
//     the original ViT / big_vision JAX checkpoints are such files (model/layouts/layout.h
//     maps their names).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "io/safetensors.h"
#include "io/zip.h"

namespace vit::io {

// Reads any of the formats above, told apart by content. Throws vit::Error naming the file and
// what is wrong: "[file] PATH: cannot open (...)" / "not a regular file (a FIFO ...)" (nothing is
// opened that could block), "[file] PATH: not a file vit reads (it is a PNG image; ...)" for
// anything else (an ONNX model, a zip with bytes before it), "[zip] PATH: ..." for a zip archive
// that is neither a torch.save file nor an .npz.
WeightsFile load_weights_file(const std::string& path);

// The torch.save and .npz readers over an opened archive (fuzzing and tests).
WeightsFile read_torch_zip(const ZipArchive& zip);
WeightsFile read_npz(const ZipArchive& zip);

}  // namespace vit::io
