// src/analyzer/export/report_html.cc: see report_html.h.
#include "analyzer/export/report_html.h"

#include <random>
#include <string_view>

#include "report/report_assets.h"

namespace memlens::analyzer {
namespace {

std::string EscapeHtmlText(std::string_view text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '&': out += "&amp;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

}  // namespace

std::string MakeReportNonce() {
  static const char kBase64[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::random_device device;  // /dev/urandom
  std::string nonce;
  for (int i = 0; i < 22; ++i) nonce += kBase64[device() % 64];  // 132 random bits
  return nonce;
}

std::string BuildReportHtml(const std::string& data_json, const std::string& title,
                            const std::string& nonce) {
  // The template's placeholders are @@NAME@@; what is put in is never scanned again.
  std::string_view page = report_assets::kTemplate;
  std::string out;
  out.reserve(page.size() + data_json.size() + 200000);
  size_t at = 0;
  for (;;) {
    size_t open = page.find("@@", at);
    size_t close = open == std::string_view::npos ? open : page.find("@@", open + 2);
    if (close == std::string_view::npos) {
      out.append(page.substr(at));
      break;
    }
    out.append(page.substr(at, open - at));
    std::string_view name = page.substr(open + 2, close - open - 2);
    if (name == "NONCE") {
      out += nonce;
    } else if (name == "TITLE") {
      out += EscapeHtmlText(title);
    } else if (name == "CSS") {
      out += report_assets::kCss;
    } else if (name == "JS") {
      out += report_assets::kJs;
    } else if (name == "DATA") {
      out += data_json;
    } else {
      out.append(page.substr(open, close + 2 - open));  // not a placeholder
    }
    at = close + 2;
  }
  return out;
}

}  // namespace memlens::analyzer
