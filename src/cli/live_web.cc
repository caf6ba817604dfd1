// src/cli/live_web.cc: the socket, the requests, the three routes.
#include "cli/live_web.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <iostream>

#include "analyzer/export/json_writer.h"
#include "analyzer/export/report_data.h"
#include "analyzer/export/report_html.h"
#include "analyzer/model/capture_argument.h"
#include "cli/analysis_options.h"
#include "cli/live_terminal.h"

namespace memlens::cli {
namespace {

using namespace analyzer;

volatile sig_atomic_t g_stop = 0;
void OnStop(int) { g_stop = 1; }

constexpr size_t kMaxRequestBytes = 16384;
constexpr int kRequestTimeoutSeconds = 5;

std::string RandomToken() {
  unsigned char bytes[16];
  size_t got = 0;
  while (got < sizeof bytes) {
    ssize_t n = getrandom(bytes + got, sizeof bytes - got, 0);
    if (n > 0) got += static_cast<size_t>(n);
  }
  static const char kHex[] = "0123456789abcdef";
  std::string token;
  for (unsigned char b : bytes) token += {kHex[b >> 4], kHex[b & 15]};
  return token;
}

// %XX and + decoded.
std::string Decoded(const std::string& text) {
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '+') {
      out += ' ';
    } else if (text[i] == '%' && i + 2 < text.size() && isxdigit(text[i + 1]) &&
               isxdigit(text[i + 2])) {
      out += static_cast<char>(std::stoi(text.substr(i + 1, 2), nullptr, 16));
      i += 2;
    } else {
      out += text[i];
    }
  }
  return out;
}

// The value of `key` in a query string ("" when absent).
std::string QueryValue(const std::string& query, const std::string& key) {
  for (size_t at = 0; at <= query.size();) {
    size_t end = query.find('&', at);
    if (end == std::string::npos) end = query.size();
    std::string pair = query.substr(at, end - at);
    size_t equals = pair.find('=');
    if (pair.substr(0, equals) == key) {
      return equals == std::string::npos ? "" : Decoded(pair.substr(equals + 1));
    }
    at = end + 1;
  }
  return "";
}

bool SameToken(const std::string& given, const std::string& token) {
  if (given.size() != token.size()) return false;
  unsigned char differ = 0;  // every byte compared: the time says nothing of the token
  for (size_t i = 0; i < token.size(); ++i) differ |= given[i] ^ token[i];
  return differ == 0;
}

void Send(int fd, int status, const char* reason, const char* type, const std::string& body) {
  std::string head = "HTTP/1.1 " + std::to_string(status) + " " + reason +
                     "\r\nContent-Type: " + type + "\r\nContent-Length: " +
                     std::to_string(body.size()) +
                     "\r\nCache-Control: no-store\r\nX-Content-Type-Options: nosniff\r\n"
                     "Connection: close\r\n\r\n";
  std::string all = head + body;
  for (size_t done = 0; done < all.size();) {
    ssize_t n = send(fd, all.data() + done, all.size() - done, MSG_NOSIGNAL);
    if (n <= 0 && errno != EINTR) return;  // the browser went away
    if (n > 0) done += static_cast<size_t>(n);
  }
}

std::string JsonMessage(bool ok, const std::string& message) {
  std::ostringstream out;
  JsonWriter json(out);
  json.BeginObject();
  json.Field("ok", ok);
  json.Field("message", message);
  json.EndObject();
  return out.str();
}

class Server {
 public:
  Server(const LiveWebSettings& settings, std::string token)
      : settings_(settings), token_(std::move(token)) {}

  void Serve(int client) {
    timeval timeout{kRequestTimeoutSeconds, 0};
    setsockopt(client, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
    setsockopt(client, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof timeout);
    std::string request;
    char buffer[4096];
    while (request.find("\r\n\r\n") == std::string::npos && request.size() < kMaxRequestBytes) {
      ssize_t n = recv(client, buffer, sizeof buffer, 0);
      if (n <= 0) return;
      request.append(buffer, static_cast<size_t>(n));
    }
    std::string line = request.substr(0, request.find("\r\n"));
    size_t space = line.find(' '), second = line.find(' ', space + 1);
    if (space == std::string::npos || second == std::string::npos) {
      return Send(client, 400, "Bad Request", "text/plain", "bad request\n");
    }
    std::string method = line.substr(0, space);
    std::string target = line.substr(space + 1, second - space - 1);
    std::string path = target.substr(0, target.find('?'));
    std::string query = target.find('?') == std::string::npos ? "" : target.substr(target.find('?') + 1);
    if (!SameToken(QueryValue(query, "token"), token_)) {
      return Send(client, 403, "Forbidden", "text/plain",
                  "this page needs the token memlens live printed with its address\n");
    }
    if (method == "GET" && path == "/") return Page(client);
    if (method == "GET" && path == "/report") return Report(client);
    if (method == "POST" && path == "/mark") return Mark(client, query);
    Send(client, 404, "Not Found", "text/plain", "not found\n");
  }

 private:
  void Page(int client) {
    Send(client, 200, "OK", "text/html; charset=utf-8",
         BuildLivePageHtml("memlens live: " + settings_.capture, MakeReportNonce(), token_,
                           static_cast<int>(settings_.interval_seconds * 1000)));
  }

  void Report(int client) {
    SnapshotSpec end;
    end.kind = SnapshotSpec::kEnd;
    end.text = "end";
    CaptureReport report;
    std::string error;
    try {
      if (!LoadCaptureReport(settings_.capture, end, ReplayOptions{}, 40, StackOptions{},
                             ReportLimits{}, &report, &error)) {
        return Send(client, 200, "OK", "text/plain; charset=utf-8",
                    "memlens: waiting for the capture: " + error + "\n");
      }
    } catch (const std::exception& e) {
      return Send(client, 200, "OK", "text/plain; charset=utf-8",
                  std::string("memlens: cannot read the capture: ") + e.what() + "\n");
    }
    pid_ = report.profile.process.pid;
    ended_ = report.profile.end.has_value();
    const auto& argv = report.profile.process.argv;
    std::string title = "memlens live: " + (argv.empty() ? report.profile.process.executable : argv[0]);
    Send(client, 200, "OK", "text/html; charset=utf-8",
         BuildReportHtml(report.data, title, MakeReportNonce()));
  }

  void Mark(int client, const std::string& query) {
    std::string name = QueryValue(query, "name");
    bool snapshot = QueryValue(query, "snapshot") == "1";
    if (name.empty()) return Send(client, 200, "OK", "application/json", JsonMessage(false, "give a name"));
    if (pid_ == 0 || ended_) {
      return Send(client, 200, "OK", "application/json",
                  JsonMessage(false, "the program is not running: no moment can be marked"));
    }
    std::string said = AskForMoment(pid_, name, snapshot);
    bool ok = said.find("' added to process") != std::string::npos;
    Send(client, 200, "OK", "application/json", JsonMessage(ok, said));
  }

  const LiveWebSettings& settings_;
  const std::string token_;
  uint64_t pid_ = 0;   // the program's, from the last report served
  bool ended_ = false;
};

}  // namespace

int RunLiveWeb(const LiveWebSettings& settings) {
  in_addr address{};
  if (inet_pton(AF_INET, settings.address.c_str(), &address) != 1) {
    return Complain("live --web: '" + settings.address + "' is not an IPv4 address");
  }
  const bool loopback = (ntohl(address.s_addr) >> 24) == 127;
  if (!loopback && !settings.allow_remote) {
    return Complain("live --web: serving on " + settings.address + " lets anyone who reaches "
                    "this machine and learns the token read the capture's names and mark the "
                    "program's moments, over plain HTTP: add --allow-remote if that is meant");
  }
  int listener = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  int yes = 1;
  setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
  sockaddr_in where{};
  where.sin_family = AF_INET;
  where.sin_addr = address;
  where.sin_port = htons(static_cast<uint16_t>(settings.port));
  if (listener < 0 || bind(listener, reinterpret_cast<sockaddr*>(&where), sizeof where) != 0 ||
      listen(listener, 16) != 0) {
    std::string why = std::strerror(errno);
    if (listener >= 0) close(listener);
    return Complain("live --web: cannot serve on " + settings.address + ":" +
                    std::to_string(settings.port) + ": " + why);
  }
  socklen_t size = sizeof where;
  getsockname(listener, reinterpret_cast<sockaddr*>(&where), &size);
  const std::string token = RandomToken();
  std::cout << "http://" << settings.address << ":" << ntohs(where.sin_port) << "/?token="
            << token << std::endl;
  std::cerr << "memlens: live view of " << settings.capture << " at the address above (its "
            << "token is its key); Ctrl-C stops serving, the program runs on\n";
  struct sigaction stop {};
  stop.sa_handler = OnStop;  // no SA_RESTART: poll returns at once
  sigaction(SIGINT, &stop, nullptr);
  sigaction(SIGTERM, &stop, nullptr);
  RunAtIdlePriority();  // the program never runs slower for the page
  Server server(settings, token);
  while (!g_stop) {
    pollfd p{listener, POLLIN, 0};
    if (poll(&p, 1, 250) <= 0) continue;
    int client = accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
    if (client < 0) continue;
    server.Serve(client);
    close(client);
  }
  close(listener);
  return 0;
}

}  // namespace memlens::cli
