-- The job platform's own state.

-- The latest progress of each long-running operation, so a subscriber that
-- arrives late starts from it.
create table operation_progress (
    operation_id text primary key,
    agency_id    text not null references agencies (id),
    is_sandbox   boolean not null,
    state        jsonb not null,
    updated_at   bigint not null
);

-- One row per executed scheduled tick: several schedulers (one per worker
-- host) fire the same tick, and only the one that claims it runs it.
create table cron_ticks (
    job_kind text not null,
    tick_at  bigint not null,
    claimed_by text not null,
    claimed_at bigint not null,
    primary key (job_kind, tick_at)
);

-- Queues an operator paused: every worker process stops taking their jobs.
create table queue_controls (
    queue      text primary key,
    paused     boolean not null,
    changed_at bigint not null
);

-- When the outbox sweep last re-dispatched an event, so an event whose
-- dispatch is stuck is offered again only after a while.
alter table events add column swept_at bigint;
