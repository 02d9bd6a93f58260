// Experiment workload (docs/experiments.md): RSA encryption and decryption with textbook
// BigInteger arithmetic, as in the Jalen Unit experiment, over one key length.
// The key is made from a fixed seed, so every run of one length does the same work; the
// messages too. Work per run: ROUNDS encrypt+decrypt pairs.
//   java Rsa <key bits> [rounds]
import java.math.BigInteger;
import java.util.Random;

public final class Rsa {
    static volatile BigInteger sink;

    static BigInteger[] key(int bits) {
        Random seeded = new Random(bits);
        BigInteger e = BigInteger.valueOf(65537);
        while (true) {
            BigInteger p = BigInteger.probablePrime(bits / 2, seeded);
            BigInteger q = BigInteger.probablePrime(bits - bits / 2, seeded);
            BigInteger phi = p.subtract(BigInteger.ONE).multiply(q.subtract(BigInteger.ONE));
            if (phi.gcd(e).equals(BigInteger.ONE)) {
                return new BigInteger[] {p.multiply(q), e, e.modInverse(phi)};
            }
        }
    }

    static BigInteger encrypt(BigInteger m, BigInteger n, BigInteger e) {
        return m.modPow(e, n);
    }

    static BigInteger decrypt(BigInteger c, BigInteger n, BigInteger d) {
        return c.modPow(d, n);
    }

    public static void main(String[] args) {
        int bits = Integer.parseInt(args[0]);
        int rounds = args.length > 1 ? Integer.parseInt(args[1]) : 64;
        BigInteger[] k = key(bits);
        Random messages = new Random(42);
        BigInteger acc = BigInteger.ZERO;
        for (int i = 0; i < rounds; i++) {
            BigInteger m = new BigInteger(k[0].bitLength() - 1, messages);
            BigInteger c = encrypt(m, k[0], k[1]);
            BigInteger back = decrypt(c, k[0], k[2]);
            if (!back.equals(m)) throw new AssertionError("RSA round trip failed at round " + i);
            acc = acc.xor(back);
        }
        sink = acc;
        System.out.println("rsa " + bits + " bits, " + rounds + " rounds");
    }
}
