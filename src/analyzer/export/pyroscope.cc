// src/analyzer/export/pyroscope.cc
#include "analyzer/export/pyroscope.h"

#include <stdlib.h>

#include <cctype>
#include <memory>

#include "analyzer/export/libcurl.h"

namespace memlens::analyzer {
namespace {

// Characters that would end a value or a name inside name=SERVICE{k=v,...}.
bool Breaks(char c) {
  return std::string_view("{}=,\"").find(c) != std::string_view::npos ||
         std::iscntrl(static_cast<unsigned char>(c));
}

struct UrlParts {
  std::string scheme, host, path, query, fragment;
};

bool SplitUrl(const CurlApi& curl, const std::string& url, UrlParts* parts) {
  CURLU* handle = curl.url();
  if (!handle) return false;
  bool ok = curl.url_set(handle, CURLUPART_URL, url.c_str(), 0) == CURLUE_OK;
  auto get = [&](CURLUPart part, std::string* out) {
    char* value = nullptr;
    if (curl.url_get(handle, part, &value, 0) == CURLUE_OK && value) *out = value;
    curl.free(value);
  };
  if (ok) {
    get(CURLUPART_SCHEME, &parts->scheme);
    get(CURLUPART_HOST, &parts->host);
    get(CURLUPART_PATH, &parts->path);
    get(CURLUPART_QUERY, &parts->query);
    get(CURLUPART_FRAGMENT, &parts->fragment);
  }
  curl.url_cleanup(handle);
  return ok;
}

std::string Escape(const CurlApi& api, CURL* curl, const std::string& text) {
  char* escaped = api.easy_escape(curl, text.data(), static_cast<int>(text.size()));
  std::string out = escaped ? escaped : "";
  api.free(escaped);
  return out;
}

size_t KeepBody(char* data, size_t size, size_t count, void* body) {
  auto* text = static_cast<std::string*>(body);
  if (text->size() < 4096) text->append(data, size * count);
  return size * count;
}

// libcurl calls this about once a second, and more often while data flows: non-zero aborts.
int CheckCancel(void* cancel, curl_off_t, curl_off_t, curl_off_t, curl_off_t) {
  return cancel && static_cast<const std::atomic<bool>*>(cancel)->load() ? 1 : 0;
}

}  // namespace

bool CheckPushUrl(const std::string& url, std::string* error) {
  const CurlApi* curl = Curl();
  if (!curl) {
    *error = LibcurlError();
    return false;
  }
  UrlParts parts;
  bool ok = url.rfind("http://", 0) == 0 || url.rfind("https://", 0) == 0;
  ok = ok && SplitUrl(*curl, url, &parts) && !parts.host.empty() && parts.query.empty() &&
       parts.fragment.empty();
  if (!ok) {
    *error = "'" + RedactedUrl(url) +
             "' is not a Pyroscope server's URL: give http:// or https://, a host and an optional "
             "path, as in http://localhost:4040";
  }
  return ok;
}

bool ParsePushLabel(const std::string& text, PushLabel* label, std::string* error) {
  size_t equals = text.find('=');
  label->name = text.substr(0, equals);
  label->value = equals == std::string::npos ? "" : text.substr(equals + 1);
  bool name_ok = !label->name.empty() && !std::isdigit(static_cast<unsigned char>(label->name[0]));
  for (char c : label->name)
    name_ok = name_ok && (std::isalnum(static_cast<unsigned char>(c)) || c == '_');
  bool value_ok = !label->value.empty();
  for (char c : label->value) value_ok = value_ok && !Breaks(c);
  if (equals == std::string::npos || !name_ok || !value_ok) {
    *error = "--label '" + text +
             "': give NAME=VALUE, the name letters, digits and _ (not first "
             "a digit), the value not empty and without { } = , \" or control characters";
    return false;
  }
  if (label->name.rfind("__", 0) == 0 || label->name == "service_name") {
    *error = "--label '" + text + "': " + label->name +
             " is Pyroscope's own (names starting with __ are reserved; service_name is --service)";
    return false;
  }
  return true;
}

bool CheckServiceName(const std::string& name, std::string* error) {
  bool ok = !name.empty();
  for (char c : name) ok = ok && !Breaks(c) && c != ' ';
  if (!ok) {
    *error =
        "--service '" + name + "': give a name without spaces, { } = , \" or control characters";
  }
  return ok;
}

std::string ServiceNameOf(const std::string& program) {
  std::string name = program.substr(program.rfind('/') + 1);
  for (char& c : name) {
    if (Breaks(c) || c == ' ') c = '_';
  }
  return name.empty() ? "memlens" : name;
}

void SetPushLabel(std::vector<PushLabel>* labels, const PushLabel& label) {
  for (PushLabel& l : *labels) {
    if (l.name == label.name) {
      l.value = label.value;
      return;
    }
  }
  labels->push_back(label);
}

std::string IngestName(const PushTarget& target) {
  std::string name = target.service + "{";
  for (size_t i = 0; i < target.labels.size(); ++i) {
    name += (i ? "," : "") + target.labels[i].name + "=" + target.labels[i].value;
  }
  return name + "}";
}

std::string RedactedUrl(const std::string& url) {
  size_t scheme = url.find("://");
  size_t start = scheme == std::string::npos ? 0 : scheme + 3;
  size_t end = url.find_first_of("/?#", start);
  size_t at = url.rfind('@', end == std::string::npos ? url.size() : end);
  if (at == std::string::npos || at < start) return url;
  std::string userinfo = url.substr(start, at - start);
  size_t colon = userinfo.find(':');
  if (colon == std::string::npos) return url;
  return url.substr(0, start) + userinfo.substr(0, colon) + ":***" + url.substr(at);
}

void TakePeriod(AllocatedSoFar* allocated, Profile* profile) {
  for (auto it = profile->stacks.begin(); it != profile->stacks.end();) {
    StackStats& stats = it->second;
    auto& before = (*allocated)[it->first];
    std::pair<uint64_t, uint64_t> now = {stats.allocations, stats.allocated_bytes};
    // Fewer than before: an exec started the profile of a new program image over.
    if (now.first >= before.first && now.second >= before.second) {
      stats.allocations -= before.first;
      stats.allocated_bytes -= before.second;
    }
    before = now;
    bool empty = stats.allocations == 0 && stats.allocated_bytes == 0 && stats.in_use_blocks == 0 &&
                 stats.in_use_bytes == 0;
    it = empty ? profile->stacks.erase(it) : std::next(it);
  }
}

IngestClient::IngestClient(PushTarget target) : target_(std::move(target)) {
  api_ = Curl();
  if (!api_) return;
  curl_ = api_->easy_init();
  UrlParts parts;
  SplitUrl(*api_, target_.url, &parts);
  ingest_url_ = target_.url;
  // The URL may name the ingest endpoint itself, or the server (behind a path prefix).
  if (parts.path.size() < 7 || parts.path.compare(parts.path.size() - 7, 7, "/ingest") != 0) {
    while (!ingest_url_.empty() && ingest_url_.back() == '/') ingest_url_.pop_back();
    ingest_url_ += "/ingest";
  }
}

IngestClient::~IngestClient() {
  if (curl_) api_->easy_cleanup(static_cast<CURL*>(curl_));
}

bool IngestClient::Send(const std::string& pprof, int64_t from, int64_t until,
                        std::chrono::milliseconds timeout, const std::atomic<bool>* cancel,
                        std::string* error) {
  CURL* curl = static_cast<CURL*>(curl_);
  if (!curl) {
    *error = api_ ? "cannot start libcurl" : LibcurlError();
    return false;
  }
  const CurlApi& api = *api_;
  std::string url = ingest_url_ + "?name=" + Escape(api, curl, IngestName(target_)) +
                    "&from=" + std::to_string(from) + "&until=" + std::to_string(until) +
                    "&format=pprof&spyName=memlens";
  curl_mime* form = api.mime_init(curl);
  curl_mimepart* part = api.mime_addpart(form);
  api.mime_name(part, "profile");
  api.mime_filename(part, "profile.pb.gz");
  api.mime_type(part, "application/octet-stream");
  api.mime_data(part, pprof.data(), pprof.size());
  curl_slist* headers = nullptr;
  std::string tenant;
  if (const char* env = getenv("MEMLENS_PUSH_TENANT"); env && *env) {
    tenant = std::string("X-Scope-OrgID: ") + env;
    headers = api.slist_append(headers, tenant.c_str());
  }
  headers = api.slist_append(headers, "Expect:");  // no 100-continue round trip
  std::string body;
  char curl_error[CURL_ERROR_SIZE] = "";
  api.easy_reset(curl);
  api.easy_setopt(curl, CURLOPT_URL, url.c_str());
  api.easy_setopt(curl, CURLOPT_MIMEPOST, form);
  api.easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
  api.easy_setopt(curl, CURLOPT_USERAGENT, "memlens/" MEMLENS_VERSION);
  api.easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);  // a thread of ours: no SIGALRM, no SIGPIPE
  api.easy_setopt(curl, CURLOPT_TIMEOUT_MS, static_cast<long>(timeout.count()));
  api.easy_setopt(curl, CURLOPT_CONNECTTIMEOUT_MS,
                   static_cast<long>(std::min<int64_t>(timeout.count(), 3000)));
  api.easy_setopt(curl, CURLOPT_NOPROGRESS, 0L);
  api.easy_setopt(curl, CURLOPT_XFERINFOFUNCTION, CheckCancel);
  api.easy_setopt(curl, CURLOPT_XFERINFODATA, cancel);
  api.easy_setopt(curl, CURLOPT_WRITEFUNCTION, KeepBody);
  api.easy_setopt(curl, CURLOPT_WRITEDATA, &body);
  api.easy_setopt(curl, CURLOPT_ERRORBUFFER, curl_error);
  // The URL's user:password@ is basic auth already; MEMLENS_PUSH_USER keeps it out of argv.
  if (const char* user = getenv("MEMLENS_PUSH_USER"); user && *user) {
    api.easy_setopt(curl, CURLOPT_USERPWD, user);
  }
  CURLcode rc = api.easy_perform(curl);
  long status = 0;
  api.easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
  api.slist_free_all(headers);
  api.mime_free(form);
  if (rc != CURLE_OK) {
    *error = rc == CURLE_ABORTED_BY_CALLBACK ? "no answer yet when memlens gave up at exit"
             : *curl_error                   ? curl_error
                                             : api.easy_strerror(rc);
    return false;
  }
  if (status < 200 || status > 299) {
    size_t end = body.find_first_of("\r\n");
    *error = "HTTP " + std::to_string(status) + (body.empty() ? "" : ": ") +
             body.substr(0, std::min<size_t>(end, 200));
    return false;
  }
  return true;
}

}  // namespace memlens::analyzer
