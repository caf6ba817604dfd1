// src/agent/hooks/cxx_forms.h
//
// The one list of C++'s replaceable operator new and delete forms, all twenty, as an X-macro:
//   X(enumerator, mangled name)
// cxx_interposers.cc expands it into its forms and the names it resolves them by; the agent's
// exported symbols (exports.map.in, preprocessed at build time) into the names it exports.
// No includes: the version script is made from this file by the C preprocessor.
#pragma once

#define MEMLENS_CXX_FORMS(X)                                                  \
  X(kNew, _Znwm)                                                              \
  X(kNewArray, _Znam)                                                         \
  X(kNewNothrow, _ZnwmRKSt9nothrow_t)                                         \
  X(kNewArrayNothrow, _ZnamRKSt9nothrow_t)                                    \
  X(kNewAligned, _ZnwmSt11align_val_t)                                        \
  X(kNewArrayAligned, _ZnamSt11align_val_t)                                   \
  X(kNewAlignedNothrow, _ZnwmSt11align_val_tRKSt9nothrow_t)                   \
  X(kNewArrayAlignedNothrow, _ZnamSt11align_val_tRKSt9nothrow_t)              \
  X(kDelete, _ZdlPv)                                                          \
  X(kDeleteArray, _ZdaPv)                                                     \
  X(kDeleteSized, _ZdlPvm)                                                    \
  X(kDeleteArraySized, _ZdaPvm)                                               \
  X(kDeleteNothrow, _ZdlPvRKSt9nothrow_t)                                     \
  X(kDeleteArrayNothrow, _ZdaPvRKSt9nothrow_t)                                \
  X(kDeleteAligned, _ZdlPvSt11align_val_t)                                    \
  X(kDeleteArrayAligned, _ZdaPvSt11align_val_t)                               \
  X(kDeleteSizedAligned, _ZdlPvmSt11align_val_t)                              \
  X(kDeleteArraySizedAligned, _ZdaPvmSt11align_val_t)                         \
  X(kDeleteAlignedNothrow, _ZdlPvSt11align_val_tRKSt9nothrow_t)               \
  X(kDeleteArrayAlignedNothrow, _ZdaPvSt11align_val_tRKSt9nothrow_t)
