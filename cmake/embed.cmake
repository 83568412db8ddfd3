# ts_embed_files(OUT_C SYMBOL_PREFIX FILE...): compile files into a C source as
# a table { name, data, len } so binaries carry their migrations, OpenAPI
# document and web assets and need nothing installed beside them.
function(ts_embed_files out_c prefix)
  set(files ${ARGN})
  add_custom_command(
    OUTPUT ${out_c}
    COMMAND ${CMAKE_COMMAND} -DOUT=${out_c} -DPREFIX=${prefix}
            "-DFILES=${files}" -P ${CMAKE_SOURCE_DIR}/cmake/embed_gen.cmake
    DEPENDS ${files} ${CMAKE_SOURCE_DIR}/cmake/embed_gen.cmake
    COMMENT "embedding ${prefix}"
    VERBATIM)
endfunction()
