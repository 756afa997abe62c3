/* cmake/shared_library.c: the one source of target shmfilter_shared
 * (libshmfilter.so for the nginx module and the Python binding). Everything
 * else comes from the static library, linked with --whole-archive. */
int shmfilter_shared_library_marker(void);
int shmfilter_shared_library_marker(void) { return 1; }
