// src/windows/text.h
//
// Text between Windows' API (UTF-16) and the capture (UTF-8), and a program's name as the
// capture's file name pattern uses it (%e: format/capture_path.h). Shared by memlens.exe and
// the agent DLL. Header-only; allocates (the agent calls it with its guard up).
#pragma once

#include <windows.h>

#include <string>

namespace memlens::windows {

// `length` wide characters, or up to the terminator when -1.
inline std::string Utf8(const wchar_t* text, int length = -1) {
  const int n = WideCharToMultiByte(CP_UTF8, 0, text, length, nullptr, 0, nullptr, nullptr);
  if (n <= 0) return "";
  std::string out(n, '\0');
  WideCharToMultiByte(CP_UTF8, 0, text, length, out.data(), n, nullptr, nullptr);
  if (length < 0) out.pop_back();  // the terminator
  return out;
}

inline std::string Utf8(const std::wstring& text) {
  return Utf8(text.c_str(), static_cast<int>(text.size()));
}

inline std::wstring Wide(const std::string& text) {
  const int n =
      MultiByteToWideChar(CP_UTF8, 0, text.c_str(), static_cast<int>(text.size()), nullptr, 0);
  std::wstring out(n > 0 ? n : 0, L'\0');
  if (n > 0) {
    MultiByteToWideChar(CP_UTF8, 0, text.c_str(), static_cast<int>(text.size()), out.data(), n);
  }
  return out;
}

// The file name of a program's path, without its directory and ".exe".
inline std::string ProgramName(const std::string& path) {
  std::string name = path.substr(path.find_last_of("\\/") + 1);
  if (name.size() > 4 && _stricmp(name.c_str() + name.size() - 4, ".exe") == 0) {
    name.resize(name.size() - 4);
  }
  return name;
}

}  // namespace memlens::windows
