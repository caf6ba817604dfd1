// src/report/report_assets.h
//
// The HTML report's sources (report.html, report.css, report.js in this folder), compiled
// into the binary: the definitions are generated at build time by embed.cmake.
#pragma once

namespace memlens::analyzer::report_assets {

extern const char kTemplate[];  // report.html, with @@NONCE@@ @@TITLE@@ @@CSS@@ @@JS@@ @@DATA@@
extern const char kCss[];       // report.css
extern const char kJs[];        // report.js

}  // namespace memlens::analyzer::report_assets
