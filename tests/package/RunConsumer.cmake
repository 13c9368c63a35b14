# cmake -P RunConsumer.cmake: builds and runs the consumer project against einjit.
#   MODE=installed: `cmake --install` the build EINJIT_BUILD into WORK/prefix, then a
#     find_package(einjit) project and a pkg-config compile line against that prefix, and the
#     installed CLI.
#   MODE=subproject: the consumer project with add_subdirectory(EINJIT_SOURCE); with FULL, it
#     builds everything and runs; without, it configures and compiles the consumer's source
#     only (what a user's code sees), which does not build einjit a second time.
# GENERATOR, CXX, LAUNCHER and FLAGS come from the build under test.
cmake_minimum_required(VERSION 3.25)
set(consumer ${CMAKE_CURRENT_LIST_DIR}/consumer)
file(REMOVE_RECURSE ${WORK})

function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    string(REPLACE ";" " " line "${ARGN}")
    message(FATAL_ERROR "failed (${rc}): ${line}")
  endif()
endfunction()

set(configure ${CMAKE_COMMAND} -G ${GENERATOR} -DCMAKE_CXX_COMPILER=${CXX}
    -DCMAKE_BUILD_TYPE=Release "-DCMAKE_CXX_FLAGS=${FLAGS}" "-DCMAKE_EXE_LINKER_FLAGS=${FLAGS}")
if(LAUNCHER)
  list(APPEND configure -DCMAKE_CXX_COMPILER_LAUNCHER=${LAUNCHER})
endif()

if(MODE STREQUAL "installed")
  set(prefix ${WORK}/prefix)
  run(${CMAKE_COMMAND} --install ${EINJIT_BUILD} --prefix ${prefix})
  foreach(file IN ITEMS include/einjit/einjit.h bin/einjit)
    if(NOT EXISTS ${prefix}/${file})
      message(FATAL_ERROR "not installed: ${file}")
    endif()
  endforeach()
  run(${configure} -S ${consumer} -B ${WORK}/build -DCMAKE_PREFIX_PATH=${prefix})
  run(${CMAKE_COMMAND} --build ${WORK}/build)
  run(${WORK}/build/consumer)

  # pkg-config, for builds without CMake.
  file(GLOB_RECURSE pc ${prefix}/*/einjit.pc)
  cmake_path(GET pc PARENT_PATH pcdir)
  set(ENV{PKG_CONFIG_PATH} ${pcdir})
  execute_process(COMMAND pkg-config --cflags --libs einjit OUTPUT_VARIABLE pcflags
                  OUTPUT_STRIP_TRAILING_WHITESPACE RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "pkg-config --cflags --libs einjit failed")
  endif()
  separate_arguments(pcflags UNIX_COMMAND "${pcflags}")
  separate_arguments(flags UNIX_COMMAND "${FLAGS}")
  execute_process(COMMAND pkg-config --variable=libdir einjit OUTPUT_VARIABLE libdir
                  OUTPUT_STRIP_TRAILING_WHITESPACE)
  run(${CXX} -std=c++20 -O1 ${flags} ${consumer}/main.cpp ${pcflags} -Wl,-rpath,${libdir}
      -o ${WORK}/consumer-pkgconfig)
  run(${WORK}/consumer-pkgconfig)

  # The installed CLI runs a program.
  execute_process(COMMAND ${prefix}/bin/einjit check "y[i] := x[i] * 2" RESULT_VARIABLE rc
                  OUTPUT_VARIABLE out ERROR_VARIABLE out)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "the installed CLI failed (${rc}): ${out}")
  endif()
elseif(MODE STREQUAL "subproject")
  run(${configure} -S ${consumer} -B ${WORK}/build -DCONSUMER_SUBPROJECT=ON
      -DEINJIT_SOURCE_DIR=${EINJIT_SOURCE})
  if(FULL)
    run(${CMAKE_COMMAND} --build ${WORK}/build --target consumer)
    run(${WORK}/build/consumer)
  else()
    set(object main.cpp.o)
    if(GENERATOR MATCHES "Ninja")
      set(object CMakeFiles/consumer.dir/main.cpp.o)
    endif()
    run(${CMAKE_COMMAND} --build ${WORK}/build --target ${object})
  endif()
else()
  message(FATAL_ERROR "MODE must be installed or subproject")
endif()
