// torch.save files written byte by byte (support/torch_files.h) against the reader's bounds: a
// pickle that amplifies is refused within its memory budget; forty keys over one storage cost
// that storage once; 200k keys (each set twice) load in linear time; a NaN in bytes past a
// storage's elements is no element of its tensor.
#include <gtest/gtest.h>
#include <omp.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "core/check.h"
#include "io/weights_file.h"
#include "support/torch_files.h"

namespace vit::io {
namespace {

using testing::PickleBytes;
using testing::TorchStorage;
using testing::TorchTensor;

WeightsFile read(const std::vector<testing::ZipMember>& members, const std::string& name = "t.pth") {
  const std::string bytes = testing::zip_bytes(members);
  return read_torch_zip(ZipArchive::from_bytes(std::make_shared<std::vector<char>>(bytes.begin(), bytes.end()), name));
}

// Runs `body` in a child process (one thread); its exit status, and how much its peak resident memory grew
// (MiB) in `grown_mb` (-1 when the child did not say).
int in_child(const std::function<int()>& body, long& grown_mb) {
  int pipe_fds[2];
  if (pipe(pipe_fds) != 0) return -1;
  const pid_t pid = fork();
  if (pid == 0) {
    omp_set_num_threads(1);  // the parent's OpenMP threads are not in this process
    close(pipe_fds[0]);
    rusage before{}, after{};
    getrusage(RUSAGE_SELF, &before);
    const int status = body();
    getrusage(RUSAGE_SELF, &after);
    const long grown = (after.ru_maxrss - before.ru_maxrss) / 1024;
    (void)!write(pipe_fds[1], &grown, sizeof grown);
    _exit(status);
  }
  close(pipe_fds[1]);
  grown_mb = -1;
  (void)!::read(pipe_fds[0], &grown_mb, sizeof grown_mb);
  close(pipe_fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 100 + WTERMSIG(status);
}

TEST(TorchZip, APickleThatAmplifiesIsRefusedInBoundedMemory) {
  // ~2 KB on disk: a deflated pickle that makes a list of 1M items, then torch.Size(list) 500
  // times (4 MiB of copied items each: 2 GB in all without a budget).
  PickleBytes p;
  p.proto().op(']').put(0).op('(').i1(0);
  p.b.append((1 << 20) - 1, '2');  // DUP
  p.op('e').global("torch", "Size").put(1).op('0');
  for (int i = 0; i < 500; ++i) p.get(1).get(0).op('\x85').op('R').op('0');
  p.stop();
  const auto members = testing::torch_members(p.b, {}, /*deflate_pickle=*/true);
  EXPECT_LT(testing::zip_bytes(members).size(), 8000u);
  long grown_mb = 0;
  const auto start = std::chrono::steady_clock::now();
  const int status = in_child(
      [&] {
        try {
          read(members);
          return 1;  // loaded
        } catch (const Error& e) {
          const std::string what = e.what();
          return what.find("[pickle] t.pth: archive/data.pkl: ") != std::string::npos &&
                         what.find("exceeds its memory budget") != std::string::npos
                     ? 0
                     : 2;
        }
      },
      grown_mb);
  EXPECT_EQ(status, 0) << "1: it loaded; 2: refused with another message";
  EXPECT_LT(grown_mb, 400) << "MiB of peak memory for a ~2 KB file";
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 20.0);
}

// A float32 storage of n elements valued i % 1000, and a float16 one of n ones.
std::vector<TorchStorage> big_storages(int64_t n) {
  std::string f32(static_cast<size_t>(n) * 4, '\0'), f16(static_cast<size_t>(n) * 2, '\0');
  for (int64_t i = 0; i < n; ++i) {
    const float v = static_cast<float>(i % 1000);
    std::memcpy(&f32[static_cast<size_t>(i) * 4], &v, 4);
    const uint16_t one = 0x3c00;
    std::memcpy(&f16[static_cast<size_t>(i) * 2], &one, 2);
  }
  return {{"0", "FloatStorage", f32}, {"1", "HalfStorage", f16}};
}

// Where the memory a tensor views starts (the same for views of one buffer).
const void* buffer_of(const Tensor& t) {
  return static_cast<const char*>(t.raw_data()) - t.offset() * static_cast<int64_t>(dtype_size(t.dtype()));
}

TEST(TorchZip, TensorsSharingAStorageShareOneBuffer) {
  const int64_t n = 4 << 20;  // 16 MiB of float32, 8 MiB of float16
  const std::vector<TorchStorage> storages = big_storages(n);
  std::vector<TorchTensor> tensors;
  for (int i = 0; i < 40; ++i) tensors.push_back({"w" + std::to_string(i), "0", 0, {n}, {1}});
  for (int i = 0; i < 4; ++i) tensors.push_back({"t" + std::to_string(i), "0", 0, {2048, 2048}, {1, 2048}});
  for (int i = 0; i < 40; ++i) tensors.push_back({"h" + std::to_string(i), "1", 0, {n}, {1}});
  const auto members = testing::torch_members(testing::state_dict_pickle(tensors, storages), storages);
  const WeightsFile f = read(members);
  ASSERT_EQ(f.tensors.size(), tensors.size());
  const Tensor& w0 = f.tensors[0].second;
  const Tensor& h0 = f.tensors[44].second;
  for (const auto& [name, t] : f.tensors) {
    EXPECT_EQ(buffer_of(t), buffer_of(name[0] == 'h' ? h0 : w0)) << name << ": a copy of its storage of its own";
  }
  EXPECT_EQ(w0.at({1234567}), 567.0);
  const Tensor& t0 = f.tensors[40].second;  // the transposed view
  EXPECT_EQ(t0.at({1, 0}), 1.0);
  EXPECT_EQ(t0.at({0, 1}), 48.0);  // element 2048
  EXPECT_EQ(h0.dtype(), DType::F32);
  EXPECT_EQ(h0.at({n - 1}), 1.0);
  // In memory: the archive (24 MiB, copied into the reader) and the float16 storage widened once
  // (16 MiB), not 84 copies (1.3 GB).
  long grown_mb = 0;
  EXPECT_EQ(in_child(
                [&] {
                  const WeightsFile g = read(members);
                  return g.tensors.size() == tensors.size() ? 0 : 1;
                },
                grown_mb),
            0);
  EXPECT_LT(grown_mb, 200) << "MiB of peak memory for 84 views of 24 MiB of storages";
}

TEST(TorchZip, ManyKeysAndKeysSetTwiceLoadInLinearTime) {
  // 200k keys over one tensor, then each key set again (the later value wins, in place): a scan
  // of the keys per repeated key took minutes here.
  const int n = 200000;
  PickleBytes p;
  p.proto().global("collections", "OrderedDict").op(')').op('R');
  auto key = [](int i) { return fmt::format("k{:06d}", i); };
  for (int pass = 0; pass < 2; ++pass) {
    for (int i = 0; i < n; ++i) {
      if (i % 1000 == 0) p.op('(');
      p.str(key(i));
      if (pass == 0 && i == 0) {
        p.global("torch._utils", "_rebuild_tensor_v2").op('(');
        p.op('(').str("storage").global("torch", "FloatStorage").str("0").str("cpu").i1(1).op('t').op('Q');
        p.i1(0).op('(').i1(1).op('t').op('(').i1(1).op('t').op('\x89');
        p.global("collections", "OrderedDict").op(')').op('R').op('t').op('R').put(7);
      } else {
        p.get(7);
      }
      if (i % 1000 == 999 || i == n - 1) p.op('u');
    }
  }
  p.stop();
  const auto start = std::chrono::steady_clock::now();
  const WeightsFile f = read(testing::torch_members(p.b, {{"0", "FloatStorage", std::string(4, '\0')}}));
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ASSERT_EQ(f.tensors.size(), static_cast<size_t>(n));
  EXPECT_EQ(f.tensors[0].first, key(0));
  EXPECT_EQ(f.tensors[n - 1].first, key(n - 1));
  EXPECT_LT(seconds, 20.0) << "200k keys, each set twice";
}

TEST(TorchZip, ANanPastAStoragesElementsIsNoElementOfItsTensor) {
  // The entry holds 8 floats; the storage (and its one tensor) has 4; a NaN at entry element 6.
  std::string bytes(32, '\0');
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::memcpy(&bytes[24], &nan, 4);
  TorchStorage s{"0", "FloatStorage", bytes, 4};
  const std::vector<TorchTensor> tensors = {{"w", "0", 0, {4}, {1}}};
  const WeightsFile clean = read(testing::torch_members(testing::state_dict_pickle(tensors, {s}), {s}));
  EXPECT_EQ(clean.torch.prescanned.size(), 1u);  // searched while its bytes were read
  EXPECT_EQ(clean.torch.prescan.nonfinite_count, 0) << "index " << clean.torch.prescan.nonfinite_index;
  std::memcpy(&s.bytes[8], &nan, 4);  // element 2: the tensor's
  const WeightsFile dirty = read(testing::torch_members(testing::state_dict_pickle(tensors, {s}), {s}));
  EXPECT_EQ(dirty.torch.prescan.nonfinite_count, 1);
  EXPECT_EQ(dirty.torch.prescan.nonfinite_index, 2);
  EXPECT_EQ(dirty.torch.prescan.nonfinite_tensor, "w");
}

}  // namespace
}  // namespace vit::io
