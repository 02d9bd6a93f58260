/* The JNI side of NativeUnwind, built by the test with gcc -O2 -fomit-frame-pointer: the
 * leaf spins in a function that keeps no frame pointer, called from another that keeps none
 * either, so only the call-frame information tells where their callers are. */
#include <jni.h>

static volatile long sink;

__attribute__((noinline)) static long leaf(long iterations, long seed) {
    long acc = seed;
    for (long i = 0; i < iterations; i++) {
        acc = acc * 6364136223846793005L + 1442695040888963407L;
        sink = acc;
    }
    return acc;
}

__attribute__((noinline)) static long middle(long iterations) {
    long acc = 0;
    for (int round = 0; round < 4; round++) acc += leaf(iterations / 4, acc + round);
    return acc;
}

JNIEXPORT jlong JNICALL Java_NativeUnwind_spin(JNIEnv *env, jclass cls, jlong iterations) {
    (void)env;
    (void)cls;
    return middle(iterations);
}
