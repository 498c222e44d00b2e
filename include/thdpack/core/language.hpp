#pragma once
// thdpack's headers are C++20 (std::span, designated initialisers, defaulted comparisons). Every
// public header includes this first, so that an older standard fails with this one line instead
// of errors deep inside a header. CMake's thdpack::thdpack target asks for C++20 itself.

#if defined(_MSVC_LANG) && !defined(__clang__)
#define THDPACK_CPLUSPLUS _MSVC_LANG
#else
#define THDPACK_CPLUSPLUS __cplusplus
#endif
#if THDPACK_CPLUSPLUS < 201709L
#error "thdpack needs C++20: compile with -std=c++20 or later (CMake: cxx_std_20)"
#endif
#undef THDPACK_CPLUSPLUS
