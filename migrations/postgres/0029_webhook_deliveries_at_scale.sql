-- An endpoint's delivery log costs the same at ten million deliveries as at
-- ten thousand: the portal's filters (status, event type, both) are served
-- by an index in the log's order (created_at, id), a recovery counts the
-- failed deliveries of its window from a partial index, the retention purge
-- finds the oldest finished deliveries without reading the rest, and the
-- log's exact total is kept, not counted.

create index webhook_deliveries_by_endpoint_status
    on webhook_deliveries (endpoint_id, status, created_at, id);
create index webhook_deliveries_by_endpoint_event_type
    on webhook_deliveries (endpoint_id, event_type, created_at, id);
create index webhook_deliveries_by_endpoint_status_event_type
    on webhook_deliveries (endpoint_id, status, event_type, created_at, id);
create index webhook_deliveries_failed_events
    on webhook_deliveries (endpoint_id, completed_at) where kind = 'event' and status = 'failed';
create index webhook_deliveries_completed
    on webhook_deliveries (completed_at) where completed_at is not null;

-- How many deliveries each endpoint has (its log's total), changed in the
-- same transaction as every delivery made or purged
-- (storage/src/webhooks/delivery_counts.rs). No check (count >= 0): an
-- upsert's proposed row (a negative delta for a row that exists) is checked
-- before its conflict is found.
create table webhook_delivery_counts (
    endpoint_id text primary key references webhook_endpoints (id),
    count       bigint not null
);

insert into webhook_delivery_counts (endpoint_id, count)
select endpoint_id, count(*) from webhook_deliveries group by endpoint_id;
