// Round trips of every record type through RecordEncoder -> chunk -> ChunkReader ->
// DecodeRecords, and the reader's answers to damaged input.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "base/byte_column.h"
#include "base/memory_file.h"
#include "base/varint.h"
#include "format/chunk.h"
#include "format/record_decoder.h"
#include "format/record_encoder.h"

namespace memlens::format {
namespace {

struct Collector : RecordVisitor {
  std::vector<ProcessRecord> processes;
  std::vector<ModuleRecord> modules;
  std::vector<uint64_t> unloads;
  std::vector<ThreadRecord> threads;
  std::vector<StackNodeRecord> nodes;
  std::vector<Event> events;
  std::vector<TimeRecord> times;
  std::vector<EndRecord> ends;
  std::vector<uint64_t> drops;
  std::vector<uint64_t> sampling_rates;
  std::vector<uint64_t> exact_froms;
  void OnSampling(const SamplingRecord& r) override {
    sampling_rates.push_back(r.rate);
    exact_froms.push_back(r.exact_from);
  }
  void OnProcess(const ProcessRecord& r) override { processes.push_back(r); }
  void OnModule(const ModuleRecord& r) override { modules.push_back(r); }
  void OnModuleUnload(const ModuleUnloadRecord& r) override { unloads.push_back(r.id); }
  void OnThread(const ThreadRecord& r) override { threads.push_back(r); }
  void OnStackNode(const StackNodeRecord& r) override { nodes.push_back(r); }
  void OnEvent(const Event& e) override { events.push_back(e); }
  void OnTime(const TimeRecord& r) override { times.push_back(r); }
  void OnEnd(const EndRecord& r) override { ends.push_back(r); }
  void OnDrops(const DropsRecord& r) override { drops.push_back(r.count); }
};

std::vector<Event> SampleEvents() {
  return {
      {100, EventKind::kMalloc, 0x7f0000001000, 24, 5, 3},
      {103, EventKind::kCalloc, 0x7f0000000800, 4096, 2, 3},  // address goes down
      {104, EventKind::kFree, 0x7f0000001000, 0, 0, 3},
      {110, EventKind::kReallocOld, 0x7f0000000800, 0, 0, 3},
      {111, EventKind::kRealloc, 0x55aa00000000, 1ull << 40, 900000, 3},
      {112, EventKind::kMmap, 0x7f1000000000, 1 << 20, 1, 3},
      {113, EventKind::kMunmap, 0x7f1000000000, 4096, 0, 3},
      {114, EventKind::kMremapOld, 0x7f1000001000, 8192, 0, 3},
      {115, EventKind::kMremapNew, 0x7f2000000000, 16384, 7, 3},
      {116, EventKind::kMmapReserved, 0x7f3000000000, 1ull << 30, 8, 3},
      {117, EventKind::kProtect, 0x7f3000000000, 8 << 20, 9, 3},
      {118, EventKind::kProtectNone, 0x7f3000200000, 6 << 20, 0, 3},
      {119, EventKind::kPosixMemalign, 64, 1, 7, 3},
  };
}

// The instrumentation API's events and strings: every kind round-trips with its fields, and the
// annotation frames keep their kind and value.
TEST(Records, ApiEventsAndStringsRoundTrip) {
  struct Strings : Collector {
    std::vector<StringRecord> strings;
    void OnString(const StringRecord& r) override { strings.push_back(r); }
  } c;
  std::vector<Event> events = {
      {0, EventKind::kHeapCreate, 1, 2, 4, 1},
      {1, EventKind::kHeapAlloc, 0x7f0000001000, 64, 6, 1},
      {2, EventKind::kHeapFree, 0x7f0000001000, 0, 5, 1},
      {3, EventKind::kHeapRealloc, 0x7f0000002000, 128, 6, 1},
      {4, EventKind::kHeapReset, 1, 0, 0, 1},
      {5, EventKind::kHeapDestroy, 1, 0, 0, 1},
      {6, EventKind::kMarker, 3, 4, 0, 1},
      {7, EventKind::kSnapshot, 3, 0, 0, 1},
  };
  std::string payload;
  RecordEncoder enc(&payload);
  enc.String({3, "frame"});
  enc.String({4, ""});
  enc.BeginEvents(1);
  for (const auto& e : events) enc.AddEvent(e);
  enc.FinishEvents();
  std::string error;
  ASSERT_TRUE(DecodeRecords(payload, &c, &error)) << error;
  ASSERT_EQ(c.strings.size(), 2u);
  EXPECT_EQ(c.strings[0].id, 3u);
  EXPECT_EQ(c.strings[0].text, "frame");
  EXPECT_EQ(c.strings[1].text, "");
  ASSERT_EQ(c.events.size(), events.size());
  for (size_t i = 0; i < events.size(); ++i) {
    EXPECT_EQ(c.events[i].kind, events[i].kind) << i;
    EXPECT_EQ(c.events[i].address, events[i].address) << i;
    EXPECT_EQ(c.events[i].size, HasSize(events[i].kind) ? events[i].size : 0) << i;
    EXPECT_EQ(c.events[i].stack, HasStack(events[i].kind) ? events[i].stack : 0) << i;
  }
  EXPECT_EQ(c.events[6].size, 4u);  // a marker's category
  EXPECT_EQ(c.events[2].stack, 5u);  // a heap free carries its stack
  uint64_t ip = AnnotationFrameIp(Annotation::kType, 0xfffffffe);
  EXPECT_TRUE(IsAnnotationFrameIp(ip));
  EXPECT_FALSE(IsPythonFrameIp(ip));
  EXPECT_EQ(AnnotationKind(ip), Annotation::kType);
  EXPECT_EQ(AnnotationValue(ip), 0xfffffffeu);
  EXPECT_FALSE(IsAnnotationFrameIp(PythonFrameIp(3, 4)));
  EXPECT_FALSE(IsAnnotationFrameIp(0x7fffffffffff));
}

TEST(Varint, RoundTripsEdges) {
  for (uint64_t v : {0ull, 1ull, 127ull, 128ull, 300ull, 1ull << 63, ~0ull}) {
    std::string s;
    PutVarint(&s, v);
    const auto* p = reinterpret_cast<const uint8_t*>(s.data());
    uint64_t out;
    ASSERT_TRUE(GetVarint(&p, p + s.size(), &out));
    EXPECT_EQ(out, v);
  }
  for (int64_t v : {0ll, -1ll, 1ll, -(1ll << 62), (1ll << 62)}) EXPECT_EQ(UnZigZag(ZigZag(v)), v);
  std::string cut;
  PutVarint(&cut, 1ull << 40);
  const auto* p = reinterpret_cast<const uint8_t*>(cut.data());
  uint64_t out;
  EXPECT_FALSE(GetVarint(&p, p + cut.size() - 1, &out));
}

// The encoder's columns: the same bytes as PutVarint's, kept whole across growth.
TEST(ByteColumn, HoldsWhatWasPutAcrossGrowth) {
  ByteColumn column;
  std::string expected;
  for (uint64_t i = 0; i < 20000; ++i) {
    uint64_t v = i * 0x9e3779b97f4a7c15ULL >> (i % 64);
    column.PutVarint(v);
    PutVarint(&expected, v);
    column.PutByte(static_cast<uint8_t>(i));
    expected.push_back(static_cast<char>(i));
    column.PutSignedVarint(-static_cast<int64_t>(i));
    PutSignedVarint(&expected, -static_cast<int64_t>(i));
  }
  std::memcpy(column.Append(3), "abc", 3);
  expected += "abc";
  ASSERT_EQ(std::string(column.data(), column.size()), expected);
  column.clear();
  EXPECT_EQ(column.size(), 0u);
  column.PutVarint(300);
  EXPECT_EQ(std::string(column.data(), column.size()), "\xac\x02");
}

TEST(Records, EveryTypeRoundTrips) {
  std::string payload;
  RecordEncoder enc(&payload);
  ProcessRecord process{42, 1, 111, 222, "/bin/prog", {"prog", "--flag", ""}, "0.1.0"};
  ModuleRecord module{3, 0x400000, "/bin/prog", std::string("\x01\x02\xff", 3),
                      {{0x401000, 0x2000}, {0x500000, 16}}};
  enc.Process(process);
  enc.Sampling({524288, 262144});
  enc.Module(module);
  enc.ModuleUnload({3});
  enc.Thread({7, 12345});
  enc.StackNode({0, 0x401234});
  enc.StackNode({1, 0x401300});
  enc.BeginEvents(3);
  for (const auto& e : SampleEvents()) enc.AddEvent(e);
  enc.EndEvents();
  enc.FinishEvents();
  enc.Time({5000000, 117});
  enc.Drops({9});
  enc.End({EndReason::kSignal, 6000000, 117, 9, 11});

  Collector c;
  std::string error;
  ASSERT_TRUE(DecodeRecords(payload, &c, &error)) << error;
  ASSERT_EQ(c.processes.size(), 1u);
  EXPECT_EQ(c.processes[0].pid, 42u);
  EXPECT_EQ(c.processes[0].argv, process.argv);
  EXPECT_EQ(c.processes[0].executable, "/bin/prog");
  EXPECT_EQ(c.sampling_rates, std::vector<uint64_t>{524288});
  EXPECT_EQ(c.exact_froms, std::vector<uint64_t>{262144});
  ASSERT_EQ(c.modules.size(), 1u);
  EXPECT_EQ(c.modules[0].build_id, module.build_id);
  ASSERT_EQ(c.modules[0].segments.size(), 2u);
  EXPECT_EQ(c.modules[0].segments[1].start, 0x500000u);
  EXPECT_EQ(c.unloads, std::vector<uint64_t>{3});
  EXPECT_EQ(c.threads[0].tid, 12345u);
  ASSERT_EQ(c.nodes.size(), 2u);
  EXPECT_EQ(c.nodes[1].parent, 1u);
  EXPECT_EQ(c.nodes[1].ip, 0x401300u);
  auto expected = SampleEvents();
  ASSERT_EQ(c.events.size(), expected.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    EXPECT_EQ(c.events[i].seq, expected[i].seq) << i;
    EXPECT_EQ(c.events[i].kind, expected[i].kind) << i;
    EXPECT_EQ(c.events[i].address, expected[i].address) << i;
    EXPECT_EQ(c.events[i].size, HasSize(expected[i].kind) ? expected[i].size : 0) << i;
    EXPECT_EQ(c.events[i].stack, HasStack(expected[i].kind) ? expected[i].stack : 0) << i;
    EXPECT_EQ(c.events[i].thread, 3u) << i;
  }
  EXPECT_EQ(c.times[0].seq, 117u);
  EXPECT_EQ(c.drops, std::vector<uint64_t>{9});
  ASSERT_EQ(c.ends.size(), 1u);
  EXPECT_EQ(c.ends[0].reason, EndReason::kSignal);
  EXPECT_EQ(c.ends[0].detail, 11);
  EXPECT_EQ(c.ends[0].dropped, 9u);
}

// The snapshot index keeps a chunk's metadata without its event batches: decoding that gives
// every other record, in order, and no event.
TEST(Records, MetadataOfAPayloadDecodesToTheSameRecordsWithoutEvents) {
  std::string payload;
  RecordEncoder enc(&payload);
  enc.Process({42, 1, 111, 222, "/bin/prog", {"prog"}, "0.1.0"});
  enc.StackNode({0, 0x401234});
  enc.BeginEvents(3);
  for (const auto& e : SampleEvents()) enc.AddEvent(e);
  enc.EndEvents();
  enc.FinishEvents();
  enc.Time({5000000, 117});
  enc.Thread({7, 12345});
  enc.End({EndReason::kExit, 6000000, 117, 0, 0});

  Collector whole;
  std::string error, metadata;
  ASSERT_TRUE(DecodeRecords(payload, &whole, &error, EventDecoding::kDeliver, nullptr, &metadata))
      << error;
  ASSERT_FALSE(whole.events.empty());
  ASSERT_LT(metadata.size(), payload.size());
  Collector kept;
  ASSERT_TRUE(DecodeRecords(metadata, &kept, &error)) << error;
  EXPECT_TRUE(kept.events.empty());
  ASSERT_EQ(kept.processes.size(), 1u);
  EXPECT_EQ(kept.processes[0].argv, whole.processes[0].argv);
  ASSERT_EQ(kept.nodes.size(), 1u);
  EXPECT_EQ(kept.nodes[0].ip, 0x401234u);
  ASSERT_EQ(kept.times.size(), 1u);
  EXPECT_EQ(kept.times[0].seq, 117u);
  ASSERT_EQ(kept.threads.size(), 1u);
  EXPECT_EQ(kept.threads[0].tid, 12345u);
  ASSERT_EQ(kept.ends.size(), 1u);
}

TEST(Records, CorruptPayloadsAreReportedNotOverread) {
  std::string payload;
  RecordEncoder enc(&payload);
  enc.Module({1, 0, "/lib/x.so", "", {{0, 1}}});
  enc.BeginEvents(1);
  enc.AddEvent({1, EventKind::kMalloc, 0x1000, 8, 1, 1});
  enc.EndEvents();
  enc.FinishEvents();
  // Every strict prefix is either decodable up to a record or reported; never a crash.
  for (size_t n = 0; n < payload.size(); ++n) {
    Collector c;
    std::string error;
    DecodeRecords(std::string_view(payload.data(), n), &c, &error);
  }
  Collector c;
  std::string error;
  EXPECT_FALSE(DecodeRecords(std::string("\x63", 1), &c, &error));
  EXPECT_NE(error.find("unknown record type 99"), std::string::npos) << error;
  // One batch (thread 1, one event); columns: kinds {0x7f}, seqs {0}, releases {}, reuses {},
  // addresses {width 0}, sizes {}, stacks {}.
  std::string bad_kind = std::string(1, static_cast<char>(RecordType::kEvents)) +
                         std::string("\x01\x01\x01\x01\x7f\x01\x00\x00\x00\x01\x00\x00\x00", 13);
  EXPECT_FALSE(DecodeRecords(bad_kind, &c, &error));
  EXPECT_NE(error.find("unknown event kind 127"), std::string::npos) << error;
  // A sampling rate of 0 would divide by zero in every estimate: refused (9.0 layout: 0, rate,
  // exact_from).
  std::string zero_rate = {static_cast<char>(RecordType::kSampling), '\0', '\0', '\0'};
  EXPECT_FALSE(DecodeRecords(zero_rate, &c, &error));
  EXPECT_NE(error.find("rate 0"), std::string::npos) << error;
}

// kMappings round-trips with every field, and stays out of the index's metadata; a mapping
// that overlaps the one before or whose resident pages exceed it is reported, never trusted.
TEST(Records, MappingsRoundTripAndImpossibleOnesAreCorrupt) {
  MappingsRecord sample;
  sample.monotonic_ns = 7000000;
  sample.seq = 4242;
  sample.read_ns = 350000;
  sample.page_size = 4096;
  Mapping heap{0x555500000000, 0x555500400000, Mapping::kRead | Mapping::kWrite, 0, 0, "[heap]",
               0x200000, 0x200000, 0, {256, 2, 510, 256}};
  Mapping lib{0x7f0000000000, 0x7f0000010000, Mapping::kRead | Mapping::kExec, 0x3000, 913,
              "/usr/lib/libx.so", 0x8000, 0, 0, {}};
  Mapping shm{0x7f0000010000, 0x7f0000011000, Mapping::kRead | Mapping::kShared, 0, 7,
              "/dev/shm/x", 0x1000, 0, 0, {}};
  sample.mappings = {heap, lib, shm};
  sample.own = {{0x7f0000020000, 65592}, {0x7f0000040000, 4096}};
  std::string payload;
  RecordEncoder enc(&payload);
  enc.Mappings(sample);
  enc.Time({5000000, 117});
  struct Mappings : Collector {
    std::vector<MappingsRecord> samples;
    void OnMappings(const MappingsRecord& r) override { samples.push_back(r); }
  } c;
  std::string error, metadata;
  ASSERT_TRUE(DecodeRecords(payload, &c, &error, EventDecoding::kDeliver, nullptr, &metadata))
      << error;
  ASSERT_EQ(c.samples.size(), 1u);
  EXPECT_EQ(c.samples[0], sample);
  Mappings kept;
  ASSERT_TRUE(DecodeRecords(metadata, &kept, &error)) << error;
  EXPECT_TRUE(kept.samples.empty());
  EXPECT_EQ(kept.times.size(), 1u);

  for (int damage = 0; damage < 4; ++damage) {
    MappingsRecord bad = sample;
    if (damage == 3) bad.mappings[2].end = bad.mappings[2].start;  // an empty mapping
    if (damage == 0) bad.mappings[0].page_runs = {1024, 1};        // more pages than it has
    if (damage == 1) bad.mappings[1].rss = 0x20000;                // more resident than mapped
    if (damage == 2) bad.page_size = 3000;                         // not a power of two
    std::string bytes;
    RecordEncoder bad_enc(&bytes);
    bad_enc.Mappings(bad);
    Mappings none;
    EXPECT_FALSE(DecodeRecords(bytes, &none, &error)) << damage;
    EXPECT_NE(error.find("impossible mappings"), std::string::npos) << error;
    EXPECT_TRUE(none.samples.empty());
  }
  // A count that would overflow the check of the bytes left is refused, not reserved.
  std::string huge = {static_cast<char>(RecordType::kMappings), 0, 0, 0, 1};
  huge += std::string("\x9a\xb3\xe6\xcc\x99\xb3\xe6\xcc\x19", 9);  // 1844674407370955162
  huge += std::string(16, '\0');
  Mappings none;
  EXPECT_FALSE(DecodeRecords(huge, &none, &error));
  // Every strict prefix is reported or decodes up to a record; never a crash.
  for (size_t n = 0; n < payload.size(); ++n) {
    Mappings part;
    DecodeRecords(std::string_view(payload.data(), n), &part, &error);
  }
}

// Format 9.0 gave kSampling its exact_from; 8.x captures (the rate alone) read as having no
// threshold, and a sampling record without one round-trips as none.
TEST(Records, SamplingThresholdAcrossVersions) {
  Collector c;
  std::string error;
  std::string old_layout = {static_cast<char>(RecordType::kSampling), '\x40'};  // rate 64
  ASSERT_TRUE(DecodeRecords(old_layout, &c, &error)) << error;
  std::string payload;
  RecordEncoder enc(&payload);
  enc.Sampling({64});
  ASSERT_TRUE(DecodeRecords(payload, &c, &error)) << error;
  EXPECT_EQ(c.sampling_rates, (std::vector<uint64_t>{64, 64}));
  EXPECT_EQ(c.exact_froms, (std::vector<uint64_t>{kNoExactThreshold, kNoExactThreshold}));
}

// Format 9.1: a followed process whose parent was not recorded names its nearest recorded
// ancestor inside agent_version, ahead of the Python-stacks mark, which still ends it; 9.2 a
// forked process's fork the same way.
TEST(Records, RecordedParentRidesOnTheVersion) {
  std::string payload;
  RecordEncoder enc(&payload);
  ProcessRecord plain{42, 7, 1, 2, "/bin/a", {"a"}, "0.1.0"};
  ProcessRecord followed = plain;
  followed.recorded_parent = 5;
  ProcessRecord python_only = followed;
  python_only.agent_version = std::string("0.1.0") + kPythonStacksMark;
  for (const ProcessRecord* r : {&plain, &followed, &python_only}) enc.Process(*r);
  Collector c;
  std::string error;
  ASSERT_TRUE(DecodeRecords(payload, &c, &error)) << error;
  ASSERT_EQ(c.processes.size(), 3u);
  EXPECT_EQ(c.processes[0].recorded_parent, 0u);
  EXPECT_EQ(c.processes[0].agent_version, "0.1.0");
  EXPECT_EQ(c.processes[1].recorded_parent, 5u);
  EXPECT_EQ(c.processes[1].agent_version, "0.1.0");
  EXPECT_EQ(c.processes[2].recorded_parent, 5u);
  EXPECT_TRUE(PythonStacksOnly(c.processes[2]));
  EXPECT_EQ(CodedAgentVersion(python_only), "0.1.0 recorded-parent=5 python-stacks");
  // 9.2: a forked process names its parent's image and the parent's sequence number at the fork.
  ProcessRecord forked = python_only;
  forked.recorded_parent = 0;
  forked.fork_parent_image_ns = 123456789;
  forked.fork_seq = 77;
  EXPECT_EQ(CodedAgentVersion(forked), "0.1.0 forked-from-image=123456789 forked-at-seq=77 python-stacks");
  ProcessRecord decoded;
  DecodeAgentVersion(CodedAgentVersion(forked), &decoded);
  EXPECT_TRUE(decoded.Forked());
  EXPECT_EQ(decoded.fork_parent_image_ns, 123456789u);
  EXPECT_EQ(decoded.fork_seq, 77u);
  EXPECT_EQ(decoded.recorded_parent, 0u);
  EXPECT_EQ(decoded.agent_version, python_only.agent_version);
  ProcessRecord odd;  // a version that names no pid is left as it is
  DecodeAgentVersion("0.1.0 recorded-parent=x", &odd);
  EXPECT_EQ(odd.recorded_parent, 0u);
  EXPECT_EQ(odd.agent_version, "0.1.0 recorded-parent=x");
}

TEST(Records, BatchCountsMustMatchTheColumns) {
  // Two batches claiming 5 events each, but one kind byte: rejected before any column is read.
  std::string lying = std::string(1, static_cast<char>(RecordType::kEvents)) +
                      std::string("\x02\x01\x05\x02\x05\x01\x01\x01\x00\x00\x00\x01\x00\x00\x00", 15);
  Collector c;
  std::string error;
  EXPECT_FALSE(DecodeRecords(lying, &c, &error));
  EXPECT_NE(error.find("do not match"), std::string::npos) << error;
  EXPECT_TRUE(c.events.empty());
}

// The columns of the one kEventColumns record in `payload` (which holds nothing else), by name.
struct EventColumns {
  std::string kinds, seqs, releases, reuses, neighbours, addresses, sizes, stacks;
};
EventColumns SplitEvents(const std::string& payload) {
  const auto* p = reinterpret_cast<const uint8_t*>(payload.data());
  const auto* end = p + payload.size();
  EXPECT_EQ(*p++, static_cast<uint8_t>(RecordType::kEventColumns));
  uint64_t batches = 0, v = 0;
  GetVarint(&p, end, &batches);
  for (uint64_t b = 0; b < 2 * batches; ++b) GetVarint(&p, end, &v);
  EventColumns c;
  for (std::string* column :
       {&c.kinds, &c.seqs, &c.releases, &c.reuses, &c.neighbours, &c.addresses, &c.sizes,
        &c.stacks}) {
    uint64_t n = 0;
    EXPECT_TRUE(GetVarint(&p, end, &n));
    column->assign(reinterpret_cast<const char*>(p), n);
    p += n;
  }
  EXPECT_EQ(p, end);
  return c;
}

std::vector<Event> Decode(const std::string& payload) {
  Collector c;
  std::string error;
  EXPECT_TRUE(DecodeRecords(payload, &c, &error)) << error;
  return c.events;
}

void ExpectSameEvents(const std::vector<Event>& got, const std::vector<Event>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    ASSERT_EQ(got[i].address, want[i].address) << i;
    ASSERT_EQ(got[i].kind, want[i].kind) << i;
    ASSERT_EQ(got[i].seq, want[i].seq) << i;
    ASSERT_EQ(got[i].thread, want[i].thread) << i;
    ASSERT_EQ(got[i].size, HasSize(want[i].kind) ? want[i].size : 0) << i;
    ASSERT_EQ(got[i].stack, HasStack(want[i].kind) ? want[i].stack : 0) << i;
  }
}

TEST(EventBatches, ReleasesReferBackToTheirAllocation) {
  // The example of docs/capture-format.md: thread 1 allocates A and B and frees A; thread 2
  // allocates C; thread 1 frees B in a batch of its own. The frees are the 2nd and the 1st
  // latest allocation of thread 1: releases {2, 1}. B starts where A's 112-byte glibc chunk
  // ends: neighbours {0, 1, 0}; the address column holds A from 0 and C from 0 (a new batch),
  // width 3.
  std::string payload;
  RecordEncoder enc(&payload);
  std::vector<Event> events = {{0, EventKind::kMalloc, 0x4052a0, 100, 3, 1},
                               {1, EventKind::kMalloc, 0x405310, 200, 2, 1},
                               {2, EventKind::kFree, 0x4052a0, 0, 0, 1},
                               {4, EventKind::kMalloc, 0x405390, 24, 3, 2},
                               {3, EventKind::kFree, 0x405310, 0, 0, 1}};
  for (size_t i = 0; i < events.size(); ++i) {
    if (i == 0 || events[i].thread != events[i - 1].thread) enc.BeginEvents(events[i].thread);
    enc.AddEvent(events[i]);
  }
  enc.FinishEvents();
  EventColumns c = SplitEvents(payload);
  EXPECT_EQ(c.releases, std::string("\x02\x01", 2));
  EXPECT_EQ(c.neighbours, std::string("\x00\x01\x00", 3));
  EXPECT_EQ(c.addresses, std::string("\x03\x54\x72\x0a\x0a\x08\x08", 7));
  ExpectSameEvents(Decode(payload), events);
}

TEST(EventBatches, AllocationsRightBehindABlockOfTheirThreadNameIt) {
  // Thread 1: A (100 bytes: a 112-byte glibc chunk), B right behind it, then (thread 2) C right
  // behind B (another thread's: in full), then thread 1 again: D behind B (its latest), E of
  // 5000 bytes and F behind E (above 4096 bytes: no neighbour), and a free of A in between.
  std::string payload;
  RecordEncoder enc(&payload);
  std::vector<Event> events = {{0, EventKind::kMalloc, 0x1000, 100, 1, 1},
                               {1, EventKind::kCalloc, 0x1070, 40, 2, 1},
                               {2, EventKind::kMalloc, 0x10a0, 8, 1, 2},
                               {3, EventKind::kFree, 0x1000, 0, 0, 1},
                               {4, EventKind::kMalloc, 0x10a0, 24, 1, 1},
                               {5, EventKind::kMalloc, 0x2000, 5000, 1, 1},
                               {6, EventKind::kMalloc, 0x2000 + 16 * ReuseClass(5000), 8, 1, 1}};
  for (size_t i = 0; i < events.size(); ++i) {
    if (i == 0 || events[i].thread != events[i - 1].thread) enc.BeginEvents(events[i].thread);
    enc.AddEvent(events[i]);
  }
  enc.FinishEvents();
  EXPECT_EQ(SplitEvents(payload).neighbours, std::string("\x00\x01\x00\x01\x00\x00", 6));
  ExpectSameEvents(Decode(payload), events);
}

TEST(EventBatches, ReleasesInAnyOrderFindTheirAllocation) {
  // A, B, C, D freed as C, A, D, B: 2, 4, 1 and 3 allocations back (neither a constant
  // distance nor always the latest).
  std::string payload;
  RecordEncoder enc(&payload);
  std::vector<Event> events;
  uint64_t seq = 0;
  for (uint64_t a : {0xa0, 0xb0, 0xc0, 0xd0}) events.push_back({seq++, EventKind::kMalloc, a, 1, 1, 5});
  for (uint64_t a : {0xc0, 0xa0, 0xd0, 0xb0}) events.push_back({seq++, EventKind::kFree, a, 0, 0, 5});
  enc.BeginEvents(5);
  for (const Event& e : events) enc.AddEvent(e);
  enc.FinishEvents();
  EXPECT_EQ(SplitEvents(payload).releases, std::string("\x02\x04\x01\x03", 4));
  ExpectSameEvents(Decode(payload), events);
}

TEST(EventBatches, FifoWindowCostsOneRepeatedReference) {
  // Each step frees the block allocated 300 steps earlier, then allocates: after the first 300
  // steps every release is "the 300th latest allocation".
  std::string payload;
  RecordEncoder enc(&payload);
  std::vector<Event> events;
  uint64_t rng = 88172645463325252ull, seq = 0;
  std::vector<uint64_t> window(300, 0);
  enc.BeginEvents(7);
  for (size_t i = 0; i < 150000; ++i) {
    uint64_t& slot = window[i % window.size()];
    if (slot) events.push_back({seq++, EventKind::kFree, slot, 0, 0, 7});
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    slot = 0x7f0000000000 + ((i * 2654435761u) % (1 << 24)) * 16;  // distinct, scattered
    events.push_back({seq++, EventKind::kMalloc, slot, 16 + rng % 500, 1 + rng % 5, 7});
  }
  for (const Event& e : events) enc.AddEvent(e);
  enc.FinishEvents();
  EventColumns c = SplitEvents(payload);
  size_t releases = events.size() - 150000;
  std::string expected;
  for (size_t i = 0; i < releases; ++i) PutVarint(&expected, 300);
  EXPECT_TRUE(c.releases == expected);  // (not EXPECT_EQ: 300 KB of bytes in a failure)
  EXPECT_EQ(c.addresses.size(), 1 + (c.addresses[0] * 150000u));  // allocations only
  ExpectSameEvents(Decode(payload), events);
}

// Each chunk's events encoded as the writer would (a kProcess first), one payload per chunk.
std::vector<std::string> EncodeChunks(const std::vector<std::vector<Event>>& chunks) {
  std::vector<std::string> payloads;
  std::string payload;
  RecordEncoder enc(&payload);
  enc.Process({1, 0, 0, 0, "/bin/t", {"t"}, "0"});
  for (const auto& chunk : chunks) {
    for (size_t i = 0; i < chunk.size(); ++i) {
      if (i == 0 || chunk[i].thread != chunk[i - 1].thread) enc.BeginEvents(chunk[i].thread);
      enc.AddEvent(chunk[i]);
    }
    enc.FinishEvents();
    payloads.push_back(payload);
    payload.clear();
    enc.NextChunk();
  }
  return payloads;
}

// Read in file order from the start, each chunk decodes to its events.
void ExpectChunksDecode(const std::vector<std::string>& payloads,
                        const std::vector<std::vector<Event>>& events) {
  DecodeState state;
  for (size_t i = 0; i < payloads.size(); ++i) {
    Collector c;
    std::string error;
    ASSERT_TRUE(DecodeRecords(payloads[i], &c, &error, EventDecoding::kDeliver, &state)) << error;
    ExpectSameEvents(c.events, events[i]);
  }
}

TEST(EventBatches, NeighboursReachEarlierChunksWhileTheirOriginIsRecent) {
  // A in chunk 1; B right behind it in chunk 2 (a neighbour one chunk back, origin chunk 1);
  // then two chunks without events; C behind B in chunk 5: B's address came from chunk 1,
  // more than kReuseOriginChunks back, so C is coded in full.
  std::vector<std::vector<Event>> chunks = {{{0, EventKind::kMalloc, 0x1000, 100, 1, 1}},
                                            {{1, EventKind::kMalloc, 0x1070, 40, 1, 1}},
                                            {},
                                            {},
                                            {{2, EventKind::kMalloc, 0x10a0, 8, 1, 1}}};
  std::vector<std::string> payloads = EncodeChunks(chunks);
  EXPECT_EQ(SplitEvents(payloads[1]).neighbours, std::string("\x01", 1));
  EXPECT_EQ(SplitEvents(payloads[4]).neighbours, std::string("\x00", 1));
  ExpectChunksDecode(payloads, chunks);
}

TEST(EventBatches, AnotherImagesAllocationIsNoNeighbour) {
  // Thread 1 allocates A; a new program image (kProcess) starts the lists over; the thread
  // allocates B, then C right behind A: A is not listed any more, so C is coded in full, never
  // as a neighbour counted from where A's number was (that would name B, decoded at its end).
  std::string payload;
  RecordEncoder enc(&payload);
  const std::vector<Event> events = {{0, EventKind::kMalloc, 0x1000, 100, 1, 1},
                                     {1, EventKind::kMalloc, 0x9000, 100, 1, 1},
                                     {2, EventKind::kMalloc, 0x1070, 40, 1, 1}};
  enc.BeginEvents(1);
  enc.AddEvent(events[0]);
  enc.FinishEvents();
  enc.Process({2, 0, 0, 0, "/bin/t2", {"t2"}, "0"});
  const size_t second = payload.size();
  enc.BeginEvents(1);
  enc.AddEvent(events[1]);
  enc.AddEvent(events[2]);
  enc.FinishEvents();
  EXPECT_EQ(SplitEvents(payload.substr(second)).neighbours, std::string("\x00\x00", 2));
  ExpectSameEvents(Decode(payload), events);
}

// Three chunks: thread 1 allocates X, W and V in chunk 1; in chunk 2 it frees X (one chunk
// back: 3 allocations back), allocates A right after (a delta from the batch's start: the
// reference into chunk 1 left the chain alone), frees Z that thread 2 allocated (by address:
// another thread's) and an address never allocated (by address); in chunk 3 it frees W (two
// chunks back: 3 allocations back) and A (one chunk back).
struct ThreeChunks {
  std::vector<std::string> payloads;
  std::vector<std::vector<Event>> events;
};
ThreeChunks MakeThreeChunks() {
  ThreeChunks t;
  t.events = {
      {{0, EventKind::kMalloc, 0x1000, 8, 1, 1},
       {1, EventKind::kMalloc, 0x5000, 8, 1, 1},
       {2, EventKind::kMalloc, 0x9000, 8, 1, 1}},
      {{3, EventKind::kFree, 0x1000, 0, 0, 1},
       {4, EventKind::kMalloc, 0x1010, 8, 1, 1},
       {6, EventKind::kMalloc, 0x2000, 8, 1, 2},
       {7, EventKind::kFree, 0x2000, 0, 0, 1},
       {8, EventKind::kFree, 0x9990, 0, 0, 1}},
      {{9, EventKind::kFree, 0x5000, 0, 0, 1},
       {10, EventKind::kFree, 0x1010, 0, 0, 1}},
  };
  t.payloads = EncodeChunks(t.events);
  return t;
}

TEST(EventBatches, ReferencesReachEarlierChunksOfTheirThread) {
  ThreeChunks t = MakeThreeChunks();
  EXPECT_EQ(SplitEvents(t.payloads[1]).releases, std::string("\x03\x00\x00", 3));
  EXPECT_EQ(SplitEvents(t.payloads[2]).releases, std::string("\x03\x01", 2));
  ExpectChunksDecode(t.payloads, t.events);
  // Without the chunk before, chunk 2's first release names nothing: corrupt.
  Collector c;
  std::string error;
  EXPECT_FALSE(DecodeRecords(t.payloads[1], &c, &error));
  EXPECT_NE(error.find("beyond those decoded"), std::string::npos) << error;
}

// Chunks 0..kReleaseReachChunks+1: thread 1 allocates X and Y in chunk 0, thread 2 one block in
// each chunk after it (thread 1's list still counts those chunks), and thread 1 frees X in
// chunk kReleaseReachChunks (in reach: a reference) and Y in the chunk after (out of reach: by
// address).
std::vector<std::string> ChunksUpToTheReach(std::vector<std::vector<Event>>* events) {
  const size_t last = kReleaseReachChunks + 1;
  events->assign(last + 1, {});
  uint64_t seq = 0;
  (*events)[0] = {{seq++, EventKind::kMalloc, 0x1000, 8, 1, 1}, {seq++, EventKind::kMalloc, 0x2000, 8, 1, 1}};
  for (size_t i = 1; i <= last; ++i) {
    if (i == last - 1) (*events)[i].push_back({seq++, EventKind::kFree, 0x1000, 0, 0, 1});
    if (i == last) (*events)[i].push_back({seq++, EventKind::kFree, 0x2000, 0, 0, 1});
    (*events)[i].push_back({seq++, EventKind::kMalloc, 0x8000 + 16 * i, 8, 1, 2});
  }
  return EncodeChunks(*events);
}

TEST(EventBatches, ReferencesReachAFixedNumberOfChunksBack) {
  std::vector<std::vector<Event>> events;
  std::vector<std::string> payloads = ChunksUpToTheReach(&events);
  const size_t last = payloads.size() - 1;
  EXPECT_EQ(SplitEvents(payloads[last - 1]).releases, std::string("\x02", 1));  // X: 2 back
  EXPECT_EQ(SplitEvents(payloads[last]).releases, std::string("\x00", 1));      // Y: by address
  ExpectChunksDecode(payloads, events);
}

// A reader resuming at a checkpoint skips the chunks before, decodes the kReleaseReachChunks
// chunks before the first it delivers for their allocations (a reference beyond them is passed
// over and leaves the address chain alone) and delivers the next. One chunk fewer decoded, and
// the reference cannot be resolved: corrupt, not wrong.
TEST(EventBatches, ResumedReadersDecodeTheChunksInReachBefore) {
  std::vector<std::vector<Event>> events;
  std::vector<std::string> payloads = ChunksUpToTheReach(&events);
  const size_t deliver = kReleaseReachChunks;  // frees X, allocated in chunk 0
  for (size_t decoded : {kReleaseReachChunks, kReleaseReachChunks - 1}) {
    DecodeState state;
    Collector skipped, allocations, delivered;
    std::string error;
    for (size_t i = 0; i < deliver - decoded; ++i) {
      ASSERT_TRUE(DecodeRecords(payloads[i], &skipped, &error, EventDecoding::kSkip, &state)) << error;
    }
    for (size_t i = deliver - decoded; i < deliver; ++i) {
      ASSERT_TRUE(DecodeRecords(payloads[i], &allocations, &error, EventDecoding::kAllocations, &state))
          << error;
    }
    EXPECT_TRUE(allocations.events.empty());
    bool ok = DecodeRecords(payloads[deliver], &delivered, &error, EventDecoding::kDeliver, &state);
    if (decoded == kReleaseReachChunks) {
      ASSERT_TRUE(ok) << error;
      ExpectSameEvents(delivered.events, events[deliver]);
    } else {
      EXPECT_FALSE(ok);
      EXPECT_NE(error.find("beyond those decoded"), std::string::npos) << error;
    }
  }
}

// The three chunks read from the second on: chunk 2's reference into chunk 1 is passed over
// when chunk 1 was skipped, and chunk 2's own allocation still decodes right, so chunk 3's
// reference to it does.
TEST(EventBatches, ASkippedChunksReferencesArePassedOver) {
  ThreeChunks t = MakeThreeChunks();
  DecodeState state;
  Collector skipped, allocations;
  std::string error;
  ASSERT_TRUE(DecodeRecords(t.payloads[0], &skipped, &error, EventDecoding::kSkip, &state)) << error;
  ASSERT_TRUE(DecodeRecords(t.payloads[1], &allocations, &error, EventDecoding::kAllocations, &state))
      << error;
  EXPECT_TRUE(allocations.events.empty());
  ASSERT_EQ(state.allocations.at(1).size(), 1u);
  EXPECT_EQ(state.allocations.at(1).Address(1), 0x1010u);
  // Delivering chunk 2 after a skipped chunk 1 cannot be done right: corrupt, not wrong.
  DecodeState fresh;
  Collector c;
  ASSERT_TRUE(DecodeRecords(t.payloads[0], &c, &error, EventDecoding::kSkip, &fresh)) << error;
  EXPECT_FALSE(DecodeRecords(t.payloads[1], &c, &error, EventDecoding::kDeliver, &fresh));
}

// Size classes follow glibc's bins (16-byte steps, its 8-byte chunk header counted) up to 4096
// bytes, then four per power of two, and every size has one.
TEST(ReusedBlocks, SizeClasses) {
  EXPECT_EQ(ReuseClass(1), ReuseClass(24));   // glibc's smallest chunk serves 1..24
  EXPECT_NE(ReuseClass(24), ReuseClass(25));
  EXPECT_EQ(ReuseClass(4096), 257u);
  EXPECT_EQ(ReuseClass(4097), 258u);
  EXPECT_EQ(ReuseClass(6144), ReuseClass(5121));
  EXPECT_NE(ReuseClass(6144), ReuseClass(6145));
  EXPECT_EQ(ReuseClass(~uint64_t{0}), ReusedBlocks::kClasses - 1);
}

// A rank is the age of a release among its class's last kDepth (1 = the latest), counting
// releases whose block was taken since; a ninth release drops the oldest; classes are apart;
// a new chunk empties every list.
TEST(ReusedBlocks, RanksAreAgesAmongTheClasssReleases) {
  ReusedBlocks reused;
  ReusedBlocks::Block block;
  EXPECT_EQ(reused.Rank(3, 0xa0, &block), 0u);
  EXPECT_FALSE(reused.Take(3, 1, &block));
  reused.Push(3, {0xa0, 1});
  reused.Push(3, {0xb0, 1});
  reused.Push(3, {0xc0, 2});
  EXPECT_EQ(reused.Rank(3, 0xc0, &block), 1u);
  EXPECT_EQ(reused.Rank(3, 0xa0, &block), 3u);
  EXPECT_EQ(block.origin, 1u);
  EXPECT_EQ(reused.Rank(4, 0xc0, &block), 0u);  // another class
  ASSERT_TRUE(reused.Take(3, 2, &block));
  EXPECT_EQ(block.address, 0xb0u);
  EXPECT_FALSE(reused.Take(3, 2, &block));     // taken already
  EXPECT_EQ(reused.Rank(3, 0xb0, &block), 0u);
  EXPECT_EQ(reused.Rank(3, 0xa0, &block), 3u);  // the taken one still counts
  for (uint64_t a = 0xd0; a < 0xd0 + 6 * 0x10; a += 0x10) reused.Push(3, {a, 2});
  EXPECT_EQ(reused.Rank(3, 0xc0, &block), 7u);
  EXPECT_EQ(reused.Rank(3, 0xa0, &block), 0u);  // the ninth release dropped it
  reused.Push(3, {0xd0, 3});                    // released again: its latest rank wins
  EXPECT_EQ(reused.Rank(3, 0xd0, &block), 1u);
  EXPECT_EQ(block.origin, 3u);
  reused.Clear();
  EXPECT_EQ(reused.Rank(3, 0xd0, &block), 0u);
  EXPECT_FALSE(reused.Take(3, 1, &block));
}

// A program behind an allocator that hands out the block of a size class freed last (as
// glibc's tcache and pymalloc do): two threads, each freeing blocks 1 to 4000 events after
// allocating them, so blocks are freed and handed out again chunk after chunk.
struct ReusingProgram {
  std::vector<std::vector<Event>> chunks;  // the events of each chunk
  std::vector<std::string> payloads;
};
ReusingProgram MakeReusingProgram() {
  ReusingProgram p;
  constexpr int kChunks = 3 * static_cast<int>(kResumeChunks), kPerChunk = 3000;
  uint64_t rng = 88172645463325252ull, seq = 0, top = 0x7f0000000000;
  auto next = [&rng] { return rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17; };
  struct Live {
    uint64_t address, size, free_at;
  };
  std::vector<Live> live[2];
  std::vector<uint64_t> freed[2][33];  // per thread and 16-byte class: LIFO
  for (int chunk = 0; chunk < kChunks; ++chunk) {
    std::vector<Event>& events = p.chunks.emplace_back();
    for (int i = 0; i < kPerChunk; ++i) {
      uint32_t thread = next() % 2;
      std::vector<Live>& mine = live[thread];
      auto due = std::find_if(mine.begin(), mine.end(), [&](const Live& b) { return b.free_at <= seq; });
      if (due != mine.end()) {
        events.push_back({seq++, EventKind::kFree, due->address, 0, 0, thread});
        freed[thread][(due->size + 15) / 16].push_back(due->address);
        mine.erase(due);
        continue;
      }
      uint64_t size = 16 * (1 + next() % 32);
      std::vector<uint64_t>& bin = freed[thread][size / 16];
      uint64_t address = top;
      if (!bin.empty()) {
        address = bin.back();
        bin.pop_back();
      } else {
        top += 512;
      }
      mine.push_back({address, size, seq + 1 + next() % 4000});
      events.push_back({seq++, EventKind::kMalloc, address, size, 1 + next() % 50, thread});
    }
  }
  p.payloads = EncodeChunks(p.chunks);
  return p;
}

// Allocations of blocks freed earlier in their chunk are coded as reuses; every chunk decodes
// to its events read from the start, and read from a resumed position with the kResumeChunks
// chunks before it decoded for their allocations.
TEST(EventBatches, ReusedBlocksDecodeFromTheStartAndWhenResumed) {
  ReusingProgram p = MakeReusingProgram();
  size_t allocations = 0, reuses = 0;
  for (size_t i = 1; i < p.payloads.size(); ++i) {  // (the first begins with the kProcess)
    EventColumns c = SplitEvents(p.payloads[i]);
    for (char rank : c.reuses) {
      ++allocations;
      reuses += rank != 0;
    }
  }
  EXPECT_GT(reuses, allocations / 3) << "of " << allocations;
  ExpectChunksDecode(p.payloads, p.chunks);
  for (size_t deliver = kResumeChunks + 1; deliver < p.payloads.size(); ++deliver) {
    DecodeState state;
    Collector c;
    std::string error;
    for (size_t i = 0; i < deliver; ++i) {
      auto mode = i + kResumeChunks < deliver ? EventDecoding::kSkip : EventDecoding::kAllocations;
      ASSERT_TRUE(DecodeRecords(p.payloads[i], &c, &error, mode, &state)) << error;
    }
    ASSERT_TRUE(c.events.empty());
    ASSERT_TRUE(DecodeRecords(p.payloads[deliver], &c, &error, EventDecoding::kDeliver, &state))
        << "chunk " << deliver << ": " << error;
    ExpectSameEvents(c.events, p.chunks[deliver]);
  }
}

// A new program image starts over: a reference into the previous image's chunk is corrupt.
TEST(EventBatches, ProcessRecordsStartTheListsOver) {
  ThreeChunks t = MakeThreeChunks();
  std::string image2;
  RecordEncoder enc(&image2);
  enc.Process({1, 0, 0, 0, "/bin/t2", {"t2"}, "0"});
  image2 += t.payloads[1];  // its first release refers back to the first image's X
  DecodeState state;
  Collector c;
  std::string error;
  ASSERT_TRUE(DecodeRecords(t.payloads[0], &c, &error, EventDecoding::kDeliver, &state)) << error;
  EXPECT_FALSE(DecodeRecords(image2, &c, &error, EventDecoding::kDeliver, &state));
}

// Stack nodes are written as id - 1 - parent: 0 along a new path, whatever the ids; the count
// carries across chunks in the state.
TEST(Records, StackNodeParentsAreCodedRelativeToTheNode) {
  std::string payload;
  RecordEncoder enc(&payload);
  enc.Process({1, 0, 0, 0, "/bin/t", {"t"}, "0"});
  std::string first_chunk = payload;
  payload.clear();
  enc.StackNode({0, 0x10});  // node 1
  enc.StackNode({1, 0x20});  // node 2
  enc.StackNode({2, 0x30});  // node 3
  enc.StackNode({1, 0x40});  // node 4: a sibling of node 2
  enc.StackNode({0, 0x50});  // node 5: under the root
  EXPECT_EQ(payload, std::string("\x05\x00\x10\x05\x00\x20\x05\x00\x30\x05\x02\x40\x05\x04\x50", 15));
  DecodeState state;
  Collector c;
  std::string error;
  ASSERT_TRUE(DecodeRecords(first_chunk, &c, &error, EventDecoding::kDeliver, &state)) << error;
  ASSERT_TRUE(DecodeRecords(payload.substr(0, 9), &c, &error, EventDecoding::kDeliver, &state));
  ASSERT_TRUE(DecodeRecords(payload.substr(9), &c, &error, EventDecoding::kDeliver, &state));
  std::vector<uint64_t> parents;
  for (const auto& n : c.nodes) parents.push_back(n.parent);
  EXPECT_EQ(parents, (std::vector<uint64_t>{0, 1, 2, 1, 0}));
  // Decoded on its own, the second part's gap of 4 names a parent before node 1: corrupt.
  EXPECT_FALSE(DecodeRecords(payload.substr(9), &c, &error));
  EXPECT_NE(error.find("names a parent after it"), std::string::npos) << error;
}

// A kEvents record (8.x's layout, which readers still read: these hand-made records test it) of
// one batch (thread 1) from hand-made columns; every size is 8, and every allocation's reuse
// rank 0 unless `reuses` is given.
// With `neighbours` given, a kEventColumns record (9.0) with that column (and the sizes in
// byte planes).
std::string EventsRecord(uint64_t count, const std::string& kinds, const std::string& releases,
                         const std::string& addresses, const std::string* reuses = nullptr,
                         const std::string* neighbours = nullptr) {
  std::string r(1, static_cast<char>(neighbours ? RecordType::kEventColumns : RecordType::kEvents));
  PutVarint(&r, 1);
  PutVarint(&r, 1);
  PutVarint(&r, count);
  std::string seqs(count, '\0'), sizes, stacks, ranks;
  for (char kind : kinds) {
    if (HasSize(static_cast<EventKind>(kind))) sizes.push_back(8);
    if (HasStack(static_cast<EventKind>(kind))) stacks.push_back(2);
    if (AddressChain(static_cast<EventKind>(kind)) == 0) ranks.push_back('\0');
  }
  if (reuses) ranks = *reuses;
  if (neighbours) sizes.insert(0, 1, '\x01');  // 9.0: byte planes, width 1
  for (const std::string* column : std::initializer_list<const std::string*>{
           &kinds, &seqs, &releases, &ranks, neighbours, &addresses, &sizes, &stacks}) {
    if (!column) continue;
    PutVarint(&r, column->size());
    r.append(*column);
  }
  return r;
}

TEST(EventBatches, BadReferencesAndAddressColumnsAreCorruption) {
  const char kMalloc = 1, kFree = 16;
  const std::string rank_1 = "\x01", ranks_0_2("\x00\x02", 2), ranks_0_1("\x00\x01", 2);
  struct Case {
    std::string record, message;
  } cases[] = {
      // A free that names the 2nd latest allocation when there was one.
      {EventsRecord(2, {kMalloc, kFree}, "\x02", "\x01\x20"), "refers back to allocation 2"},
      // A free before any allocation.
      {EventsRecord(1, {kFree}, "\x01", std::string("\x00", 1)), "refers back to allocation 1"},
      // Two addresses for one event.
      {EventsRecord(1, {kMalloc}, "", "\x01\x20\x22"), "left over in the address column"},
      // Too few addresses: the free has no reference and no address.
      {EventsRecord(2, {kMalloc, kFree}, std::string("\x00", 1), "\x01\x20"), "ends early"},
      // Planes of unequal length.
      {EventsRecord(1, {kMalloc}, "", "\x02\x20\x00\x01"), "bad address column"},
      // A release without its releases entry.
      {EventsRecord(2, {kMalloc, kFree}, "", "\x01\x20"), "ends early"},
      // An allocation that reuses a block of its class when none was freed in the chunk.
      {EventsRecord(1, {kMalloc}, "", std::string("\x00", 1), &rank_1), "reused block 1"},
      // ...or the 2nd latest when one was.
      {EventsRecord(3, {kMalloc, kFree, kMalloc}, "\x01", "\x01\x20", &ranks_0_2), "reused block 2"},
  };
  // 9.0: a neighbour beyond the allocations listed (sizes are 8: class 2, End = address + 32).
  const std::string neighbours_0_2("\x00\x02", 2), neighbours_0_1("\x00\x01", 2);
  const std::string ranks_0_0("\x00\x00", 2);
  Case neighbour_cases[] = {
      {EventsRecord(2, {kMalloc, kMalloc}, "", "\x01\x20", &ranks_0_0, &neighbours_0_2),
       "names neighbour 2"},
  };
  for (const Case& t : neighbour_cases) {
    Collector c;
    std::string error;
    EXPECT_FALSE(DecodeRecords(t.record, &c, &error)) << t.message;
    EXPECT_NE(error.find(t.message), std::string::npos) << error;
  }
  Collector after;
  std::string after_error;
  ASSERT_TRUE(DecodeRecords(EventsRecord(2, {kMalloc, kMalloc}, "", "\x01\x40", &ranks_0_0,
                                         &neighbours_0_1),
                            &after, &after_error))
      << after_error;
  ASSERT_EQ(after.events.size(), 2u);
  EXPECT_EQ(after.events[1].address, 0x200u + 32);  // right behind the first (its chunk: 32)
  for (const Case& t : cases) {
    Collector c;
    std::string error;
    EXPECT_FALSE(DecodeRecords(t.record, &c, &error)) << t.message;
    EXPECT_NE(error.find(t.message), std::string::npos) << error;
  }
  // The well-formed twin of the first case decodes: malloc 0x200, then its free.
  Collector c;
  std::string error;
  ASSERT_TRUE(DecodeRecords(EventsRecord(2, {kMalloc, kFree}, "\x01", "\x01\x40"), &c, &error))
      << error;
  ASSERT_EQ(c.events.size(), 2u);
  EXPECT_EQ(c.events[1].address, 0x200u);
  // And of the last: malloc 0x200, its free, and a malloc that gets the block back.
  Collector reused;
  ASSERT_TRUE(DecodeRecords(EventsRecord(3, {kMalloc, kFree, kMalloc}, "\x01", "\x01\x40", &ranks_0_1),
                            &reused, &error))
      << error;
  ASSERT_EQ(reused.events.size(), 3u);
  EXPECT_EQ(reused.events[2].address, 0x200u);
}

TEST(EventBatches, DamagedRecordsAreReportedNeverOverread) {
  std::string payload;
  RecordEncoder enc(&payload);
  for (uint32_t thread : {1u, 2u, 1u}) {
    enc.BeginEvents(thread);
    for (uint64_t i = 0; i < 40; ++i) {
      enc.AddEvent({i, EventKind::kMalloc, 0x5000 + 32 * i + 4096 * thread, i, i % 3 + 1, thread});
      if (i % 2) enc.AddEvent({i, EventKind::kFree, 0x5000 + 32 * (i - 1) + 4096 * thread, 0, 0, thread});
    }
  }
  enc.FinishEvents();
  ASSERT_FALSE(Decode(payload).empty());
  // Every byte changed to a few values: decoding succeeds or reports, within bounds (run under
  // ASan by the sanitizer build).
  for (size_t i = 0; i < payload.size(); ++i) {
    for (uint8_t value : {0x00, 0x01, 0x7f, 0x80, 0xff}) {
      std::string damaged = payload;
      damaged[i] = static_cast<char>(value);
      Collector c;
      std::string error;
      if (!DecodeRecords(damaged, &c, &error)) {
        EXPECT_FALSE(error.empty());
      }
    }
  }
}

// A visitor that asks for hints (WantsUpcoming) gets the same events as one that does not,
// in groups through OnEvents, and those decoded before a corrupt event all the same.
struct GroupedCollector : Collector {
  size_t groups = 0;
  bool WantsUpcoming() const override { return true; }
  void OnEvents(const Event* events, size_t count) override {
    ++groups;
    Collector::OnEvents(events, count);
  }
};

TEST(EventBatches, GroupedDeliveryGivesTheSameEvents) {
  std::string payload;
  RecordEncoder enc(&payload);
  std::vector<Event> events;
  for (uint32_t thread : {1u, 2u}) {
    enc.BeginEvents(thread);
    for (uint64_t i = 0; i < 700; ++i) {  // more than one group of each thread's batch
      Event alloc{2 * i + 2000 * thread, EventKind::kMalloc, 0x5000 + 64 * i + (thread << 20), 48,
                  i % 5 + 1, thread};
      Event release{alloc.seq + 1, EventKind::kFree, alloc.address, 0, 0, thread};
      for (const Event& e : {alloc, release}) {
        enc.AddEvent(e);
        events.push_back(e);
      }
    }
  }
  enc.FinishEvents();
  Collector one_by_one;
  GroupedCollector grouped;
  std::string error;
  ASSERT_TRUE(DecodeRecords(payload, &one_by_one, &error)) << error;
  ASSERT_TRUE(DecodeRecords(payload, &grouped, &error)) << error;
  ExpectSameEvents(one_by_one.events, events);
  ExpectSameEvents(grouped.events, events);
  EXPECT_GT(grouped.groups, 2u);

  // An unknown kind some 600 events in: the events before it arrive either way.
  size_t kinds = payload.find('\x01');  // near the first kind byte (kMalloc)
  ASSERT_NE(kinds, std::string::npos);
  std::string damaged = payload;
  damaged[kinds + 600] = static_cast<char>(0xee);
  Collector before_damage;
  GroupedCollector grouped_before_damage;
  EXPECT_FALSE(DecodeRecords(damaged, &before_damage, &error));
  EXPECT_FALSE(DecodeRecords(damaged, &grouped_before_damage, &error));
  EXPECT_GT(before_damage.events.size(), 500u);  // past the first group of 256
  EXPECT_LT(before_damage.events.size(), events.size());
  ExpectSameEvents(grouped_before_damage.events, before_damage.events);
}

ChunkReader::Result ReadOne(const std::string& bytes, std::string* payload, std::string* error,
                            bool* header_ok) {
  MemoryFile file(bytes);
  EXPECT_TRUE(file.ok());
  std::FILE* f = std::fopen(file.path().c_str(), "rb");
  ChunkReader reader(f);
  uint16_t major, minor;
  *header_ok = reader.ReadFileHeader(&major, &minor, error);
  auto result = *header_ok ? reader.Next(payload, error) : ChunkReader::Result::kCorrupt;
  std::fclose(f);
  return result;
}

TEST(Chunks, CompressedAndRawChunksRoundTrip) {
  ChunkCompressor compressor;
  std::string repetitive(100000, 'a'), tiny = "xy";
  for (const std::string& payload : {repetitive, tiny}) {
    std::string file = EncodeFileHeader();
    compressor.AppendChunk(payload, &file);
    std::string out, error;
    bool header_ok;
    ASSERT_EQ(ReadOne(file, &out, &error, &header_ok), ChunkReader::Result::kChunk) << error;
    EXPECT_EQ(out, payload);
  }
}

TEST(Chunks, DamageIsDetected) {
  ChunkCompressor compressor;
  std::string good = EncodeFileHeader();
  compressor.AppendChunk(std::string(5000, 'q'), &good);
  std::string out, error;
  bool header_ok;
  // Truncated in the payload.
  EXPECT_EQ(ReadOne(good.substr(0, good.size() - 3), &out, &error, &header_ok),
            ChunkReader::Result::kTruncated);
  // A flipped payload byte fails the checksum.
  std::string flipped = good;
  flipped[flipped.size() - 2] ^= 0x40;
  EXPECT_EQ(ReadOne(flipped, &out, &error, &header_ok), ChunkReader::Result::kCorrupt);
  EXPECT_NE(error.find("checksum"), std::string::npos);
  // A corrupt length field is caught by the checksum too.
  std::string bad_length = good;
  bad_length[kFileHeaderSize + 8] ^= 0x01;
  EXPECT_NE(ReadOne(bad_length, &out, &error, &header_ok), ChunkReader::Result::kChunk);
}

TEST(Chunks, FileHeaderChecks) {
  std::string out, error;
  bool header_ok;
  ReadOne("", &out, &error, &header_ok);
  EXPECT_FALSE(header_ok);
  EXPECT_NE(error.find("empty"), std::string::npos);
  ReadOne("random bytes that are not a capture", &out, &error, &header_ok);
  EXPECT_FALSE(header_ok);
  EXPECT_NE(error.find("not a memlens capture"), std::string::npos);
  std::string newer = EncodeFileHeader();
  newer[8] = static_cast<char>(kFormatMajor + 1);
  ReadOne(newer, &out, &error, &header_ok);
  EXPECT_FALSE(header_ok);
  EXPECT_NE(error.find("newer than this memlens reads"), std::string::npos) << error;
  // 8.x captures are still read (their event batches are kEvents records, tested above).
  std::string eight = EncodeFileHeader();
  eight[8] = static_cast<char>(kOldestReadableMajor);
  ReadOne(eight, &out, &error, &header_ok);
  EXPECT_TRUE(header_ok) << error;
  std::string older = EncodeFileHeader();
  older[8] = static_cast<char>(kOldestReadableMajor - 1);
  ReadOne(older, &out, &error, &header_ok);
  EXPECT_FALSE(header_ok);
  EXPECT_NE(error.find("older than this memlens reads"), std::string::npos) << error;
}

}  // namespace
}  // namespace memlens::format
