// classify: the smallest useful program on vit's C++ package. Loads any checkpoint vit reads,
// then for each argument:
//   an image file  -> its top-3 classes (a feature extractor: its embedding's size and norm);
//   X.npy          -> a float32 (B, C, H, W) batch, as numpy.save writes it: its logits are
//                     written to X.logits.npy (the same numbers as `vit predict --tensor X.npy`).
// With --save-input DIR, each image's preprocessed pixels are also written to DIR/NAME.npy.
// "--train DATA_DIR OUT_DIR" trains a small ViT on the MNIST files in DATA_DIR for one epoch
// (the flags of `vit train`), printing each epoch from a callback.
//   classify MODEL.safetensors [--save-input DIR] (IMAGE | X.npy)...
//   classify --train DATA_DIR OUT_DIR
#include <vit/vit.h>

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

namespace {

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

std::string base_name(const std::string& path) { return path.substr(path.find_last_of('/') + 1); }

int train(const std::string& data_dir, const std::string& out_dir) {
  const vit::TrainReport r =
      vit::train_model({"--data", data_dir, "--out", out_dir, "--preset", "vit_digits", "--dim", "16", "--depth", "1",
                        "--heads", "2", "--epochs", "1", "--batch-size", "32", "--plain", "--overwrite"},
                       [](const vit::EpochReport& e) {
                         std::printf("callback: epoch %ld/%ld test accuracy %.4f (%s)\n", static_cast<long>(e.epoch),
                                     static_cast<long>(e.epochs), e.test_accuracy, e.checkpoint.c_str());
                         return true;  // false would stop here (resumable with --resume)
                       });
  std::printf("trained %ld epoch(s): test accuracy %.4f\n", static_cast<long>(r.epochs_run), r.final_test_accuracy);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3 || (std::string(argv[1]) == "--train" && argc != 4)) {
    std::fprintf(
        stderr,
        "usage: %s MODEL.safetensors [--save-input DIR] (IMAGE | X.npy)...\n       %s --train DATA_DIR OUT_DIR\n",
        argv[0], argv[0]);
    return 2;
  }
  try {
    if (std::string(argv[1]) == "--train") return train(argv[2], argv[3]);

    vit::set_num_threads(0);  // all cores
    const vit::Model model = vit::Model::load(argv[1]);
    std::printf("%s: %s layout, %ldx%ld, %ld classes (vit %s)\n", argv[1], model.layout().c_str(),
                static_cast<long>(model.image_size()), static_cast<long>(model.image_size()),
                static_cast<long>(model.num_classes()), vit::version().c_str());
    std::string save_dir;
    for (int i = 2; i < argc; ++i) {
      const std::string arg = argv[i];
      if (arg == "--save-input" && i + 1 < argc) {
        save_dir = argv[++i];
        continue;
      }
      if (ends_with(arg, ".npy")) {  // a batch from numpy
        const vit::Array x = vit::load_npy(arg);
        if (x.shape.size() != 4) throw vit::Error("classify: " + arg + " must be a (B, C, H, W) batch");
        const std::vector<float> logits = model.predict(x.values.data(), x.shape[0]);
        const std::string out = arg.substr(0, arg.size() - 4) + ".logits.npy";
        vit::save_npy(out, logits, {x.shape[0], model.num_classes()});
        std::printf("%s: %ld images -> %s\n", arg.c_str(), static_cast<long>(x.shape[0]), out.c_str());
        continue;
      }
      const std::vector<float> pixels = model.load_image(arg);  // decoded + preprocessed
      if (!save_dir.empty()) {
        vit::save_npy(save_dir + "/" + base_name(arg) + ".npy", pixels,
                      {1, model.in_channels(), model.image_size(), model.image_size()});
      }
      if (!model.has_classifier()) {
        const std::vector<float> e = model.embed(pixels.data(), 1);
        double norm = 0;
        for (float v : e) norm += static_cast<double>(v) * v;
        std::printf("%s: embedding of %zu values, norm %.4f\n", arg.c_str(), e.size(), std::sqrt(norm));
        continue;
      }
      const std::vector<float> logits = model.predict(pixels.data(), 1);
      const std::vector<std::vector<vit::Prediction>> top = model.top_k(logits, 3);  // one list per image
      std::printf("%s:", arg.c_str());
      for (const vit::Prediction& p : top[0]) {
        std::printf("  %s %.2f%% (logit %.6f)", p.label.c_str(), 100 * p.probability,
                    static_cast<double>(logits[static_cast<size_t>(p.index)]));
      }
      std::printf("\n");
    }
  } catch (const vit::Error& e) {  // the same messages the vit command prints
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}
