# tests/consumer/run.cmake: cmake -P script run by the install_consumer test.
# Inputs: BUILD_DIR, WORK_DIR, SOURCE_DIR, CXX, GENERATOR, CONFIG, SANITIZE.
cmake_minimum_required(VERSION 3.20)

function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    string(REPLACE ";" " " cmd "${ARGN}")
    message(FATAL_ERROR "install_consumer: '${cmd}' failed (${rc}):\n${out}\n${err}")
  endif()
  set(LAST_OUT "${out}" PARENT_SCOPE)
endfunction()

set(prefix ${WORK_DIR}/prefix)
file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR})

# 1. Install into a fresh prefix.
set(cfg_args)
if(CONFIG)
  set(cfg_args --config ${CONFIG})
endif()
run(${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${prefix} ${cfg_args})

set(extra_flags "")
if(SANITIZE)
  set(extra_flags "-fsanitize=${SANITIZE}")
endif()

# 2. find_package(shmfilter) consumer.
run(${CMAKE_COMMAND} -S ${SOURCE_DIR} -B ${WORK_DIR}/cmake-build -G ${GENERATOR}
    -DCMAKE_PREFIX_PATH=${prefix} -DCMAKE_CXX_COMPILER=${CXX} -DCMAKE_BUILD_TYPE=Release
    "-DCMAKE_CXX_FLAGS=${extra_flags}" "-DCMAKE_EXE_LINKER_FLAGS=${extra_flags}")
run(${CMAKE_COMMAND} --build ${WORK_DIR}/cmake-build)
run(${WORK_DIR}/cmake-build/consumer)
message(STATUS "find_package consumer: ${LAST_OUT}")
if(NOT LAST_OUT MATCHES "consumer ok")
  message(FATAL_ERROR "install_consumer: find_package consumer printed '${LAST_OUT}'")
endif()

# 3. pkg-config consumer: the .pc file found only through the installed prefix.
file(GLOB_RECURSE pc_files ${prefix}/*/shmfilter.pc)
list(LENGTH pc_files n)
if(NOT n EQUAL 1)
  message(FATAL_ERROR "install_consumer: expected one installed shmfilter.pc, found '${pc_files}'")
endif()
get_filename_component(pc_dir ${pc_files} DIRECTORY)
set(ENV{PKG_CONFIG_PATH} ${pc_dir})
run(pkg-config --cflags --libs shmfilter)
string(STRIP "${LAST_OUT}" pc_flags)
separate_arguments(pc_flags UNIX_COMMAND "${pc_flags}")
separate_arguments(extra UNIX_COMMAND "${extra_flags}")
run(${CXX} ${extra} ${SOURCE_DIR}/main.cpp -o ${WORK_DIR}/consumer_pc ${pc_flags})
run(${WORK_DIR}/consumer_pc)
message(STATUS "pkg-config consumer: ${LAST_OUT}")
if(NOT LAST_OUT MATCHES "consumer ok")
  message(FATAL_ERROR "install_consumer: pkg-config consumer printed '${LAST_OUT}'")
endif()
