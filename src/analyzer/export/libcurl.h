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

// The functions of libcurl that pyroscope.cc calls, with libcurl's own signatures.
struct CurlApi {
  decltype(&curl_global_init) global_init;
  decltype(&curl_easy_init) easy_init;
  decltype(&curl_easy_cleanup) easy_cleanup;
  decltype(&curl_easy_reset) easy_reset;
  decltype(&curl_easy_setopt) easy_setopt;
  decltype(&curl_easy_perform) easy_perform;
  decltype(&curl_easy_getinfo) easy_getinfo;
  decltype(&curl_easy_strerror) easy_strerror;
  decltype(&curl_easy_escape) easy_escape;
  decltype(&curl_free) free;
  decltype(&curl_url) url;
  decltype(&curl_url_set) url_set;
  decltype(&curl_url_get) url_get;
  decltype(&curl_url_cleanup) url_cleanup;
  decltype(&curl_mime_init) mime_init;
  decltype(&curl_mime_addpart) mime_addpart;
  decltype(&curl_mime_name) mime_name;
  decltype(&curl_mime_filename) mime_filename;
  decltype(&curl_mime_type) mime_type;
  decltype(&curl_mime_data) mime_data;
  decltype(&curl_mime_free) mime_free;
  decltype(&curl_slist_append) slist_append;
  decltype(&curl_slist_free_all) slist_free_all;
};

// libcurl's functions, loaded (and curl_global_init run) at the first call; nullptr when
// libcurl.so.4 cannot be loaded, with why in LibcurlError().
const CurlApi* Curl();
const char* LibcurlError();

}  // namespace memlens::analyzer
