// Test fixture: a JVM whose attach socket never answers.
//   java SilentAttach <seconds>
// Before anything else it listens on /tmp/.java_pid<its pid>, mode 0600, as HotSpot's attach
// listener would, and never accepts: an attach client connects, sends its command and waits for
// a reply that never comes. A thread named "busy" keeps compiled code running meanwhile.
import java.net.StandardProtocolFamily;
import java.net.UnixDomainSocketAddress;
import java.nio.channels.ServerSocketChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;

public final class SilentAttach {
    static volatile long sink;

    static long mix(long x) {
        for (int i = 0; i < 10_000; i++) x = x * 6364136223846793005L + (x >>> 17) + i;
        return x;
    }

    public static void main(String[] args) throws Exception {
        double seconds = args.length > 0 ? Double.parseDouble(args[0]) : 30;
        long pid = ProcessHandle.current().pid();
        Path socket = Path.of("/tmp/.java_pid" + pid);
        Files.deleteIfExists(socket);
        ServerSocketChannel server = ServerSocketChannel.open(StandardProtocolFamily.UNIX);
        server.bind(UnixDomainSocketAddress.of(socket), 1);
        Files.setPosixFilePermissions(socket, PosixFilePermissions.fromString("rw-------"));
        socket.toFile().deleteOnExit();
        long until = System.nanoTime() + (long) (seconds * 1e9);
        Thread busy = new Thread(() -> {
            long x = 1;
            while (System.nanoTime() < until) x = mix(x);
            sink = x;
        }, "busy");
        busy.start();
        System.out.println("ready " + pid);
        busy.join();
        server.close();
    }
}
