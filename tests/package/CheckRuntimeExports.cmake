# cmake -DNM=nm -DLIB=libeinjit.so -P CheckRuntimeExports.cmake: the library exports einjit's
# API and no part of the C++ runtime, also where the toolchain links libstdc++.a into it (the
# GPU machine's). std::locale::classic() and std::ios_base::Init stand for the runtime's own
# symbols; exported, they bind to the process's libstdc++.so and the two runtimes' locale
# tables disagree (python/src/exports.map).
execute_process(COMMAND ${NM} -D --defined-only ${LIB} OUTPUT_VARIABLE symbols RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "${NM} -D --defined-only ${LIB} failed (${rc})")
endif()
if(NOT symbols MATCHES " _ZN6einjit7compile")
  message(FATAL_ERROR "${LIB} does not export einjit::compile: the check reads the wrong table")
endif()
foreach(runtime IN ITEMS _ZNSt6locale7classicEv _ZNSt8ios_base4InitC1Ev)
  if(symbols MATCHES " ${runtime}(@[^\n]*)?\n")
    message(FATAL_ERROR "${LIB} exports ${runtime}: the C++ runtime linked into it is visible")
  endif()
endforeach()
