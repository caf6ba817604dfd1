// src/analyzer/export/libcurl.h
//
// libcurl, loaded when a profile is first pushed rather than linked: it and the libraries it
// needs (TLS, Kerberos, LDAP, ... about 30) cost every start of `memlens` 3.5 ms of CPU in the
// dynamic loader and the kernel, and `memlens run` starts before the program it profiles. Only
// `--push` and `memlens push` use HTTP.
//
// Runs on: any thread; the first Curl() call loads the library (once, thread-safe).
#pragma once

#include <curl/curl.h>

namespace memlens::analyzer {

// The functions of libcurl that pyroscope.cc calls, each curl_NAME as X(NAME): one list for
// the table's fields and the names looked up.
#define MEMLENS_CURL_FUNCTIONS(X) \
  X(global_init) X(easy_init) X(easy_cleanup) X(easy_reset) X(easy_setopt) X(easy_perform) \
  X(easy_getinfo) X(easy_strerror) X(easy_escape) X(free) X(url) X(url_set) X(url_get) \
  X(url_cleanup) X(mime_init) X(mime_addpart) X(mime_name) X(mime_filename) X(mime_type) \
  X(mime_data) X(mime_free) X(slist_append) X(slist_free_all)

// libcurl's functions, with libcurl's own signatures.
struct CurlApi {
#define MEMLENS_CURL_FIELD(name) decltype(&curl_##name) name;
  MEMLENS_CURL_FUNCTIONS(MEMLENS_CURL_FIELD)
#undef MEMLENS_CURL_FIELD
};

// libcurl's functions, loaded (and curl_global_init run) at the first call; nullptr when
// libcurl.so.4 cannot be loaded, with why in LibcurlError().
const CurlApi* Curl();
const char* LibcurlError();

}  // namespace memlens::analyzer
