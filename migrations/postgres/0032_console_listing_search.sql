-- The ops console's listing-number search finds the events about a listing by
-- an index, not by reading the agency's every event's data: the number most
-- events carry (`data.listing_number`) is a column of its own, computed from
-- the data (so every writer fills it, and every event already written has it).
alter table events add column listing_number text
    generated always as (data ->> 'listing_number') stored;
create index events_by_listing on events (agency_id, listing_number, seq);

-- ... and the deliveries of those events, of any kind (a replay keeps its
-- event's id), by the event.
create index webhook_deliveries_by_event on webhook_deliveries (event_id);
