// session_server: the example tools/demo records (README.md, "Try it").
//
// A toy server answers 400 requests, one every 2 ms, and has the three memory problems a
// profiler is for, each on a line marked for tests/e2e/test_demo.py:
//  - a peak: halfway, it serializes its sessions into one 8 MiB buffer, writes it out and
//    drops it (@snapshot): memory in use jumps, then falls back;
//  - a leak: a request without a session makes HandleRequest return early, forgetting the
//    4 KiB copy of the body it made (@body): one request in 25, 16 blocks at exit;
//  - a logical leak: the session cache keeps every session it has seen (@session) and lets
//    go only at exit. Nothing of it is left then, but it grows all along: `memlens leaks
//    --growth` finds it.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>
#include <string>
#include <thread>
#include <vector>

namespace {

constexpr int kRequests = 400;
constexpr size_t kBodyBytes = 4096;

struct Request {
  int id;
  int session;  // 0: the request names no session (malformed)
  std::string body;
};

class SessionCache {
 public:
  // Keeps the session's state. Nothing is ever evicted: the cache grows with every session.
  void Remember(int session, const char* body) {
    sessions_[session] = std::string(2048, body[0]);  // @session
  }
  const std::map<int, std::string>& sessions() const { return sessions_; }

 private:
  std::map<int, std::string> sessions_;
};

// Copies the request's body to work on it; the early return forgets to free the copy.
bool HandleRequest(const Request& request, SessionCache* cache) {
  char* body = new char[kBodyBytes];  // @body
  std::memset(body, 0, kBodyBytes);
  std::memcpy(body, request.body.data(), std::min(request.body.size(), kBodyBytes - 1));
  if (request.session == 0) return false;  // malformed: the copy leaks here
  cache->Remember(request.session, body);
  delete[] body;
  return true;
}

// Serializes every session into one buffer, "writes" it, and drops it: the peak.
size_t WriteSnapshot(const SessionCache& cache, std::FILE* out) {
  std::vector<char> buffer(8 << 20);  // @snapshot
  size_t used = 0;
  for (const auto& [id, state] : cache.sessions()) {
    if (used + state.size() > buffer.size()) break;
    std::memcpy(buffer.data() + used, state.data(), state.size());
    used += state.size();
  }
  std::fwrite(buffer.data(), 1, used, out);
  return used;
}

}  // namespace

int main() {
  std::FILE* sink = std::fopen("/dev/null", "w");
  if (!sink) return 1;
  SessionCache cache;
  int served = 0, rejected = 0;
  size_t snapshot_bytes = 0;
  for (int i = 1; i <= kRequests; ++i) {
    Request request{i, i % 25 == 0 ? 0 : i, "GET /account/" + std::to_string(i)};
    if (HandleRequest(request, &cache)) {
      ++served;
    } else {
      ++rejected;
    }
    if (i == kRequests / 2) snapshot_bytes += WriteSnapshot(cache, sink);
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  std::fclose(sink);
  std::printf("served %d requests, rejected %d, wrote a snapshot of %zu bytes\n", served, rejected,
              snapshot_bytes);
  return 0;
}
