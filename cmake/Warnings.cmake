# Warnings and sanitizers applied to every einjit target through einjit_options.
add_library(einjit_options INTERFACE)
target_compile_options(einjit_options INTERFACE -Wall -Wextra -Wpedantic -Wshadow=local
                       -Wno-missing-field-initializers)
# GCC 12 reports false -Wrestrict warnings inside libstdc++ string concatenation at -O2/-O3
# (GCC bug 105651); they point into <bits/char_traits.h>, never at einjit code.
if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU" AND CMAKE_CXX_COMPILER_VERSION VERSION_LESS 13)
  target_compile_options(einjit_options INTERFACE -Wno-restrict)
endif()
if(EINJIT_WERROR)
  target_compile_options(einjit_options INTERFACE -Werror)
endif()
if(EINJIT_SANITIZE)
  target_compile_options(einjit_options INTERFACE -fsanitize=address,undefined
                         -fno-sanitize-recover=undefined -fno-omit-frame-pointer)
  target_link_options(einjit_options INTERFACE -fsanitize=address,undefined)
endif()
if(EINJIT_FUZZ)
  if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
    message(FATAL_ERROR "EINJIT_FUZZ needs clang (libFuzzer): CXX=clang++-19 (scripts/fuzz.sh)")
  endif()
  # Coverage for libFuzzer in every einjit target; the fuzz target links libFuzzer's main.
  # Not clang's -fsanitize=function: it reads a signature word before the callee of every
  # indirect call, and JIT-compiled functions have none (the read can fault at a page start).
  target_compile_options(einjit_options INTERFACE -fsanitize=fuzzer-no-link,address,undefined
                         -fno-sanitize=function -fno-sanitize-recover=undefined
                         -fno-omit-frame-pointer -D_GLIBCXX_ASSERTIONS)
  target_link_options(einjit_options INTERFACE -fsanitize=address,undefined)
endif()
if(EINJIT_TSAN)
  if(EINJIT_SANITIZE OR EINJIT_FUZZ)
    message(FATAL_ERROR "EINJIT_TSAN cannot be combined with AddressSanitizer")
  endif()
  target_compile_options(einjit_options INTERFACE -fsanitize=thread -fno-omit-frame-pointer)
  target_link_options(einjit_options INTERFACE -fsanitize=thread)
endif()
