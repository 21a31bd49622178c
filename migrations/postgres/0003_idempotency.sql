-- Idempotent requests: one record per (agency, idempotency key), reserved while
-- the first request runs and holding its response for 24 hours afterwards.
create table idempotency_records (
    agency_id         text not null references agencies (id),
    idempotency_key   text not null,
    -- sha256 of method, path and canonical body: a reused key with another
    -- request is a conflict, not a replay.
    fingerprint       text not null,
    state             text not null check (state in ('in_flight', 'completed')),
    -- While in flight: when the reservation is considered orphaned by a crash.
    lease_expires_at  bigint,
    response_status   integer,
    response_headers  jsonb,
    response_body     bytea,
    response_is_error boolean,
    created_at        bigint not null,
    completed_at      bigint,
    primary key (agency_id, idempotency_key)
);

create index idempotency_records_by_age on idempotency_records (created_at);

-- A creation remembers the key it was made under, so a retry that slips past a
-- lost idempotency record (a crash between commit and bookkeeping) finds the
-- listing instead of making a second one.
alter table listings add column idempotency_key text;
create unique index listings_by_idempotency_key on listings (agency_id, idempotency_key)
    where idempotency_key is not null;
