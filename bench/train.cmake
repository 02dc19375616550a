# stoke-bench (the README's demo) is an installed program: tools/stoke/CMakeLists.txt.
