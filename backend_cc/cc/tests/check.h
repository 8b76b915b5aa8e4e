// A minimal assertion helper for the cc tests (plain executables: exit code 0 = pass), so
// they build with nothing but a C++ compiler and the cuDNN headers.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>

#define CHECK(cond)                                                              \
  do {                                                                           \
    if (!(cond)) {                                                               \
      std::fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
      std::exit(1);                                                              \
    }                                                                            \
  } while (0)

// Runs `statement`, which must throw `Type` whose message contains `needle`.
#define CHECK_THROWS(Type, needle, statement)                                      \
  do {                                                                             \
    bool thrown = false;                                                           \
    try {                                                                          \
      statement;                                                                   \
    } catch (const Type& e) {                                                      \
      thrown = std::string(e.what()).find(needle) != std::string::npos;            \
      if (!thrown) std::fprintf(stderr, "%s:%d: message was: %s\n", __FILE__, __LINE__, e.what()); \
    }                                                                              \
    if (!thrown) {                                                                 \
      std::fprintf(stderr, "%s:%d: expected %s containing \"%s\" from %s\n", __FILE__, \
                   __LINE__, #Type, needle, #statement);                           \
      std::exit(1);                                                                \
    }                                                                              \
  } while (0)
