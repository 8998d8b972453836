// The dynamic batcher of `vit serve`: requests arriving within the delay run as one model call
// (up to max_batch images), kinds never mix, every request gets its own rows, a full queue
// refuses at once, a cancelled request is not run (and leaves the queue at once), a failing call fails only its batch,
// and drain() runs what is queued before returning.
#include "serve/batcher.h"

#include <gtest/gtest.h>

#include <chrono>
#include <mutex>
#include <thread>

#include "core/check.h"
#include "serve/metrics.h"

namespace vit::serve {
namespace {

const Kind kLogits{infer::Output::Logits};
const Kind kCls{infer::Output::Embedding, infer::Pool::Cls};
const Kind kFail{infer::Output::Embedding, infer::Pool::Tokens};  // the recorder's failing kind

// A "model" that returns, per image, (first pixel, batch size it was called with), and remembers
// each call's kind and size.
struct Recorder {
  std::mutex mutex;
  std::vector<std::pair<std::string, int64_t>> calls;
  std::chrono::milliseconds delay{0};
  Tensor operator()(const Kind& kind, const Tensor& images) {
    std::this_thread::sleep_for(delay);
    VIT_CHECK(!(kind == kFail), "test", "this kind fails");
    {
      std::lock_guard lock(mutex);
      calls.emplace_back(infer::request_name(kind), images.size(0));
    }
    Tensor out = Tensor::empty({images.size(0), 2});
    for (int64_t i = 0; i < images.size(0); ++i) {
      out.data<float>()[2 * i] = images.contiguous().data<float>()[i * images.numel() / images.size(0)];
      out.data<float>()[2 * i + 1] = static_cast<float>(images.size(0));
    }
    return out;
  }
};

Tensor marked(int64_t n, float first) {
  Tensor t = Tensor::zeros({n, 1, 2, 2});
  for (int64_t i = 0; i < n; ++i) t.data<float>()[i * 4] = first + static_cast<float>(i);
  return t;
}

TEST(Batcher, RequestsWithinTheDelayShareOneCallAndGetTheirOwnRows) {
  Recorder model;
  int64_t batches = 0;
  std::vector<double> waited;
  Batcher batcher(
      {.max_batch = 8, .max_delay_us = 200'000, .max_queue = 16},
      [&](const Kind& k, const Tensor& x) { return model(k, x); },
      [&](int64_t, const std::vector<double>& w) {
        ++batches;
        waited = w;
      });
  std::vector<Batcher::Ticket> tickets;
  for (int r = 0; r < 4; ++r) tickets.push_back(batcher.submit(kLogits, marked(2, 10.0f * r)));
  for (int r = 0; r < 4; ++r) {
    const Tensor rows = tickets[r].result.get();
    ASSERT_EQ(rows.shape(), (Shape{2, 2}));
    EXPECT_EQ(rows.data<float>()[0], 10.0f * r);
    EXPECT_EQ(rows.data<float>()[2], 10.0f * r + 1);
    EXPECT_EQ(rows.data<float>()[1], 8.0f) << "all four requests ran as one batch of 8";
  }
  EXPECT_EQ(batches, 1);
  ASSERT_EQ(waited.size(), 4u) << "one queue time per request";
  for (double w : waited) EXPECT_TRUE(w >= 0 && w < 0.2) << w << " s: the batch filled at once, before the delay";
}

// A request behind a busy model waits in the queue for the model call before it: its queue time
// is that call's length, reported for each request of its batch.
TEST(Batcher, QueueTimeIsTheWaitBehindTheBatchBefore) {
  std::vector<double> waited;
  std::mutex m;
  Batcher batcher(
      {.max_batch = 1, .max_delay_us = 0, .max_queue = 16},
      [](const Kind&, const Tensor& x) {
        std::this_thread::sleep_for(std::chrono::milliseconds(150));
        return x;
      },
      [&](int64_t, const std::vector<double>& w) {
        std::lock_guard lock(m);
        waited.insert(waited.end(), w.begin(), w.end());
      });
  Batcher::Ticket first = batcher.submit(kLogits, marked(1, 0));
  Batcher::Ticket second = batcher.submit(kLogits, marked(1, 1));
  first.result.get();
  second.result.get();
  std::lock_guard lock(m);
  ASSERT_EQ(waited.size(), 2u);
  EXPECT_LT(waited[0], 0.1) << "the first ran at once";
  EXPECT_GE(waited[1], 0.14) << "the second waited for the first call (150 ms)";
}

TEST(Batcher, KindsDoNotMixAndMaxBatchIsHeld) {
  Recorder model;
  Batcher batcher({.max_batch = 3, .max_delay_us = 50'000, .max_queue = 16},
                  [&](const Kind& k, const Tensor& x) { return model(k, x); });
  std::vector<Batcher::Ticket> tickets;
  for (int r = 0; r < 4; ++r) tickets.push_back(batcher.submit(r % 2 ? kCls : kLogits, marked(1, 0)));
  tickets.push_back(batcher.submit(kLogits, marked(5, 0)));  // larger than max_batch: runs alone
  for (auto& t : tickets) t.result.get();
  std::lock_guard lock(model.mutex);
  int64_t images = 0;
  for (const auto& [kind, n] : model.calls) {
    images += n;
    EXPECT_TRUE(n <= 3 || n == 5) << kind << " " << n;
  }
  EXPECT_EQ(images, 9);
  EXPECT_GE(model.calls.size(), 3u);
}

TEST(Batcher, AFullQueueRefusesAndCancelledRequestsAreNotRun) {
  Recorder model;
  model.delay = std::chrono::milliseconds(100);
  Batcher batcher({.max_batch = 1, .max_delay_us = 0, .max_queue = 2},
                  [&](const Kind& k, const Tensor& x) { return model(k, x); });
  auto running = batcher.submit(kLogits, marked(1, 1));
  std::this_thread::sleep_for(std::chrono::milliseconds(30));  // taken by the worker
  auto cancelled = batcher.submit(kLogits, marked(1, 2));
  auto waiting = batcher.submit(kLogits, marked(1, 3));
  EXPECT_EQ(batcher.queue_depth(), 2);
  EXPECT_THROW(batcher.submit(kLogits, marked(1, 4)), QueueFull);
  cancelled.cancelled->store(true);
  EXPECT_EQ(running.result.get().data<float>()[0], 1.0f);
  EXPECT_THROW(cancelled.result.get(), Error);
  EXPECT_EQ(waiting.result.get().data<float>()[0], 3.0f);
  std::lock_guard lock(model.mutex);
  EXPECT_EQ(model.calls.size(), 2u);
}

// A caller that gives up (the server's request timeout) frees its place in the queue at once:
// the next request is not refused for it, and the model never sees it.
TEST(Batcher, ACancelledRequestLeavesTheQueueAtOnce) {
  Recorder model;
  model.delay = std::chrono::milliseconds(200);
  Batcher batcher({.max_batch = 1, .max_delay_us = 0, .max_queue = 1},
                  [&](const Kind& k, const Tensor& x) { return model(k, x); });
  auto running = batcher.submit(kLogits, marked(1, 1));
  std::this_thread::sleep_for(std::chrono::milliseconds(30));  // taken by the worker
  auto given_up = batcher.submit(kLogits, marked(1, 2));
  EXPECT_EQ(batcher.queue_depth(), 1);
  batcher.cancel(given_up);
  EXPECT_EQ(batcher.queue_depth(), 0);
  auto next = batcher.submit(kLogits, marked(1, 3));  // room again while the model is still busy
  EXPECT_THROW(given_up.result.get(), Error);
  EXPECT_EQ(running.result.get().data<float>()[0], 1.0f);
  EXPECT_EQ(next.result.get().data<float>()[0], 3.0f);
  std::lock_guard lock(model.mutex);
  EXPECT_EQ(model.calls.size(), 2u);
}

TEST(Batcher, AFailingCallFailsItsRequestsAndTheWorkerGoesOn) {
  Recorder model;
  Batcher batcher({.max_batch = 4, .max_delay_us = 0, .max_queue = 4},
                  [&](const Kind& k, const Tensor& x) { return model(k, x); });
  auto bad = batcher.submit(kFail, marked(1, 0));
  EXPECT_THROW(bad.result.get(), Error);
  EXPECT_EQ(batcher.submit(kLogits, marked(1, 5)).result.get().data<float>()[0], 5.0f);
}

TEST(Batcher, DrainRunsWhatIsQueuedThenRefuses) {
  Recorder model;
  model.delay = std::chrono::milliseconds(20);
  Batcher batcher({.max_batch = 1, .max_delay_us = 0, .max_queue = 8},
                  [&](const Kind& k, const Tensor& x) { return model(k, x); });
  std::vector<Batcher::Ticket> tickets;
  for (int r = 0; r < 5; ++r) tickets.push_back(batcher.submit(kLogits, marked(1, static_cast<float>(r))));
  batcher.drain();
  for (auto& t : tickets) {
    EXPECT_EQ(t.result.wait_for(std::chrono::seconds(0)), std::future_status::ready);
    t.result.get();
  }
  EXPECT_THROW(batcher.submit(kLogits, marked(1, 0)), ShuttingDown);
}

TEST(Batcher, BadOptionsAreRefused) {
  auto run = [](const Kind&, const Tensor& x) { return x; };
  EXPECT_THROW(Batcher({.max_batch = 0}, run), Error);
  EXPECT_THROW(Batcher({.max_batch = 1, .max_delay_us = -1}, run), Error);
  EXPECT_THROW(Batcher({.max_batch = 1, .max_delay_us = 0, .max_queue = 0}, run), Error);
}

TEST(Metrics, PrometheusTextHasCumulativeBucketsLabelledByModel) {
  Metrics m;
  m.add_model("a");
  m.add_model("b");
  m.request("a", "/v1/predict", 200, 0.003);
  m.request("a", "/v1/predict", 200, 0.2);
  m.request("a", "/v1/embed", 400, 0.0001);
  m.request("b", "/v2/infer", 200, 0.02);
  m.batch("a", 8, {0.0002, 0.003, 0.003});
  m.load("b", true);
  m.load("b", false);
  m.load("b", true);
  const std::string text = m.text({{"a", 2}, {"b", 0}}, 1);
  EXPECT_NE(text.find("vit_requests_total{model=\"a\",endpoint=\"/v1/predict\",code=\"200\"} 2\n"), std::string::npos)
      << text;
  EXPECT_NE(text.find("vit_requests_total{model=\"a\",endpoint=\"/v1/embed\",code=\"400\"} 1\n"), std::string::npos);
  EXPECT_NE(text.find("vit_requests_total{model=\"b\",endpoint=\"/v2/infer\",code=\"200\"} 1\n"), std::string::npos);
  EXPECT_NE(text.find("vit_request_duration_seconds_bucket{model=\"a\",le=\"0.001\"} 1\n"), std::string::npos) << text;
  EXPECT_NE(text.find("vit_request_duration_seconds_bucket{model=\"a\",le=\"0.005\"} 2\n"), std::string::npos) << text;
  EXPECT_NE(text.find("vit_request_duration_seconds_bucket{model=\"a\",le=\"+Inf\"} 3\n"), std::string::npos);
  EXPECT_NE(text.find("vit_request_duration_seconds_count{model=\"a\"} 3\n"), std::string::npos);
  EXPECT_NE(text.find("vit_request_duration_seconds_count{model=\"b\"} 1\n"), std::string::npos);
  EXPECT_NE(text.find("vit_batch_size_bucket{model=\"a\",le=\"4\"} 0\n"), std::string::npos) << text;
  EXPECT_NE(text.find("vit_batch_size_bucket{model=\"a\",le=\"8\"} 1\n"), std::string::npos);
  EXPECT_NE(text.find("vit_batch_size_count{model=\"b\"} 0\n"), std::string::npos);
  EXPECT_NE(text.find("vit_queue_depth{model=\"a\"} 2\n"), std::string::npos);
  EXPECT_NE(text.find("vit_queue_depth{model=\"b\"} 0\n"), std::string::npos);
  EXPECT_NE(text.find("vit_inflight_requests 1\n"), std::string::npos);
  EXPECT_NE(text.find("vit_batch_requests_bucket{model=\"a\",le=\"4\"} 1\n"), std::string::npos) << text;
  EXPECT_NE(text.find("vit_queue_duration_seconds_bucket{model=\"a\",le=\"0.00025\"} 1\n"), std::string::npos) << text;
  EXPECT_NE(text.find("vit_queue_duration_seconds_bucket{model=\"a\",le=\"0.0025\"} 1\n"), std::string::npos);
  EXPECT_NE(text.find("vit_queue_duration_seconds_bucket{model=\"a\",le=\"0.005\"} 3\n"), std::string::npos);
  EXPECT_NE(text.find("vit_queue_duration_seconds_count{model=\"b\"} 0\n"), std::string::npos);
  EXPECT_NE(text.find("vit_model_loads_total{model=\"b\",result=\"ok\"} 2\n"), std::string::npos) << text;
  EXPECT_NE(text.find("vit_model_loads_total{model=\"b\",result=\"failed\"} 1\n"), std::string::npos);
}

}  // namespace
}  // namespace vit::serve
