// src/analyzer/export/pyroscope.h
//
// Sending pprof profiles to a Grafana Pyroscope server through its HTTP ingest API: POST
// /ingest?name=SERVICE{label=value,...}&from=UNIX&until=UNIX&format=pprof&spyName=memlens, the
// body multipart/form-data with the gzipped profile.proto in a part named "profile"
// (docs/push.md says which servers take it, and why this API). HTTP is libcurl's, loaded at the first push (libcurl.h) (https, basic
// auth from the URL's user:password@ or MEMLENS_PUSH_USER, the tenant from MEMLENS_PUSH_TENANT).
//
// Runs on: the `push` command's main thread, or the pusher's threads (cli/pusher.h), one
// IngestClient each.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "analyzer/model/replay.h"

namespace memlens::analyzer {

struct CurlApi;

struct PushLabel {
  std::string name, value;
};

struct PushTarget {
  std::string url;      // as given: http(s)://[user:password@]host[:port][/prefix][/ingest]
  std::string service;  // the application name, Pyroscope's service_name
  std::vector<PushLabel> labels;  // host and pid first, then the user's, in order
};

// Where profiles are sent: an http:// or https:// URL with a host, and no query or fragment.
bool CheckPushUrl(const std::string& url, std::string* error);
// "k=v": the name as Prometheus spells label names, not starting with "__" (reserved) nor
// service_name (that is --service); the value non-empty, without {},=" or control characters,
// which would break the name=SERVICE{...} syntax.
bool ParsePushLabel(const std::string& text, PushLabel* label, std::string* error);
bool CheckServiceName(const std::string& name, std::string* error);
// A program's name as a service name: the characters CheckServiceName refuses become '_'.
std::string ServiceNameOf(const std::string& program);
// Sets `label` in *labels, replacing one of the same name (the user's host= wins over ours).
void SetPushLabel(std::vector<PushLabel>* labels, const PushLabel& label);
// The ingest API's name parameter, before URL encoding: "service{host=a,pid=7,env=prod}".
std::string IngestName(const PushTarget& target);
// The URL for messages: the password (if any) is left out.
std::string RedactedUrl(const std::string& url);

// Turns a profile of a capture still being written into one period's: the in-use figures stay
// those of now, the allocations become those made since the last call, per stack
// (*allocated: each stack's allocations and bytes so far, updated here). Stacks with nothing in
// use and nothing allocated in the period are left out.
using AllocatedSoFar = std::unordered_map<uint64_t, std::pair<uint64_t, uint64_t>>;
void TakePeriod(AllocatedSoFar* allocated, Profile* profile);

// One connection to the server, kept alive between sends.
class IngestClient {
 public:
  explicit IngestClient(PushTarget target);
  ~IngestClient();
  IngestClient(const IngestClient&) = delete;
  IngestClient& operator=(const IngestClient&) = delete;

  // Sends one gzipped pprof covering [from, until] (UNIX seconds). Gives up after `timeout`, or
  // soon after *cancel turns true (within about a second). A 2xx answer is success; anything
  // else is false with one line in *error ("HTTP 400: ...", "Connection refused", ...).
  bool Send(const std::string& pprof, int64_t from, int64_t until,
            std::chrono::milliseconds timeout, const std::atomic<bool>* cancel, std::string* error);

 private:
  PushTarget target_;
  std::string ingest_url_;  // the URL up to its query: .../ingest
  const CurlApi* api_ = nullptr;  // nullptr: libcurl could not be loaded (libcurl.h)
  void* curl_ = nullptr;          // CURL*
};

}  // namespace memlens::analyzer
