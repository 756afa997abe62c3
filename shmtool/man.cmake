# shmtool/man.cmake: generates shmtool.1 with help2man from the same text as
# `shmtool --help` (overview) and `shmtool help --man` (every command's help).
#   cmake -DSHMTOOL=<binary> -DHELP2MAN=<help2man> -DOUT=<shmtool.1> -P man.cmake
execute_process(COMMAND ${SHMTOOL} help --man OUTPUT_FILE ${OUT}.h2m RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "'${SHMTOOL} help --man' failed (${rc})")
endif()
execute_process(COMMAND ${HELP2MAN} --no-info --section=1
                        "--name=create, inspect, check, save and use shmfilter shared-memory segments"
                        --include=${OUT}.h2m --output=${OUT} ${SHMTOOL}
                RESULT_VARIABLE rc ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "help2man failed (${rc}): ${err}")
endif()
