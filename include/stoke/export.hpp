// Symbol visibility: stoke's libraries are built with hidden visibility;
// STOKE_API marks what they export. It is default visibility on both sides so
// that exception type identity holds across libstoke, the CUDA plugin and the
// application.
#pragma once

#define STOKE_API __attribute__((visibility("default")))

// Exported for stoke's own tests and plugin only; not part of the public API
// (declared in lib/ headers, which are not installed). Internals that neither
// use carry no mark and stay hidden.
#define STOKE_INTERNAL __attribute__((visibility("default")))
