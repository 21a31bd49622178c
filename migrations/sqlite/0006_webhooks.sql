-- Webhooks: endpoints an agency registers, one delivery per (event,
-- endpoint), every attempt of a delivery, and notifications to owners.

create table webhook_endpoints (
    id                   text primary key,
    agency_id            text not null references agencies (id),
    -- Registered with a sandbox key: such an endpoint only hears sandbox events.
    is_sandbox           integer not null check (is_sandbox in (0, 1)),
    name                 text,
    url                  text not null,
    -- JSON array of canonical event types; null subscribes to every type.
    event_types          text,
    environment          text not null check (environment in ('live', 'sandbox', 'both')),
    -- The signing secret, sealed with a key derived from the master key.
    secret_sealed        text not null,
    status               text not null check (status in ('enabled', 'disabled')),
    disabled_reason      text,
    disabled_at          integer,
    consecutive_failures integer not null default 0,
    created_by           text,
    created_at           integer not null,
    updated_at           integer not null,
    deleted_at           integer
) strict;

create index webhook_endpoints_by_agency on webhook_endpoints (agency_id, created_at, id);

create table webhook_deliveries (
    id              text primary key,
    endpoint_id     text not null references webhook_endpoints (id),
    agency_id       text not null references agencies (id),
    kind            text not null check (kind in ('event', 'replay', 'test_fire')),
    replay_of       text,
    event_id        text not null,
    event_type      text not null,
    api_version     text not null,
    occurred_at     integer not null,
    is_sandbox      integer not null check (is_sandbox in (0, 1)),
    data            text not null,
    status          text not null check (status in ('pending', 'retrying', 'succeeded', 'failed')),
    attempts        integer not null default 0,
    next_attempt_at integer,
    created_at      integer not null,
    completed_at    integer
) strict;

-- Fan-out is idempotent: one delivery of an event per endpoint.
create unique index webhook_deliveries_once on webhook_deliveries (event_id, endpoint_id) where kind = 'event';
create index webhook_deliveries_by_endpoint on webhook_deliveries (endpoint_id, created_at, id);
create index webhook_deliveries_due on webhook_deliveries (next_attempt_at) where status in ('pending', 'retrying');

create table webhook_attempts (
    delivery_id      text not null references webhook_deliveries (id) on delete cascade,
    attempt          integer not null,
    endpoint_id      text not null,
    nonce            text not null,
    started_at       integer not null,
    duration_ms      integer not null,
    outcome          text not null,
    status_code      integer,
    response_excerpt text,
    error            text,
    primary key (delivery_id, attempt)
) strict;

-- The per-endpoint hourly inbound budget counts recent attempts.
create index webhook_attempts_by_endpoint on webhook_attempts (endpoint_id, started_at);

create table notifications (
    id         text primary key,
    agency_id  text not null references agencies (id),
    user_id    text references users (id),
    kind       text not null,
    subject    text not null,
    body       text not null,
    created_at integer not null,
    sent_at    integer
) strict;

create index notifications_by_agency on notifications (agency_id, created_at);
