// src/analyzer/model/runtime_allocations.cc: see runtime_allocations.h.
#include "analyzer/model/runtime_allocations.h"

#include <algorithm>

#include "analyzer/model/stack_filter.h"
#include "analyzer/symbolize/symbolizer.h"

namespace memlens::analyzer {
namespace {

// The C and C++ runtime's modules: the walk from the allocation outwards goes through these
// only. Every rule's module is one of them.
const char* const kRuntimeModules[] = {"libc.so*",       "ld-linux*.so*", "libstdc++.so*",
                                       "libgcc_s.so*",   "libm.so*",      "libpthread.so*",
                                       "libdl.so*",      "librt.so*",     "libresolv.so*",
                                       "libnss_*.so*"};

// THE list (docs/runtime-allocations.md says it in words; keep both in step). Each function
// glob names a job the runtime does for itself; public entry points are listed beside the
// internal names, so that a rule holds without the runtime's debug symbols (Debian's
// libc6-dbg), when only exported functions have names.
const std::vector<RuntimeRule> kRuntimeRules = {
    {"libstdc++-init", "libstdc++'s start-up (its exception emergency pool)", "libstdc++.so*",
     {kStaticInitializer, "_GLOBAL__sub_I_*", "__static_initialization_and_destruction_*",
      "*pool::pool*"}},
    {"libstdc++-streams", "libstdc++'s standard stream buffers (sync_with_stdio(false))",
     "libstdc++.so*", {"std::ios_base::sync_with_stdio*"}},
    {"stdio-buffers", "stdio buffers (stdout, stdin, a FILE's until fclose)", "libc.so*",
     {"*_IO_file_doallocate", "*_IO_wfile_doallocate", "*_IO_wdoallocbuf"}},
    {"loader", "the dynamic loader's bookkeeping (libraries, thread-local storage)",
     "ld-linux*.so*", {}},
    {"dl-state", "dlopen, dlsym and dlerror's per-thread error state", "libc.so*",
     {"*dlopen*", "*dlmopen*", "*dlsym*", "*dlvsym*", "*dlerror*"}},
    {"locale", "locale data (setlocale, multibyte conversions)", "libc.so*",
     {"*setlocale", "*wcsmbs_load_conv*", "btowc", "wctob", "mbrtowc", "wcrtomb", "mbtowc",
      "wctomb", "mblen", "mbrlen", "mbsrtowcs", "wcsrtombs", "mbstowcs", "wcstombs"}},
    {"messages", "message catalogs (gettext, strerror)", "libc.so*",
     {"*dcigettext*", "*gettext", "*textdomain*", "*strerror*", "*strsignal", "psignal"}},
    {"time-zone", "time-zone data (localtime, mktime, strftime)", "libc.so*",
     {"*tzset*", "*tzfile*", "*tz_convert", "localtime*", "mktime", "timelocal", "ctime*",
      "strftime*"}},
    {"nss", "user, group and host lookups (NSS, getpwnam, gethostbyname)", "libc.so*",
     {"*nss_*", "getpw*", "getgr*", "getsp*", "getlogin*", "gethostby*", "gethostent",
      "getservby*", "getservent", "getprotoby*", "getprotoent", "getnetby*", "getnetent",
      "initgroups", "getgrouplist"}},
    {"exit-handlers", "the lists of functions to run at exit (atexit, thread_local)", "libc.so*",
     {"*new_exitfn", "*cxa_atexit", "atexit", "on_exit", "*at_quick_exit",
      "*cxa_thread_atexit_impl"}},
};

FramePattern Pattern(FramePattern::Field field, const char* glob) {
  FramePattern p;
  p.field = field;
  p.glob = glob;
  return p;
}

struct CompiledRule {
  FramePattern module;
  std::vector<FramePattern> functions;

  bool Matches(const SourceFrame& f) const {
    if (!module.Matches(f)) return false;
    if (functions.empty()) return true;
    for (const auto& p : functions) {
      if (p.Matches(f)) return true;
    }
    return false;
  }
};

struct Compiled {
  std::vector<FramePattern> modules;
  std::vector<CompiledRule> rules;  // as kRuntimeRules
};

const Compiled& CompiledRules() {
  static const Compiled compiled = [] {
    Compiled c;
    for (const char* m : kRuntimeModules) c.modules.push_back(Pattern(FramePattern::kModule, m));
    for (const RuntimeRule& r : kRuntimeRules) {
      CompiledRule rule{Pattern(FramePattern::kModule, r.module), {}};
      for (const char* f : r.functions) {
        rule.functions.push_back(Pattern(FramePattern::kFunction, f));
      }
      c.rules.push_back(std::move(rule));
    }
    return c;
  }();
  return compiled;
}

}  // namespace

const std::vector<RuntimeRule>& RuntimeRules() { return kRuntimeRules; }

int RuntimeClassifier::FrameVerdict(const SourceFrame& f) {
  const Compiled& c = CompiledRules();
  if (std::none_of(c.modules.begin(), c.modules.end(),
                   [&](const FramePattern& m) { return m.Matches(f); })) {
    return kProgram;
  }
  auto rule = std::find_if(c.rules.begin(), c.rules.end(),
                           [&](const CompiledRule& r) { return r.Matches(f); });
  return rule != c.rules.end() ? static_cast<int>(rule - c.rules.begin()) : kUnknown;
}

const RuntimeRule* RuntimeClassifier::RuleOf(const Stack& frames) {
  for (const SourceFrame* f : frames) {
    int verdict = FrameVerdict(*f);
    if (verdict != kUnknown) return verdict >= 0 ? &kRuntimeRules[verdict] : nullptr;
  }
  return nullptr;
}

RuntimeClassifier::RuntimeClassifier(const Profile& profile, StackResolver* resolver)
    : profile_(profile), resolver_(resolver), verdicts_(profile.nodes.size(), kUnknown) {}

const RuntimeRule* RuntimeClassifier::RuleOf(uint64_t stack_id) {
  int verdict = VerdictOf(stack_id);
  return verdict >= 0 ? &kRuntimeRules[verdict] : nullptr;
}

int RuntimeClassifier::VerdictOf(uint64_t node) {
  // The verdict from a node outwards depends on that node and its ancestors only: it is kept
  // per node, and the stacks sharing a path share the work.
  std::vector<uint64_t> path;  // nodes without a verdict, innermost first
  int verdict = kProgram;      // the root: the walk ran out of frames
  for (uint64_t id = node; id != 0 && id < profile_.nodes.size(); id = profile_.nodes[id].parent) {
    if (verdicts_[id] != kUnknown) {
      verdict = verdicts_[id];
      break;
    }
    int own = kUnknown;  // this node's frames decide, or pass the question outwards
    for (const SourceFrame& f : resolver_->NodeFrames(id)) {
      if ((own = FrameVerdict(f)) != kUnknown) break;
    }
    if (own != kUnknown) {
      verdict = verdicts_[id] = own;
      break;
    }
    path.push_back(id);
  }
  for (uint64_t id : path) verdicts_[id] = verdict;
  return verdict;
}

void SetRuntimeApart(StackResolver* resolver, Profile* p) {
  RuntimeClassifier classifier(*p, resolver);
  std::vector<RuntimeShare> shares(kRuntimeRules.size());
  Totals& t = p->totals;
  for (auto& [stack_id, stats] : p->stacks) {
    if (stats.in_use_blocks == 0) continue;
    const RuntimeRule* rule = classifier.RuleOf(stack_id);
    if (!rule) continue;
    RuntimeShare& share = shares[rule - kRuntimeRules.data()];
    share.stacks += 1;
    share.bytes += stats.in_use_bytes;
    share.blocks += stats.in_use_blocks;
    share.bytes_var += stats.in_use_bytes_var;
    share.blocks_var += stats.in_use_blocks_var;
    p->runtime_stacks[stack_id] = {stats.in_use_bytes, stats.in_use_blocks,
                                   stats.in_use_bytes_var, stats.in_use_blocks_var};
    t.runtime_bytes += stats.in_use_bytes;
    t.runtime_blocks += stats.in_use_blocks;
    t.runtime_bytes_var += stats.in_use_bytes_var;
    t.runtime_blocks_var += stats.in_use_blocks_var;
    t.in_use_bytes -= std::min(t.in_use_bytes, stats.in_use_bytes);
    t.in_use_blocks -= std::min(t.in_use_blocks, stats.in_use_blocks);
    t.mapping_in_use_bytes -= std::min(t.mapping_in_use_bytes, stats.mapping_in_use_bytes);
    t.in_use_bytes_var -= std::min(t.in_use_bytes_var, stats.in_use_bytes_var);
    t.in_use_blocks_var -= std::min(t.in_use_blocks_var, stats.in_use_blocks_var);
    stats.in_use_bytes = stats.in_use_blocks = stats.python_in_use_bytes = 0;
    stats.mapping_in_use_bytes = 0;
    stats.in_use_bytes_var = stats.in_use_blocks_var = stats.python_in_use_bytes_var = 0;
  }
  for (size_t r = 0; r < shares.size(); ++r) {
    if (shares[r].blocks == 0) continue;
    shares[r].rule = &kRuntimeRules[r];
    p->runtime.push_back(shares[r]);
  }
}

}  // namespace memlens::analyzer
