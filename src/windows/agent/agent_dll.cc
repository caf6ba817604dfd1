// src/windows/agent/agent_dll.cc
//
// memlens_agent.dll's entry point and the agent's life (agent.h). memlens.exe creates the
// program suspended and loads this DLL into it with a remote thread (LoadLibraryW), so
// DllMain runs before the program's own code, with the loader's lock held: it only opens the
// capture, patches the import tables and creates the writer thread, which starts once the
// loader lets go. The capture's path comes from MEMLENS_OUTPUT (%p and %e expanded, as on
// Linux: format/capture_path.h).
//
// The end: ExitProcess (hooked) stops the writer and waits for the END record; an unhandled
// exception does the same from the exception filter (EndReason::kSignal, the exception code
// as detail) before Windows ends the process; DLL_PROCESS_DETACH catches every other way out,
// writing from the detaching thread when the writer thread was already ended.
#include <windows.h>
#include <winternl.h>

#include <string>
#include <vector>

#include "format/capture_path.h"
#include "windows/agent/agent.h"
#include "windows/agent/capture_writer.h"
#include "windows/agent/import_patcher.h"
#include "windows/agent/module_list.h"
#include "windows/agent/thread_rings.h"
#include "windows/text.h"

namespace memlens::windows {
namespace {

HMODULE g_self = nullptr;
volatile LONG g_recording = 0;
volatile LONG g_ended = 0;
CaptureWriter* g_writer = nullptr;
HANDLE g_writer_thread = nullptr;
LPTOP_LEVEL_EXCEPTION_FILTER g_previous_filter = nullptr;  // installed before the agent
LPTOP_LEVEL_EXCEPTION_FILTER g_program_filter = nullptr;   // installed by the program since
constexpr DWORD kEndWaitMs = 10000;

// The program's arguments as its C runtime splits its command line (the rules of
// CommandLineToArgvW, which lives in shell32: no DLL is loaded under the loader lock).
std::vector<std::string> SplitCommandLine(const wchar_t* line) {
  std::vector<std::string> args;
  const wchar_t* p = line;
  while (*p) {
    while (*p == L' ' || *p == L'\t') ++p;
    if (!*p) break;
    std::wstring arg;
    bool quoted = false;
    for (;;) {
      size_t backslashes = 0;
      while (*p == L'\\') ++backslashes, ++p;
      if (*p == L'"') {
        arg.append(backslashes / 2, L'\\');
        if (backslashes % 2) {
          arg += L'"';
        } else if (quoted && p[1] == L'"') {
          arg += L'"';
          ++p;
        } else {
          quoted = !quoted;
        }
        ++p;
        continue;
      }
      arg.append(backslashes, L'\\');
      if (!*p || (!quoted && (*p == L' ' || *p == L'\t'))) break;
      arg += *p++;
    }
    args.push_back(Utf8(arg.c_str()));
  }
  return args;
}

uint64_t RealtimeNs() {
  FILETIME ft;
  GetSystemTimePreciseAsFileTime(&ft);
  const uint64_t ticks = (uint64_t{ft.dwHighDateTime} << 32) | ft.dwLowDateTime;
  return (ticks - 116444736000000000ull) * 100;  // 100 ns since 1601 to ns since 1970
}

void Say(const std::string& line) {
  const std::string text = "memlens: " + line + "\n";
  DWORD wrote = 0;
  WriteFile(GetStdHandle(STD_ERROR_HANDLE), text.data(), static_cast<DWORD>(text.size()), &wrote,
            nullptr);
}

DWORD WINAPI WriterMain(void*) {
  g_writer->Run();
  return 0;
}

// ntdll's library notifications (LdrRegisterDllNotification; Windows and Wine alike), which
// mingw-w64's headers do not declare.
struct DllNotification {
  ULONG flags;
  const UNICODE_STRING* full_name;
  const UNICODE_STRING* base_name;
  void* base;
  ULONG image_size;
};
enum : ULONG { kDllLoaded = 1, kDllUnloaded = 2 };
using DllNotificationFn = VOID(CALLBACK*)(ULONG reason, const DllNotification* data, void* context);
using RegisterFn = LONG(NTAPI*)(ULONG flags, DllNotificationFn fn, void* context, void** cookie);

// A library mapped by the loader, before its DllMain runs: its imports are patched (so its
// DllMain's allocations are seen as malloc, not only as the CRT's HeapAlloc) and it is
// described for the capture at once (it may be unloaded before the writer's next cycle).
VOID CALLBACK OnDllNotification(ULONG reason, const DllNotification* data, void*) {
  if (!Recording()) return;
  ThreadState* state = CurrentThreadState();
  if (state == nullptr) return;
  const DWORD error = GetLastError();
  {
    Guard guard(state);
    auto* module = static_cast<HMODULE>(data->base);
    if (reason == kDllLoaded) {
      PatchNewModule(g_self, module);
      const std::wstring path(data->full_name->Buffer, data->full_name->Length / sizeof(wchar_t));
      LoadedModule described;
      if (DescribeModule(module, path.c_str(), &described))
        g_writer->Announce(std::move(described));
    } else if (reason == kDllUnloaded) {
      ForgetModule(module);
      NoteModuleUnloaded();
      g_writer->AnnounceUnload(reinterpret_cast<uint64_t>(module));
    }
  }
  SetLastError(error);
}

void WatchLibraries() {
  auto* ntdll = GetModuleHandleW(L"ntdll.dll");
  auto* reg = reinterpret_cast<RegisterFn>(
      reinterpret_cast<void*>(GetProcAddress(ntdll, "LdrRegisterDllNotification")));
  void* cookie = nullptr;
  if (reg == nullptr || reg(0, OnDllNotification, nullptr, &cookie) != 0) {
    Say("libraries loaded from now on are not recorded (no loader notifications here)");
  }
}

// An exception no handler took: the program's own filter first (it may repair and continue),
// then the capture's end, then what Windows does with it.
LONG WINAPI OnUnhandledException(EXCEPTION_POINTERS* info) {
  const LPTOP_LEVEL_EXCEPTION_FILTER program =
      g_program_filter ? g_program_filter : g_previous_filter;
  const LONG action = program ? program(info) : EXCEPTION_CONTINUE_SEARCH;
  if (action == EXCEPTION_CONTINUE_EXECUTION) return action;
  EndRecording(format::EndReason::kSignal,
               static_cast<int64_t>(info->ExceptionRecord->ExceptionCode));
  return action;
}

void Start(HMODULE self) {
  g_self = self;
  if (!InitThreadRings() || !ResolveKernelFunctions()) {
    Say("cannot start the agent in this process; the program runs unrecorded");
    return;
  }
  ThreadState* state = CurrentThreadState();
  if (state == nullptr) return;
  Guard guard(state);

  wchar_t exe[MAX_PATH * 4];
  const DWORD n = GetModuleFileNameW(nullptr, exe, MAX_PATH * 4);
  format::ProcessRecord process;
  process.pid = GetCurrentProcessId();
  process.start_realtime_ns = RealtimeNs();
  process.executable = Utf8(exe, static_cast<int>(n));
  process.argv = SplitCommandLine(GetCommandLineW());
  process.agent_version = std::string(format::kWindowsAgentPrefix) + MEMLENS_VERSION;

  wchar_t pattern[MAX_PATH * 4];
  const DWORD length = GetEnvironmentVariableW(L"MEMLENS_OUTPUT", pattern, MAX_PATH * 4);
  const std::string path = format::ExpandCapturePattern(
      length > 0 && length < MAX_PATH * 4 ? Utf8(pattern) : format::kDefaultCapturePattern,
      process.pid, ProgramName(process.executable));
  HANDLE file = CreateFileW(Wide(path).c_str(), GENERIC_WRITE, FILE_SHARE_READ, nullptr,
                            CREATE_ALWAYS, FILE_ATTRIBUTE_NORMAL, nullptr);
  if (file == INVALID_HANDLE_VALUE) {
    Say("cannot write " + path + " (error " + std::to_string(GetLastError()) +
        "); the program runs unrecorded");
    return;
  }
  g_writer = new CaptureWriter(file, process);
  g_writer_thread = CreateThread(nullptr, 0, WriterMain, nullptr, 0, nullptr);
  if (g_writer_thread == nullptr) {
    Say("cannot start the writer thread; the program runs unrecorded");
    g_writer->Finish(format::EndReason::kExit, 0);
    return;
  }
  g_previous_filter = SetUnhandledExceptionFilter(OnUnhandledException);
  InterlockedExchange(&g_recording, 1);
  WatchLibraries();
  PatchLoadedModules(self);
}

}  // namespace

bool Recording() { return g_recording != 0; }

LPTOP_LEVEL_EXCEPTION_FILTER ExchangeProgramFilter(LPTOP_LEVEL_EXCEPTION_FILTER filter) {
  auto* previous = reinterpret_cast<LPTOP_LEVEL_EXCEPTION_FILTER>(InterlockedExchangePointer(
      reinterpret_cast<void* volatile*>(&g_program_filter), reinterpret_cast<void*>(filter)));
  return previous ? previous : g_previous_filter;
}

void FlushCapture(DWORD timeout_ms) {
  if (g_writer && Recording()) g_writer->FlushNow(timeout_ms);
}
HMODULE AgentModule() { return g_self; }

void EndRecording(format::EndReason reason, int64_t detail) {
  if (g_writer == nullptr || InterlockedExchange(&g_ended, 1) != 0) return;
  ThreadState* state = CurrentThreadState();
  if (state) ++state->guard;  // from here on this thread records nothing
  InterlockedExchange(&g_recording, 0);
  if (!g_writer->Stop(g_writer_thread, reason, detail, kEndWaitMs)) {
    g_writer->Finish(reason, detail);
  }
}

}  // namespace memlens::windows

BOOL WINAPI DllMain(HINSTANCE self, DWORD reason, LPVOID reserved) {
  using namespace memlens::windows;
  switch (reason) {
    case DLL_PROCESS_ATTACH:
      Start(self);
      break;
    case DLL_THREAD_DETACH:
      if (Recording()) RetireCurrentThread();
      break;
    case DLL_PROCESS_DETACH:
      // The process is ending (reserved != null): the writer thread may be gone already.
      if (reserved != nullptr && g_writer_thread != nullptr &&
          WaitForSingleObject(g_writer_thread, 0) == WAIT_OBJECT_0) {
        InterlockedExchange(&g_recording, 0);
        if (InterlockedExchange(&g_ended, 1) == 0)
          g_writer->Finish(memlens::format::EndReason::kExit, 0);
      } else {
        EndRecording(memlens::format::EndReason::kExit, 0);
      }
      break;
  }
  return TRUE;
}
