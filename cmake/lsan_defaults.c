/* LeakSanitizer's defaults in a sanitizer build (-DFUSEC_SANITIZE=address,...): linked into every
 * executable there; LSAN_OPTIONS in the environment still adds to and overrides them.
 *
 * use_tls=0: thread-local storage is not a root set. GCC 12's LeakSanitizer misreads the size of
 * a dynamic TLS block that glibc 2.36 allocates with the interposed malloc (the blocks of a
 * dlopen'd library with TLS: NVRTC, OpenBLAS) and its tracer thread then scans a range such as
 * [0x239f, 0x20000034a1) and dies ("Tracer caught signal 11"), taking the leak check with it:
 * whether it dies depends on what lies before the block, so some graphs always crash it and others
 * never. Leaving TLS out can only report more, never hide a leak: memory that is reachable only
 * from TLS is reported. fusec keeps no heap pointer in TLS; glibc does, and those allocations
 * (the dlerror buffer, pthread_setspecific's second-level arrays) are suppressed below by their
 * glibc frames, so a leak is still reported wherever fusec's own code allocated it. */
const char *__lsan_default_options(void);
const char *__lsan_default_suppressions(void);

const char *__lsan_default_options(void) { return "use_tls=0:print_suppressions=0"; }

const char *__lsan_default_suppressions(void) {
    return "leak:_dlerror_run\n"
           "leak:___pthread_setspecific\n"
           "leak:_dl_exception_create\n";
}
