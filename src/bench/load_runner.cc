#include "bench/load_runner.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <random>

#include "bench/arrival.h"
#include "bench/progress_bar.h"
#include "core/error.h"

namespace vireo::bench {

Endpoint parse_base_url(const std::string& url) {
  std::string rest = url;
  Endpoint ep;
  if (rest.rfind("https://", 0) == 0) {
    rest = rest.substr(8);
    ep.tls = true;
    ep.port = 443;
  } else if (rest.rfind("http://", 0) == 0) {
    rest = rest.substr(7);
  }
  size_t slash = rest.find('/');
  std::string hostport = rest.substr(0, slash);
  if (slash != std::string::npos) ep.path_prefix = rest.substr(slash);
  while (!ep.path_prefix.empty() && ep.path_prefix.back() == '/') ep.path_prefix.pop_back();
  size_t colon = hostport.rfind(':');
  if (!hostport.empty() && hostport[0] == '[') {  // [v6]:port
    size_t close = hostport.find(']');
    if (close == std::string::npos) throw Error("--base-url: bad IPv6 host in '" + url + "'");
    ep.host = hostport.substr(1, close - 1);
    colon = hostport.size() > close + 1 && hostport[close + 1] == ':' ? close + 1 : std::string::npos;
  } else {
    ep.host = hostport.substr(0, colon);
  }
  if (colon != std::string::npos) {
    try {
      ep.port = std::stoi(hostport.substr(colon + 1));
    } catch (const std::exception&) {
      throw Error("--base-url: bad port in '" + url + "'");
    }
  }
  if (ep.host.empty()) throw Error("--base-url: no host in '" + url + "'");
  return ep;
}

std::vector<RequestResult> run_load(const std::vector<SampleRequest>& requests, const LoadOptions& opt,
                                    double* duration_s, std::chrono::steady_clock::time_point* origin) {
  const int n = static_cast<int>(requests.size());
  std::vector<RequestResult> results(n);
  std::vector<double> offsets = opt.ramp_up.strategy.empty()
                                    ? arrival_offsets(n, opt.request_rate, opt.burstiness, opt.seed)
                                    : arrival_offsets(n, opt.ramp_up, opt.burstiness, opt.seed);
  // Request bodies and result buffers are made before the clock starts: the loop below only sends,
  // reads and parses.
  std::vector<HttpRequest> reqs(n);
  std::mt19937_64 lora_rng(opt.seed ^ 0x6c6f7261ull);
  for (int i = 0; i < n; ++i) {
    reqs[i].path = opt.path;
    const std::string& model =
        opt.lora_modules.empty() ? opt.model : opt.lora_modules[lora_rng() % opt.lora_modules.size()];
    reqs[i].body = build_request_body(opt.backend, model, requests[i].prompt, requests[i].expected_output_len,
                                      opt.ignore_eos, opt.extra_body);
    reqs[i].timeout_s = opt.request_timeout_s;
    reqs[i].headers = opt.headers;
    if (!opt.request_id_prefix.empty()) reqs[i].headers.emplace_back("x-request-id", opt.request_id_prefix + std::to_string(i));
    results[i].prompt_len = requests[i].prompt_len;
    size_t expect = static_cast<size_t>(std::clamp(requests[i].expected_output_len, 1, 1 << 16));
    results[i].itl.reserve(expect - 1);
    results[i].generated_text.reserve(std::min<size_t>(expect * 8, 1 << 16));
  }
  EpollHttpClient client(opt.host, opt.port, opt.tls);
  std::vector<std::unique_ptr<OpenAIStreamHandler>> handlers(n);
  ProgressBar bar(n, opt.progress);
  int done = 0, next = 0;
  const double t0 = client.now();
  if (origin) *origin = client.origin() + std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(t0));
  while (done < n) {
    double t = client.now() - t0;
    while (next < n && offsets[next] <= t && (!opt.max_concurrency || client.in_flight() < *opt.max_concurrency)) {
      handlers[next] = std::make_unique<OpenAIStreamHandler>(opt.backend, &results[next], client.now(),
                                                             [&done] { ++done; });
      client.start(reqs[next], handlers[next].get());
      ++next;
    }
    if (done >= n) break;
    int timeout_ms = 100;
    if (next < n && (!opt.max_concurrency || client.in_flight() < *opt.max_concurrency)) {
      double wait = offsets[next] - (client.now() - t0);
      timeout_ms = wait <= 0 ? 0 : std::min(100, static_cast<int>(std::ceil(wait * 1000.0)));
    }
    client.poll(timeout_ms);
    bar.update(done);
  }
  bar.finish(done);
  if (duration_s) *duration_s = client.now() - t0;
  for (auto& r : results) r.start_time -= t0;  // client clock -> seconds since the benchmark start
  return results;
}

}  // namespace vireo::bench
