-- When each API key last authenticated a request (recorded at most once a
-- minute per key), for the developer portal's key list.
alter table api_keys add column last_used_at integer;

-- Requests per agency, environment, route and status, by hour: the portal's
-- usage chart. Processes add their counts every few seconds.
create table request_usage (
    agency_id   text not null references agencies (id),
    is_sandbox  integer not null check (is_sandbox in (0, 1)),
    route       text not null,
    status      integer not null,
    hour        integer not null,
    requests    integer not null,
    primary key (agency_id, is_sandbox, route, status, hour)
) strict;
create index request_usage_by_hour on request_usage (hour);
