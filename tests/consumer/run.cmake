# tests/consumer/run.cmake: cmake -P script run by the install_consumer test.
# Inputs: BUILD_DIR, WORK_DIR, SOURCE_DIR, CXX, CC, GENERATOR, CONFIG, SANITIZE,
# INSTALL_PREFIX (the configured CMAKE_INSTALL_PREFIX),
# LIBDIR, SOVERSION, STATIC (YES: shmfilter::shmfilter is libshmfilter.a), EXPECT (|-separated paths relative to the prefix, or
# absolute), NGINX_MODULE (its path in EXPECT, or empty), NGINX (the nginx
# binary, or empty).
cmake_minimum_required(VERSION 3.20)

function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    string(REPLACE ";" " " cmd "${ARGN}")
    message(FATAL_ERROR "install_consumer: '${cmd}' failed (${rc}):\n${out}\n${err}")
  endif()
  set(LAST_OUT "${out}" PARENT_SCOPE)
endfunction()

# expect_ok(WHAT OUTPUT PATTERN): OUTPUT (a consumer's) must match PATTERN.
function(expect_ok what out pattern)
  string(STRIP "${out}" out)
  message(STATUS "${what}: ${out}")
  if(NOT out MATCHES "${pattern}")
    message(FATAL_ERROR "install_consumer: ${what} printed '${out}'")
  endif()
endfunction()

# needs_shared(PROGRAM YES|NO): whether PROGRAM's dynamic section must name libshmfilter.so.N.
function(needs_shared program want_shared)
  run(readelf -d ${program})
  if(want_shared AND NOT LAST_OUT MATCHES "\\[libshmfilter\\.so\\.${SOVERSION}\\]")
    message(FATAL_ERROR "install_consumer: ${program} does not need libshmfilter.so.${SOVERSION}:\n${LAST_OUT}")
  elseif(NOT want_shared AND LAST_OUT MATCHES "libshmfilter")
    message(FATAL_ERROR "install_consumer: ${program} needs libshmfilter.so (expected the static archive):\n${LAST_OUT}")
  endif()
endfunction()

# resolves_here(FILE): the dynamic loader finds FILE's libshmfilter.so.N in the
# installed tree (not in the build tree, not elsewhere on the system).
function(resolves_here file)
  run(ldd ${file})
  if(NOT LAST_OUT MATCHES "libshmfilter\\.so\\.${SOVERSION} => ([^ ]+)")
    message(FATAL_ERROR "install_consumer: ldd ${file} does not name libshmfilter.so.${SOVERSION}:\n${LAST_OUT}")
  endif()
  get_filename_component(found "${CMAKE_MATCH_1}" REALPATH)
  get_filename_component(want "${root}/${LIBDIR}/libshmfilter.so.${SOVERSION}" REALPATH)
  if(NOT found STREQUAL want)
    message(FATAL_ERROR "install_consumer: ${file} loads ${found}, not the installed ${want}")
  endif()
endfunction()

set(prefix ${WORK_DIR}/prefix)
file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR})
string(REPLACE "|" ";" EXPECT "${EXPECT}")

# 1. Install into a fresh prefix. When some directory was configured as an
#    absolute path (-DSHMFILTER_NGINX_MODULES_DIR=/usr/lib/nginx/modules), stage
#    the configured prefix under DESTDIR instead, as a package build does, so
#    the test never writes outside WORK_DIR.
set(root ${prefix})
foreach(f IN LISTS EXPECT)
  if(IS_ABSOLUTE "${f}")
    set(ENV{DESTDIR} ${WORK_DIR}/destdir)
    set(prefix ${INSTALL_PREFIX})
    set(root ${WORK_DIR}/destdir${prefix})
  endif()
endforeach()
set(cfg_args)
if(CONFIG)
  set(cfg_args --config ${CONFIG})
endif()
run(${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${prefix} ${cfg_args})
unset(ENV{DESTDIR})

# 2. Every file of the install rules is there; the library's links are links.
set(missing)
foreach(f IN LISTS EXPECT)
  if(IS_ABSOLUTE "${f}")
    set(path ${WORK_DIR}/destdir${f})
  else()
    set(path ${root}/${f})
  endif()
  if(NOT EXISTS ${path})
    list(APPEND missing ${path})
  endif()
  if(f MATCHES "/libshmfilter\\.so(\\.${SOVERSION})?$" AND NOT IS_SYMLINK ${path})
    list(APPEND missing "${path} (as a symbolic link)")
  endif()
  if(f MATCHES "man1/shmtool\\.1$" AND NOT EXISTS ${path})
    list(APPEND missing "(help2man was not found when configuring: run scripts/install-deps.sh, then reconfigure)")
  endif()
endforeach()
if(missing)
  string(REPLACE ";" "\n  " missing "${missing}")
  message(FATAL_ERROR "install_consumer: cmake --install did not install:\n  ${missing}")
endif()
file(GLOB_RECURSE installed RELATIVE ${root} LIST_DIRECTORIES false ${root}/*)
list(LENGTH installed n)
message(STATUS "installed ${n} files under ${root}")

set(extra_flags "")
if(SANITIZE)
  set(extra_flags "-fsanitize=${SANITIZE}")
endif()
separate_arguments(extra UNIX_COMMAND "${extra_flags}")

# 3. find_package(shmfilter): consumer links shmfilter::shmfilter (the archive),
#    c_consumer shmfilter::shared (CMake gives it an rpath to the prefix).
run(${CMAKE_COMMAND} -S ${SOURCE_DIR} -B ${WORK_DIR}/cmake-build -G ${GENERATOR}
    -DCMAKE_PREFIX_PATH=${root} -DCMAKE_CXX_COMPILER=${CXX} -DCMAKE_C_COMPILER=${CC} -DCMAKE_BUILD_TYPE=Release
    "-DCMAKE_CXX_FLAGS=${extra_flags}" "-DCMAKE_C_FLAGS=${extra_flags}" "-DCMAKE_EXE_LINKER_FLAGS=${extra_flags}")
run(${CMAKE_COMMAND} --build ${WORK_DIR}/cmake-build)
if(STATIC)
  needs_shared(${WORK_DIR}/cmake-build/consumer NO)
endif()
run(${WORK_DIR}/cmake-build/consumer)
expect_ok("find_package consumer (C++, shmfilter::shmfilter)" "${LAST_OUT}" "^consumer ok")
needs_shared(${WORK_DIR}/cmake-build/c_consumer YES)
resolves_here(${WORK_DIR}/cmake-build/c_consumer)
run(${WORK_DIR}/cmake-build/c_consumer)
expect_ok("find_package c_consumer (C, shmfilter::shared)" "${LAST_OUT}" "^c consumer ok")

# 4. pkg-config, the .pc file found only through the installed prefix: -lshmfilter
#    links libshmfilter.so, found at run time through an rpath given here.
set(ENV{PKG_CONFIG_PATH} ${root}/${LIBDIR}/pkgconfig)
run(pkg-config --cflags --libs shmfilter)
string(STRIP "${LAST_OUT}" pc_flags)
separate_arguments(pc_flags UNIX_COMMAND "${pc_flags}")
set(rpath -Wl,-rpath,${root}/${LIBDIR})
run(${CXX} ${extra} ${SOURCE_DIR}/main.cpp -o ${WORK_DIR}/consumer_pc ${pc_flags} ${rpath})
needs_shared(${WORK_DIR}/consumer_pc YES)
run(${WORK_DIR}/consumer_pc)
expect_ok("pkg-config consumer (C++, shared)" "${LAST_OUT}" "^consumer ok")
# The Cflags carry -std=c++20 for the C++ headers; cc warns that it ignores it.
run(${CC} ${extra} -std=c99 ${SOURCE_DIR}/main.c -o ${WORK_DIR}/c_consumer_pc ${pc_flags} ${rpath})
needs_shared(${WORK_DIR}/c_consumer_pc YES)
run(${WORK_DIR}/c_consumer_pc)
expect_ok("pkg-config c_consumer (C, shared)" "${LAST_OUT}" "^c consumer ok")

# 5. The installed nginx module finds the installed library through its rewritten
#    rpath, and nginx loads it (nginx -t: no http block, nothing else opened).
if(NGINX_MODULE)
  if(IS_ABSOLUTE "${NGINX_MODULE}")
    set(module ${WORK_DIR}/destdir${NGINX_MODULE})
  else()
    set(module ${root}/${NGINX_MODULE})
    resolves_here(${module})
  endif()
  if(NGINX AND NOT IS_ABSOLUTE "${NGINX_MODULE}")
    set(p ${WORK_DIR}/nginx)
    file(MAKE_DIRECTORY ${p}/logs)
    file(WRITE ${p}/nginx.conf "load_module ${module};\npid ${p}/nginx.pid;\nerror_log ${p}/error.log;\nevents {}\n")
    run(${NGINX} -t -p ${p} -c ${p}/nginx.conf -e ${p}/error.log)
    message(STATUS "nginx -t loads ${module}")
  endif()
endif()
