-- The ops console's records of the job platform.

-- Every run of a job: where and when it ran and how it ended. Workers write
-- these in small batches; the job's detail page lists them and the history
-- rollups count them.
create table job_attempts (
    job_id      text not null,
    attempt     integer not null,
    queue       text not null,
    worker_id   text not null,
    host        text not null,
    agency_id   text,
    endpoint_id text,
    due_at      integer,
    started_at  integer not null,
    finished_at integer,
    outcome     text check (outcome in ('succeeded', 'failed')),
    error       text,
    primary key (job_id, started_at)
) strict;
create index job_attempts_by_finish on job_attempts (finished_at);

-- Finished runs per queue, agency and webhook endpoint ('' for none), per
-- minute (kept a day) and per hour (kept 30 days), rolled up from the runs.
create table job_history (
    resolution  text not null check (resolution in ('minute', 'hour')),
    bucket      integer not null,
    queue       text not null,
    agency_id   text not null,
    endpoint_id text not null,
    succeeded   integer not null,
    failed      integer not null,
    wait_ms_sum integer not null,
    wait_count  integer not null,
    wait_ms_max integer not null,
    run_ms_sum  integer not null,
    run_ms_max  integer not null,
    primary key (resolution, bucket, queue, agency_id, endpoint_id)
) strict;

-- Every worker process that ran: its host, queues, jobs in hand and last
-- heartbeat, and what an operator asked of it (quiet, stop).
create table worker_processes (
    id                text primary key,
    host              text not null,
    pid               integer not null,
    version           text not null,
    queues            text not null,
    in_hand           integer not null,
    started_at        integer not null,
    heartbeat_at      integer not null,
    heartbeat_seconds integer not null,
    state             text not null check (state in ('running', 'quiet', 'stopping', 'stopped')),
    requested         text check (requested in ('quiet', 'stop')),
    requested_at      integer
) strict;

-- What operators did to jobs and workers: who, what, on which filter, how many.
create table ops_audit (
    id     text primary key,
    at     integer not null,
    actor  text not null,
    action text not null,
    target text not null,
    count  integer not null
) strict;
create index ops_audit_by_at on ops_audit (at);
