// Test fixture: a Java thread whose native code is interrupted by a signal whose handler spins.
//   java SignalSpin <seconds> <JNI library path>
// Thread "signal" runs SignalSpin.caller, which calls the JNI library's spin (signal_spin.c):
// it spins in spin_inner until SIGALRM arrives, and the handler spins until the deadline.
// Prints "ready <pid>" once the thread runs.
public final class SignalSpin {
    static native void spin(long seconds);

    static void caller(long seconds) {
        spin(seconds);
    }

    public static void main(String[] args) throws Exception {
        long seconds = Long.parseLong(args[0]);
        System.load(args[1]);
        Thread t = new Thread(() -> caller(seconds), "signal");
        t.start();
        System.out.println("ready " + ProcessHandle.current().pid());
        System.out.flush();
        t.join();
    }
}
