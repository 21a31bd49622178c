"""Verify a Media Agency Listing API webhook delivery. Python 3, standard library only."""
import base64, hashlib, hmac, json, re, sys, threading, time

TOLERANCE = 300         # seconds between the signing time and our clock, either way
NONCE_WINDOW = 600      # a nonce seen within this many seconds is a replay
EVENT_MEMORY = 86400    # how long accepted event ids are remembered
_nonces, _events, _lock = {}, {}, threading.Lock()  # several instances: use Redis or a DB


class Rejected(Exception):
    """Answer 401 (a test fire reports "Signature rejected"); str(error) is the reason."""


def verify(secret, headers, raw_body, now=None):
    """Return "accepted" (process it, then answer 2xx) or "duplicate" (answer 2xx, skip it).

    secret: the endpoint's whsec_... string, or a list of them during a rotation.
    headers: any mapping of header names (any case) to values. raw_body: bytes as received.
    """
    now = int(time.time()) if now is None else now
    h = {name.lower(): str(value).strip() for name, value in headers.items()}
    signature = h.get("x-webhook-signature") or h.get("x-mediaagency-signature")
    if not signature:
        raise Rejected("missing_signature")
    # One signature, or several during a secret rotation's overlap:
    # "sha256=<new>, sha256=<old>"; any one that verifies will do.
    given = [part.strip(" ") for part in signature.split(",")]
    if len(given) > 4 or not all(re.fullmatch(r"sha256=[0-9a-f]{64}", g) for g in given):
        raise Rejected("malformed_signature")
    timestamp = h.get("x-webhook-timestamp")
    if not timestamp:
        raise Rejected("missing_timestamp")
    if not re.fullmatch(r"[0-9]{1,15}", timestamp):
        raise Rejected("malformed_timestamp")
    signed = timestamp.encode() + b"." + raw_body
    secrets = [secret] if isinstance(secret, str) else secret
    expected = [hmac.new(s.encode(), signed, hashlib.sha256).hexdigest() for s in secrets]
    if not any(hmac.compare_digest(g[7:], e) for g in given for e in expected):
        raise Rejected("signature_mismatch")
    if abs(now - int(timestamp)) > TOLERANCE:
        raise Rejected("timestamp_out_of_tolerance")
    try:
        envelope = json.loads(raw_body.decode("utf-8"))
        event_id, nonce = envelope.get("event_id"), envelope.get("nonce")
    except (ValueError, AttributeError):  # not UTF-8, not JSON, not an object
        raise Rejected("malformed_body") from None
    if not (isinstance(event_id, str) and isinstance(nonce, str) and event_id and nonce):
        raise Rejected("malformed_body")
    if not h.get("x-event-id"):
        raise Rejected("missing_event_id")
    if h["x-event-id"] != event_id:
        raise Rejected("event_id_mismatch")
    with _lock:
        for memory, keep in ((_nonces, NONCE_WINDOW), (_events, EVENT_MEMORY)):
            for key in [k for k, seen in memory.items() if now - seen > keep]:
                del memory[key]
        if nonce in _nonces:
            raise Rejected("nonce_replayed")
        _nonces[nonce] = now
        if event_id in _events:
            return "duplicate"
        _events[event_id] = now  # if processing then fails, del _events[event_id]
        return "accepted"


if __name__ == "__main__":
    # Test entry point: one JSON object on stdin, one JSON verdict line on stdout.
    request = json.load(sys.stdin)
    try:
        body = base64.b64decode(request["body_base64"])
        verdict = verify(request["secret"], request["headers"], body, request.get("now"))
        print(json.dumps({"verdict": verdict, "reason": verdict}))
    except Rejected as rejection:
        print(json.dumps({"verdict": "rejected", "reason": str(rejection)}))
