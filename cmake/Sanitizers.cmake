# UP_SANITIZER is a list: address;undefined, thread, ...
function(up_target_sanitizers tgt)
  if(UP_SANITIZER STREQUAL "")
    return()
  endif()
  string(REPLACE ";" "," _san "${UP_SANITIZER}")
  target_compile_options(${tgt} PUBLIC -fsanitize=${_san} -fno-sanitize-recover=all
    -fno-omit-frame-pointer -g)
  target_link_options(${tgt} PUBLIC -fsanitize=${_san})
endfunction()
