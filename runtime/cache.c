/* cache.c: the on-disk kernel cache (entry points: rt_cache_open, rt_cache_get, rt_cache_put,
 * rt_cache_compile; see cache.h and docs/cuda_runtime.md).
 *
 * Invariants:
 *   - The folder is opened once (O_DIRECTORY | O_NOFOLLOW) after the lstat checks, and every
 *     later file operation is relative to that descriptor (openat/renameat/unlinkat), so a
 *     folder swapped for a symlink after the checks is never followed.
 *   - An entry file is only ever created by rename() of a complete, fsync'd temporary file:
 *     a reader sees either no file or a whole one. Anything that fails validation is treated
 *     as a miss and removed (only if the name still refers to the file that was read).
 *   - No locks: two writers of one key both rename; their bytes are the same by construction
 *     (the key is a hash of everything that determines them).
 * The hashes (SHA-256 for keys, FNV-1a 64 for payload checksums) are written here from their
 * published definitions (FIPS 180-4; Fowler/Noll/Vo).
 */
#include "cache.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include "nvrtc.h"

/* ---- SHA-256 (FIPS 180-4) ------------------------------------------------------------------- */
static const uint32_t sha_k[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
};

static uint32_t rotr32(uint32_t x, int n) { return (x >> n) | (x << (32 - n)); }

static void sha_block(uint32_t h[8], const uint8_t *p) {
    uint32_t w[64];
    for (int i = 0; i < 16; i++)
        w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 | (uint32_t)p[4 * i + 2] << 8 | p[4 * i + 3];
    for (int i = 16; i < 64; i++) {
        uint32_t s0 = rotr32(w[i - 15], 7) ^ rotr32(w[i - 15], 18) ^ (w[i - 15] >> 3);
        uint32_t s1 = rotr32(w[i - 2], 17) ^ rotr32(w[i - 2], 19) ^ (w[i - 2] >> 10);
        w[i] = w[i - 16] + s0 + w[i - 7] + s1;
    }
    uint32_t a = h[0], b = h[1], c = h[2], d = h[3], e = h[4], f = h[5], g = h[6], hh = h[7];
    for (int i = 0; i < 64; i++) {
        uint32_t t1 = hh + (rotr32(e, 6) ^ rotr32(e, 11) ^ rotr32(e, 25)) + ((e & f) ^ (~e & g)) + sha_k[i] + w[i];
        uint32_t t2 = (rotr32(a, 2) ^ rotr32(a, 13) ^ rotr32(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
        hh = g; g = f; f = e; e = d + t1; d = c; c = b; b = a; a = t1 + t2;
    }
    h[0] += a; h[1] += b; h[2] += c; h[3] += d; h[4] += e; h[5] += f; h[6] += g; h[7] += hh;
}

void rt_sha256_init(RtSha256 *s) {
    static const uint32_t h0[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                   0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
    memcpy(s->h, h0, sizeof h0);
    s->nbytes = 0;
    s->nbuf = 0;
}

void rt_sha256_update(RtSha256 *s, const void *data, size_t len) {
    const uint8_t *p = data;
    s->nbytes += len;
    if (s->nbuf > 0) {
        size_t take = 64 - s->nbuf < len ? 64 - s->nbuf : len;
        memcpy(s->buf + s->nbuf, p, take);
        s->nbuf += take;
        p += take;
        len -= take;
        if (s->nbuf < 64) return;
        sha_block(s->h, s->buf);
        s->nbuf = 0;
    }
    for (; len >= 64; p += 64, len -= 64) sha_block(s->h, p);
    memcpy(s->buf, p, len);
    s->nbuf = len;
}

void rt_sha256_final(RtSha256 *s, uint8_t out[32]) {
    uint64_t bits = s->nbytes * 8;
    uint8_t pad[72] = {0x80};
    size_t padlen = (s->nbuf < 56 ? 56 : 120) - s->nbuf;   /* to 56 mod 64 */
    for (int i = 0; i < 8; i++) pad[padlen + (size_t)i] = (uint8_t)(bits >> (56 - 8 * i));
    uint64_t keep = s->nbytes;
    rt_sha256_update(s, pad, padlen + 8);
    s->nbytes = keep;
    for (int i = 0; i < 8; i++) {
        out[4 * i] = (uint8_t)(s->h[i] >> 24);
        out[4 * i + 1] = (uint8_t)(s->h[i] >> 16);
        out[4 * i + 2] = (uint8_t)(s->h[i] >> 8);
        out[4 * i + 3] = (uint8_t)s->h[i];
    }
}

void rt_sha256(const void *data, size_t len, uint8_t out[32]) {
    RtSha256 s;
    rt_sha256_init(&s);
    rt_sha256_update(&s, data, len);
    rt_sha256_final(&s, out);
}

uint64_t rt_fnv1a64(const void *data, size_t len) {
    const uint8_t *p = data;
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < len; i++) {
        h ^= p[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

/* ---- keys -------------------------------------------------------------------------------------- */
static void put_u64le(uint8_t *p, uint64_t v) {
    for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static uint64_t get_u64le(const uint8_t *p) {
    uint64_t v = 0;
    for (int i = 0; i < 8; i++) v |= (uint64_t)p[i] << (8 * i);
    return v;
}
void rt_put_u32le(uint8_t *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}
uint32_t rt_get_u32le(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static void hash_field(RtSha256 *s, const void *data, size_t len) {
    uint8_t n[8];
    put_u64le(n, (uint64_t)len);
    rt_sha256_update(s, n, 8);
    rt_sha256_update(s, data, len);
}
static void hash_str(RtSha256 *s, const char *str) { hash_field(s, str, strlen(str)); }

void rt_cache_key(RtCacheKey *key, const char *src, size_t srclen, const char *arch, const char *options,
                  const char *nvrtc_version) {
    RtSha256 s;
    rt_sha256_init(&s);
    hash_str(&s, "fusec kernel cache key v1");
    hash_str(&s, fc_version());
    hash_str(&s, nvrtc_version ? nvrtc_version : "none");
    hash_str(&s, arch ? arch : "");
    hash_str(&s, options ? options : "");
    hash_field(&s, src ? src : "", src ? srclen : 0);
    rt_sha256_final(&s, key->bytes);
    static const char hexd[] = "0123456789abcdef";
    for (int i = 0; i < 32; i++) {
        key->hex[2 * i] = hexd[key->bytes[i] >> 4];
        key->hex[2 * i + 1] = hexd[key->bytes[i] & 15];
    }
    key->hex[64] = 0;
}

/* ---- the folder ---------------------------------------------------------------------------------- */
struct RtCache {
    char *dir;      /* as opened (fc_alloc'd) */
    int dirfd;      /* O_DIRECTORY | O_NOFOLLOW descriptor of dir */
};

enum {
    HEADER_BYTES = 64,
    FORMAT_VERSION = 1,
};
#define MAX_PAYLOAD ((uint64_t)1 << 30)
static const char cache_magic[8] = {'F', 'U', 'S', 'E', 'C', 'K', '1', 0};

/* mkdir -p with mode 0700 for the folders it creates (existing ones are left alone). */
static FcStatus make_dirs(char *path, FcErr *err) {
    size_t n = strlen(path);
    for (size_t i = 1; i <= n; i++) {
        if (path[i] != '/' && path[i] != 0) continue;
        char c = path[i];
        path[i] = 0;
        int r = mkdir(path, 0700);
        int e = errno;
        path[i] = c;
        if (r != 0 && e != EEXIST) {
            char part[PATH_MAX];
            snprintf(part, sizeof part, "%.*s", (int)i, path);
            return fc_err_set(err, FC_ERR_IO, "kernel cache: cannot create the folder '%s': %s", part, strerror(e));
        }
    }
    return FC_OK;
}

FcStatus rt_cache_open_dir(const char *dir, RtCache **out, FcErr *err) {
    if (!out) return fc_err_set(err, FC_ERR_USAGE, "rt_cache_open_dir: out is NULL");
    *out = NULL;
    if (!dir || !dir[0]) return fc_err_set(err, FC_ERR_USAGE, "kernel cache: the folder name is empty");
    size_t n = strlen(dir);
    if (n >= PATH_MAX - 128) return fc_err_set(err, FC_ERR_USAGE, "kernel cache: the folder name is too long");
    char path[PATH_MAX];
    memcpy(path, dir, n + 1);
    while (n > 1 && path[n - 1] == '/') path[--n] = 0;   /* "a/b/" -> "a/b": O_NOFOLLOW must see the link */
    FC_TRY(make_dirs(path, err));

    struct stat st;
    if (lstat(path, &st) != 0)
        return fc_err_set(err, FC_ERR_IO, "kernel cache: cannot inspect '%s': %s", path, strerror(errno));
    if (S_ISLNK(st.st_mode))
        return fc_err_set(err, FC_ERR_USAGE, "kernel cache: '%s' is a symbolic link; refusing to use it (point "
                          "FUSEC_CACHE_DIR at a real folder)", path);
    if (!S_ISDIR(st.st_mode))
        return fc_err_set(err, FC_ERR_USAGE, "kernel cache: '%s' is not a folder; refusing to use it", path);
    if (st.st_uid != geteuid())
        return fc_err_set(err, FC_ERR_USAGE, "kernel cache: '%s' is owned by uid %ld, not by the current user (uid "
                          "%ld); refusing to use it", path, (long)st.st_uid, (long)geteuid());
    if (st.st_mode & (S_IWGRP | S_IWOTH))
        return fc_err_set(err, FC_ERR_USAGE, "kernel cache: '%s' is writable by group or others (mode %04o); "
                          "refusing to use it (chmod 700 it)", path, (unsigned)(st.st_mode & 07777));

    int fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) return fc_err_set(err, FC_ERR_IO, "kernel cache: cannot open '%s': %s", path, strerror(errno));
    struct stat st2;
    if (fstat(fd, &st2) != 0 || st2.st_dev != st.st_dev || st2.st_ino != st.st_ino) {
        close(fd);
        return fc_err_set(err, FC_ERR_IO, "kernel cache: '%s' changed while it was being opened", path);
    }
    RtCache *c = fc_calloc(1, sizeof *c);
    char *d = fc_strdup(path);
    if (!c || !d) {
        close(fd);
        fc_free(c);
        fc_free(d);
        return FC_OOM(err);
    }
    c->dir = d;
    c->dirfd = fd;
    *out = c;
    return FC_OK;
}

FcStatus rt_cache_open(RtCache **out, FcErr *err) {
    if (!out) return fc_err_set(err, FC_ERR_USAGE, "rt_cache_open: out is NULL");
    *out = NULL;
    char path[PATH_MAX];
    const char *env = getenv("FUSEC_CACHE_DIR");
    const char *xdg = getenv("XDG_CACHE_HOME");
    const char *home = getenv("HOME");
    int w;
    if (env && env[0]) {
        w = snprintf(path, sizeof path, "%s", env);
    } else if (xdg && xdg[0] == '/') {   /* the XDG spec: relative values are ignored */
        w = snprintf(path, sizeof path, "%s/fusec", xdg);
    } else {
        if (!home || !home[0]) {
            struct passwd pw, *res = NULL;
            char buf[4096];
            if (getpwuid_r(geteuid(), &pw, buf, sizeof buf, &res) == 0 && res && res->pw_dir && res->pw_dir[0])
                w = snprintf(path, sizeof path, "%s/.cache/fusec", res->pw_dir);
            else
                return fc_err_set(err, FC_ERR_UNAVAILABLE, "kernel cache: no folder for it (FUSEC_CACHE_DIR, "
                                  "XDG_CACHE_HOME and HOME are unset and the user has no home directory)");
        } else {
            w = snprintf(path, sizeof path, "%s/.cache/fusec", home);
        }
    }
    if (w < 0 || (size_t)w >= sizeof path) return fc_err_set(err, FC_ERR_USAGE, "kernel cache: the folder name is too long");
    return rt_cache_open_dir(path, out, err);
}

void rt_cache_free(RtCache *c) {
    if (!c) return;
    if (c->dirfd >= 0) close(c->dirfd);
    fc_free(c->dir);
    fc_free(c);
}

const char *rt_cache_dir(const RtCache *c) { return c ? c->dir : ""; }

static bool valid_ext(const char *ext) {
    size_t n = ext ? strlen(ext) : 0;
    if (n < 1 || n > 15) return false;
    for (size_t i = 0; i < n; i++)
        if (!((ext[i] >= 'a' && ext[i] <= 'z') || (ext[i] >= '0' && ext[i] <= '9'))) return false;
    return true;
}

/* "<hex>.<ext>" relative to the folder. */
static bool entry_name(const RtCacheKey *key, const char *ext, char *buf, size_t n) {
    if (!valid_ext(ext)) return false;
    int w = snprintf(buf, n, "%.64s.%s", key->hex, ext);
    return w > 0 && (size_t)w < n;
}

bool rt_cache_entry_path(const RtCache *c, const RtCacheKey *key, const char *ext, char *buf, size_t n) {
    char name[96];
    if (!c || !key || !buf || !entry_name(key, ext, name, sizeof name)) return false;
    int w = snprintf(buf, n, "%s/%s", c->dir, name);
    return w > 0 && (size_t)w < n;
}

/* ---- reading ------------------------------------------------------------------------------------- */
/* Reads exactly n bytes; false on error or early end of file. */
static bool read_full(int fd, void *buf, size_t n) {
    char *p = buf;
    while (n > 0) {
        ssize_t r = read(fd, p, n);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return false;
        p += r;
        n -= (size_t)r;
    }
    return true;
}

/* Removes a damaged entry, but only if `name` still is the file that was read (a writer may
 * have renamed a good one over it since). */
static void remove_damaged(RtCache *c, const char *name, const struct stat *was) {
    struct stat now;
    if (fstatat(c->dirfd, name, &now, AT_SYMLINK_NOFOLLOW) == 0 && now.st_dev == was->st_dev &&
        now.st_ino == was->st_ino)
        unlinkat(c->dirfd, name, 0);
}

bool rt_cache_get(RtCache *c, const RtCacheKey *key, const char *ext, void **data, size_t *len) {
    if (data) *data = NULL;
    if (len) *len = 0;
    char name[96];
    if (!c || !key || !data || !len || !entry_name(key, ext, name, sizeof name)) return false;
    int fd = openat(c->dirfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) return false;
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return false;
    }
    uint8_t h[HEADER_BYTES];
    bool damaged = true;
    char *buf = NULL;
    uint64_t plen = 0;
    if ((uint64_t)st.st_size < HEADER_BYTES || !read_full(fd, h, sizeof h)) goto out;
    plen = get_u64le(h + 16);
    if (memcmp(h, cache_magic, 8) != 0 || rt_get_u32le(h + 8) != FORMAT_VERSION || rt_get_u32le(h + 12) != HEADER_BYTES ||
        plen > MAX_PAYLOAD || plen != (uint64_t)st.st_size - HEADER_BYTES || memcmp(h + 32, key->bytes, 32) != 0)
        goto out;
    buf = fc_alloc((size_t)plen + 1);
    if (!buf) {
        damaged = false;   /* our memory, not the file */
        goto out;
    }
    if (!read_full(fd, buf, (size_t)plen) || rt_fnv1a64(buf, (size_t)plen) != get_u64le(h + 24)) goto out;
    buf[plen] = 0;
    close(fd);
    *data = buf;
    *len = (size_t)plen;
    return true;
out:
    close(fd);
    fc_free(buf);
    if (damaged) remove_damaged(c, name, &st);
    return false;
}

/* ---- writing ------------------------------------------------------------------------------------- */
static bool write_full(int fd, const void *buf, size_t n) {
    const char *p = buf;
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return false;
        p += w;
        n -= (size_t)w;
    }
    return true;
}

static uint64_t random_u64(void) {
    uint64_t r = 0;
    if (getrandom(&r, sizeof r, GRND_NONBLOCK) == (ssize_t)sizeof r) return r;
    static _Atomic uint64_t counter;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    uint64_t x = (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 30) ^ ((uint64_t)getpid() << 40) ^ ++counter;
    x ^= (uint64_t)(uintptr_t)&r;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;   /* splitmix64's finalizer */
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

FcStatus rt_cache_put(RtCache *c, const RtCacheKey *key, const char *ext, const void *data, size_t len,
                      FcErr *err) {
    char name[96], tmp[128];
    if (!c || !key || (!data && len) || !entry_name(key, ext, name, sizeof name))
        return fc_err_set(err, FC_ERR_USAGE, "rt_cache_put: bad argument");
    if ((uint64_t)len > MAX_PAYLOAD)
        return fc_err_set(err, FC_ERR_USAGE, "kernel cache: an entry of %zu bytes is larger than the 1 GiB limit", len);
    uint8_t h[HEADER_BYTES] = {0};
    memcpy(h, cache_magic, 8);
    rt_put_u32le(h + 8, FORMAT_VERSION);
    rt_put_u32le(h + 12, HEADER_BYTES);
    put_u64le(h + 16, (uint64_t)len);
    put_u64le(h + 24, rt_fnv1a64(data, len));
    memcpy(h + 32, key->bytes, 32);

    int fd = -1;
    for (int attempt = 0; attempt < 16 && fd < 0; attempt++) {
        snprintf(tmp, sizeof tmp, ".tmp-%.16s-%ld-%016llx", key->hex, (long)getpid(), (unsigned long long)random_u64());
        fd = openat(c->dirfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd < 0 && errno != EEXIST) break;
    }
    if (fd < 0)
        return fc_err_set(err, FC_ERR_IO, "kernel cache: cannot create a file in '%s': %s", c->dir, strerror(errno));
    if (!write_full(fd, h, sizeof h) || !write_full(fd, data, len) || fsync(fd) != 0) {
        int e = errno;
        close(fd);
        unlinkat(c->dirfd, tmp, 0);
        return fc_err_set(err, FC_ERR_IO, "kernel cache: cannot write '%s/%s': %s", c->dir, tmp, strerror(e));
    }
    if (close(fd) != 0 || renameat(c->dirfd, tmp, c->dirfd, name) != 0) {
        int e = errno;
        unlinkat(c->dirfd, tmp, 0);
        return fc_err_set(err, FC_ERR_IO, "kernel cache: cannot store '%s/%s': %s", c->dir, name, strerror(e));
    }
    fsync(c->dirfd);   /* best effort: make the rename durable */
    return FC_OK;
}

/* ---- NVRTC through the cache --------------------------------------------------------------------- */
/* Everything rt_nvrtc_compile passes besides the architecture (keep in step with nvrtc.c). */
#define NVRTC_OPTIONS "--std=c++17"

FcStatus rt_cache_compile(RtCache *c, const char *src, const char *arch, bool cubin, char **out, size_t *len,
                          bool *hit, FcErr *err) {
    if (hit) *hit = false;
    if (out) *out = NULL;
    if (len) *len = 0;
    if (!src || !arch || !out || !len) return fc_err_set(err, FC_ERR_USAGE, "rt_cache_compile: NULL argument");
    const char *ext = cubin ? "cubin" : "ptx";
    RtCacheKey key;
    const char *ver = NULL;
    if (c) {
        FC_TRY(rt_nvrtc_available(err));   /* its version is part of the key */
        ver = rt_nvrtc_version();
        rt_cache_key(&key, src, strlen(src), arch, cubin ? "cubin " NVRTC_OPTIONS : "ptx " NVRTC_OPTIONS, ver);
        void *data = NULL;
        size_t n = 0;
        if (rt_cache_get(c, &key, ext, &data, &n)) {
            *out = data;
            *len = n;
            if (hit) *hit = true;
            return FC_OK;
        }
    }
    FC_TRY(rt_nvrtc_compile(src, arch, cubin, out, len, NULL, err));
    if (c) {
        FcErr ignored = {0};
        (void)rt_cache_put(c, &key, ext, *out, *len, &ignored);
    }
    return FC_OK;
}
