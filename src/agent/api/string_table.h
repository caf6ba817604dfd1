// src/agent/api/string_table.h
//
// StringTable: the names the instrumentation API is given (heaps, markers, snapshots, types),
// interned by content into small ids, so that events stay fixed-size and a name is written to
// the capture once (a kString record, written by the writer before the first event using it).
//
// Runs on: application threads (Intern, on the API's path) and the writer thread (Text).
// Hot-path rules apply to Intern: no heap (the table and the text live in static storage), no
// locks (slots are claimed with a compare-and-swap), no syscalls. The text of a name is copied:
// the caller may free its string as soon as Intern returns.
// Limits: kMaxLength bytes of a name are kept; when the table or the text store is full, new
// names get id 0 ("no name"), and the capture says so (the writer's kString for id 0).
// Thread safety: an id is published (release) only after its text is complete, and reaches the
// writer through the thread buffer's own release/acquire, so Text never sees a partial name.
// Two threads interning the same new name at once may get two ids with the same text: the
// analyzer compares names by text, so that is harmless.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace memlens::agent {

inline constexpr size_t kMaxStringLength = 255;
// Every id is below this (the writer bounds the ids it reads from another process's rings).
inline constexpr uint32_t kMaxStringIds = 8192;

// The id of `text` (0 for null or when full). Async-signal-safe and lock-free.
uint32_t InternString(const char* text);
// The text of an id returned by InternString; *length receives its length. Id 0 and unknown
// ids give "".
const char* StringText(uint32_t id, size_t* length);
// Called with each new id once its text is in place (the hosted writer's log: hosted.h).
extern std::atomic<void (*)(uint32_t)> g_on_new_string;

}  // namespace memlens::agent
