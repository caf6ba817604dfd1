// src/agent/python_support.cc: see python_support.h and python_bridge.h.
#include "agent/python_support.h"

#include <dlfcn.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <string>

#include "agent/agent.h"
#include "agent/python_bridge.h"
#include "agent/recorder/recorder.h"
#include "agent/recorder/sampler.h"
#include "agent/writer/hosted.h"
#include "base/raw_mapping.h"

namespace memlens::agent {

uintptr_t g_eval_begin = 0, g_eval_end = 0;
bool g_python_stacks = false;
constinit thread_local bool t_in_mimalloc = false;

namespace {

constexpr uint64_t kMaxCodes = kMaxPythonCodes;

std::atomic<PythonCodeInfo*>* g_codes = nullptr;  // by id; mapped once, never freed
std::atomic<uint64_t> g_next_code{1};
std::atomic<MemlensPythonFrameReader> g_reader{nullptr};
std::atomic<int> g_python_depth{1 << 30};  // MEMLENS_PYTHON_FRAMES, or a span's python_frames
// The hooks library, once loaded: attach again at a later span's start, detach at its stop.
MemlensPythonAttach g_attach = nullptr;
void (*g_detach)(void) = nullptr;
bool g_attach_tried = false;

int BridgeEnter(const void* caller) {
  if (!ShouldRecord(caller)) return 0;
  t_in_hook = true;
  return 1;
}

void BridgeLeave() { t_in_hook = false; }

int BridgeRecording() { return g_state.load(std::memory_order_relaxed) == kRecording; }

void BridgeRecordAlloc(uint8_t kind, const void* address, size_t size) {
  RecordAlloc(static_cast<format::EventKind>(kind), address, size);
}

void BridgeRecordRelease(uint8_t kind, const void* address, size_t size) {
  RecordRelease(static_cast<format::EventKind>(kind), address, size);
}

void BridgeProgramEnd() {
  if (g_state.load(std::memory_order_relaxed) != kRecording || t_in_hook) return;
  HookGuard guard;
  RecordRelease(format::EventKind::kProgramEnd, nullptr, 0);
}

char* CopyString(const char* s) {
  size_t n = std::strlen(s);
  auto* copy = static_cast<char*>(std::malloc(n + 1));  // under the caller's guard: not recorded
  if (copy) std::memcpy(copy, s, n + 1);
  return copy;
}

uint64_t BridgeRegisterCode(const char* filename, const char* name, uint64_t first_line) {
  if (!g_codes) return 0;
  uint64_t id = g_next_code.fetch_add(1, std::memory_order_relaxed);
  if (id >= kMaxCodes) return 0;
  auto* info = static_cast<PythonCodeInfo*>(std::malloc(sizeof(PythonCodeInfo)));
  if (!info) return 0;
  info->filename = CopyString(filename ? filename : "");
  info->name = CopyString(name ? name : "");
  info->first_line = first_line;
  g_codes[id].store(info, std::memory_order_release);
  PublishPythonCode(id);  // under memlens run, for its writer (hosted.h)
  return id;
}

void BridgeSetRanges(uintptr_t hooks_begin, uintptr_t hooks_end, uintptr_t eval_begin,
                     uintptr_t eval_end) {
  AddSelfRange(hooks_begin, hooks_end);
  g_eval_begin = eval_begin;
  g_eval_end = eval_end;
  PublishEvalLoop(eval_begin, eval_end);
}

void BridgeSetReader(MemlensPythonFrameReader reader) {
  g_reader.store(reader, std::memory_order_release);
}

// Where a thread-local of the agent lies from the thread pointer: the same in every thread, the
// agent's thread-local storage being static (-ftls-model=initial-exec).
ptrdiff_t ThreadPointerOffset(const void* variable) {
  return static_cast<const char*>(variable) - static_cast<const char*>(__builtin_thread_pointer());
}

MemlensAgentBridge MakeBridge() {
  MemlensAgentBridge bridge = {};
  bridge.version = MEMLENS_PYTHON_BRIDGE_VERSION;
  bridge.enter = BridgeEnter;
  bridge.leave = BridgeLeave;
  bridge.recording = BridgeRecording;
  bridge.record_alloc = BridgeRecordAlloc;
  bridge.record_release = BridgeRecordRelease;
  bridge.register_code = BridgeRegisterCode;
  bridge.set_python_ranges = BridgeSetRanges;
  bridge.set_frame_reader = BridgeSetReader;
  bridge.say = [](const char* message) { SayToUser(message); };
  bridge.sampling = g_sample_rate != 0;  // set by InitializeOnce, before AttachPython
  bridge.countdown_offset = ThreadPointerOffset(&t_bytes_to_sample);
  bridge.in_hook_offset = ThreadPointerOffset(&t_in_hook);
  bridge.map_memory = [](size_t bytes) { return MapZeroed(bytes); };
  bridge.sampled_blocks = &g_sampled;
  bridge.mimalloc_offset = ThreadPointerOffset(&t_in_mimalloc);
  bridge.program_end = BridgeProgramEnd;
  return bridge;
}

std::string OwnFolder() {
  Dl_info info;
  if (!dladdr(reinterpret_cast<void*>(&AttachPython), &info) || !info.dli_fname) return ".";
  std::string path = info.dli_fname;
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? "." : path.substr(0, slash);
}

}  // namespace

void SetPythonFrames(uint64_t frames) {
  if (frames == 0) {
    const char* depth = getenv("MEMLENS_PYTHON_FRAMES");
    frames = depth && *depth ? strtoull(depth, nullptr, 10) : 0;
  }
  g_python_depth.store(frames >= 1 ? static_cast<int>(std::min(frames, uint64_t{1} << 30)) : 1 << 30,
                       std::memory_order_relaxed);
}

bool SetPythonStacks(int option) {
  bool valid = true;
  if (option < 0) {
    const char* value = getenv("MEMLENS_PYTHON_STACKS");
    std::string text = value ? value : "";
    valid = text.empty() || text == "0" || text == "1";
    option = text == "1";
  }
  g_python_stacks = option == 1;
  return valid;
}

void AttachPython() {
  static MemlensAgentBridge bridge;  // read by the hooks library for good
  if (g_attach) {  // a later span: the wrappers go back on
    g_attach(&bridge);
    return;
  }
  if (g_attach_tried) return;  // no Python, or said why once
  g_attach_tried = true;
  const auto* version = static_cast<const unsigned long*>(dlsym(RTLD_DEFAULT, "Py_Version"));
  if (!version) {
    if (dlsym(RTLD_DEFAULT, "Py_GetVersion")) {
      SayToUser("this Python is older than 3.11, which memlens does not support: Python frames are "
          "not recorded, only native allocations");
    }
    return;
  }
  // The layout differs by version and by build: a free-threaded interpreter has hooks of its own.
  unsigned major = (*version >> 24) & 0xff, minor = (*version >> 16) & 0xff;
  std::string tag = std::to_string(major) + "." + std::to_string(minor) +
                    (dlsym(RTLD_DEFAULT, MEMLENS_FREE_THREADED_SYMBOL) ? "t" : "");
  std::string path = OwnFolder() + "/libmemlens_python" + tag + ".so";
  if (access(path.c_str(), R_OK) != 0) {
    std::string message = "Python " + tag + " is not supported by this memlens build (no " + path +
                          "): Python frames are not recorded, only native allocations";
    SayToUser(message);
    return;
  }
  void* mem = MapZeroed(kMaxCodes * sizeof(std::atomic<PythonCodeInfo*>));
  if (!mem) return;
  g_codes = static_cast<std::atomic<PythonCodeInfo*>*>(mem);
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  auto attach = handle ? reinterpret_cast<MemlensPythonAttach>(dlsym(handle, "memlens_python_attach"))
                       : nullptr;
  if (!attach) {
    std::string message = "cannot load " + path + ": " + (handle ? "no entry point" : dlerror());
    SayToUser(message);
    return;
  }
  bridge = MakeBridge();
  if (attach(&bridge) != 0) return;
  g_attach = attach;
  g_detach = reinterpret_cast<void (*)(void)>(dlsym(handle, "memlens_python_detach"));
}

void DetachPython() {
  if (g_detach) g_detach();
}

const PythonCodeInfo* FindPythonCode(uint64_t id) {
  if (!g_codes || id == 0 || id >= kMaxCodes) return nullptr;
  return g_codes[id].load(std::memory_order_acquire);
}

int ReadPythonFrames(uint64_t* frames, int max, MemlensFrameCache* cache, uint32_t thread) {
  MemlensPythonFrameReader reader = g_reader.load(std::memory_order_acquire);
  const int depth = g_python_depth.load(std::memory_order_relaxed);
  return reader ? reader(frames, max < depth ? max : depth, cache, thread) : 0;
}

}  // namespace memlens::agent
