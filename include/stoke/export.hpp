// Symbol visibility: stoke's libraries are built with hidden visibility;
// STOKE_API marks what they export. It is default visibility on both sides so
// that exception type identity holds across libstoke, the CUDA plugin and the
// application: the plugin throws stoke::Error subclasses whose typeinfo it
// imports from its host, so an application catches them by type.
#pragma once

#define STOKE_API __attribute__((visibility("default")))

// Marks a declaration in a lib/ header that is not part of the public API.
// It expands to nothing: internals keep the build's hidden visibility, so
// libstoke.so exports only STOKE_API (and STOKE_PLUGIN_HOST below). stoke's
// own tests, benches and helper programs reach internals by linking the
// static library stoke_internal (lib/CMakeLists.txt), not through libstoke.so.
#define STOKE_INTERNAL

// The few internals the CUDA plugin (libstoke_cuda.so) calls in its host:
// exported by libstoke.so (and by the executables that link stoke_internal
// and may load the plugin) so that the plugin's imports resolve there. Not
// part of the public API; the test Layering.LibraryExportsOnlyThePublicApi
// checks that nothing else internal is exported.
#define STOKE_PLUGIN_HOST __attribute__((visibility("default")))
