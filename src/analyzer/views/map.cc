// src/analyzer/views/map.cc: see map.h.
#include "analyzer/views/map.h"

#include <algorithm>

namespace memlens::analyzer {

MapView SumRegions(const std::vector<AddressRegion>& regions) {
  MapView view;
  for (const AddressRegion& r : regions) {
    if (r.kind == AddressRegion::kReserved) {  // address space, not memory: apart
      view.reserved_bytes += r.end - r.begin;
      continue;
    }
    view.in_use_bytes += r.in_use_bytes;
    view.in_use_bytes_var += r.in_use_bytes_var;
    view.span_bytes += r.end - r.begin;
    view.largest_gap = std::max(view.largest_gap, r.largest_gap);
  }
  return view;
}

MapView BuildMap(const Profile& p, StackResolver* resolver) {
  MapView view = SumRegions(p.address_map);
  for (const AddressRegion& r : p.address_map) {
    view.top_sites.push_back(resolver->Site(r.top_stack));
  }
  return view;
}

}  // namespace memlens::analyzer
