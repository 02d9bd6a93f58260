// Fixture for the attach tests: warms one method up until the JIT compiles it, says
// "ready", then keeps it hot until stdin closes or the test kills it.
public class HotLoop {
    static long churn(int n) {
        long s = 0;
        for (int i = 0; i < n; i++) {
            s += (i * 31L) ^ (s >>> 3);
        }
        return s;
    }

    public static void main(String[] args) throws Exception {
        long sink = 0;
        long warmUntil = System.nanoTime() + 300_000_000L;
        while (System.nanoTime() < warmUntil) {
            sink += churn(10_000);
        }
        System.out.println("ready " + (sink & 1));
        System.out.flush();
        while (true) {
            sink += churn(100_000);
            if (System.in.available() < 0) {
                break;
            }
        }
    }
}
