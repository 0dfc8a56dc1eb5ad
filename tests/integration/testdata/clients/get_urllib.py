# Python's urllib through an explicit proxy: a ProxyHandler with credentials in the proxy URL
# (it sends them as Proxy-Authorization: Basic). Prints the body, or the error as urllib
# reports it (HTTPError: "HTTP Error 403: <reason>"; a refused CONNECT: "Tunnel connection
# failed: 403 <reason>"). Exit 0 only on a 200.
# usage: get_urllib.py URL PROXY_URL CA_PEM
import ssl
import sys
import urllib.request

url, proxy, ca = sys.argv[1:4]
opener = urllib.request.build_opener(
    urllib.request.ProxyHandler({"http": proxy, "https": proxy}),
    urllib.request.HTTPSHandler(context=ssl.create_default_context(cafile=ca)))
try:
    with opener.open(url, timeout=10) as r:
        print(r.status, r.reason)
        sys.stdout.write(r.read().decode())
except Exception as e:
    print(f"error: {e}", file=sys.stderr)
    sys.exit(1)
