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
  bind(&api->global_init, "curl_global_init");
  bind(&api->easy_init, "curl_easy_init");
  bind(&api->easy_cleanup, "curl_easy_cleanup");
  bind(&api->easy_reset, "curl_easy_reset");
  bind(&api->easy_setopt, "curl_easy_setopt");
  bind(&api->easy_perform, "curl_easy_perform");
  bind(&api->easy_getinfo, "curl_easy_getinfo");
  bind(&api->easy_strerror, "curl_easy_strerror");
  bind(&api->easy_escape, "curl_easy_escape");
  bind(&api->free, "curl_free");
  bind(&api->url, "curl_url");
  bind(&api->url_set, "curl_url_set");
  bind(&api->url_get, "curl_url_get");
  bind(&api->url_cleanup, "curl_url_cleanup");
  bind(&api->mime_init, "curl_mime_init");
  bind(&api->mime_addpart, "curl_mime_addpart");
  bind(&api->mime_name, "curl_mime_name");
  bind(&api->mime_filename, "curl_mime_filename");
  bind(&api->mime_type, "curl_mime_type");
  bind(&api->mime_data, "curl_mime_data");
  bind(&api->mime_free, "curl_mime_free");
  bind(&api->slist_append, "curl_slist_append");
  bind(&api->slist_free_all, "curl_slist_free_all");
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
