/* flydeps C extensions: the C APIs one extension exports to another through a capsule.
 *
 * Contract: each layout below is the single definition the exporting module
 * (flydeps.watch._watchext, flydeps.watch._dictver) and the importing one
 * (flydeps.builds._fastcache) compile against. Every layout starts with `unsigned int abi`
 * (cext_import_capsule in cext.h compares it): bump the ABI number on any change of a layout,
 * so an importer built against another version ignores the capsule instead of misreading it.
 */
#ifndef FLYDEPS_CEXT_CAPI_H
#define FLYDEPS_CEXT_CAPI_H

#include "cext.h"

/* flydeps.watch._watchext (CPython >= 3.12): the watcher counter, version() without a
 * Python call. Never fails, never leaves an exception set. */
typedef struct {
    unsigned int abi;
    unsigned long long (*version)(void);
} FlydepsWatchAPI;
#define FLYDEPS_WATCH_API_ABI 1u
#define FLYDEPS_WATCH_MODULE "flydeps.watch._watchext"
#define FLYDEPS_WATCH_CAPSULE "flydeps.watch._watchext._C_API"

/* flydeps.watch._dictver (CPython 3.10/3.11): the largest PEP 509 tag of a tuple of dicts;
 * -1 with TypeError set when dicts is not a tuple of dicts. */
typedef struct {
    unsigned int abi;
    long long (*tags_max)(PyObject *dicts);
} FlydepsDictVerAPI;
#define FLYDEPS_DICTVER_API_ABI 1u
#define FLYDEPS_DICTVER_MODULE "flydeps.watch._dictver"
#define FLYDEPS_DICTVER_CAPSULE "flydeps.watch._dictver._C_API"

#endif /* FLYDEPS_CEXT_CAPI_H */
