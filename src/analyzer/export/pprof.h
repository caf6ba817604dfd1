// src/analyzer/export/pprof.h
//
// A profile as pprof reads it: gzipped profile.proto (github.com/google/pprof,
// proto/profile.proto) with Go's heap sample types, so `go tool pprof`, Pyroscope and Parca
// open it as they open a Go heap profile. One sample per call stack; functions carry file and
// line, Python and native frames alike; every module is a mapping with its build-id.
// Written with protozero (Debian libprotozero-dev) and zlib: docs/exports.md says why.
//
// Runs on: the analyzer's main thread (the `export` command), or the pusher's thread.
#pragma once

#include <cstdint>
#include <string>

#include "analyzer/model/replay.h"
#include "analyzer/model/sites.h"

namespace memlens::analyzer {

struct PprofOptions {
  int64_t time_nanos = 0;      // Profile.time_nanos: when the profile was taken (0: unset)
  int64_t duration_nanos = 0;  // Profile.duration_nanos: the period it covers (0: unset)
  std::string default_sample_type = "inuse_space";  // one of the four sample types' names
};

// A capture's times as pprof dates them: time_nanos the profile's moment (FILE@moment, as a
// UNIX time in ns, 0 when the capture has no start time), duration_nanos the stretch from the
// start of recording to it, which the allocated figures cover.
PprofOptions PprofTimesOf(const Profile& profile);

// Gzipped profile.proto with sample types alloc_objects/count, alloc_space/bytes,
// inuse_objects/count, inuse_space/bytes (scaled already for a sampled capture).
// "alloc" is StackStats allocations/allocated_bytes, "inuse" is in_use_blocks/in_use_bytes.
// Returns false with one line in *error (an unknown default_sample_type, a zlib failure).
bool WritePprof(const Profile& profile, StackResolver* resolver, const PprofOptions& options,
                std::string* gzipped, std::string* error);

}  // namespace memlens::analyzer
