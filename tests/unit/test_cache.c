/* test_cache.c: the on-disk kernel cache (runtime/cache.c).
 *
 * Checks: SHA-256 and FNV-1a 64 against published vectors; key derivation (every field counts,
 * field boundaries count); the folder rules (FUSEC_CACHE_DIR / XDG_CACHE_HOME / HOME, mode
 * 0700, symlink / not a folder / group- or world-writable / another owner refused); hit and
 * miss; damaged entries (a flipped payload byte, truncation, an extra byte, a wrong key in the
 * header, bad magic) read as misses, are removed and are rebuilt; an allocation failure while
 * reading is a miss that keeps the entry; 6 processes storing and reading one key at once;
 * and, where NVRTC is present, rt_cache_compile (miss, hit, rebuild after damage, 4 processes
 * compiling one source at once) and fc_block_emit's PTX and cubin through it (one entry each,
 * the same bytes again; an unusable folder still compiles). Everything runs in a fresh
 * temporary folder.
 */
#include "cache.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "fusec.h"
#include "nvrtc.h"

#include "check.h"

static char root[256];   /* the test's temporary folder */

/* ---- helpers ---------------------------------------------------------------------------------- */
static void hex(const uint8_t *b, int n, char *out) {
    for (int i = 0; i < n; i++) sprintf(out + 2 * i, "%02x", b[i]);
}

static void rm_tree(const char *path) {
    struct stat st;
    if (lstat(path, &st) != 0) return;
    if (S_ISDIR(st.st_mode)) {
        chmod(path, 0700);
        DIR *d = opendir(path);
        if (d) {
            struct dirent *e;
            while ((e = readdir(d)) != NULL) {
                if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
                char sub[1024];
                snprintf(sub, sizeof sub, "%s/%s", path, e->d_name);
                rm_tree(sub);
            }
            closedir(d);
        }
        rmdir(path);
    } else {
        unlink(path);
    }
}

/* Files in dir whose name starts with prefix. */
static int count_files(const char *dir, const char *prefix) {
    DIR *d = opendir(dir);
    if (!d) return -1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        if (strncmp(e->d_name, prefix, strlen(prefix)) == 0 && strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) n++;
    closedir(d);
    return n;
}

static long file_size(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 ? (long)st.st_size : -1;
}

/* A payload of n pseudo-random bytes from seed (never all zero). */
static unsigned char *make_payload(size_t n, uint64_t seed) {
    unsigned char *p = malloc(n ? n : 1);
    for (size_t i = 0; i < n; i++) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        p[i] = (unsigned char)(seed >> 56) | 1;
    }
    return p;
}

static void test_key(RtCacheKey *k, const char *src, const char *arch) {
    rt_cache_key(k, src, strlen(src), arch, "cubin --std=c++17", "12.8");
}

/* ---- hashes ----------------------------------------------------------------------------------- */
static void check_hashes(void) {
    static const struct { const char *msg; const char *want; } v[] = {
        {"", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},
        {"abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"},
        {"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
         "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"},
        {"abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnopqklmnopqrlmnopqrsmnopqrstnopqrstu",
         "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1"},
    };
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
        uint8_t h[32];
        char got[65];
        rt_sha256(v[i].msg, strlen(v[i].msg), h);
        hex(h, 32, got);
        EXPECT(strcmp(got, v[i].want) == 0, "sha256(\"%s\") = %s, want %s", v[i].msg, got, v[i].want);
    }
    /* one million 'a', fed in pieces of awkward sizes */
    RtSha256 s;
    rt_sha256_init(&s);
    char a[1000];
    memset(a, 'a', sizeof a);
    size_t left = 1000000, step = 1;
    while (left > 0) {
        size_t n = step < left ? step : left;
        if (n > sizeof a) n = sizeof a;
        rt_sha256_update(&s, a, n);
        left -= n;
        step = step * 7 % 997 + 1;
    }
    uint8_t h[32];
    char got[65];
    rt_sha256_final(&s, h);
    hex(h, 32, got);
    EXPECT(strcmp(got, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0") == 0,
           "sha256(10^6 x 'a') = %s", got);
    /* every length around the padding boundary agrees between one-shot and byte-by-byte */
    for (size_t n = 50; n < 140; n++) {
        uint8_t h1[32], h2[32];
        rt_sha256(a, n, h1);
        rt_sha256_init(&s);
        for (size_t i = 0; i < n; i++) rt_sha256_update(&s, a + i, 1);
        rt_sha256_final(&s, h2);
        EXPECT(memcmp(h1, h2, 32) == 0, "sha256 of %zu bytes differs between one-shot and incremental", n);
    }
    EXPECT(rt_fnv1a64("", 0) == 0xcbf29ce484222325ull, "fnv1a64(\"\")");
    EXPECT(rt_fnv1a64("a", 1) == 0xaf63dc4c8601ec8cull, "fnv1a64(\"a\") = %016llx",
           (unsigned long long)rt_fnv1a64("a", 1));
    EXPECT(rt_fnv1a64("foobar", 6) == 0x85944171f73967e8ull, "fnv1a64(\"foobar\") = %016llx",
           (unsigned long long)rt_fnv1a64("foobar", 6));
}

static void check_keys(void) {
    RtCacheKey base, k;
    rt_cache_key(&base, "src", 3, "sm_90", "cubin", "12.8");
    EXPECT(strlen(base.hex) == 64, "hex key length %zu", strlen(base.hex));
    rt_cache_key(&k, "src", 3, "sm_90", "cubin", "12.8");
    EXPECT(memcmp(k.bytes, base.bytes, 32) == 0 && strcmp(k.hex, base.hex) == 0, "same fields, different keys");
    rt_cache_key(&k, "srd", 3, "sm_90", "cubin", "12.8");
    EXPECT(memcmp(k.bytes, base.bytes, 32) != 0, "the source is not in the key");
    rt_cache_key(&k, "src", 3, "sm_80", "cubin", "12.8");
    EXPECT(memcmp(k.bytes, base.bytes, 32) != 0, "the arch is not in the key");
    rt_cache_key(&k, "src", 3, "sm_90", "ptx", "12.8");
    EXPECT(memcmp(k.bytes, base.bytes, 32) != 0, "the options are not in the key");
    rt_cache_key(&k, "src", 3, "sm_90", "cubin", "12.9");
    EXPECT(memcmp(k.bytes, base.bytes, 32) != 0, "the NVRTC version is not in the key");
    rt_cache_key(&k, "src", 3, "sm_90", "cubin", NULL);
    EXPECT(memcmp(k.bytes, base.bytes, 32) != 0, "a missing NVRTC version is not in the key");
    /* moving bytes between fields changes the key */
    RtCacheKey k1, k2;
    rt_cache_key(&k1, "x", 1, "sm_90", "ab", "c");
    rt_cache_key(&k2, "x", 1, "sm_90", "a", "bc");
    EXPECT(memcmp(k1.bytes, k2.bytes, 32) != 0, "field boundaries do not count");
    /* srclen is honoured: a source with an embedded NUL differs from its prefix */
    rt_cache_key(&k1, "ab\0cd", 5, "sm_90", "o", "v");
    rt_cache_key(&k2, "ab", 2, "sm_90", "o", "v");
    EXPECT(memcmp(k1.bytes, k2.bytes, 32) != 0, "srclen ignored");
}

/* ---- the folder -------------------------------------------------------------------------------- */
static void expect_refused(const char *dir, FcStatus want, const char *needle) {
    RtCache *c = (RtCache *)1;
    FcErr err = {0};
    FcStatus st = rt_cache_open_dir(dir, &c, &err);
    EXPECT(st == want && c == NULL && strstr(err.msg, needle) != NULL, "open('%s') = %d, message: %s (want %d, '%s')",
           dir, (int)st, err.msg, (int)want, needle);
}

static void check_folder_rules(void) {
    char path[1024], want[1100];
    FcErr err = {0};
    RtCache *c = NULL;

    /* FUSEC_CACHE_DIR wins; nested folders are created with mode 0700 */
    snprintf(path, sizeof path, "%s/env/a/b", root);
    setenv("FUSEC_CACHE_DIR", path, 1);
    setenv("XDG_CACHE_HOME", "/nonexistent-xdg", 1);
    FcStatus st = rt_cache_open(&c, &err);
    EXPECT(st == FC_OK && c && strcmp(rt_cache_dir(c), path) == 0, "FUSEC_CACHE_DIR: %d %s", (int)st, err.msg);
    struct stat sb;
    EXPECT(stat(path, &sb) == 0 && S_ISDIR(sb.st_mode) && (sb.st_mode & 0777) == 0700, "mode %o", (unsigned)sb.st_mode);
    snprintf(want, sizeof want, "%s/env/a", root);
    EXPECT(stat(want, &sb) == 0 && (sb.st_mode & 0777) == 0700, "parent mode %o", (unsigned)sb.st_mode);
    rt_cache_free(c);
    c = NULL;
    /* a trailing slash is the same folder */
    snprintf(path, sizeof path, "%s/env/a/b/", root);
    st = rt_cache_open_dir(path, &c, &err);
    snprintf(want, sizeof want, "%s/env/a/b", root);
    EXPECT(st == FC_OK && strcmp(rt_cache_dir(c), want) == 0, "trailing slash: %s", c ? rt_cache_dir(c) : err.msg);
    rt_cache_free(c);
    c = NULL;

    /* then $XDG_CACHE_HOME/fusec (absolute only), then $HOME/.cache/fusec */
    unsetenv("FUSEC_CACHE_DIR");
    snprintf(path, sizeof path, "%s/xdg", root);
    setenv("XDG_CACHE_HOME", path, 1);
    st = rt_cache_open(&c, &err);
    snprintf(want, sizeof want, "%s/xdg/fusec", root);
    EXPECT(st == FC_OK && strcmp(rt_cache_dir(c), want) == 0, "XDG: %s", c ? rt_cache_dir(c) : err.msg);
    rt_cache_free(c);
    c = NULL;
    setenv("XDG_CACHE_HOME", "relative/xdg", 1);
    snprintf(path, sizeof path, "%s/home", root);
    setenv("HOME", path, 1);
    st = rt_cache_open(&c, &err);
    snprintf(want, sizeof want, "%s/home/.cache/fusec", root);
    EXPECT(st == FC_OK && strcmp(rt_cache_dir(c), want) == 0, "HOME: %s", c ? rt_cache_dir(c) : err.msg);
    rt_cache_free(c);
    c = NULL;
    EXPECT(access("relative", F_OK) != 0, "a relative XDG_CACHE_HOME was used");

    /* refusals */
    char real[600], link[600], file[600];
    snprintf(real, sizeof real, "%s/real", root);
    snprintf(link, sizeof link, "%s/link", root);
    mkdir(real, 0700);
    EXPECT(symlink(real, link) == 0, "symlink: %s", strerror(errno));
    expect_refused(link, FC_ERR_USAGE, "is a symbolic link; refusing to use it");
    snprintf(path, sizeof path, "%s/", link);
    expect_refused(path, FC_ERR_USAGE, "is a symbolic link");
    snprintf(file, sizeof file, "%s/plainfile", root);
    FILE *f = fopen(file, "w");
    if (f) fclose(f);
    expect_refused(file, FC_ERR_USAGE, "is not a folder; refusing to use it");
    snprintf(path, sizeof path, "%s/gw", root);
    mkdir(path, 0700);
    chmod(path, 0770);
    expect_refused(path, FC_ERR_USAGE, "is writable by group or others (mode 0770); refusing to use it (chmod 700 it)");
    chmod(path, 0707);
    expect_refused(path, FC_ERR_USAGE, "(mode 0707)");
    chmod(path, 0755);   /* readable by others is fine */
    st = rt_cache_open_dir(path, &c, &err);
    EXPECT(st == FC_OK, "mode 0755 refused: %s", err.msg);
    rt_cache_free(c);
    c = NULL;
    if (geteuid() == 0) {   /* only root can give a folder away */
        snprintf(path, sizeof path, "%s/other", root);
        mkdir(path, 0700);
        EXPECT(chown(path, 12345, 12345) == 0, "chown: %s", strerror(errno));
        expect_refused(path, FC_ERR_USAGE, "is owned by uid 12345, not by the current user (uid 0)");
    }
    /* a folder that cannot be created */
    snprintf(path, sizeof path, "%s/sub", file);
    expect_refused(path, FC_ERR_IO, "kernel cache: cannot create the folder");
    expect_refused("", FC_ERR_USAGE, "the folder name is empty");
    /* allocation failures while opening: NOMEM, nothing half-made */
    snprintf(path, sizeof path, "%s/oom", root);
    for (long n = 1; n <= 4; n++) {
        fc_alloc_fail_at(n);
        c = NULL;
        st = rt_cache_open_dir(path, &c, &err);
        fc_alloc_fail_at(0);
        EXPECT((st == FC_OK) == (c != NULL) && (st == FC_OK || st == FC_ERR_NOMEM), "alloc failure %ld: %d", n, (int)st);
        rt_cache_free(c);
    }
}

/* ---- entries ------------------------------------------------------------------------------------ */
static RtCache *open_fresh(const char *name) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", root, name);
    RtCache *c = NULL;
    FcErr err = {0};
    if (rt_cache_open_dir(path, &c, &err) != FC_OK) fprintf(stderr, "open %s: %s\n", path, err.msg);
    return c;
}

static bool get_equals(RtCache *c, const RtCacheKey *k, const char *ext, const void *want, size_t n) {
    void *data = NULL;
    size_t len = 0;
    bool hit = rt_cache_get(c, k, ext, &data, &len);
    bool ok = hit && len == n && memcmp(data, want, n) == 0 && ((char *)data)[n] == 0;
    fc_free(data);
    return ok;
}

static bool is_miss(RtCache *c, const RtCacheKey *k, const char *ext) {
    void *data = (void *)1;
    size_t len = 1;
    bool hit = rt_cache_get(c, k, ext, &data, &len);
    if (hit) fc_free(data);
    return !hit && data == NULL && len == 0;
}

/* Rewrites byte `at` of a file (XOR 0x01), or truncates it to `at` bytes, or appends a byte. */
typedef enum { FLIP, TRUNCATE, APPEND } Damage;
static void damage(const char *path, Damage how, long at) {
    int fd = open(path, O_RDWR);
    if (fd < 0) { fprintf(stderr, "damage: cannot open %s\n", path); failures++; return; }
    unsigned char b = 0;
    switch (how) {
    case FLIP:
        if (pread(fd, &b, 1, at) != 1) failures++;
        b ^= 1;
        if (pwrite(fd, &b, 1, at) != 1) failures++;
        break;
    case TRUNCATE: if (ftruncate(fd, at) != 0) failures++; break;
    case APPEND: if (pwrite(fd, "x", 1, lseek(fd, 0, SEEK_END)) != 1) failures++; break;
    }
    close(fd);
}

static void check_entries(void) {
    RtCache *c = open_fresh("entries");
    if (!c) { failures++; return; }
    FcErr err = {0};
    RtCacheKey k, k2;
    test_key(&k, "kernel one", "sm_90");
    test_key(&k2, "kernel two", "sm_90");
    size_t n = 5003;
    unsigned char *pay = make_payload(n, 7);
    char path[1024], path2[1024];
    EXPECT(rt_cache_entry_path(c, &k, "cubin", path, sizeof path), "entry path");
    EXPECT(rt_cache_entry_path(c, &k2, "cubin", path2, sizeof path2), "entry path");
    EXPECT(strstr(path, k.hex) && strstr(path, ".cubin"), "entry path %s", path);

    EXPECT(is_miss(c, &k, "cubin"), "miss before any put");
    EXPECT(rt_cache_put(c, &k, "cubin", pay, n, &err) == FC_OK, "put: %s", err.msg);
    EXPECT(get_equals(c, &k, "cubin", pay, n), "hit after put");
    EXPECT(file_size(path) == (long)n + 64, "entry size %ld", file_size(path));
    EXPECT(is_miss(c, &k, "ptx"), "another extension is another entry");
    EXPECT(is_miss(c, &k2, "cubin"), "another key is another entry");
    struct stat sb;
    EXPECT(stat(path, &sb) == 0 && (sb.st_mode & 0777) == 0600, "entry mode %o", (unsigned)sb.st_mode);
    /* header layout: magic, version 1, header size 64, length, checksum, key */
    unsigned char h[64];
    FILE *f = fopen(path, "rb");
    EXPECT(f && fread(h, 1, 64, f) == 64, "read header");
    if (f) fclose(f);
    EXPECT(memcmp(h, "FUSECK1\0", 8) == 0 && h[8] == 1 && h[12] == 64 && memcmp(h + 32, k.bytes, 32) == 0, "header");
    uint64_t len = 0, sum = 0;
    for (int i = 0; i < 8; i++) len |= (uint64_t)h[16 + i] << (8 * i), sum |= (uint64_t)h[24 + i] << (8 * i);
    EXPECT(len == n && sum == rt_fnv1a64(pay, n), "length %llu checksum %016llx", (unsigned long long)len,
           (unsigned long long)sum);

    /* damage of every kind: a miss, the file removed, a put rebuilds it */
    static const struct { Damage how; long at; const char *what; } cases[] = {
        {FLIP, 64 + 2500, "a flipped payload byte"}, {FLIP, 64 + 5002, "the last payload byte flipped"},
        {FLIP, 3, "bad magic"}, {FLIP, 8, "bad format version"}, {FLIP, 16, "a wrong length"},
        {FLIP, 24, "a wrong checksum"}, {FLIP, 40, "a wrong key byte"}, {TRUNCATE, 64 + 4000, "truncated payload"},
        {TRUNCATE, 30, "truncated header"}, {TRUNCATE, 0, "an empty file"}, {APPEND, 0, "an extra byte"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        damage(path, cases[i].how, cases[i].at);
        EXPECT(is_miss(c, &k, "cubin"), "%s: not a miss", cases[i].what);
        EXPECT(access(path, F_OK) != 0, "%s: the damaged entry was not removed", cases[i].what);
        EXPECT(rt_cache_put(c, &k, "cubin", pay, n, &err) == FC_OK, "%s: rebuild: %s", cases[i].what, err.msg);
        EXPECT(get_equals(c, &k, "cubin", pay, n), "%s: no hit after the rebuild", cases[i].what);
    }

    /* an entry under the wrong name (the key in its header is another's) */
    EXPECT(rename(path, path2) == 0, "rename");
    EXPECT(is_miss(c, &k2, "cubin"), "wrong key in the header: not a miss");
    EXPECT(access(path2, F_OK) != 0, "wrong key: not removed");
    EXPECT(is_miss(c, &k, "cubin"), "entry gone");

    /* an allocation failure while reading is a miss that keeps the (good) entry */
    EXPECT(rt_cache_put(c, &k, "cubin", pay, n, &err) == FC_OK, "put: %s", err.msg);
    fc_alloc_fail_at(1);
    EXPECT(is_miss(c, &k, "cubin"), "alloc failure: not a miss");
    fc_alloc_fail_at(0);
    EXPECT(get_equals(c, &k, "cubin", pay, n), "alloc failure removed a good entry");

    /* a folder or a symlink under an entry's name is a miss and is left alone */
    mkdir(path2, 0700);
    EXPECT(is_miss(c, &k2, "cubin"), "a folder read as an entry");
    EXPECT(access(path2, F_OK) == 0, "a folder under an entry name was removed");
    rmdir(path2);
    EXPECT(symlink(path, path2) == 0, "symlink");
    EXPECT(is_miss(c, &k2, "cubin"), "an entry read through a symlink");
    unlink(path2);

    /* empty payloads, replacing, bad arguments */
    EXPECT(rt_cache_put(c, &k2, "ptx", "", 0, &err) == FC_OK, "empty put: %s", err.msg);
    EXPECT(get_equals(c, &k2, "ptx", "", 0), "empty payload");
    EXPECT(rt_cache_put(c, &k2, "ptx", "new", 3, &err) == FC_OK, "replace: %s", err.msg);
    EXPECT(get_equals(c, &k2, "ptx", "new", 3), "replaced payload");
    EXPECT(rt_cache_put(c, &k2, "../x", "a", 1, &err) == FC_ERR_USAGE, "a bad extension was accepted");
    EXPECT(rt_cache_put(c, &k2, "", "a", 1, &err) == FC_ERR_USAGE, "an empty extension was accepted");
    EXPECT(is_miss(c, &k2, "PTX"), "upper-case extension");
    EXPECT(rt_cache_put(NULL, &k2, "ptx", "a", 1, &err) == FC_ERR_USAGE, "NULL cache");
    EXPECT(!rt_cache_get(NULL, &k2, "ptx", NULL, NULL), "NULL get");
    EXPECT(count_files(rt_cache_dir(c), ".tmp-") == 0, "temporary files left: %d", count_files(rt_cache_dir(c), ".tmp-"));
    rt_cache_free(c);
    rt_cache_free(NULL);
    free(pay);
}

/* ---- several processes at once ------------------------------------------------------------------ */
enum { NPROC = 6, ROUNDS = 60 };

static int child_store(const char *dir, int fd_go, uint64_t seed) {
    char go;
    if (read(fd_go, &go, 1) != 1) return 10;
    RtCache *c = NULL;
    FcErr err = {0};
    if (rt_cache_open_dir(dir, &c, &err) != FC_OK) { fprintf(stderr, "child: %s\n", err.msg); return 11; }
    RtCacheKey k;
    test_key(&k, "shared kernel", "sm_90");
    size_t n = 200000;
    unsigned char *pay = make_payload(n, seed);
    int rc = 0;
    for (int r = 0; r < ROUNDS && rc == 0; r++) {
        void *data = NULL;
        size_t len = 0;
        if (rt_cache_get(c, &k, "cubin", &data, &len)) {
            if (len != n || memcmp(data, pay, n) != 0) rc = 12;   /* a partial or foreign file seen */
            fc_free(data);
        }
        if (rc == 0 && rt_cache_put(c, &k, "cubin", pay, n, &err) != FC_OK) {
            fprintf(stderr, "child put: %s\n", err.msg);
            rc = 13;
        }
    }
    free(pay);
    rt_cache_free(c);
    return rc;
}

/* Forks NPROC children running fn after a common start signal; true if all exit 0. */
static bool run_children(int nproc, int (*fn)(const char *, int, uint64_t), const char *dir, uint64_t seed) {
    int pipefd[2];
    if (pipe(pipefd) != 0) return false;
    pid_t pids[16];
    if (nproc < 1 || nproc > 16) return false;
    for (int i = 0; i < nproc; i++) {
        pids[i] = fork();
        if (pids[i] == 0) {
            close(pipefd[1]);
            _exit(fn(dir, pipefd[0], seed));
        }
    }
    close(pipefd[0]);
    char go[16] = {0};
    if (write(pipefd[1], go, (size_t)nproc) != nproc) failures++;
    close(pipefd[1]);
    bool ok = true;
    for (int i = 0; i < nproc; i++) {
        int ws = 0;
        if (pids[i] <= 0 || waitpid(pids[i], &ws, 0) != pids[i] || !WIFEXITED(ws) || WEXITSTATUS(ws) != 0) {
            fprintf(stderr, "child %d: exit %d\n", i, WIFEXITED(ws) ? WEXITSTATUS(ws) : -1);
            ok = false;
        }
    }
    return ok;
}

static void check_concurrent_store(void) {
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/concurrent", root);
    RtCache *c = open_fresh("concurrent");
    if (!c) { failures++; return; }
    EXPECT(run_children(NPROC, child_store, dir, 99), "a child failed");
    RtCacheKey k;
    test_key(&k, "shared kernel", "sm_90");
    unsigned char *pay = make_payload(200000, 99);
    EXPECT(get_equals(c, &k, "cubin", pay, 200000), "the entry is not valid after concurrent stores");
    EXPECT(count_files(dir, ".tmp-") == 0, "temporary files left: %d", count_files(dir, ".tmp-"));
    EXPECT(count_files(dir, "") == 1, "files in the folder: %d", count_files(dir, ""));
    free(pay);
    rt_cache_free(c);
}

/* ---- NVRTC through the cache ------------------------------------------------------------------- */
static char unique_src[1024];

static int child_compile(const char *dir, int fd_go, uint64_t seed) {
    (void)seed;
    char go;
    if (read(fd_go, &go, 1) != 1) return 10;
    RtCache *c = NULL;
    FcErr err = {0};
    if (rt_cache_open_dir(dir, &c, &err) != FC_OK) return 11;
    char *out = NULL;
    size_t len = 0;
    bool hit = false;
    int rc = rt_cache_compile(c, unique_src, "sm_80", true, &out, &len, &hit, &err) == FC_OK && len > 0 ? 0 : 12;
    if (rc) fprintf(stderr, "child compile: %s\n", err.msg);
    fc_free(out);
    rt_cache_free(c);
    return rc;
}

static void check_compile(void) {
    FcErr err = {0};
    if (rt_nvrtc_available(&err) != FC_OK) {
        printf("NVRTC absent: rt_cache_compile not exercised (%s)\n", err.msg);
        return;
    }
    snprintf(unique_src, sizeof unique_src,
             "/* %ld-%ld */\nextern \"C\" __global__ void k0_add(const float* __restrict__ p0, float* __restrict__ p1)\n"
             "{\n    long long i = (long long)blockIdx.x * 128 + threadIdx.x;\n    if (i < 1000) p1[i] = p0[i] + 1.0f;\n}\n",
             (long)getpid(), (long)time(NULL));
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/nvrtc", root);
    RtCache *c = open_fresh("nvrtc");
    if (!c) { failures++; return; }
    /* several processes compile the same source into an empty cache */
    EXPECT(run_children(4, child_compile, dir, 0), "a compiling child failed");
    EXPECT(count_files(dir, ".tmp-") == 0, "temporary files left");
    char *a = NULL, *b = NULL, *p = NULL;
    size_t na = 0, nb = 0, np = 0;
    bool hit = false;
    EXPECT(rt_cache_compile(c, unique_src, "sm_80", true, &a, &na, &hit, &err) == FC_OK && hit, "no hit: %s", err.msg);
    EXPECT(na > 4 && memcmp(a, "\x7f" "ELF", 4) == 0, "the cached cubin is not an ELF image");
    /* uncached compile gives the same bytes */
    EXPECT(rt_cache_compile(NULL, unique_src, "sm_80", true, &b, &nb, &hit, &err) == FC_OK && !hit, "uncached: %s", err.msg);
    EXPECT(na == nb && memcmp(a, b, na) == 0, "the cached cubin differs from a fresh compile");
    /* damage: rebuilt on the next call */
    RtCacheKey k;
    rt_cache_key(&k, unique_src, strlen(unique_src), "sm_80", "cubin --std=c++17", rt_nvrtc_version());
    char path[1024];
    EXPECT(rt_cache_entry_path(c, &k, "cubin", path, sizeof path) && access(path, F_OK) == 0, "entry %s missing", path);
    damage(path, FLIP, 64 + (long)na / 2);
    fc_free(b);
    b = NULL;
    EXPECT(rt_cache_compile(c, unique_src, "sm_80", true, &b, &nb, &hit, &err) == FC_OK && !hit, "damaged entry hit");
    EXPECT(nb == na && memcmp(a, b, na) == 0, "rebuilt cubin differs");
    fc_free(b);
    b = NULL;
    EXPECT(rt_cache_compile(c, unique_src, "sm_80", true, &b, &nb, &hit, &err) == FC_OK && hit, "no hit after rebuild");
    /* PTX is another entry, NUL-terminated text */
    EXPECT(rt_cache_compile(c, unique_src, "sm_80", false, &p, &np, &hit, &err) == FC_OK && !hit, "ptx: %s", err.msg);
    fc_free(p);
    p = NULL;
    EXPECT(rt_cache_compile(c, unique_src, "sm_80", false, &p, &np, &hit, &err) == FC_OK && hit, "ptx: no hit");
    EXPECT(p && strlen(p) == np && strstr(p, ".entry k0_add"), "ptx text");
    /* a compile error is not cached and carries NVRTC's log */
    char *bad = NULL;
    size_t nbad = 0;
    FcStatus st = rt_cache_compile(c, "extern \"C\" __global__ void k(float *p) { p[0] = nope; }", "sm_80", true, &bad,
                                   &nbad, &hit, &err);
    EXPECT(st == FC_ERR_DEVICE && !bad && strstr(err.msg, "nope"), "compile error: %d %s", (int)st, err.msg);
    EXPECT(rt_cache_compile(c, unique_src, "gfx90", true, &bad, &nbad, &hit, &err) == FC_ERR_USAGE, "bad arch");
    EXPECT(count_files(dir, ".tmp-") == 0, "temporary files left");
    fc_free(a);
    fc_free(b);
    fc_free(p);
    rt_cache_free(c);
}

/* fc_block_emit's PTX and cubin through the cache at FUSEC_CACHE_DIR: one entry each, the same
 * bytes from it; a folder that cannot be used (a file) still gives the code, from NVRTC. */
static char *emit(const char *src, FcEmitKind kind, size_t *len) {
    FcOptions *o = NULL;
    FcBlock *b = NULL;
    char *data = NULL;
    *len = 0;
    fc_options_new(&o);
    fc_options_set_arch(o, "sm_80");
    if (fc_compile_string(src, "emit.tf", o, &b) != FC_OK || fc_block_emit(b, kind, &data, len) != FC_OK) {
        fprintf(stderr, "emit: %s\n", fc_block_last_error(b));
        data = NULL;
    }
    fc_block_free(b);
    fc_options_free(o);
    return data;
}

static void check_emit(void) {
    FcErr err = {0};
    if (rt_nvrtc_available(&err) != FC_OK) return;
    char dir[1024], file[1100], src[200];
    snprintf(dir, sizeof dir, "%s/emit", root);
    snprintf(file, sizeof file, "%s/not-a-folder", root);
    snprintf(src, sizeof src, "block e(x: f32[%ld]) { return exp(x) * 3.0 }\n", (long)getpid() % 1000 + 17);
    setenv("FUSEC_CACHE_DIR", dir, 1);
    size_t n[3] = {0};
    char *ptx[3] = {emit(src, FC_EMIT_PTX, &n[0]), emit(src, FC_EMIT_PTX, &n[1]), NULL};
    EXPECT(ptx[0] && ptx[1] && strstr(ptx[0], ".entry") && n[0] == n[1] && !memcmp(ptx[0], ptx[1], n[0]),
           "--emit ptx twice: not the same PTX");
    EXPECT(count_files(dir, "") == 1, "PTX entries in the cache: %d, not 1", count_files(dir, ""));
    char *cubin = emit(src, FC_EMIT_CUBIN, &n[2]);
    EXPECT(cubin && n[2] > 4 && !memcmp(cubin, "\x7f" "ELF", 4), "--emit cubin: no ELF");
    EXPECT(count_files(dir, "") == 2, "entries after the cubin: %d, not 2", count_files(dir, ""));
    fc_buffer_free(cubin);
    FILE *f = fopen(file, "w");
    if (f) fclose(f);
    setenv("FUSEC_CACHE_DIR", file, 1);
    ptx[2] = emit(src, FC_EMIT_PTX, &n[2]);
    EXPECT(ptx[2] && n[2] == n[0] && !memcmp(ptx[0], ptx[2], n[0]), "--emit ptx without a usable cache folder");
    unsetenv("FUSEC_CACHE_DIR");
    for (int i = 0; i < 3; i++) fc_buffer_free(ptx[i]);
}

int main(void) {
    snprintf(root, sizeof root, "/tmp/fusec-test-cache-XXXXXX");
    if (!mkdtemp(root)) {
        perror("mkdtemp");
        return 1;
    }
    check_hashes();
    check_keys();
    check_concurrent_store();   /* before anything loads NVRTC in this process */
    check_folder_rules();
    check_entries();
    check_compile();
    check_emit();
    rm_tree(root);
    if (failures) {
        fprintf(stderr, "test_cache: %d failure(s)\n", failures);
        return 1;
    }
    printf("test_cache: ok\n");
    return 0;
}
