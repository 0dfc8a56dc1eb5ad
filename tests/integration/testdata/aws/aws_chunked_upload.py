#!/usr/bin/python3
"""An S3 PutObject as the SDKs that sign chunk by chunk send it, for curl to send.

  aws_chunked_upload.py URL REGION HEADERS_OUT BODY_OUT [trailer] [broken]

Signs with the keys in AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (in a sandbox: its
placeholders) in the STREAMING-AWS4-HMAC-SHA256-PAYLOAD mode (-TRAILER, with a CRC32 checksum
trailer, when `trailer`): the request's signature covers the head; each 64 KiB chunk's chains
from the one before, the first from the request's. Writes the fields curl is to send (-H
@HEADERS_OUT) and the aws-chunked body (--data-binary @BODY_OUT). The data is 200,000 bytes,
each byte its offset modulo 251. `broken`: the second chunk's header has no signature.
"""
import base64
import datetime
import hashlib
import hmac
import os
import sys
import urllib.parse
import zlib

CHUNK = 64 * 1024
EMPTY = hashlib.sha256(b"").hexdigest()


def sign(key, text):
    return hmac.new(key, text.encode(), hashlib.sha256)


def main():
    url, region, headers_out, body_out = sys.argv[1:5]
    trailer = "trailer" in sys.argv[5:]
    broken = "broken" in sys.argv[5:]
    key_id, secret = os.environ["AWS_ACCESS_KEY_ID"], os.environ["AWS_SECRET_ACCESS_KEY"]
    data = bytes(i % 251 for i in range(200000))
    now = datetime.datetime.utcnow()
    amz_date, day = now.strftime("%Y%m%dT%H%M%SZ"), now.strftime("%Y%m%d")
    scope = f"{day}/{region}/s3/aws4_request"
    mode = "STREAMING-AWS4-HMAC-SHA256-PAYLOAD" + ("-TRAILER" if trailer else "")
    parts = urllib.parse.urlsplit(url)
    fields = {"content-encoding": "aws-chunked", "host": parts.netloc,
              "x-amz-content-sha256": mode, "x-amz-date": amz_date,
              "x-amz-decoded-content-length": str(len(data))}
    if trailer:
        fields["x-amz-trailer"] = "x-amz-checksum-crc32"
    names = sorted(fields)
    canonical = "\n".join(["PUT", parts.path, "", "".join(f"{n}:{fields[n]}\n" for n in names),
                           ";".join(names), mode])
    key = ("AWS4" + secret).encode()
    for part in (day, region, "s3", "aws4_request"):
        key = sign(key, part).digest()
    to_sign = "\n".join(["AWS4-HMAC-SHA256", amz_date, scope,
                         hashlib.sha256(canonical.encode()).hexdigest()])
    previous = sign(key, to_sign).hexdigest()
    authorization = (f"AWS4-HMAC-SHA256 Credential={key_id}/{scope}, "
                     f"SignedHeaders={';'.join(names)}, Signature={previous}")
    body = b""
    chunks = [data[i:i + CHUNK] for i in range(0, len(data), CHUNK)] + [b""]
    for n, chunk in enumerate(chunks):
        to_sign = "\n".join(["AWS4-HMAC-SHA256-PAYLOAD", amz_date, scope, previous, EMPTY,
                             hashlib.sha256(chunk).hexdigest()])
        previous = sign(key, to_sign).hexdigest()
        header = f"{len(chunk):x}" + ("" if broken and n == 1 else f";chunk-signature={previous}")
        body += header.encode() + b"\r\n" + chunk + (b"\r\n" if chunk else b"")
    if trailer:
        crc = base64.b64encode(zlib.crc32(data).to_bytes(4, "big")).decode()
        line = f"x-amz-checksum-crc32:{crc}"
        to_sign = "\n".join(["AWS4-HMAC-SHA256-TRAILER", amz_date, scope, previous,
                             hashlib.sha256((line + "\n").encode()).hexdigest()])
        body += f"{line}\r\nx-amz-trailer-signature:{sign(key, to_sign).hexdigest()}\r\n".encode()
    body += b"\r\n"
    with open(headers_out, "w") as f:
        for name in names:
            if name != "host":
                f.write(f"{name}: {fields[name]}\n")
        f.write(f"Authorization: {authorization}\n")
    with open(body_out, "wb") as f:
        f.write(body)


main()
