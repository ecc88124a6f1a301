// DynamoDBLocalLoopback starts DynamoDB Local bound to one address (the
// system property snavio.bind, 127.0.0.1 by default) on a port the kernel
// picks, prints "listening <host> <port>" once it accepts connections, and
// stops when its standard input closes, so it never outlives the test
// process that started it. DynamoDB Local itself has no host flag.
import java.lang.reflect.Field;
import java.util.Arrays;
import org.eclipse.jetty.server.Connector;
import org.eclipse.jetty.server.Server;
import org.eclipse.jetty.server.ServerConnector;
import software.amazon.dynamodb.services.local.main.CommandLineInput;
import software.amazon.dynamodb.services.local.main.ServerRunner;
import software.amazon.dynamodb.services.local.server.DynamoDBProxyServer;

public final class DynamoDBLocalLoopback {
  public static void main(String[] args) throws Exception {
    String host = System.getProperty("snavio.bind", "127.0.0.1");
    // The parser insists on a port in 1..65535; the connector is re-bound
    // to port 0 below, before it listens.
    String[] full = Arrays.copyOf(args, args.length + 2);
    full[args.length] = "-port";
    full[args.length + 1] = "8000";
    CommandLineInput in = new CommandLineInput(full);
    if (!in.init()) {
      System.err.println("DynamoDBLocalLoopback: DynamoDB Local refused the arguments " + Arrays.toString(args));
      System.exit(2);
    }
    DynamoDBProxyServer proxy = ServerRunner.createServer(in);
    Field f = DynamoDBProxyServer.class.getDeclaredField("server");
    f.setAccessible(true);
    Server server = (Server) f.get(proxy);
    for (Connector c : server.getConnectors()) {
      ServerConnector sc = (ServerConnector) c;
      sc.setHost(host);
      sc.setPort(0);
    }
    proxy.start();
    int port = ((ServerConnector) server.getConnectors()[0]).getLocalPort();
    System.out.println("listening " + host + " " + port);
    System.out.flush();
    while (System.in.read() != -1) {
      // Wait for the parent to close the pipe (or die).
    }
    proxy.stop();
    System.exit(0);
  }
}
