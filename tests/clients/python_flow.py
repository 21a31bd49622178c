"""A client's first afternoon, through the Python client generated from the
service's own OpenAPI document (openapi-python-client): create a listing,
read it, page the list, register a webhook endpoint, upload a photo and
follow its progress to the end, cancel the listing. Prints one JSON object of
what it saw; any surprise is an exception (a non-zero exit).

usage: python_flow.py BASE_URL API_KEY OWNER_ID AGENT_ID RECEIVER_URL PHOTO
"""

import json
import sys
import uuid

from listing_api_client import AuthenticatedClient
from listing_api_client.api.listings import (
    cancel_listing,
    create_listing,
    read_listing_single,
    read_listings_list,
)
from listing_api_client.api.media import upload_listing_media
from listing_api_client.api.webhooks import create_webhook_endpoint
from listing_api_client.models import (
    EndpointIn,
    ListingIn,
    UploadListingMediaBody,
)
from listing_api_client.types import UNSET, File


def idempotency_key() -> str:
    return str(uuid.uuid4())


def expect(response, status: int):
    if response.status_code != status:
        raise AssertionError(f"{status} expected, got {response.status_code}: {response.content!r}")
    return response.parsed


def main() -> None:
    base_url, key, owner, agent, receiver_url, photo = sys.argv[1:]
    client = AuthenticatedClient(base_url=base_url, token=key, timeout=60.0)
    seen = {}

    created = []
    for address in ("1 Generated Lane", "2 Generated Lane"):
        body = ListingIn(address=address, owner_user_id=owner, agent_one_id=agent)
        response = create_listing.sync_detailed(
            client=client, body=body, x_idempotency_key=idempotency_key()
        )
        created.append(expect(response, 201).listing_number)
    number = created[0]

    listing = expect(read_listing_single.sync_detailed(client=client, listing_number=number), 200)
    assert listing.listing_number == number and listing.address == "1 Generated Lane", listing
    seen["read_status"] = listing.status

    numbers, cursor = [], None
    while True:
        page = expect(
            read_listings_list.sync_detailed(client=client, limit=1, cursor=cursor or UNSET), 200
        )
        numbers.extend(item.listing_number for item in page.items)
        cursor = page.next_cursor
        if not cursor:
            break
    assert sorted(numbers) == sorted(created), numbers
    seen["paged"] = len(numbers)

    endpoint = expect(
        create_webhook_endpoint.sync_detailed(
            client=client,
            body=EndpointIn(url=receiver_url, event_types=["listing.cancelled"]),
            x_idempotency_key=idempotency_key(),
        ),
        201,
    )
    assert endpoint.secret, "the signing secret, once"
    seen["endpoint"] = endpoint.id

    with open(photo, "rb") as payload:
        body = UploadListingMediaBody(
            files=[File(payload=payload, file_name="front.jpg", mime_type="image/jpeg")]
        )
        upload = expect(
            upload_listing_media.sync_detailed(
                client=client, listing_number=number, body=body, x_idempotency_key=idempotency_key()
            ),
            200,
        )
    operation = upload.operation_id
    events = []
    http = client.get_httpx_client()
    with http.stream("GET", f"/api/v1/progress/{operation}", headers={"Accept": "text/event-stream"}) as stream:
        assert stream.status_code == 200, stream.status_code
        name = None
        for line in stream.iter_lines():
            if line.startswith("event:"):
                name = line.split(":", 1)[1].strip()
            elif line.startswith("data:") and name:
                events.append(name)
                if name == "completed":
                    data = json.loads(line.split(":", 1)[1])
                    assert data["operation"]["status"] == "completed", data
                    break
    assert events and events[-1] == "completed", events
    seen["progress"] = events

    cancelled = expect(
        cancel_listing.sync_detailed(
            client=client, listing_number=number, x_idempotency_key=idempotency_key()
        ),
        200,
    )
    assert cancelled.status == "Cancelled", cancelled
    seen["cancelled"] = cancelled.status
    print(json.dumps(seen))


if __name__ == "__main__":
    main()
