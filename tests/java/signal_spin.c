/* The JNI side of SignalSpin, built by the test with gcc -O2 -fomit-frame-pointer: the Java
 * thread spins in spin_inner (called by spin_outer) until a helper thread signals it; the
 * handler then spins on that same stack, above the kernel's signal frame and libc's
 * __restore_rt, until the deadline. A stack sampled in the handler must go on through the
 * signal frame to the function the signal interrupted and its callers. `arm` sets up the same
 * signal and returns, for a thread whose Java code the signal is to interrupt. */
#include <jni.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static volatile long sink;
static volatile int signalled;
static struct timespec deadline;
static pthread_t target;

static int before_deadline(void) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return now.tv_sec < deadline.tv_sec || (now.tv_sec == deadline.tv_sec && now.tv_nsec < deadline.tv_nsec);
}

__attribute__((noinline)) static void signal_spin_handler(int sig) {
    (void)sig;
    signalled = 1;
    long acc = 0;
    while (before_deadline()) {
        for (int i = 0; i < 100000; i++) acc = acc * 6364136223846793005L + 1;
        sink = acc;
    }
}

__attribute__((noinline)) static void spin_inner(void) {
    long acc = 1;
    /* No call in the loop: the signal interrupts this function itself. */
    while (!signalled) acc = acc * 6364136223846793005L + 1442695040888963407L, sink = acc;
}

__attribute__((noinline)) static void spin_outer(void) {
    spin_inner();
    sink++;
}

static void *signaller(void *arg) {
    (void)arg;
    usleep(200 * 1000);
    pthread_kill(target, SIGALRM);
    return NULL;
}

/* Installs the handler and starts the helper that signals the calling thread in 0.2 s. */
static pthread_t arm(jlong seconds) {
    clock_gettime(CLOCK_MONOTONIC, &deadline);
    deadline.tv_sec += seconds;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = signal_spin_handler;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGALRM, &sa, NULL);
    target = pthread_self();
    pthread_t helper;
    pthread_create(&helper, NULL, signaller, NULL);
    return helper;
}

JNIEXPORT void JNICALL Java_SignalSpin_spin(JNIEnv *env, jclass cls, jlong seconds) {
    (void)env;
    (void)cls;
    pthread_t helper = arm(seconds);
    spin_outer();
    pthread_join(helper, NULL);
}

JNIEXPORT void JNICALL Java_SignalSpin_arm(JNIEnv *env, jclass cls, jlong seconds) {
    (void)env;
    (void)cls;
    pthread_detach(arm(seconds));
}
