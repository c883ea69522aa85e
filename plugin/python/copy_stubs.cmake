# Copies the gRPC/protobuf Python stubs that protoc generated (IN = <build>/python/stepcast/v1)
# into the stepcast_client package (OUT = plugin/python/stepcast_client/_proto), with their
# imports of each other rewritten from the top-level "stepcast.v1" to the package's own
# "stepcast_client._proto.stepcast.v1", so the installed package needs no top-level "stepcast"
# module and no PYTHONPATH. Files are rewritten only when their content changes. The output is
# gitignored (the source tree stays clean).
#   cmake -DIN=... -DOUT=... -P copy_stubs.cmake
if(NOT IN OR NOT OUT)
  message(FATAL_ERROR "copy_stubs.cmake: pass -DIN=<generated stepcast/v1 dir> -DOUT=<package _proto dir>")
endif()
function(write_if_changed path content)
  if(EXISTS "${path}")
    file(READ "${path}" old)
    if(old STREQUAL content)
      return()
    endif()
  endif()
  file(WRITE "${path}" "${content}")
endfunction()
file(MAKE_DIRECTORY "${OUT}/stepcast/v1")
set(init "# Generated at build time by plugin/python/copy_stubs.cmake; not in git.\n")
write_if_changed("${OUT}/__init__.py" "${init}")
write_if_changed("${OUT}/stepcast/__init__.py" "${init}")
write_if_changed("${OUT}/stepcast/v1/__init__.py" "${init}")
file(GLOB stubs "${IN}/*_pb2.py" "${IN}/*_pb2_grpc.py")
if(NOT stubs)
  message(FATAL_ERROR "copy_stubs.cmake: no *_pb2.py in ${IN}")
endif()
foreach(stub ${stubs})
  get_filename_component(name "${stub}" NAME)
  file(READ "${stub}" text)
  string(REGEX REPLACE "(^|\n)from stepcast\\.v1 import " "\\1from stepcast_client._proto.stepcast.v1 import " text "${text}")
  # The module name the message classes record (__module__, used by pickle).
  string(REGEX REPLACE "'stepcast\\.v1\\.([a-z0-9_]+_pb2)'" "'stepcast_client._proto.stepcast.v1.\\1'" text "${text}")
  write_if_changed("${OUT}/stepcast/v1/${name}" "${text}")
endforeach()
