// src/analyzer/model/markers.h
//
// Markers and snapshot requests as snapshot places: FILE@marker:NAME#K names an exact place in
// the sequence of events (just before the K-th marker NAME), so a snapshot there stops the
// replay exactly at it (replay.cc passes the sequence number as the replay's stop).
//
// Runs on: the analyzer's main thread.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "analyzer/model/replay.h"

namespace memlens::analyzer {

// The markers (or snapshot requests) of the capture's last program image, in sequence order,
// read without replaying anything. Returns false with one line in *error for an unreadable file.
bool ReadMarkers(const std::string& path, std::vector<Marker>* markers, std::string* error);

// The sequence number of the marker or snapshot request `spec` names. Returns false with one
// line in *error when the capture has no such name (listing the ones it has) or fewer
// occurrences than asked.
bool FindMarkerSeq(const std::string& path, const SnapshotSpec& spec, uint64_t* seq,
                   std::string* error);
// The same among markers already read (the snapshot index keeps them all).
bool FindMarkerSeq(const std::vector<Marker>& markers, const SnapshotSpec& spec, uint64_t* seq,
                   std::string* error);

// Where a Python program's own code ended (format::EventKind::kProgramEnd: @program-end), read
// from the capture, or as the index keeps it (0: none). Returns false with one line in *error
// when the capture has no such moment.
bool FindProgramEndSeq(const std::string& path, uint64_t* seq, std::string* error);
bool FindProgramEndSeq(uint64_t program_end_seq, uint64_t* seq, std::string* error);

}  // namespace memlens::analyzer
