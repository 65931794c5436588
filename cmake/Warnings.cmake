# Warning flags for the project's own targets (not for consumers).
function(up_target_warnings tgt)
  target_compile_options(${tgt} PRIVATE -Wall -Wextra -Wshadow -Wconversion
    -Wmissing-prototypes -Wstrict-prototypes -Wno-sign-conversion)
  if(UP_WERROR)
    target_compile_options(${tgt} PRIVATE -Werror)
  endif()
endfunction()
