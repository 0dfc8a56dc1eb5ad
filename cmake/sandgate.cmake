# add_sandgate_library(NAME SOURCES ... DEPS ...): one library per module, alias sandgate::NAME.
function(add_sandgate_library name)
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPS" ${ARGN})
  add_library(sandgate_${name} STATIC ${ARG_SOURCES})
  add_library(sandgate::${name} ALIAS sandgate_${name})
  target_include_directories(sandgate_${name} PUBLIC ${PROJECT_SOURCE_DIR}/src)
  target_link_libraries(sandgate_${name} PUBLIC ${ARG_DEPS} PRIVATE sandgate_warnings)
endfunction()

# add_sandgate_test(NAME [NEEDS_BINARY] SOURCES ... LIBS ...): a GoogleTest executable registered with CTest.
function(add_sandgate_test name)
  cmake_parse_arguments(ARG "NEEDS_BINARY" "" "SOURCES;LIBS;LABELS" ${ARGN})
  add_executable(${name} ${ARG_SOURCES})
  target_include_directories(${name} PRIVATE ${PROJECT_SOURCE_DIR}/tests)
  target_link_libraries(${name} PRIVATE ${ARG_LIBS} GTest::gtest GTest::gtest_main sandgate_warnings)
  if(ARG_NEEDS_BINARY)
    add_dependencies(${name} sandgate sandgate-launch)
  endif()
  # One variable only: CMake 3.25's gtest_discover_tests splits a list-valued ENVIRONMENT into
  # separate properties. Other paths (sandgate-launch, the source dir) are compiled into the
  # tests that need them.
  gtest_discover_tests(${name} DISCOVERY_TIMEOUT 60
    PROPERTIES LABELS "${ARG_LABELS}"
               ENVIRONMENT "SANDGATE_BIN=${PROJECT_BINARY_DIR}/src/app/sandgate")
endfunction()
