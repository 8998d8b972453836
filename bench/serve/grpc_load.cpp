// vit_grpc_load: a closed-loop gRPC load generator for `vit serve --grpc-port` (what wrk is for
// HTTP): C client threads, each with its own channel (its own HTTP/2 connection), call ModelInfer
// back to back for --seconds after --warmup, with one request read from a file (a serialized
// inference.ModelInferRequest) or built here: a (1, 3, S, S) FP32 tensor of random values in
// raw_input_contents, or an image file's bytes as a BYTES input. Prints requests/s, the latency
// percentiles and the failed calls (by status), as one JSON line.
//   vit_grpc_load --port 8001 --model m --concurrency 64 --seconds 10 [--image photo.jpg] [--size 224]
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <map>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "serve/grpc/inference.grpc.pb.h"

namespace {

using Clock = std::chrono::steady_clock;

struct Options {
  std::string host = "127.0.0.1", model = "m", image;
  int port = 8001, concurrency = 64, size = 224;
  double seconds = 10, warmup = 2;
};

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i], v = argv[i + 1];
    if (k == "--host")
      o.host = v;
    else if (k == "--port")
      o.port = std::stoi(v);
    else if (k == "--model")
      o.model = v;
    else if (k == "--concurrency")
      o.concurrency = std::stoi(v);
    else if (k == "--seconds")
      o.seconds = std::stod(v);
    else if (k == "--warmup")
      o.warmup = std::stod(v);
    else if (k == "--image")
      o.image = v;
    else if (k == "--size")
      o.size = std::stoi(v);
    else {
      std::fprintf(stderr, "vit_grpc_load: unknown option %s\n", k.c_str());
      std::exit(2);
    }
  }
  return o;
}

inference::ModelInferRequest request(const Options& o) {
  inference::ModelInferRequest r;
  r.set_model_name(o.model);
  auto* in = r.add_inputs();
  if (!o.image.empty()) {
    std::ifstream f(o.image, std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    if (bytes.empty()) {
      std::fprintf(stderr, "vit_grpc_load: cannot read %s\n", o.image.c_str());
      std::exit(2);
    }
    in->set_name("image");
    in->set_datatype("BYTES");
    in->add_shape(1);
    std::string raw(4, '\0');
    for (int k = 0; k < 4; ++k) raw[static_cast<size_t>(k)] = static_cast<char>((bytes.size() >> (8 * k)) & 0xff);
    r.add_raw_input_contents(raw + bytes);
  } else {
    in->set_name("input");
    in->set_datatype("FP32");
    for (int64_t d : {1, 3, o.size, o.size}) in->add_shape(d);
    std::vector<float> x(static_cast<size_t>(3) * o.size * o.size);
    std::mt19937 gen(1);
    std::normal_distribution<float> normal;
    for (float& v : x) v = normal(gen);
    r.add_raw_input_contents(std::string(reinterpret_cast<const char*>(x.data()), x.size() * 4));
  }
  r.add_outputs()->set_name("logits");
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse(argc, argv);
  const inference::ModelInferRequest req = request(o);
  const auto start = Clock::now();
  const auto measure_from =
      start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(o.warmup));
  const auto end = measure_from + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(o.seconds));
  std::mutex m;
  std::vector<double> latencies;
  std::map<int, int64_t> failed;
  std::vector<std::thread> threads;
  for (int t = 0; t < o.concurrency; ++t) {
    threads.emplace_back([&, t] {
      grpc::ChannelArguments args;
      args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);  // a connection of its own
      args.SetInt("vit.client", t);                        // distinct arguments: distinct channels
      args.SetMaxReceiveMessageSize(-1);
      auto stub = inference::GRPCInferenceService::NewStub(
          grpc::CreateCustomChannel(o.host + ":" + std::to_string(o.port), grpc::InsecureChannelCredentials(), args));
      std::vector<double> mine;
      std::map<int, int64_t> bad;
      for (;;) {
        const auto t0 = Clock::now();
        if (t0 >= end) break;
        grpc::ClientContext context;
        inference::ModelInferResponse reply;
        const grpc::Status s = stub->ModelInfer(&context, req, &reply);
        const auto t1 = Clock::now();
        if (t0 < measure_from) continue;
        if (s.ok()) {
          mine.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
        } else {
          ++bad[s.error_code()];
        }
      }
      std::lock_guard lock(m);
      latencies.insert(latencies.end(), mine.begin(), mine.end());
      for (const auto& [code, n] : bad) failed[code] += n;
    });
  }
  for (std::thread& t : threads) t.join();
  std::sort(latencies.begin(), latencies.end());
  auto pct = [&](double p) {
    return latencies.empty() ? 0.0
                             : latencies[std::min(latencies.size() - 1, static_cast<size_t>(p * latencies.size()))];
  };
  int64_t failures = 0;
  std::string codes;
  for (const auto& [code, n] : failed) {
    failures += n;
    codes += (codes.empty() ? "" : ",") + std::string("\"") + std::to_string(code) + "\":" + std::to_string(n);
  }
  std::printf(
      "{\"requests\": %zu, \"requests_per_s\": %.2f, \"p50_ms\": %.2f, \"p99_ms\": %.2f, \"failed\": %ld, "
      "\"failed_by_status\": {%s}}\n",
      latencies.size(), static_cast<double>(latencies.size()) / o.seconds, pct(0.5), pct(0.99), failures,
      codes.c_str());
  return failures == 0 ? 0 : 1;
}
