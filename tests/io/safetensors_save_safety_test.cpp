// Saving against a hostile world: two writers replacing the same file at once (two `vit train`
// in one folder did) each write a temporary file of their own, so the file on disk is always one
// complete version; text that JSON cannot hold (not UTF-8) is refused as a vit error naming the
// file, with nothing written.
#include <gmock/gmock.h>
#include <unistd.h>

#include <atomic>
#include <mutex>
#include <thread>

#include "safetensors_test_util.h"

namespace vit::io::test {
namespace {

using ::testing::HasSubstr;

TEST_F(SafetensorsTest, ConcurrentSavesOfOneFileNeverShareATemporaryFile) {
  const std::string file = path("last.safetensors");
  const std::vector<std::pair<std::string, Tensor>> a = {{"w", Tensor::full({4096}, 1.0)}};
  const std::vector<std::pair<std::string, Tensor>> b = {{"w", Tensor::full({4096}, 2.0)}};
  std::atomic<int> failures{0};
  std::string first_failure;
  std::mutex mutex;
  auto writer = [&](const std::vector<std::pair<std::string, Tensor>>& tensors, const std::string& tag) {
    for (int i = 0; i < 40; ++i) {
      try {
        save_safetensors(file, tensors, {{"writer", tag}});
      } catch (const std::exception& e) {
        std::lock_guard<std::mutex> guard(mutex);
        if (failures++ == 0) first_failure = e.what();
      }
    }
  };
  std::thread ta(writer, std::cref(a), "a"), tb(writer, std::cref(b), "b");
  ta.join();
  tb.join();
  EXPECT_EQ(failures.load(), 0) << first_failure;
  // Whole: one writer's tensor and its own metadata, never a mix.
  const WeightsFile loaded = load_safetensors(file);
  const std::string tag = loaded.metadata.at("writer");
  EXPECT_EQ(loaded.get("w").to_vector(), std::vector<double>(4096, tag == "a" ? 1.0 : 2.0));
  std::vector<std::string> entries;
  for (const auto& e : fs::directory_iterator(dir_)) entries.push_back(e.path().filename().string());
  EXPECT_EQ(entries, (std::vector<std::string>{"last.safetensors"}));
}

TEST_F(SafetensorsTest, TemporaryNamesAreUniqueAndNameTheFileAndTheProcess) {
  const std::string file = path("last.safetensors");
  const std::string one = temp_path(file), two = temp_path(file);
  EXPECT_NE(one, two);
  EXPECT_EQ(one.rfind(file + ".tmp." + std::to_string(::getpid()) + ".", 0), 0u) << one;
}

TEST_F(SafetensorsTest, TextThatIsNotUtf8IsRefusedNamingTheFileAndNothingIsWritten) {
  const std::string file = path("bad.safetensors");
  std::string msg = error_of([&] { save_safetensors(file, {{"w", Tensor::ones({2})}}, {{"data", "caf\xE9"}}); });
  EXPECT_EQ(msg.rfind("[safetensors] " + file + ": cannot write the header as JSON (", 0), 0u) << msg;
  EXPECT_THAT(msg, HasSubstr("UTF-8"));
  msg = error_of([&] { save_safetensors(file, {{"w\xFF", Tensor::ones({2})}}); });
  EXPECT_EQ(msg.rfind("[safetensors] " + file + ": cannot write the header as JSON (", 0), 0u) << msg;
  EXPECT_TRUE(fs::is_empty(dir_));
}

}  // namespace
}  // namespace vit::io::test
