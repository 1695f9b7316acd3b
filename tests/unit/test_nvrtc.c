/* test_nvrtc.c: NVRTC loading and compiling (runtime/nvrtc.c).
 *
 * Without NVRTC: checks that the absence is reported as FC_ERR_UNAVAILABLE with how to get it,
 * then exits 77. With it: PTX and cubin for sm_80 and sm_90, a compile error carrying the log
 * and the numbered source, bad arguments, concurrent compiles from two threads, and (in a
 * child process with FUSEC_NVRTC_LIBRARY pointing nowhere) the unavailable path.
 */
#include "nvrtc.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"

static const char *good_src =
    "extern \"C\" __global__ void k0_add(const float* __restrict__ p0, float* __restrict__ p1)\n"
    "{\n"
    "    for (long long v0 = (long long)threadIdx.x; v0 < 1000LL; v0 += 128) p1[v0] = p0[v0] + 1.0f;\n"
    "}\n";

static const char *bad_src =
    "extern \"C\" __global__ void k0_bad(float* p0)\n"
    "{\n"
    "    p0[0] = 1.0f;\n"
    "    p0[1] = undefined_name;\n"
    "    p0[2] = 3.0f;\n"
    "}\n";

/* The unavailable path, in a child process (loading happens once per process). */
static int child_unavailable(void) {
    FcErr err = {0};
    FcStatus st = rt_nvrtc_available(&err);
    if (st != FC_ERR_UNAVAILABLE) { fprintf(stderr, "child: status %d\n", (int)st); return 1; }
    if (!strstr(err.msg, "NVRTC is unavailable") || !strstr(err.msg, "nvidia-cuda-nvrtc-cu12") ||
        !strstr(err.msg, "CUDA_HOME")) {
        fprintf(stderr, "child: message: %s\n", err.msg);
        return 1;
    }
    char *out = NULL;
    size_t len = 0;
    st = rt_nvrtc_compile(good_src, "sm_90", false, &out, &len, NULL, &err);
    if (st != FC_ERR_UNAVAILABLE || out || rt_nvrtc_version() != NULL) { fprintf(stderr, "child: compile %d\n", (int)st); return 1; }
    return 0;
}

static void check_unavailable_in_child(void) {
    pid_t pid = fork();
    if (pid == 0) {
        setenv("FUSEC_NVRTC_LIBRARY", "/nonexistent/libnvrtc.so", 1);
        char *argv[] = {"test_nvrtc", "--child-unavailable", NULL};
        execv("/proc/self/exe", argv);
        _exit(127);
    }
    int ws = 0;
    EXPECT(pid > 0 && waitpid(pid, &ws, 0) == pid && WIFEXITED(ws) && WEXITSTATUS(ws) == 0,
           "child exit status %d", WIFEXITED(ws) ? WEXITSTATUS(ws) : -1);
}

static void *compile_thread(void *arg) {
    (void)arg;
    for (int i = 0; i < 2; i++) {
        FcErr err = {0};
        char *out = NULL;
        size_t len = 0;
        FcStatus st = rt_nvrtc_compile(good_src, "sm_80", i == 1, &out, &len, NULL, &err);
        if (st != FC_OK || !out || len == 0) return (void *)1;
        fc_free(out);
    }
    return NULL;
}

int main(int argc, char **argv) {
    if (argc > 1 && !strcmp(argv[1], "--child-unavailable")) return child_unavailable();

    check_unavailable_in_child();
    FcErr err = {0};
    if (rt_nvrtc_available(&err) != FC_OK) {
        EXPECT(err.status == FC_ERR_UNAVAILABLE && strstr(err.msg, "nvidia-cuda-nvrtc-cu12"), "%s", err.msg);
        printf("NVRTC absent (%s): skipping\n", err.msg);
        return failures ? 1 : 77;
    }
    const char *ver = rt_nvrtc_version();
    EXPECT(ver && strchr(ver, '.'), "version %s", ver ? ver : "(null)");
    printf("NVRTC %s\n", ver);

    static const char *const arches[] = {"sm_80", "sm_90"};
    for (int a = 0; a < 2; a++)
        for (int cubin = 0; cubin < 2; cubin++) {
            char *out = NULL, *log = NULL;
            size_t len = 0;
            FcStatus st = rt_nvrtc_compile(good_src, arches[a], cubin, &out, &len, &log, &err);
            EXPECT(st == FC_OK, "%s %s: %s", arches[a], cubin ? "cubin" : "ptx", err.msg);
            if (st == FC_OK) {
                EXPECT(out && len > 16 && log, "empty result");
                if (cubin) EXPECT(!memcmp(out, "\x7f" "ELF", 4), "cubin is not ELF");
                else {
                    char target[32];
                    snprintf(target, sizeof target, ".target %s", arches[a]);
                    EXPECT(strstr(out, ".entry k0_add") && strstr(out, target) && strlen(out) == len, "ptx:\n%.300s", out);
                }
            }
            fc_free(out);
            fc_free(log);
        }

    /* a compile error: FC_ERR_DEVICE, the log and the source around the failing line */
    {
        char *out = NULL, *log = NULL;
        size_t len = 0;
        FcStatus st = rt_nvrtc_compile(bad_src, "sm_90", false, &out, &len, &log, &err);
        EXPECT(st == FC_ERR_DEVICE && err.status == FC_ERR_DEVICE, "status %d", (int)st);
        EXPECT(strstr(err.msg, "fusec.cu(4): error") && strstr(err.msg, "undefined_name"), "msg:\n%s", err.msg);
        EXPECT(strstr(err.msg, "    4|     p0[1] = undefined_name;"), "numbered source missing:\n%s", err.msg);
        EXPECT(strstr(err.msg, "compiling for sm_90 failed"), "msg:\n%s", err.msg);
        EXPECT(out == NULL && len == 0, "output on failure");
        EXPECT(log && strstr(log, "undefined_name") && strstr(log, "    6| }"), "full log:\n%s", log ? log : "(null)");
        fc_free(log);
    }
    /* a long source that fails near its end: the message stays within FcErr and shows the error */
    {
        StrBuf sb = {0};
        sb_puts(&sb, "extern \"C\" __global__ void k0_long(float* p0)\n{\n");
        for (int i = 0; i < 3000; i++) sb_printf(&sb, "    p0[%d] = %d.0f;\n", i, i);
        sb_puts(&sb, "    p0[0] = missing_thing;\n}\n");
        char *out = NULL;
        size_t len = 0;
        FcStatus st = rt_nvrtc_compile(sb.data, "sm_80", true, &out, &len, NULL, &err);
        EXPECT(st == FC_ERR_DEVICE && strstr(err.msg, "missing_thing") && strstr(err.msg, " 3003|"), "msg:\n%.600s", err.msg);
        sb_free(&sb);
    }
    /* bad arguments */
    {
        char *out = NULL;
        size_t len = 0;
        EXPECT(rt_nvrtc_compile(good_src, "sm90", false, &out, &len, NULL, &err) == FC_ERR_USAGE &&
                   strstr(err.msg, "unknown GPU architecture 'sm90'"), "%s", err.msg);
        EXPECT(rt_nvrtc_compile(good_src, "sm_9x; rm", false, &out, &len, NULL, &err) == FC_ERR_USAGE, "%s", err.msg);
        EXPECT(rt_nvrtc_compile(NULL, "sm_90", false, &out, &len, NULL, &err) == FC_ERR_USAGE, "%s", err.msg);
        EXPECT(rt_nvrtc_compile(good_src, NULL, false, &out, &len, NULL, &err) == FC_ERR_USAGE, "%s", err.msg);
    }
    /* two threads at once */
    {
        pthread_t t[2];
        void *r[2] = {(void *)1, (void *)1};
        for (int i = 0; i < 2; i++) pthread_create(&t[i], NULL, compile_thread, NULL);
        for (int i = 0; i < 2; i++) pthread_join(t[i], &r[i]);
        EXPECT(r[0] == NULL && r[1] == NULL, "a concurrent compile failed");
    }
    /* out of memory while compiling: an error, no crash or leak */
    for (long n = 1; n <= 6; n++) {
        char *out = NULL, *log = NULL;
        size_t len = 0;
        fc_alloc_fail_at(n);
        FcStatus st = rt_nvrtc_compile(bad_src, "sm_90", false, &out, &len, &log, &err);
        fc_alloc_fail_at(0);
        EXPECT(st == FC_ERR_DEVICE || st == FC_ERR_NOMEM, "fail at %ld: %d", n, (int)st);
        fc_free(out);
        fc_free(log);
    }
    if (failures) {
        fprintf(stderr, "%d failure(s)\n", failures);
        return 1;
    }
    puts("test_nvrtc: ok");
    return 0;
}
