# The TIFF tests write their inputs with libtiff itself, and a 16-bit PNG with
# libpng's simplified API (tests/unit/image_tiff_test.cpp).
find_package(TIFF REQUIRED)
target_link_libraries(stoke_unit_tests PRIVATE TIFF::TIFF PNG::PNG)
