// Uploads files to /api/v1/uploads with tus-js-client, unmodified: its own
// retries resume every dropped connection from the server's offset (HEAD).
//
//   node tus_upload.mjs ENDPOINT KEY LISTING_NUMBER BATCH_ID CHUNK_BYTES FILE...
//
// Prints one JSON line per file: its name, upload URL and media item.
import { readFileSync } from "node:fs";
import { basename } from "node:path";
import * as tus from "tus-js-client";

const [endpoint, key, listing, batch, chunk, ...files] = process.argv.slice(2);

for (const path of files) {
  const name = basename(path);
  const result = await new Promise((resolve, reject) => {
    let mediaId = null;
    const upload = new tus.Upload(readFileSync(path), {
      endpoint,
      headers: { "X-API-Key": key },
      chunkSize: Number(chunk),
      retryDelays: Array(200).fill(50),
      metadata: { filename: name, filetype: "image/jpeg", listing_number: listing, batch_id: batch },
      onAfterResponse: (_request, response) => {
        mediaId = response.getHeader("Upload-Media-Id") || mediaId;
      },
      onError: reject,
      onSuccess: () => resolve({ file: name, url: upload.url, media_id: mediaId }),
    });
    upload.start();
  });
  console.log(JSON.stringify(result));
}
