// src/report/report_assets.h
//
// The HTML report's sources (report.html, report.css, report.js in this folder) and the live
// page's (live.html, memlens live --web), compiled
// into the binary: the definitions are generated at build time by embed.cmake.
#pragma once

namespace memlens::analyzer::report_assets {

extern const char kTemplate[];  // report.html, with @@NONCE@@ @@TITLE@@ @@CSS@@ @@JS@@ @@DATA@@
extern const char kCss[];       // report.css
extern const char kJs[];        // report.js
extern const char kLivePage[];  // live.html, with @@NONCE@@ @@TITLE@@ @@TOKEN@@ @@INTERVAL@@

}  // namespace memlens::analyzer::report_assets
