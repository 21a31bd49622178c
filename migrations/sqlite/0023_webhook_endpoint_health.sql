-- Endpoint health: failed deliveries since the last success, which a
-- re-enable does not reset (a success after five or more emits
-- webhook.endpoint.recovered); and recoveries, each re-sending an endpoint's
-- deliveries that failed since a time, one job each, with their progress.
alter table webhook_endpoints add column unrecovered_failures integer not null default 0;

create table webhook_recoveries (
    id           text primary key,
    endpoint_id  text not null references webhook_endpoints (id),
    agency_id    text not null references agencies (id),
    since        integer not null,
    status       text not null check (status in ('queued', 'running', 'completed', 'failed')),
    total        integer not null default 0,
    resent       integer not null default 0,
    succeeded    integer not null default 0,
    failed       integer not null default 0,
    error        text,
    created_at   integer not null,
    finished_at  integer
) strict;

create index webhook_recoveries_by_endpoint on webhook_recoveries (endpoint_id, created_at);
