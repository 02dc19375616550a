# The fuzz targets: tests/fuzz/fuzz_<name>.cpp, corpus in corpus/<name>/,
# kept crash reproducers in crashes/<name>/.
set(STOKE_FUZZ_TARGETS jpeg png idx manifest config_file config_env checkpoint cache bmp image_size tiff)
# Targets that include lib/ headers: linked with stoke_internal (lib/CMakeLists.txt).
set(STOKE_FUZZ_INTERNAL_TARGETS cache)
