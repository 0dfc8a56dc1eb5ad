# Python requests through an explicit proxy (credentials in the proxy URL), as most Python
# programs use it. Prints the status code and reason phrase, then raise_for_status()'s
# message or the exception (a refused CONNECT is a ProxyError). Exit 0 only on a 200.
# usage: get_requests.py URL PROXY_URL CA_PEM
import sys

import requests

url, proxy, ca = sys.argv[1:4]
try:
    r = requests.get(url, proxies={"http": proxy, "https": proxy}, verify=ca, timeout=10)
    print(r.status_code, r.reason)
    print(r.text, end="")
    r.raise_for_status()
except Exception as e:  # what the program would show its user
    print(f"error: {e}", file=sys.stderr)
    sys.exit(1)
