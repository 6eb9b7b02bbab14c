# mmsctl-init: fetch this instance's assets from S3 with its role (IMDSv2), standard library only.
import datetime
import hashlib
import hmac
import json
import os
import sys
import time
import urllib.parse
import urllib.request
bucket, prefix, region, dest = sys.argv[1:5]
IMDS = os.environ.get("MMSCTL_IMDS_ENDPOINT") or "http://169.254.169.254"
S3 = os.environ.get("MMSCTL_S3_ENDPOINT")


def call(req, timeout=10):
    for attempt in range(6):
        try:
            return urllib.request.urlopen(req, timeout=timeout)
        except OSError as exc:
            if attempt == 5 or getattr(exc, "code", 500) in (400, 403, 404):
                raise
            time.sleep(2 ** attempt)


def creds():
    put = urllib.request.Request(IMDS + "/latest/api/token", method="PUT",
                                 headers={"X-aws-ec2-metadata-token-ttl-seconds": "21600"})
    head = {"X-aws-ec2-metadata-token": call(put).read().decode()}
    base = IMDS + "/latest/meta-data/iam/security-credentials/"
    role = call(urllib.request.Request(base, headers=head)).read().decode().split()[0]
    return json.loads(call(urllib.request.Request(base + role, headers=head)).read())


def get(c, bucket, key, out):
    path = "/" + urllib.parse.quote(key, safe="/~")
    if S3:
        base = S3.rstrip("/")
        host, path = urllib.parse.urlsplit(base).netloc, "/" + bucket + path
    else:
        host = bucket + ".s3." + region + ".amazonaws.com"
        base = "https://" + host
    amz = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    empty = hashlib.sha256(b"").hexdigest()
    h = {"host": host, "x-amz-content-sha256": empty, "x-amz-date": amz, "x-amz-security-token": c["Token"]}
    signed = ";".join(sorted(h))
    canonical = "\n".join(["GET", path, "", "".join(k + ":" + h[k] + "\n" for k in sorted(h)), signed, empty])
    scope = amz[:8] + "/" + region + "/s3/aws4_request"
    to_sign = "\n".join(["AWS4-HMAC-SHA256", amz, scope, hashlib.sha256(canonical.encode()).hexdigest()])
    key_ = ("AWS4" + c["SecretAccessKey"]).encode()
    for part in (amz[:8], region, "s3", "aws4_request"):
        key_ = hmac.new(key_, part.encode(), hashlib.sha256).digest()
    h["authorization"] = ("AWS4-HMAC-SHA256 Credential=" + c["AccessKeyId"] + "/" + scope + ", SignedHeaders="
                          + signed + ", Signature=" + hmac.new(key_, to_sign.encode(), hashlib.sha256).hexdigest())
    del h["host"]
    os.makedirs(os.path.dirname(out), exist_ok=True)
    digest = hashlib.sha256()
    with call(urllib.request.Request(base + path, headers=h), timeout=120) as r, open(out + ".part", "wb") as f:
        for block in iter(lambda: r.read(1 << 20), b""):
            f.write(block)
            digest.update(block)
    os.replace(out + ".part", out)
    return digest.hexdigest()


c = creds()
get(c, bucket, prefix + "manifest.json", os.path.join(dest, "manifest.json"))
manifest = json.load(open(os.path.join(dest, "manifest.json")))
for a in manifest["assets"]:
    if get(c, bucket, a["key"], os.path.join(dest, a["dest"])) != a["sha256"]:
        sys.exit("mmsctl-init: " + a["key"] + " does not match its sha256")
for s in manifest.get("s3", []):
    b, k = s["uri"][5:].split("/", 1)
    get(c, b, k, os.path.join(dest, s["dest"]))
print("mmsctl-init: fetched", len(manifest["assets"]) + len(manifest.get("s3", [])), "assets from s3://" + bucket + "/" + prefix)
