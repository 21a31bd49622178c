"""Uploads files to /api/v1/uploads with tuspy, unmodified, resuming after
every dropped connection from the server's offset (a new uploader on the
upload's URL asks for it), with sha1 checksums on every chunk.

    tus_upload.py ENDPOINT KEY LISTING_NUMBER BATCH_ID CHUNK_BYTES FILE...

Prints one JSON line per file: its name, upload URL and how many times the
link dropped under it."""

import json
import sys
import time

from tusclient import client

endpoint, key, listing, batch, chunk = sys.argv[1:6]
files = sys.argv[6:]
tus = client.TusClient(endpoint, headers={"X-API-Key": key})

for path in files:
    name = path.rsplit("/", 1)[-1]
    metadata = {"filename": name, "filetype": "image/jpeg", "listing_number": listing, "batch_id": batch}
    uploader = tus.uploader(path, chunk_size=int(chunk), metadata=metadata, upload_checksum=True)
    drops = 0
    while True:
        try:
            uploader.upload()
            break
        except Exception as err:  # the link dropped: resume from the server's offset
            drops += 1
            if drops > 200:
                raise
            time.sleep(0.05)
            url = uploader.url
            uploader = tus.uploader(path, chunk_size=int(chunk), metadata=metadata, upload_checksum=True, url=url)
    print(json.dumps({"file": name, "url": uploader.url, "drops": drops}), flush=True)
