// src/analyzer/export/report_html.cc: see report_html.h.
#include "analyzer/export/report_html.h"

#include <algorithm>
#include <initializer_list>
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

namespace {

// The template with its placeholders (@@NAME@@) replaced by `values`; what is put in is never
// scanned again, and a @@...@@ not in `values` stays as it is.
std::string FillTemplate(std::string_view page,
                         std::initializer_list<std::pair<std::string_view, std::string_view>> values,
                         size_t extra) {
  std::string out;
  out.reserve(page.size() + extra);
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
    auto value = std::find_if(values.begin(), values.end(),
                              [&](const auto& v) { return v.first == name; });
    if (value != values.end()) {
      out.append(value->second);
    } else {
      out.append(page.substr(open, close + 2 - open));  // not a placeholder
    }
    at = close + 2;
  }
  return out;
}

}  // namespace

std::string BuildReportHtml(const std::string& data_json, const std::string& title,
                            const std::string& nonce) {
  const std::string escaped_title = EscapeHtmlText(title);
  return FillTemplate(report_assets::kTemplate,
                      {{"NONCE", nonce}, {"TITLE", escaped_title}, {"CSS", report_assets::kCss},
                       {"JS", report_assets::kJs}, {"DATA", data_json}},
                      data_json.size() + 200000);
}

std::string BuildLivePageHtml(const std::string& title, const std::string& nonce,
                              const std::string& token, int interval_ms) {
  const std::string escaped_title = EscapeHtmlText(title);
  const std::string interval = std::to_string(interval_ms);
  return FillTemplate(report_assets::kLivePage,
                      {{"NONCE", nonce}, {"TITLE", escaped_title}, {"TOKEN", token},
                       {"INTERVAL", interval}},
                      1000);
}

}  // namespace memlens::analyzer
