// src/analyzer/export/libcurl.cc: see libcurl.h.
#include "analyzer/export/libcurl.h"

#include <dlfcn.h>

#include <mutex>
#include <string>

namespace memlens::analyzer {
namespace {

std::string g_error;

bool Load(CurlApi* api) {
  // RTLD_LOCAL: libcurl's symbols serve only the lookups below.
  void* library = dlopen("libcurl.so.4", RTLD_NOW | RTLD_LOCAL);
  if (!library) {
    const char* why = dlerror();
    g_error = std::string("cannot load libcurl (libcurl.so.4), which pushing needs: ") +
              (why ? why : "unknown error");
    return false;
  }
  bool ok = true;
  auto bind = [&](auto* slot, const char* name) {
    void* symbol = dlsym(library, name);
    if (!symbol) {
      g_error = std::string("libcurl.so.4 has no ") + name + " (a libcurl older than 7.62?)";
      ok = false;
    }
    *slot = reinterpret_cast<std::remove_pointer_t<decltype(slot)>>(symbol);
  };
#define MEMLENS_CURL_BIND(name) bind(&api->name, "curl_" #name);
  MEMLENS_CURL_FUNCTIONS(MEMLENS_CURL_BIND)
#undef MEMLENS_CURL_BIND
  if (ok && api->global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
    g_error = "libcurl's global set-up failed";
    ok = false;
  }
  return ok;
}

}  // namespace

const CurlApi* Curl() {
  static CurlApi api;
  static bool loaded = false;
  static std::once_flag once;
  std::call_once(once, [] { loaded = Load(&api); });
  return loaded ? &api : nullptr;
}

const char* LibcurlError() { return g_error.c_str(); }

}  // namespace memlens::analyzer
