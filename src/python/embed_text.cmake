# Embeds a text file into a C++ header as a NUL-terminated char array; no Python at build time.
#   cmake -DINPUT=file.py -DOUTPUT=header.h -DNAME=kSymbol -P embed_text.cmake
# The header declares memguard::python::embedded::NAME, the file's exact bytes.
file(READ "${INPUT}" hex HEX)
string(REPEAT "[0-9a-f]" 24 line_of_hex)  # 12 bytes a line
string(REGEX REPLACE "(${line_of_hex})" "\\1\n" hex "${hex}")
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "'\\\\x\\1'," bytes "${hex}")
get_filename_component(source "${INPUT}" NAME)
file(WRITE "${OUTPUT}"
     "// Generated from ${source} by embed_text.cmake at build time; edit ${source}, not this.\n"
     "#pragma once\n\n"
     "namespace memguard::python::embedded {\n"
     "inline constexpr char ${NAME}[] = {\n${bytes}'\\0'};\n"
     "}  // namespace memguard::python::embedded\n")
