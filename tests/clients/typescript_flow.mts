// A client's first afternoon, through the TypeScript client generated from
// the service's own OpenAPI document (openapi-typescript's types, driven by
// openapi-fetch): create a listing, read it, page the list, register a
// webhook endpoint, upload a photo and follow its progress to the end,
// cancel the listing. Type-checked with tsc against the generated types,
// then run with tsx. Prints one JSON object of what it saw; any surprise
// throws (a non-zero exit).
//
// usage: tsx typescript_flow.mts BASE_URL API_KEY OWNER_ID AGENT_ID RECEIVER_URL PHOTO
// (the generated `api.d.ts` beside it)

import { readFileSync } from "node:fs";
import { randomUUID } from "node:crypto";
import createClient from "openapi-fetch";
import type { paths } from "./api.d.ts";

const [baseUrl, key, owner, agent, receiverUrl, photo] = process.argv.slice(2);
const client = createClient<paths>({
  baseUrl,
  headers: { "X-API-Key": key },
});
const seen: Record<string, unknown> = {};

function expectStatus(response: Response, status: number, error: unknown): void {
  if (response.status !== status) {
    throw new Error(`${status} expected, got ${response.status}: ${JSON.stringify(error)}`);
  }
}

const created: string[] = [];
for (const address of ["1 Typed Lane", "2 Typed Lane"]) {
  const { data, error, response } = await client.POST("/api/v1/listings", {
    params: { header: { "X-Idempotency-Key": randomUUID() } },
    body: { address, owner_user_id: owner, agent_one_id: agent },
  });
  expectStatus(response, 201, error);
  created.push(data!.listing_number);
}
const number = created[0];

{
  const { data, error, response } = await client.GET("/api/v1/listings/{listing_number}", {
    params: { path: { listing_number: number } },
  });
  expectStatus(response, 200, error);
  if (data!.address !== "1 Typed Lane") throw new Error(`read ${JSON.stringify(data)}`);
  seen.read_status = data!.status;
}

const paged: string[] = [];
let cursor: string | undefined;
for (;;) {
  const { data, error, response } = await client.GET("/api/v1/listings", {
    params: { query: { limit: 1, cursor } },
  });
  expectStatus(response, 200, error);
  paged.push(...data!.items.map((item) => item.listing_number));
  if (!data!.next_cursor) break;
  cursor = data!.next_cursor;
}
if ([...paged].sort().join() !== [...created].sort().join()) {
  throw new Error(`paged ${paged}`);
}
seen.paged = paged.length;

{
  const { data, error, response } = await client.POST("/api/v1/webhooks/endpoints", {
    params: { header: { "X-Idempotency-Key": randomUUID() } },
    body: { url: receiverUrl, event_types: ["listing.cancelled"] },
  });
  expectStatus(response, 201, error);
  if (!data!.secret) throw new Error("no signing secret");
  seen.endpoint = data!.id;
}

let operation: string;
{
  const form = new FormData();
  form.append("files", new Blob([readFileSync(photo)], { type: "image/jpeg" }), "front.jpg");
  const { data, error, response } = await client.POST("/api/v1/listings/{listing_number}/media", {
    params: {
      path: { listing_number: number },
      header: { "X-Idempotency-Key": randomUUID() },
    },
    // The generated body type describes the parts; the wire form is FormData.
    body: { files: [] },
    bodySerializer: () => form,
  });
  expectStatus(response, 200, error);
  operation = data!.operation_id;
}

{
  const response = await fetch(`${baseUrl}/api/v1/progress/${operation}`, {
    headers: { "X-API-Key": key, Accept: "text/event-stream" },
  });
  if (response.status !== 200 || !response.body) throw new Error(`progress ${response.status}`);
  const events: string[] = [];
  const decoder = new TextDecoder();
  let buffer = "";
  let name = "";
  let done = false;
  for await (const chunk of response.body) {
    buffer += decoder.decode(chunk, { stream: true });
    let end: number;
    while ((end = buffer.indexOf("\n")) >= 0) {
      const line = buffer.slice(0, end).replace(/\r$/, "");
      buffer = buffer.slice(end + 1);
      if (line.startsWith("event:")) name = line.slice(6).trim();
      if (line.startsWith("data:") && name) {
        events.push(name);
        if (name === "completed") {
          const state = JSON.parse(line.slice(5));
          if (state.operation.status !== "completed") throw new Error(line);
          done = true;
        }
      }
    }
    if (done) break;
  }
  if (!done) throw new Error(`progress ended early: ${events}`);
  seen.progress = events;
}

{
  const { data, error, response } = await client.POST("/api/v1/listings/{listing_number}/cancel", {
    params: {
      path: { listing_number: number },
      header: { "X-Idempotency-Key": randomUUID() },
    },
  });
  expectStatus(response, 200, error);
  if (data!.status !== "Cancelled") throw new Error(JSON.stringify(data));
  seen.cancelled = data!.status;
}

console.log(JSON.stringify(seen));
