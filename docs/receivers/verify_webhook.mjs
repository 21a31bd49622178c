// Verify a Media Agency Listing API webhook delivery. Node >= 20, standard library only.
import { createHmac, timingSafeEqual } from "node:crypto";
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";

const TOLERANCE = 300; // seconds between the signing time and our clock, either way
const NONCE_WINDOW = 600; // a nonce seen within this many seconds is a replay
const EVENT_MEMORY = 86400; // how long accepted event ids are remembered
const nonces = new Map(), events = new Map(); // several instances: use Redis or a DB

/** Answer 401 (a test fire reports "Signature rejected"); `message` is the reason. */
export class Rejected extends Error {}

/**
 * Returns "accepted" (process it, then answer 2xx) or "duplicate" (answer 2xx, skip it).
 * secret: the endpoint's whsec_... string, or an array of them during a rotation.
 * headers: an object of header names (any case) to values. rawBody: a Buffer as received.
 */
export function verify(secret, headers, rawBody, now = Math.floor(Date.now() / 1000)) {
  const h = Object.fromEntries(Object.entries(headers).map(([k, v]) => [k.toLowerCase(), String(v).trim()]));
  const signature = h["x-webhook-signature"] || h["x-mediaagency-signature"];
  if (!signature) throw new Rejected("missing_signature");
  // One signature, or several during a secret rotation's overlap:
  // "sha256=<new>, sha256=<old>"; any one that verifies will do.
  const parts = signature.split(",").map((part) => part.replace(/^ +| +$/g, ""));
  if (parts.length > 4 || !parts.every((part) => /^sha256=[0-9a-f]{64}$/.test(part))) {
    throw new Rejected("malformed_signature");
  }
  const timestamp = h["x-webhook-timestamp"];
  if (!timestamp) throw new Rejected("missing_timestamp");
  if (!/^[0-9]{1,15}$/.test(timestamp)) throw new Rejected("malformed_timestamp");
  const tags = parts.map((part) => Buffer.from(part.slice(7), "hex"));
  const matches = (s) => {
    const expected = createHmac("sha256", s).update(`${timestamp}.`).update(rawBody).digest();
    return tags.some((tag) => timingSafeEqual(expected, tag));
  };
  if (![secret].flat().some(matches)) throw new Rejected("signature_mismatch");
  if (Math.abs(now - Number(timestamp)) > TOLERANCE) throw new Rejected("timestamp_out_of_tolerance");
  let envelope;
  try {
    envelope = JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(rawBody));
  } catch {
    throw new Rejected("malformed_body");
  }
  const { event_id: eventId, nonce } = envelope ?? {};
  if (typeof eventId !== "string" || typeof nonce !== "string" || !eventId || !nonce) {
    throw new Rejected("malformed_body");
  }
  if (!h["x-event-id"]) throw new Rejected("missing_event_id");
  if (h["x-event-id"] !== eventId) throw new Rejected("event_id_mismatch");
  for (const [memory, keep] of [[nonces, NONCE_WINDOW], [events, EVENT_MEMORY]]) {
    for (const [key, seen] of memory) if (now - seen > keep) memory.delete(key);
  }
  if (nonces.has(nonce)) throw new Rejected("nonce_replayed");
  nonces.set(nonce, now);
  if (events.has(eventId)) return "duplicate";
  events.set(eventId, now); // if processing then fails, events.delete(eventId)
  return "accepted";
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  // Test entry point: one JSON object on stdin, one JSON verdict line on stdout.
  const request = JSON.parse(readFileSync(0, "utf8"));
  try {
    const body = Buffer.from(request.body_base64, "base64");
    const verdict = verify(request.secret, request.headers, body, request.now ?? undefined);
    console.log(JSON.stringify({ verdict, reason: verdict }));
  } catch (error) {
    if (!(error instanceof Rejected)) throw error;
    console.log(JSON.stringify({ verdict: "rejected", reason: error.message }));
  }
}
