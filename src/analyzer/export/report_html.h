// src/analyzer/export/report_html.h
//
// The HTML report as one self-contained page: the template, stylesheet and script of
// src/report/ (compiled into the binary, see src/report/embed.cmake) with the report's data
// (report_data.h) embedded as JSON in a <script type="application/json"> element. The page
// carries a Content-Security-Policy that allows no network access at all and runs only the
// script and style carrying this page's random nonce. docs/report.md describes the page.
//
// Runs on: the analyzer's main thread.
#pragma once

#include <string>

namespace memlens::analyzer {

// A fresh random nonce for the Content-Security-Policy (128 bits, base64).
std::string MakeReportNonce();

// The page. `data_json` must be script-safe (report_data.h writes it so); `title` is plain
// text (escaped here).
std::string BuildReportHtml(const std::string& data_json, const std::string& title,
                            const std::string& nonce);

// The live page of `memlens live --web` (src/report/live.html): it reloads the report from its
// server every `interval_ms`, asking with `token` (hex digits only: put in as it is).
std::string BuildLivePageHtml(const std::string& title, const std::string& nonce,
                              const std::string& token, int interval_ms);

}  // namespace memlens::analyzer
