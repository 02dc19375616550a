# The pool's bookkeeping calls its own helpers on every allocation: let the
# compiler inline and call them directly instead of through the PLT (the
# library exports them for the tests, which makes them interposable otherwise).
file(GLOB stoke_memory_sources CONFIGURE_DEPENDS ${CMAKE_CURRENT_LIST_DIR}/*.cpp)
set_source_files_properties(${stoke_memory_sources} TARGET_DIRECTORY stoke
                            PROPERTIES COMPILE_OPTIONS -fno-semantic-interposition)
