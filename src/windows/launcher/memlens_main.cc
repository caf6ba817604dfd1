// src/windows/launcher/memlens_main.cc
//
// memlens.exe: `memlens run [-o FILE] -- PROGRAM.exe ARGS` on Windows. Starts the program
// suspended, loads memlens_agent.dll (beside memlens.exe) into it with a remote thread before
// any of its own code runs, resumes it, and waits: the program keeps the console, its
// arguments (quoted back as its C runtime will split them), its working directory and its exit
// code, which memlens.exe returns as its own. The capture is analyzed with the `memlens` CLI
// (on Linux, or wherever it is built): summary, top, tree, leaks, report...
//
// Runs on: the launching process, one thread.
#include <windows.h>
// After windows.h, which it needs.
#include <psapi.h>

#include <cstdio>
#include <string>
#include <vector>

#include "format/capture_path.h"
#include "windows/text.h"

namespace {

using memlens::windows::Utf8;
using memlens::windows::Wide;

constexpr wchar_t kUsage[] =
    L"usage: memlens run [-o FILE] [--] PROGRAM [ARGS...]\n"
    L"\n"
    L"Records every allocation of PROGRAM (the C runtime's malloc family, operator new and\n"
    L"delete through it, HeapAlloc and friends, VirtualAlloc and VirtualFree), from every thread\n"
    L"and every DLL, with its stack, into a capture file. The program runs as it would without\n"
    L"memlens: same console, arguments, working directory and exit code.\n"
    L"\n"
    L"options:\n"
    L"  -o, --output FILE   the capture's path (default memlens-PROGRAM-PID.mlens here);\n"
    L"                      %p is replaced by the process id, %e by the program's name\n"
    L"  -h, --help          this help\n"
    L"      --version       memlens's version\n"
    L"\n"
    L"Then read the capture with the memlens command on Linux: memlens summary FILE,\n"
    L"memlens top FILE, memlens leaks FILE, memlens report FILE -o report.html.\n";

void Print(const std::wstring& text) { fwprintf(stderr, L"%ls", text.c_str()); }

std::wstring LastErrorText() {
  const DWORD error = GetLastError();
  wchar_t* text = nullptr;
  FormatMessageW(
      FORMAT_MESSAGE_ALLOCATE_BUFFER | FORMAT_MESSAGE_FROM_SYSTEM | FORMAT_MESSAGE_IGNORE_INSERTS,
      nullptr, error, 0, reinterpret_cast<wchar_t*>(&text), 0, nullptr);
  std::wstring out = text ? text : L"error " + std::to_wstring(error);
  if (text) LocalFree(text);
  while (!out.empty() && (out.back() == L'\n' || out.back() == L'\r' || out.back() == L' ')) {
    out.pop_back();
  }
  return out;
}

// One argument as the C runtime's command-line splitting reads it back unchanged.
std::wstring Quote(const std::wstring& arg) {
  if (!arg.empty() && arg.find_first_of(L" \t\n\v\"") == std::wstring::npos) return arg;
  std::wstring out = L"\"";
  for (size_t i = 0;; ++i) {
    size_t backslashes = 0;
    while (i < arg.size() && arg[i] == L'\\') ++backslashes, ++i;
    if (i == arg.size()) {
      out.append(backslashes * 2, L'\\');
      break;
    }
    if (arg[i] == L'"') {
      out.append(backslashes * 2 + 1, L'\\');
    } else {
      out.append(backslashes, L'\\');
    }
    out += arg[i];
  }
  return out + L"\"";
}

std::wstring FullPath(const std::wstring& path) {
  wchar_t full[MAX_PATH * 4];
  const DWORD n = GetFullPathNameW(path.c_str(), MAX_PATH * 4, full, nullptr);
  return n > 0 && n < MAX_PATH * 4 ? std::wstring(full, n) : path;
}

// memlens_agent.dll beside this executable.
std::wstring AgentPath() {
  wchar_t self[MAX_PATH * 4];
  const DWORD n = GetModuleFileNameW(nullptr, self, MAX_PATH * 4);
  std::wstring dir(self, n);
  dir.resize(dir.find_last_of(L"\\/") + 1);
  return dir + L"memlens_agent.dll";
}

// Whether the process has loaded the agent: a thread's exit code holds only the low half of
// the HMODULE LoadLibraryW returned, which is 0 for one load address in 65536.
bool AgentLoaded(HANDLE process, const std::wstring& dll) {
  HMODULE modules[1024];
  DWORD bytes = 0;
  if (!K32EnumProcessModules(process, modules, sizeof modules, &bytes)) return false;
  const std::wstring name = dll.substr(dll.find_last_of(L"\\/") + 1);
  for (DWORD i = 0; i < bytes / sizeof(HMODULE) && i < 1024; ++i) {
    wchar_t loaded[MAX_PATH];
    if (K32GetModuleBaseNameW(process, modules[i], loaded, MAX_PATH) &&
        _wcsicmp(loaded, name.c_str()) == 0) {
      return true;
    }
  }
  return false;
}

// Loads the agent into the suspended process: the path in its memory, LoadLibraryW on a
// thread of its own, which the loader runs before the program's first instruction.
bool Inject(HANDLE process, const std::wstring& dll) {
  const SIZE_T bytes = (dll.size() + 1) * sizeof(wchar_t);
  void* remote = VirtualAllocEx(process, nullptr, bytes, MEM_COMMIT | MEM_RESERVE, PAGE_READWRITE);
  if (remote == nullptr || !WriteProcessMemory(process, remote, dll.c_str(), bytes, nullptr)) {
    return false;
  }
  auto* load = reinterpret_cast<LPTHREAD_START_ROUTINE>(
      reinterpret_cast<void*>(GetProcAddress(GetModuleHandleW(L"kernel32.dll"), "LoadLibraryW")));
  HANDLE thread = CreateRemoteThread(process, nullptr, 0, load, remote, 0, nullptr);
  if (thread == nullptr) return false;
  WaitForSingleObject(thread, INFINITE);
  DWORD module = 0;  // the low half of the HMODULE: 0 when LoadLibraryW failed, or by chance
  GetExitCodeThread(thread, &module);
  CloseHandle(thread);
  VirtualFreeEx(process, remote, 0, MEM_RELEASE);
  if (module != 0 || AgentLoaded(process, dll)) return true;
  SetLastError(ERROR_MOD_NOT_FOUND);
  return false;
}

int Run(const std::vector<std::wstring>& args) {
  std::wstring output;
  size_t i = 0;
  for (; i < args.size(); ++i) {
    const std::wstring& a = args[i];
    if (a == L"--") {
      ++i;
      break;
    }
    if (a == L"-o" || a == L"--output") {
      if (i + 1 == args.size()) {
        Print(L"memlens run: " + a + L" needs a file name\n");
        return 2;
      }
      output = args[++i];
    } else if (a.rfind(L"--output=", 0) == 0) {
      output = a.substr(9);
    } else if (a == L"-h" || a == L"--help") {
      Print(kUsage);
      return 0;
    } else if (!a.empty() && a[0] == L'-') {
      Print(L"memlens run: unknown option " + a + L" (memlens run --help)\n");
      return 2;
    } else {
      break;
    }
  }
  if (i == args.size()) {
    Print(L"memlens run: no program to run (memlens run --help)\n");
    return 2;
  }
  std::wstring command_line;
  for (size_t k = i; k < args.size(); ++k) command_line += (k > i ? L" " : L"") + Quote(args[k]);
  const std::wstring pattern =
      FullPath(output.empty() ? Wide(memlens::format::kDefaultCapturePattern) : output);
  const std::wstring agent = AgentPath();
  if (GetFileAttributesW(agent.c_str()) == INVALID_FILE_ATTRIBUTES) {
    Print(L"memlens: the agent " + agent + L" is missing: memlens.exe needs it beside it\n");
    return 2;
  }
  SetEnvironmentVariableW(L"MEMLENS_OUTPUT", pattern.c_str());

  STARTUPINFOW startup = {};
  startup.cb = sizeof startup;
  PROCESS_INFORMATION child = {};
  std::vector<wchar_t> line(command_line.begin(), command_line.end());
  line.push_back(L'\0');
  if (!CreateProcessW(nullptr, line.data(), nullptr, nullptr, TRUE, CREATE_SUSPENDED, nullptr,
                      nullptr, &startup, &child)) {
    Print(L"memlens: cannot run " + args[i] + L": " + LastErrorText() + L"\n");
    return 127;
  }
  if (!Inject(child.hProcess, agent)) {
    Print(L"memlens: cannot load " + agent + L" into " + args[i] + L": " + LastErrorText() + L"\n");
    TerminateProcess(child.hProcess, 1);
    return 2;
  }
  // Ctrl+C reaches the program, which decides; memlens waits for it either way.
  SetConsoleCtrlHandler(nullptr, TRUE);
  ResumeThread(child.hThread);
  WaitForSingleObject(child.hProcess, INFINITE);
  DWORD code = 0;
  GetExitCodeProcess(child.hProcess, &code);
  const std::string capture = memlens::format::ExpandCapturePattern(
      Utf8(pattern), child.dwProcessId, memlens::windows::ProgramName(Utf8(args[i])));
  if (GetFileAttributesW(Wide(capture).c_str()) != INVALID_FILE_ATTRIBUTES) {
    Print(L"memlens: capture written to " + Wide(capture) + L"\n");
  } else {
    Print(L"memlens: no capture was written (" + Wide(capture) + L")\n");
  }
  CloseHandle(child.hThread);
  CloseHandle(child.hProcess);
  return static_cast<int>(code);
}

}  // namespace

int wmain(int argc, wchar_t** argv) {
  std::vector<std::wstring> args(argv + 1, argv + argc);
  if (args.empty() || args[0] == L"-h" || args[0] == L"--help" || args[0] == L"help") {
    Print(kUsage);
    return args.empty() ? 2 : 0;
  }
  if (args[0] == L"--version") {
    fwprintf(stdout, L"memlens %hs (Windows)\n", MEMLENS_VERSION);
    return 0;
  }
  if (args[0] != L"run") {
    Print(L"memlens: '" + args[0] +
          L"' is not a command here: memlens.exe records (memlens run); the analysis commands "
          L"run in the memlens CLI on Linux\n");
    return 2;
  }
  return Run(std::vector<std::wstring>(args.begin() + 1, args.end()));
}
