// Java's HttpClient through an explicit proxy, run with the source launcher:
//   java -Djdk.http.auth.tunneling.disabledSchemes= Get.java PROXY_HOST PROXY_PORT ID CA_PEM
//        URL TOKEN [URL TOKEN ...]
// Each URL is fetched with a client of its own whose Authenticator answers with TOKEN (one JVM
// for every case: starting one costs seconds), each result after a line "== URL".
// The proxy credentials come from an Authenticator, which HttpClient consults only after a
// 407 challenge (it never sends them first). For https:// (a CONNECT tunnel) Basic is disabled
// by default (jdk.http.auth.tunneling.disabledSchemes=Basic); the empty value enables it.
// Prints the status code and body; on an exception, the exception. Exit 0 only when every
// URL answered 200.
import java.io.FileInputStream;
import java.net.Authenticator;
import java.net.InetSocketAddress;
import java.net.PasswordAuthentication;
import java.net.ProxySelector;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.security.KeyStore;
import java.security.cert.CertificateFactory;
import java.time.Duration;
import javax.net.ssl.SSLContext;
import javax.net.ssl.TrustManagerFactory;

public class Get {
  public static void main(String[] args) throws Exception {
    KeyStore roots = KeyStore.getInstance(KeyStore.getDefaultType());
    roots.load(null, null);
    try (FileInputStream in = new FileInputStream(args[3])) {
      roots.setCertificateEntry("origin", CertificateFactory.getInstance("X.509").generateCertificate(in));
    }
    TrustManagerFactory tmf = TrustManagerFactory.getInstance(TrustManagerFactory.getDefaultAlgorithm());
    tmf.init(roots);
    SSLContext tls = SSLContext.getInstance("TLS");
    tls.init(null, tmf.getTrustManagers(), null);
    boolean all = true;
    for (int i = 4; i + 1 < args.length; i += 2) {
      System.out.println("== " + args[i]);
      all &= get(tls, args[0], Integer.parseInt(args[1]), args[2], args[i + 1], args[i]);
    }
    System.exit(all ? 0 : 1);
  }

  static boolean get(SSLContext tls, String proxyHost, int proxyPort, String id, String token,
                     String url) {
    HttpClient client = HttpClient.newBuilder()
        .proxy(ProxySelector.of(new InetSocketAddress(proxyHost, proxyPort)))
        .authenticator(new Authenticator() {
          @Override
          protected PasswordAuthentication getPasswordAuthentication() {
            if (getRequestorType() != RequestorType.PROXY) return null;
            return new PasswordAuthentication(id, token.toCharArray());
          }
        })
        .sslContext(tls)
        .connectTimeout(Duration.ofSeconds(10))
        .build();
    HttpRequest request = HttpRequest.newBuilder(URI.create(url)).timeout(Duration.ofSeconds(10)).build();
    try {
      HttpResponse<String> response = client.send(request, HttpResponse.BodyHandlers.ofString());
      System.out.println("status " + response.statusCode());
      response.headers().firstValue("x-sandgate-error").ifPresent(v -> System.out.println("x-sandgate-error " + v));
      System.out.println(response.body());
      return response.statusCode() == 200;
    } catch (Exception e) {
      System.out.println(e);
      return false;
    }
  }
}
