/* A process that looks like a JVM to discovery (it maps a libjvm.so) and runs fake_run(). */
#include <stdio.h>

void fake_setup(void);
void fake_run(void);

int main(void) {
    fake_setup();
    printf("ready\n");
    fflush(stdout);
    fake_run();
    return 0;
}
