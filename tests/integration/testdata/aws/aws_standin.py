#!/usr/bin/python3
"""A stand-in for the AWS endpoints the AWS tests call (STS, S3, Secrets Manager), over HTTPS.

  aws_standin.py LOG CERT KEY ADDRESS:PORT KEYS_JSON

Like AWS, it refuses every request whose SigV4 signature it cannot verify with the secret of
the key id the request names: KEYS_JSON maps each key id it knows to {"secret": ...,
"token": ...} ("token": the session token the request must carry, for temporary keys). The
expected signature is computed by botocore (Debian's python3-botocore), not by sandgate's
code, from the request as it arrived: the fields the Authorization lists, the path and query as
sent, and the body's SHA-256 unless x-amz-content-sha256 declares the payload.

Refusals are AWS's, in AWS's shape: an unknown key id (a placeholder) is InvalidClientTokenId
(STS, Secrets Manager) or InvalidAccessKeyId (S3), a wrong signature SignatureDoesNotMatch.
Like S3, those error bodies echo what the request named (the key id, the string to sign): a
hostile echo for sandgate's redactor. GET /echo-auth on S3 echoes the request's Authorization
and X-Amz-Security-Token outright.

An S3 upload signed chunk by chunk (STREAMING-AWS4-HMAC-SHA256-PAYLOAD[-TRAILER]) has each
chunk's signature verified in turn, chained from the request's, and the trailer's, and its
CRC32 checksum trailer checked against the data (decode_aws_chunked), as S3 does.

Every request is logged to LOG as one JSON line: method, host, path, key id, verdict.
"""
import base64
import datetime
import hashlib
import hmac
import http.server
import json
import socketserver
import ssl
import sys
import threading
import urllib.parse
import uuid
import zlib

from botocore.auth import S3SigV4Auth, SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

LOG_LOCK = threading.Lock()
STATE_LOCK = threading.Lock()
OBJECTS = {}  # (bucket, key) -> bytes
UPLOADS = {}  # upload id -> {part number: bytes}
KEYS = {}
API_TOKEN = "tok-from-secrets-manager-e2e"
WEB_IDENTITY_TOKEN = "eyJhbGciOiJSUzI1NiJ9.e2e-projected-service-account-token.sig"
# What GetSecretValue answers, by SecretId.
SECRETS = {"db": "the-stored-secret", "api-token": json.dumps({"token": API_TOKEN, "user": "svc"})}


def log(entry):
    with LOG_LOCK, open(sys.argv[1], "a") as f:
        f.write(json.dumps(entry) + "\n")


def parse_authorization(value):
    """{'key_id', 'date', 'region', 'service', 'signed', 'signature'} or None."""
    if not value.startswith("AWS4-HMAC-SHA256 "):
        return None
    parts = {}
    for item in value[len("AWS4-HMAC-SHA256 "):].split(","):
        name, _, v = item.strip().partition("=")
        parts[name] = v
    try:
        key_id, date, region, service, terminal = parts["Credential"].split("/")
        if terminal != "aws4_request":
            return None
        return {"key_id": key_id, "date": date, "region": region, "service": service,
                "signed": parts["SignedHeaders"].split(";"), "signature": parts["Signature"]}
    except (KeyError, ValueError):
        return None


def expected_signature(handler, auth, body, secret):
    """The signature botocore computes for the request as it arrived, and its string to sign."""
    headers = {}
    for name in auth["signed"]:
        values = handler.headers.get_all(name)
        if values is None:
            return None, ""
        headers[name] = ",".join(values)
    creds = Credentials(auth["key_id"], secret)
    signer = (S3SigV4Auth if auth["service"] == "s3" else SigV4Auth)(
        creds, auth["service"], auth["region"])
    request = AWSRequest(method=handler.command, url="https://" + headers.get(
        "host", handler.headers.get("Host", "")) + handler.path, headers={}, data=body)
    # Only the fields the client signed, as it sent them (botocore signs every field it holds).
    request.headers = type(request.headers)()
    for name, value in headers.items():
        request.headers[name] = value
    request.context["timestamp"] = handler.headers.get("X-Amz-Date", "")
    canonical = signer.canonical_request(request)
    string_to_sign = signer.string_to_sign(request, canonical)
    return signer.signature(string_to_sign, request), string_to_sign


def decode_aws_chunked(handler, auth, body, secret):
    """The data of an upload signed chunk by chunk, or None when a chunk's signature (chained
    from the request's) or the trailer's does not verify with `secret`, the framing is not
    aws-chunked's, or the data is not x-amz-decoded-content-length long or not the checksum the
    trailer names."""
    def hmac_hex(text):
        return hmac.new(key, text.encode(), hashlib.sha256).hexdigest()
    key = ("AWS4" + secret).encode()
    for part in (auth["date"], auth["region"], auth["service"], "aws4_request"):
        key = hmac.new(key, part.encode(), hashlib.sha256).digest()
    scope = f"{auth['date']}/{auth['region']}/{auth['service']}/aws4_request"
    amz_date = handler.headers.get("X-Amz-Date", "")
    previous, data, at = auth["signature"], b"", 0
    try:
        while True:
            end = body.index(b"\r\n", at)
            size_hex, _, signature = body[at:end].decode().partition(";chunk-signature=")
            size = int(size_hex, 16)
            chunk = body[end + 2:end + 2 + size]
            expected = hmac_hex("\n".join(["AWS4-HMAC-SHA256-PAYLOAD", amz_date, scope, previous,
                                           hashlib.sha256(b"").hexdigest(),
                                           hashlib.sha256(chunk).hexdigest()]))
            if len(chunk) != size or signature != expected:
                return None
            previous, at = signature, end + 2 + size
            if size == 0:
                break
            if body[at:at + 2] != b"\r\n":
                return None
            data, at = data + chunk, at + 2
    except ValueError:
        return None
    rest = body[at:].decode(errors="replace")
    if handler.headers.get("x-amz-content-sha256", "").endswith("-TRAILER"):
        lines = rest.split("\r\n")
        if lines[-2:] != ["", ""] or len(lines) != 4:
            return None
        checksum, signature = lines[0], lines[1].partition(":")[2]
        expected = hmac_hex("\n".join(["AWS4-HMAC-SHA256-TRAILER", amz_date, scope, previous,
                                       hashlib.sha256((checksum + "\n").encode()).hexdigest()]))
        crc = base64.b64encode(zlib.crc32(data).to_bytes(4, "big")).decode()
        if signature != expected or checksum != "x-amz-checksum-crc32:" + crc:
            return None
    elif rest != "\r\n":
        return None
    if len(data) != int(handler.headers.get("x-amz-decoded-content-length", "-1")):
        return None
    return data


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def host(self):
        return self.headers.get("Host", "").split(":")[0]

    def reply(self, status, body, content_type="application/xml", extra=()):
        data = body.encode() if isinstance(body, str) else body
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.send_header("x-amzn-RequestId", str(uuid.uuid4()))
        for name, value in extra:
            self.send_header(name, value)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    service = ""  # the signature's service (the error bodies' shape)

    def error(self, status, code, message, echo=()):
        if self.service == "s3":
            fields = "".join(f"<{k}>{v}</{k}>" for k, v in echo)
            body = (f"<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>{code}</Code>"
                    f"<Message>{message}</Message>{fields}<RequestId>1</RequestId></Error>")
            self.reply(status, body)
        elif self.service == "sts":
            body = (f"<ErrorResponse><Error><Type>Sender</Type><Code>{code}</Code>"
                    f"<Message>{message}</Message></Error><RequestId>1</RequestId>"
                    f"</ErrorResponse>")
            self.reply(status, body)
        else:
            self.reply(status, json.dumps({"__type": code, "message": message}),
                       "application/x-amz-json-1.1")

    def body(self):
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            data = b""
            while True:
                size = int(self.rfile.readline().split(b";")[0], 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b""):
                        pass
                    return data
                data += self.rfile.read(size)
                self.rfile.readline()
        return self.rfile.read(int(self.headers.get("Content-Length", "0")))

    def handle_any(self):
        body = self.body()
        entry = {"method": self.command, "host": self.host(), "path": self.path}
        if self.host() == "api.internal.test":
            # Not AWS: an internal API whose bearer token is kept in Secrets Manager.
            good = self.headers.get("Authorization") == "Bearer " + API_TOKEN
            entry["verdict"] = "ok" if good else "bad_token"
            log(entry)
            return self.reply(200 if good else 401, "hello from the internal api\n" if good
                              else "who are you?\n", "text/plain")
        auth = parse_authorization(self.headers.get("Authorization", ""))
        form = urllib.parse.parse_qs(body.decode(errors="replace"))
        if auth is None and form.get("Action") == ["AssumeRoleWithWebIdentity"]:
            # Unsigned, as STS takes it: the OIDC token is the proof.
            good = form.get("WebIdentityToken") == [WEB_IDENTITY_TOKEN]
            entry["verdict"] = "web_identity" if good else "bad_web_identity"
            entry["session"] = form.get("RoleSessionName", [""])[0]
            log(entry)
            self.service = "sts"
            if not good:
                return self.error(400, "InvalidIdentityToken", "Couldn't verify the token")
            return self.assumed("AssumeRoleWithWebIdentity", "ASIASANDGATEWEBIDENT")
        if auth is None:
            entry["verdict"] = "unsigned"
            log(entry)
            return self.error(403, "MissingAuthenticationToken",
                              "Request is missing Authentication Token")
        entry["key_id"] = auth["key_id"]
        self.service = auth["service"]
        key = KEYS.get(auth["key_id"])
        if key is None:
            entry["verdict"] = "unknown_key"
            log(entry)
            code = "InvalidAccessKeyId" if auth["service"] == "s3" else "InvalidClientTokenId"
            return self.error(403, code, "The security token included in the request is invalid.",
                              [("AWSAccessKeyId", auth["key_id"])])
        if key.get("token") and self.headers.get("X-Amz-Security-Token") != key["token"]:
            entry["verdict"] = "bad_token"
            log(entry)
            return self.error(403, "InvalidToken", "The provided token is malformed or otherwise "
                              "invalid.")
        if "x-amz-security-token" in auth["signed"] and not key.get("token"):
            entry["verdict"] = "unexpected_token"
            log(entry)
            return self.error(403, "InvalidToken", "A long-term key carries no session token.")
        signature, string_to_sign = expected_signature(self, auth, body, key["secret"])
        if signature != auth["signature"]:
            entry["verdict"] = "bad_signature"
            log(entry)
            return self.error(403, "SignatureDoesNotMatch",
                              "The request signature we calculated does not match the signature "
                              "you provided.",
                              [("AWSAccessKeyId", auth["key_id"]),
                               ("StringToSign", string_to_sign),
                               ("SignatureProvided", auth["signature"])])
        if self.headers.get("x-amz-content-sha256", "").startswith(
                "STREAMING-AWS4-HMAC-SHA256-PAYLOAD"):
            body = decode_aws_chunked(self, auth, body, key["secret"])
            if body is None:
                entry["verdict"] = "bad_chunk_signature"
                log(entry)
                return self.error(403, "SignatureDoesNotMatch",
                                  "The request signature we calculated does not match the "
                                  "signature you provided.")
            entry["chunked"] = True
        if form.get("Action") == ["AssumeRole"]:
            entry["session"] = form.get("RoleSessionName", [""])[0]
        entry["verdict"] = "ok"
        entry["bytes"] = len(body)
        entry["body_head"] = body[:60].decode(errors="replace")
        log(entry)
        if auth["service"] == "sts":
            return self.sts(body)
        if auth["service"] == "secretsmanager":
            return self.secrets_manager(body)
        return self.s3(body)

    def assumed(self, action, key_id):
        expires = (datetime.datetime.utcnow() + datetime.timedelta(hours=1)).strftime(
            "%Y-%m-%dT%H:%M:%SZ")
        key = KEYS[key_id]
        self.reply(200, f"<{action}Response xmlns=\"https://sts.amazonaws.com/doc/2011-06-15/\">"
                   f"<{action}Result><Credentials><AccessKeyId>{key_id}</AccessKeyId>"
                   f"<SecretAccessKey>{key['secret']}</SecretAccessKey>"
                   f"<SessionToken>{key['token']}</SessionToken>"
                   f"<Expiration>{expires}</Expiration></Credentials>"
                   f"<AssumedRoleUser><Arn>arn:aws:sts::123456789012:assumed-role/agents/s</Arn>"
                   f"</AssumedRoleUser></{action}Result></{action}Response>", "text/xml")

    def sts(self, body):
        form = urllib.parse.parse_qs(body.decode())
        if form.get("Action") == ["AssumeRole"]:
            return self.assumed("AssumeRole", "ASIASANDGATEASSUMED")
        if form.get("Action") != ["GetCallerIdentity"]:
            return self.error(400, "InvalidAction", "Could not find operation")
        self.reply(200, "<GetCallerIdentityResponse xmlns=\"https://sts.amazonaws.com/doc/"
                   "2011-06-15/\"><GetCallerIdentityResult>"
                   "<Arn>arn:aws:iam::123456789012:user/sandgate-test</Arn>"
                   "<UserId>AIDASANDGATETESTUSER</UserId><Account>123456789012</Account>"
                   "</GetCallerIdentityResult><ResponseMetadata><RequestId>1</RequestId>"
                   "</ResponseMetadata></GetCallerIdentityResponse>", "text/xml")

    def secrets_manager(self, body):
        if self.headers.get("X-Amz-Target") != "secretsmanager.GetSecretValue":
            return self.error(400, "UnknownOperationException", "unknown operation")
        request = json.loads(body or b"{}")
        if request.get("SecretId") not in SECRETS:
            return self.error(400, "ResourceNotFoundException",
                              "Secrets Manager can't find the specified secret.")
        self.reply(200, json.dumps({
            "ARN": "arn:aws:secretsmanager:us-east-1:123456789012:secret:" + request["SecretId"],
            "Name": request["SecretId"], "SecretString": SECRETS[request["SecretId"]],
            "VersionId": "v1", "VersionStages": ["AWSCURRENT"], "CreatedDate": 1700000000}),
            "application/x-amz-json-1.1")

    def s3(self, body):
        url = urllib.parse.urlsplit(self.path)
        query = urllib.parse.parse_qs(url.query, keep_blank_values=True)
        host = self.host()
        if host.startswith("s3.") or not host.count("."):  # path style: /bucket/key
            bucket, _, key = url.path.lstrip("/").partition("/")
        else:  # virtual host style: bucket.s3.region.amazonaws.com/key
            bucket, key = host.split(".s3.")[0], url.path.lstrip("/")
        key = urllib.parse.unquote(key)
        if url.path == "/echo-auth":
            return self.reply(200, json.dumps({
                "authorization": self.headers.get("Authorization", ""),
                "token": self.headers.get("X-Amz-Security-Token", "")}), "application/json")
        if self.command == "PUT" and "uploadId" in query:
            with STATE_LOCK:
                UPLOADS[query["uploadId"][0]][int(query["partNumber"][0])] = body
            return self.reply(200, b"", extra=[("ETag", '"%s"' % hashlib.md5(body).hexdigest())])
        if self.command == "PUT":
            with STATE_LOCK:
                OBJECTS[(bucket, key)] = body
            return self.reply(200, b"", extra=[("ETag", '"%s"' % hashlib.md5(body).hexdigest())])
        if self.command == "POST" and "uploads" in query:
            upload = uuid.uuid4().hex
            with STATE_LOCK:
                UPLOADS[upload] = {}
            return self.reply(200, f"<InitiateMultipartUploadResult><Bucket>{bucket}</Bucket>"
                              f"<Key>{key}</Key><UploadId>{upload}</UploadId>"
                              f"</InitiateMultipartUploadResult>")
        if self.command == "POST" and "uploadId" in query:
            with STATE_LOCK:
                parts = UPLOADS.pop(query["uploadId"][0])
                OBJECTS[(bucket, key)] = b"".join(parts[n] for n in sorted(parts))
            return self.reply(200, f"<CompleteMultipartUploadResult><Bucket>{bucket}</Bucket>"
                              f"<Key>{key}</Key><ETag>\"multi\"</ETag>"
                              f"</CompleteMultipartUploadResult>")
        if self.command in ("GET", "HEAD") and key:
            with STATE_LOCK:
                data = OBJECTS.get((bucket, key))
            if data is None:
                return self.error(404, "NoSuchKey", "The specified key does not exist.")
            stamp = datetime.datetime(2026, 1, 1).strftime("%a, %d %b %Y %H:%M:%S GMT")
            size = len(data)
            ranged = self.headers.get("Range", "")
            if ranged.startswith("bytes="):  # "bytes=FIRST-LAST", as the CLI asks for parts
                first, _, last = ranged[6:].partition("-")
                first, last = int(first), min(int(last or size - 1), size - 1)
                data = data[first:last + 1]
                self.send_response(206)
                self.send_header("Content-Range", f"bytes {first}-{last}/{size}")
            else:
                self.send_response(200)
            self.send_header("Content-Type", "binary/octet-stream")
            self.send_header("Content-Length", str(len(data)))
            self.send_header("ETag", '"%s"' % hashlib.md5(data).hexdigest())
            self.send_header("Last-Modified", stamp)
            self.end_headers()
            if self.command == "GET":
                self.wfile.write(data)
            return None
        return self.error(400, "NotImplemented", "not in this stand-in")

    do_GET = do_PUT = do_POST = do_HEAD = do_DELETE = handle_any


class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def server_bind(self):
        # HTTPServer's own looks up the address's name, which the test internet cannot answer.
        socketserver.TCPServer.server_bind(self)
        self.server_name, self.server_port = self.server_address[:2]


def main():
    _, _, cert, key, listen, keys = sys.argv
    KEYS.update(json.load(open(keys)))
    address, port = listen.rsplit(":", 1)
    server = Server((address, int(port)), Handler)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    print("ready", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
