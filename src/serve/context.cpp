// What the endpoints share (see context.h): option checks, decoding within the budget, running a
// batch within the timeout.
#include "serve/context.h"

#include <chrono>
#include <cmath>
#include <cstring>
#include <future>

#include "core/check.h"
#include "serve/router.h"

namespace vit::serve {

using Clock = std::chrono::steady_clock;

void ServerOptions::validate() const {
  VIT_CHECK(!host.empty(), "serve",
            "--host is empty: give the address to listen on (127.0.0.1, or 0.0.0.0 for every interface)");
  VIT_CHECK(request_timeout > 0 && std::isfinite(request_timeout), "serve",
            "--request-timeout must be positive, got {}", request_timeout);
  VIT_CHECK(max_body_bytes >= 1024, "serve", "--max-body must be at least 1024 bytes, got {}", max_body_bytes);
  VIT_CHECK(http_threads >= 1 && http_threads <= 4096, "serve", "--http-threads must be in [1, 4096], got {}",
            http_threads);
  VIT_CHECK(top_k >= 1, "serve", "--top-k must be >= 1, got {}", top_k);
  VIT_CHECK(port >= 0 && port <= 65535, "serve", "--port must be in [0, 65535], got {}", port);
  VIT_CHECK(grpc_port >= -1 && grpc_port <= 65535, "serve", "--grpc-port must be in [0, 65535], got {}", grpc_port);
  const int64_t pixels = max_pixels > 0 ? max_pixels : data::kDefaultMaxPixels;
  const int64_t largest = kPeakBytesPerValue * 4 * pixels;  // an RGBA image at the pixel limit
  VIT_CHECK(decode_memory_bytes >= largest, "serve",
            "--decode-memory {} MiB cannot decode one image at the pixel limit ({} pixels: {} MiB at its peak); "
            "raise it or lower --max-pixels",
            decode_memory_bytes >> 20, pixels, largest >> 20);
}

ServeContext::ServeContext(std::vector<NamedModel> list, ServerOptions o)
    : models(std::move(list), o.repository.control != ModelControl::None),
      options((o.validate(), std::move(o))),
      metrics(),
      decode_budget(options.decode_memory_bytes) {}

int64_t ServeContext::max_pixels() const {
  return options.max_pixels > 0 ? options.max_pixels : data::kDefaultMaxPixels;
}

data::Image ServeContext::decode(const ServedModel& m, const uint8_t* bytes, size_t size, const char* name) {
  const data::ImageHeader header = data::read_image_header(bytes, size, name);
  if (header.height * header.width > max_pixels())
    return data::decode_image(bytes, size, name, max_pixels());  // refuses
  const int64_t need = kPeakBytesPerValue * header.height * header.width *
                       std::max<int64_t>({header.channels, m.config().in_channels, 1});
  const std::optional<DecodeBudget::Lease> lease = decode_budget.try_reserve(need);
  if (!lease) {
    throw HttpError{503, fmt::format("[serve] the server is short of image-decoding memory: this {}x{} image needs {} "
                                     "MiB at its peak, {} of {} MiB (--decode-memory) are in use; retry",
                                     header.width, header.height, need >> 20, decode_budget.used() >> 20,
                                     decode_budget.total() >> 20)};
  }
  try {
    return data::decode_image(bytes, size, name, max_pixels());
  } catch (const Error& e) {  // stb's allocation failure: the server is short, not the image bad
    if (std::strstr(e.what(), "(outofmem)") != nullptr) throw std::bad_alloc();
    throw;
  }
}

Tensor ServeContext::run(ServedModel& m, const infer::Request& kind, Tensor images) {
  Batcher::Ticket ticket;
  try {
    ticket = m.batcher->submit(kind, std::move(images));
  } catch (const QueueFull& e) {
    throw HttpError{429, e.what()};
  } catch (const ShuttingDown& e) {
    throw HttpError{503, e.what()};
  }
  const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                           std::chrono::duration<double>(options.request_timeout));
  for (;;) {
    const auto now = Clock::now();
    const auto give_up = Clock::time_point(std::chrono::nanoseconds(give_up_ns.load()));
    if (now >= deadline || now >= give_up) break;
    const auto slice = std::min({deadline - now, give_up - now, Clock::duration(std::chrono::milliseconds(100))});
    if (ticket.result.wait_for(slice) == std::future_status::ready) return ticket.result.get();
  }
  m.batcher->cancel(ticket);
  throw HttpError{
      503, fmt::format("timed out after {} s waiting for the model (--request-timeout)", options.request_timeout)};
}

}  // namespace vit::serve
