// src/agent/recorder/frame_rules.cc: see frame_rules.h. The byte layouts read here are the
// LSB's .eh_frame and .eh_frame_hdr (DWARF 4 section 6.4 with GNU pointer encodings).
#include "agent/recorder/frame_rules.h"

#include <dlfcn.h>

#include <cstring>

namespace memlens::agent {
namespace {

// DWARF register numbers on x86-64.
constexpr unsigned kRbp = 6;
constexpr unsigned kRsp = 7;
constexpr unsigned kReturnAddress = 16;

// Pointer encodings (DW_EH_PE_*).
constexpr uint8_t kPeOmit = 0xff;
constexpr uint8_t kPeIndirect = 0x80;
constexpr uint8_t kPePcrel = 0x10;
constexpr uint8_t kPeDatarel = 0x30;
constexpr uint8_t kPeDatarelSdata4 = 0x3b;  // the binary-search table's usual encoding

// A bounded reader over mapped CFI bytes; any overrun or unknown encoding clears ok.
struct Reader {
  const uint8_t* p;
  const uint8_t* end;
  bool ok = true;

  bool Has(size_t n) {
    if (static_cast<size_t>(end - p) < n) ok = false;
    return ok;
  }
  template <typename T>
  T Fixed() {
    T value{};
    if (Has(sizeof(T))) {
      std::memcpy(&value, p, sizeof(T));
      p += sizeof(T);
    }
    return value;
  }
  uint8_t U8() { return Fixed<uint8_t>(); }
  uint64_t Uleb() {
    uint64_t value = 0;
    for (unsigned shift = 0; Has(1); shift += 7) {
      uint8_t byte = *p++;
      if (shift < 64) value |= uint64_t{byte & 0x7fu} << shift;
      if (!(byte & 0x80)) return value;
    }
    return 0;
  }
  int64_t Sleb() {
    int64_t value = 0;
    unsigned shift = 0;
    for (; Has(1);) {
      uint8_t byte = *p++;
      if (shift < 64) value |= static_cast<int64_t>(uint64_t{byte & 0x7fu} << shift);
      shift += 7;
      if (!(byte & 0x80)) {
        if (shift < 64 && (byte & 0x40)) value |= -(int64_t{1} << shift);
        return value;
      }
    }
    return 0;
  }
  // An encoded pointer; `data_base` is the base of DW_EH_PE_datarel.
  uint64_t Pointer(uint8_t encoding, uintptr_t data_base) {
    if (encoding == kPeOmit) return 0;
    uintptr_t here = reinterpret_cast<uintptr_t>(p);
    uint64_t value;
    switch (encoding & 0x0f) {
      case 0x00: value = Fixed<uint64_t>(); break;  // absptr
      case 0x01: value = Uleb(); break;
      case 0x02: value = Fixed<uint16_t>(); break;
      case 0x03: value = Fixed<uint32_t>(); break;
      case 0x04: value = Fixed<uint64_t>(); break;
      case 0x09: value = static_cast<uint64_t>(Sleb()); break;
      case 0x0a: value = static_cast<uint64_t>(static_cast<int64_t>(Fixed<int16_t>())); break;
      case 0x0b: value = static_cast<uint64_t>(static_cast<int64_t>(Fixed<int32_t>())); break;
      case 0x0c: value = Fixed<uint64_t>(); break;
      default: ok = false; return 0;
    }
    switch (encoding & 0x70) {
      case 0x00: break;
      case kPePcrel: value += here; break;
      case kPeDatarel: value += data_base; break;
      default: ok = false; return 0;
    }
    return value;
  }
};

// The rule of one register (only rbp and the return address matter to us).
struct RegisterRule {
  enum Kind : uint8_t { kSame, kOffset, kUndefined, kOther } kind = kSame;
  int64_t offset = 0;  // kOffset: saved at CFA + offset
};

struct Row {
  unsigned cfa_register = kRsp;
  int64_t cfa_offset = 8;
  bool cfa_other = false;  // a CFA expression
  RegisterRule rbp;
  RegisterRule ra;
};

struct Cie {
  uint64_t code_align = 1;
  int64_t data_align = -8;
  unsigned ra_register = kReturnAddress;
  uint8_t fde_encoding = 0;
  bool augmented = false;  // 'z': FDEs carry augmentation data
  bool signal_frame = false;
  const uint8_t* instructions = nullptr;
  const uint8_t* end = nullptr;
};

RegisterRule* RuleOf(Row& row, uint64_t reg, unsigned ra_register) {
  if (reg == kRbp) return &row.rbp;
  if (reg == ra_register) return &row.ra;
  return nullptr;
}

// DW_CFA_restore: back to the rule the CIE's initial instructions gave.
void Restore(Row& row, const Row& initial, uint64_t reg, unsigned ra_register) {
  if (reg == kRbp) row.rbp = initial.rbp;
  if (reg == ra_register) row.ra = initial.ra;
}

// Runs CFA instructions up to code address `pc` (all of them when pc is ~0). Returns false on
// an instruction it does not know.
bool Execute(const Cie& cie, const uint8_t* begin, const uint8_t* end, uint64_t location,
             uint64_t pc, const Row& initial, Row* row) {
  constexpr int kMaxRemembered = 8;
  Row remembered[kMaxRemembered];
  int depth = 0;
  Reader r{begin, end};
  while (r.ok && r.p < r.end) {
    uint8_t op = r.U8();
    uint8_t low = op & 0x3f;
    uint64_t reg;
    switch (op & 0xc0) {
      case 0x40:  // DW_CFA_advance_loc
        location += low * cie.code_align;
        if (location > pc) return true;
        continue;
      case 0x80:  // DW_CFA_offset
        if (RegisterRule* rule = RuleOf(*row, low, cie.ra_register)) {
          *rule = {RegisterRule::kOffset, static_cast<int64_t>(r.Uleb()) * cie.data_align};
        } else {
          r.Uleb();
        }
        continue;
      case 0xc0:  // DW_CFA_restore
        Restore(*row, initial, low, cie.ra_register);
        continue;
    }
    switch (op) {
      case 0x00: break;  // DW_CFA_nop
      case 0x02: case 0x03: case 0x04: {  // DW_CFA_advance_loc1/2/4
        uint64_t delta = op == 0x02 ? r.U8() : op == 0x03 ? r.Fixed<uint16_t>()
                                                           : r.Fixed<uint32_t>();
        location += delta * cie.code_align;
        if (location > pc) return r.ok;
        break;
      }
      case 0x05: case 0x11: case 0x14: case 0x15: {  // offset_extended(_sf), val_offset(_sf)
        reg = r.Uleb();
        int64_t factored = (op == 0x05 || op == 0x14) ? static_cast<int64_t>(r.Uleb()) : r.Sleb();
        if (RegisterRule* rule = RuleOf(*row, reg, cie.ra_register)) {
          *rule = op <= 0x11 ? RegisterRule{RegisterRule::kOffset, factored * cie.data_align}
                             : RegisterRule{RegisterRule::kOther, 0};
        }
        break;
      }
      case 0x06:  // DW_CFA_restore_extended
        Restore(*row, initial, r.Uleb(), cie.ra_register);
        break;
      case 0x07: case 0x08:  // DW_CFA_undefined, DW_CFA_same_value
        reg = r.Uleb();
        if (RegisterRule* rule = RuleOf(*row, reg, cie.ra_register)) {
          *rule = {op == 0x07 ? RegisterRule::kUndefined : RegisterRule::kSame, 0};
        }
        break;
      case 0x09: {  // DW_CFA_register
        reg = r.Uleb();
        r.Uleb();
        if (RegisterRule* rule = RuleOf(*row, reg, cie.ra_register)) *rule = {RegisterRule::kOther};
        break;
      }
      case 0x0a:  // DW_CFA_remember_state
        if (depth == kMaxRemembered) return false;
        remembered[depth++] = *row;
        break;
      case 0x0b:  // DW_CFA_restore_state: the whole row, CFA rule included (DWARF 5 6.4.2.4)
        if (depth == 0) return false;
        *row = remembered[--depth];
        break;
      case 0x0c: case 0x12:  // DW_CFA_def_cfa, DW_CFA_def_cfa_sf
        row->cfa_register = static_cast<unsigned>(r.Uleb());
        row->cfa_offset = op == 0x0c ? static_cast<int64_t>(r.Uleb()) : r.Sleb() * cie.data_align;
        row->cfa_other = false;
        break;
      case 0x0d:  // DW_CFA_def_cfa_register
        row->cfa_register = static_cast<unsigned>(r.Uleb());
        row->cfa_other = false;
        break;
      case 0x0e:  // DW_CFA_def_cfa_offset
        row->cfa_offset = static_cast<int64_t>(r.Uleb());
        break;
      case 0x13:  // DW_CFA_def_cfa_offset_sf
        row->cfa_offset = r.Sleb() * cie.data_align;
        break;
      case 0x0f:  // DW_CFA_def_cfa_expression
        row->cfa_other = true;
        r.p += r.Uleb();
        break;
      case 0x10: case 0x16: {  // DW_CFA_expression, DW_CFA_val_expression
        reg = r.Uleb();
        r.p += r.Uleb();
        if (RegisterRule* rule = RuleOf(*row, reg, cie.ra_register)) *rule = {RegisterRule::kOther};
        break;
      }
      case 0x2e:  // DW_CFA_GNU_args_size
        r.Uleb();
        break;
      case 0x2f:  // DW_CFA_GNU_negative_offset_extended
        reg = r.Uleb();
        if (RegisterRule* rule = RuleOf(*row, reg, cie.ra_register)) {
          *rule = {RegisterRule::kOffset, -static_cast<int64_t>(r.Uleb()) * cie.data_align};
        } else {
          r.Uleb();
        }
        break;
      default:
        return false;  // DW_CFA_set_loc and vendor extensions: not followed
    }
    if (r.p > r.end) return false;
  }
  return r.ok;
}

bool ParseCie(const uint8_t* cie, Cie* out) {
  uint32_t length;
  std::memcpy(&length, cie, 4);
  if (length == 0 || length == 0xffffffffu) return false;  // 64-bit CFI: not emitted on x86-64
  Reader r{cie + 8, cie + 4 + length};                      // past the length and the CIE id
  uint8_t version = r.U8();
  const char* augmentation = reinterpret_cast<const char*>(r.p);
  size_t aug_len = strnlen(augmentation, static_cast<size_t>(r.end - r.p));
  r.p += aug_len + 1;
  if (std::strstr(augmentation, "eh")) return false;
  out->code_align = r.Uleb();
  out->data_align = r.Sleb();
  out->ra_register = version == 1 ? r.U8() : static_cast<unsigned>(r.Uleb());
  if (augmentation[0] == 'z') {
    out->augmented = true;
    uint64_t data_len = r.Uleb();
    const uint8_t* data_end = r.p + data_len;
    for (const char* c = augmentation + 1; *c && r.ok; ++c) {
      switch (*c) {
        case 'R': out->fde_encoding = r.U8(); break;
        case 'P': {
          uint8_t encoding = r.U8();
          r.Pointer(encoding & ~kPeIndirect, 0);
          break;
        }
        case 'L': r.U8(); break;
        case 'S': out->signal_frame = true; break;
        default: r.p = data_end; break;  // unknown: the length lets us skip it
      }
    }
    r.p = data_end;
  } else if (augmentation[0] != '\0') {
    return false;
  }
  out->instructions = r.p;
  out->end = r.end;
  return r.ok && r.p <= r.end;
}

// The FDE covering pc, found by binary search of .eh_frame_hdr's table; nullptr if none.
const uint8_t* FindFde(uintptr_t pc) {
  dl_find_object object;
  if (_dl_find_object(reinterpret_cast<void*>(pc), &object) != 0 || !object.dlfo_eh_frame) {
    return nullptr;
  }
  const auto* header = static_cast<const uint8_t*>(object.dlfo_eh_frame);
  uintptr_t base = reinterpret_cast<uintptr_t>(header);
  if (header[0] != 1 || header[3] != kPeDatarelSdata4) return nullptr;
  Reader r{header + 4, header + 4 + 16};
  r.Pointer(header[1], base);                  // eh_frame_ptr
  uint64_t count = r.Pointer(header[2], base);  // fde_count
  if (!r.ok || count == 0) return nullptr;
  struct Entry {
    int32_t location;
    int32_t fde;
  };
  const auto* table = reinterpret_cast<const Entry*>(r.p);
  size_t low = 0, high = count;  // the last entry with location <= pc
  while (high - low > 1) {
    size_t mid = (low + high) / 2;
    if (base + static_cast<intptr_t>(table[mid].location) <= pc) {
      low = mid;
    } else {
      high = mid;
    }
  }
  if (base + static_cast<intptr_t>(table[low].location) > pc) return nullptr;
  return header + table[low].fde;
}

}  // namespace

FrameRule FindFrameRule(uintptr_t pc) {
  FrameRule unsupported;
  unsupported.kind = FrameRule::kUnsupported;
  const uint8_t* fde = FindFde(pc);
  if (!fde) return unsupported;
  uint32_t length;
  std::memcpy(&length, fde, 4);
  if (length == 0 || length == 0xffffffffu) return unsupported;
  uint32_t cie_offset;
  std::memcpy(&cie_offset, fde + 4, 4);
  Cie cie;
  if (cie_offset == 0 || !ParseCie(fde + 4 - cie_offset, &cie) || cie.signal_frame) {
    return unsupported;
  }
  Reader r{fde + 8, fde + 4 + length};
  uint64_t begin = r.Pointer(cie.fde_encoding, 0);
  uint64_t range = r.Pointer(cie.fde_encoding & 0x0f, 0);
  if (!r.ok || pc < begin || pc - begin >= range) return unsupported;  // in a gap between FDEs
  if (cie.augmented) r.p += r.Uleb();
  if (!r.ok || r.p > r.end) return unsupported;

  Row initial;
  if (!Execute(cie, cie.instructions, cie.end, begin, ~uint64_t{0}, initial, &initial)) {
    return unsupported;
  }
  Row row = initial;
  if (!Execute(cie, r.p, r.end, begin, pc, initial, &row)) return unsupported;

  FrameRule rule;
  if (row.ra.kind == RegisterRule::kUndefined) {
    rule.kind = FrameRule::kOutermost;
    return rule;
  }
  bool cfa_ok = !row.cfa_other && (row.cfa_register == kRsp || row.cfa_register == kRbp) &&
                row.cfa_offset > 0 && row.cfa_offset < (int64_t{1} << 30);
  bool ra_ok = row.ra.kind == RegisterRule::kOffset && row.ra.offset == -8;
  bool rbp_ok = row.rbp.kind == RegisterRule::kSame ||
                (row.rbp.kind == RegisterRule::kOffset && row.rbp.offset < 0 &&
                 row.rbp.offset >= INT16_MIN);
  if (!cfa_ok || !ra_ok || !rbp_ok) return unsupported;
  rule.kind = FrameRule::kNormal;
  rule.cfa_from_rbp = row.cfa_register == kRbp;
  rule.cfa_offset = static_cast<int32_t>(row.cfa_offset);
  rule.rbp_offset = row.rbp.kind == RegisterRule::kOffset ? static_cast<int16_t>(row.rbp.offset) : 0;
  return rule;
}

}  // namespace memlens::agent
