/* cache.h: the on-disk kernel cache (NVRTC results keyed by their content).
 *
 * Where: $FUSEC_CACHE_DIR, else $XDG_CACHE_HOME/fusec (when absolute), else ~/.cache/fusec
 * ($HOME, else the password database). The folder is created with mode 0700 and must be a
 * real folder (not a symlink), owned by the current user and not writable by group or others;
 * otherwise rt_cache_open refuses it and the caller compiles without caching.
 *
 * Entries: "<64 hex digits of the key>.<ext>" (ext "cubin" or "ptx"), each a 64-byte header
 * (magic "FUSECK1\0", format version, payload length, FNV-1a 64 checksum of the payload, the
 * 32-byte key) followed by the payload. Written to a unique temporary file in the folder,
 * fsync'd, then renamed over the entry name: readers only ever see whole files, and two
 * processes writing the same key both succeed (last rename wins; both wrote the same bytes).
 * A damaged entry (bad magic, version, length, checksum or key) reads as a miss and is
 * removed. No locks. docs/cuda_runtime.md has the details.
 */
#ifndef FUSEC_CACHE_H
#define FUSEC_CACHE_H

#include "support.h"

/* ---- hashes (own implementations; exported for the tests) ---------------------------------- */
typedef struct RtSha256 {
    uint32_t h[8];
    uint64_t nbytes;        /* message length so far, bytes */
    uint8_t buf[64];
    size_t nbuf;            /* bytes waiting in buf */
} RtSha256;
void rt_sha256_init(RtSha256 *s);
void rt_sha256_update(RtSha256 *s, const void *data, size_t len);
void rt_sha256_final(RtSha256 *s, uint8_t out[32]);
void rt_sha256(const void *data, size_t len, uint8_t out[32]);
/* FNV-1a, 64-bit (offset basis 0xcbf29ce484222325, prime 0x100000001b3). */
uint64_t rt_fnv1a64(const void *data, size_t len);

/* Little-endian 32-bit fields of the files the cache keeps (entry headers; cpu.c's objects). */
void rt_put_u32le(uint8_t *p, uint32_t v);
uint32_t rt_get_u32le(const uint8_t *p);

/* ---- keys ------------------------------------------------------------------------------------ */
typedef struct RtCacheKey {
    uint8_t bytes[32];      /* SHA-256 of the fields below */
    char hex[65];           /* the same, lowercase hex, NUL-terminated */
} RtCacheKey;
/* The key of compiling `src` (srclen bytes) for `arch` ("sm_90") with `options` (a text that
 * names everything else that changes the output, e.g. "cubin --std=c++17"), by NVRTC version
 * `nvrtc_version` (NULL: "none"). fusec's own version (fc_version()) is always included. Each
 * field is hashed with its length in front, so no two field lists collide by concatenation. */
void rt_cache_key(RtCacheKey *key, const char *src, size_t srclen, const char *arch,
                  const char *options, const char *nvrtc_version);

/* ---- the cache --------------------------------------------------------------------------------- */
typedef struct RtCache RtCache;

/* Opens (creating when absent) the per-user cache folder described above. On failure *out is
 * NULL and err says why: FC_ERR_IO (cannot create or inspect it), FC_ERR_UNAVAILABLE (no
 * folder can be determined), FC_ERR_USAGE (it exists but is refused: a symlink, not a
 * folder, another owner, group/world writable), FC_ERR_NOMEM. */
FcStatus rt_cache_open(RtCache **out, FcErr *err);
/* The same for an explicit folder (tests, tools). */
FcStatus rt_cache_open_dir(const char *dir, RtCache **out, FcErr *err);
void rt_cache_free(RtCache *c);
/* The folder in use (absolute or as given). */
const char *rt_cache_dir(const RtCache *c);
/* The path of key's entry with extension ext, into buf; false if it does not fit. */
bool rt_cache_entry_path(const RtCache *c, const RtCacheKey *key, const char *ext, char *buf, size_t n);

/* Looks key up. Hit: true, *data (fc_alloc'd, len + 1 bytes, NUL after the payload; caller
 * frees) and *len. Miss (absent, unreadable, damaged - a damaged file is removed, best
 * effort - or out of memory): false with *data NULL. ext: 1..15 characters of [a-z0-9]. */
bool rt_cache_get(RtCache *c, const RtCacheKey *key, const char *ext, void **data, size_t *len);
/* Stores len bytes (at most 1 GiB) under key, atomically (see above). FC_ERR_IO with the
 * reason on failure, leaving no temporary file; the previous entry, if any, stays. */
FcStatus rt_cache_put(RtCache *c, const RtCacheKey *key, const char *ext, const void *data, size_t len,
                      FcErr *err);

/* NVRTC through the cache: the key is rt_cache_key(src, arch, "<cubin|ptx> <NVRTC options>",
 * rt_nvrtc_version()). A hit returns the stored result; a miss compiles with
 * rt_nvrtc_compile and stores the result (a failure to store is ignored: the result is still
 * returned). c == NULL compiles without the cache. *out is fc_alloc'd (NUL after the payload)
 * and *len as rt_nvrtc_compile's; *hit (may be NULL) tells whether the cache answered.
 * Errors are rt_nvrtc_compile's (the log and the numbered source on a compile failure). */
FcStatus rt_cache_compile(RtCache *c, const char *src, const char *arch, bool cubin, char **out, size_t *len,
                          bool *hit, FcErr *err);

#endif
