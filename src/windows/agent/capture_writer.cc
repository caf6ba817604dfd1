// src/windows/agent/capture_writer.cc
#include "windows/agent/capture_writer.h"

#include <algorithm>
#include <cstring>

#include "agent/api/string_table.h"

namespace memlens::windows {
namespace {

using format::EventKind;

constexpr DWORD kCycleMs = 10;
constexpr uint64_t kFlushNs = 100 * 1000000ull;
constexpr size_t kChunkEvents = 64 * 1024;

uint64_t NowNs() {
  static const uint64_t frequency = [] {
    LARGE_INTEGER f;
    QueryPerformanceFrequency(&f);
    return static_cast<uint64_t>(f.QuadPart);
  }();
  LARGE_INTEGER c;
  QueryPerformanceCounter(&c);
  const uint64_t ticks = static_cast<uint64_t>(c.QuadPart);
  return ticks / frequency * 1000000000ull + ticks % frequency * 1000000000ull / frequency;
}

}  // namespace

CaptureWriter::CaptureWriter(HANDLE file, const format::ProcessRecord& process)
    : file_(file), meta_encoder_(&meta_), event_encoder_(&meta_) {
  InitializeCriticalSection(&lock_);
  start_ns_ = NowNs();
  last_flush_ns_ = start_ns_;
  format::ProcessRecord p = process;
  p.start_monotonic_ns = start_ns_;
  Write(format::EncodeFileHeader());
  meta_encoder_.Process(p);
  // The modules loaded now (the loader's lock is ours: this runs in DllMain); later ones come
  // from the loader's notifications (Announce, AnnounceUnload). The writer thread itself never
  // asks the loader: that takes its lock, which a thread in a DllMain holds while it
  // allocates, waiting for the writer to drain its ring.
  for (LoadedModule& m : ListLoadedModules()) WriteModule(m);
  Flush();
  finished_event_ = CreateEventW(nullptr, TRUE, FALSE, nullptr);
}

uint64_t CaptureWriter::SinceStartNs() const { return NowNs() - start_ns_; }

void CaptureWriter::Run() {
  InterlockedExchange(&started_, 1);
  MarkAgentThread();
  while (!stop_) {
    WaitForSingleObject(WriterWakeEvent(), kCycleMs);
    EnterCriticalSection(&lock_);
    Cycle();
    LeaveCriticalSection(&lock_);
  }
  EnterCriticalSection(&lock_);
  Cycle();
  WriteEnd();
  LeaveCriticalSection(&lock_);
  SetEvent(finished_event_);
}

bool CaptureWriter::Stop(HANDLE thread, format::EndReason reason, int64_t detail,
                         DWORD timeout_ms) {
  end_reason_ = reason;
  end_detail_ = detail;
  InterlockedExchange(&stop_, 1);
  // A thread starts running only once the loader lets it (its attach notifications): a process
  // that ends early, from a DllMain, may hold the loader's lock before the writer ever ran.
  if (!started_) return false;
  SetEvent(WriterWakeEvent());
  // The capture's end, not the thread's: a thread's exit waits for the loader's lock, which
  // the thread ending the process may hold (ExitProcess from a DllMain).
  const HANDLE ends[] = {finished_event_, thread};
  return WaitForMultipleObjects(2, ends, FALSE, timeout_ms) == WAIT_OBJECT_0;
}

void CaptureWriter::Finish(format::EndReason reason, int64_t detail) {
  // The writer thread ended inside a cycle (the process is going): its state is half-done.
  if (!TryEnterCriticalSection(&lock_)) return;
  end_reason_ = reason;
  end_detail_ = detail;
  Cycle();
  WriteEnd();
  LeaveCriticalSection(&lock_);
}

void CaptureWriter::Cycle() {
  if (finished_) return;
  // Every event numbered below this had happened by now (docs/capture-format.md, kTime).
  meta_encoder_.Time({SinceStartNs(), NextSeq()});
  // Libraries loaded since the last cycle, before the events whose stacks may reach them.
  std::vector<LoadedModule> announced;
  std::vector<uint64_t> unloaded;
  AcquireSRWLockExclusive(&announced_lock_);
  announced.swap(announced_);
  unloaded.swap(unloaded_);
  ReleaseSRWLockExclusive(&announced_lock_);
  for (LoadedModule& m : announced) WriteModule(m);
  ThreadRing* previous = nullptr;
  for (ThreadRing* ring = FirstRing(); ring != nullptr;) {
    const bool exited = ring->exited.load(std::memory_order_acquire);
    Drain(ring);
    ThreadRing* next = ring->next;
    if (exited) {
      FreeRing(ring, previous);
    } else {
      previous = ring;
    }
    ring = next;
  }
  // Unloads last: the events drained above happened while those libraries were loaded.
  WriteUnloads(unloaded);
  const uint64_t dropped = DroppedEvents();
  if (dropped != dropped_written_) {
    meta_encoder_.Drops({dropped - dropped_written_});
    dropped_written_ = dropped;
  }
  const LONG flush_ticket = flush_requested_;
  if (NowNs() - last_flush_ns_ >= kFlushNs || flush_ticket != flush_done_) {
    Flush();
    InterlockedExchange(&flush_done_, flush_ticket);
  }
  NoteWriterRound();
}

bool CaptureWriter::FlushNow(DWORD timeout_ms) {
  const LONG ticket = InterlockedIncrement(&flush_requested_);
  SetEvent(WriterWakeEvent());
  // A clock, not a count of sleeps: Sleep(1) lasts a timer tick, 15.6 ms on Windows.
  const uint64_t start = GetTickCount64();
  while (flush_done_ - ticket < 0) {
    if (GetTickCount64() - start >= timeout_ms) return false;
    Sleep(1);
  }
  return true;
}

void CaptureWriter::Drain(ThreadRing* ring) {
  const uint64_t head = ring->head.load(std::memory_order_acquire);
  uint64_t tail = ring->tail.load(std::memory_order_relaxed);
  if (tail == head) return;
  const uint32_t thread = ring->index;
  if (threads_written_.size() <= thread) threads_written_.resize(thread + 1);
  if (!threads_written_[thread]) {
    meta_encoder_.Thread({thread, ring->tid});
    threads_written_[thread] = true;
  }
  const char* base = reinterpret_cast<const char*>(ring->data);
  bool in_batch = false;
  while (tail != head) {
    RingEvent e;
    const uint64_t at = tail & (ThreadRing::kBytes - 1);
    if (ThreadRing::kBytes - at < sizeof e) {  // a tail too short for a record (Append)
      tail += ThreadRing::kBytes - at;
      continue;
    }
    std::memcpy(&e, base + at, sizeof e);
    if (e.kind == 0) {  // filler up to the ring's end
      tail += e.size;
      continue;
    }
    const auto* frames = reinterpret_cast<const uint64_t*>(base + at + sizeof e);
    // Stack nodes and module records the interner writes land before the events record: the
    // encoder writes the batches' columns at FinishEvents.
    if (!in_batch) {
      event_encoder_.BeginEvents(thread);
      in_batch = true;
    }
    AddEvent(thread, e, frames);
    tail += sizeof e + 8 * static_cast<uint64_t>(e.frame_count);
    if (event_encoder_.pending_events() >= kChunkEvents) {
      event_encoder_.EndEvents();
      in_batch = false;
      ring->tail.store(tail, std::memory_order_release);
      Flush();
    }
  }
  if (in_batch) event_encoder_.EndEvents();
  ring->tail.store(tail, std::memory_order_release);
}

void CaptureWriter::AddEvent(uint32_t thread, const RingEvent& e, const uint64_t* frames) {
  format::Event out;
  out.seq = e.seq;
  out.kind = static_cast<EventKind>(e.kind);
  out.address = e.address;
  out.size = e.size;
  out.thread = thread;
  switch (out.kind) {
    case EventKind::kHeapCreate:  // size: the name's string id
      DescribeString(e.size);
      break;
    case EventKind::kMarker:
      DescribeString(e.address);
      DescribeString(e.size);
      break;
    case EventKind::kSnapshot:
      DescribeString(e.address);
      break;
    default:
      break;
  }
  // A custom heap's block events carry its annotation (extra: CustomHeapExtra).
  const bool custom = format::IsCustomHeapEvent(out.kind) && out.kind != EventKind::kHeapCreate;
  if (format::HasStack(out.kind))
    out.stack = InternStack(frames, e.frame_count, custom ? e.extra : 0);
  event_encoder_.AddEvent(out);
}

// A string the API interned (agent/api/string_table.h), written once before its first use.
void CaptureWriter::DescribeString(uint64_t id) {
  if (id == 0 || id >= agent::kMaxStringIds) return;
  if (strings_written_.size() <= id) strings_written_.resize(id + 1);
  if (strings_written_[id]) return;
  size_t length = 0;
  const char* text = agent::StringText(static_cast<uint32_t>(id), &length);
  meta_encoder_.String({id, std::string(text, length)});
  strings_written_[id] = true;
}

// Custom heap annotations (records.h) innermost, then the frames.
uint64_t CaptureWriter::InternStack(const uint64_t* frames, int count, uint64_t custom_heap) {
  stack_.clear();
  if (custom_heap) {
    const auto heap = static_cast<uint32_t>(custom_heap >> 32);
    const auto type = static_cast<uint32_t>(custom_heap);
    stack_.push_back(format::AnnotationFrameIp(format::Annotation::kHeap, heap));
    if (type) {
      DescribeString(type);
      stack_.push_back(format::AnnotationFrameIp(format::Annotation::kType, type));
    }
  }
  stack_.insert(stack_.end(), frames, frames + count);
  return interner_.Intern(stack_.data(), static_cast<int>(stack_.size()),
                          [this](uint64_t parent, uint64_t ip) {
                            meta_encoder_.StackNode({parent, ip});
                          });
}

void CaptureWriter::Announce(LoadedModule module) {
  AcquireSRWLockExclusive(&announced_lock_);
  announced_.push_back(std::move(module));
  ReleaseSRWLockExclusive(&announced_lock_);
}

void CaptureWriter::WriteModule(LoadedModule& m) {
  const bool known = std::any_of(modules_.begin(), modules_.end(), [&](const KnownModule& k) {
    return k.loaded && k.handle == m.handle && k.start == m.base && k.end == m.base + m.size;
  });
  if (known) return;
  m.record.id = next_module_id_++;
  meta_encoder_.Module(m.record);
  modules_.push_back({m.record.id, m.base, m.base + m.size, m.handle, true});
}

void CaptureWriter::AnnounceUnload(uint64_t base) {
  AcquireSRWLockExclusive(&announced_lock_);
  unloaded_.push_back(base);
  ReleaseSRWLockExclusive(&announced_lock_);
}

// Modules unloaded (FreeLibrary) since the last cycle. Their frames stay resolvable; new stacks
// get new nodes, since the same addresses may now belong to another library.
void CaptureWriter::WriteUnloads(const std::vector<uint64_t>& bases) {
  bool unloaded = false;
  for (KnownModule& k : modules_) {
    if (k.loaded && std::find(bases.begin(), bases.end(), k.start) != bases.end()) {
      meta_encoder_.ModuleUnload({k.id});
      k.loaded = false;
      unloaded = true;
    }
  }
  if (unloaded) interner_.ForgetPaths();
}

void CaptureWriter::Flush() {
  last_flush_ns_ = NowNs();
  event_encoder_.FinishEvents();
  if (meta_.empty()) return;
  chunk_.clear();
  compressor_.AppendChunk(meta_, &chunk_, &event_encoder_.block_starts());
  Write(chunk_);
  event_encoder_.NextChunk();
  meta_.clear();
}

void CaptureWriter::WriteEnd() {
  if (finished_) return;
  format::EndRecord end;
  end.reason = end_reason_;
  end.detail = end_detail_;
  end.monotonic_ns = SinceStartNs();
  end.events = NextSeq();
  end.dropped = DroppedEvents();
  meta_encoder_.End(end);
  Flush();
  FlushFileBuffers(file_);
  CloseHandle(file_);
  finished_ = true;
}

void CaptureWriter::Write(const std::string& bytes) {
  size_t done = 0;
  while (done < bytes.size()) {
    DWORD wrote = 0;
    const DWORD n = static_cast<DWORD>(std::min<size_t>(bytes.size() - done, 1u << 30));
    if (!WriteFile(file_, bytes.data() + done, n, &wrote, nullptr) || wrote == 0) return;
    done += wrote;
  }
}

}  // namespace memlens::windows
