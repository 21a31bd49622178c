-- Every published state of an operation's progress, so a stream that
-- reconnects with `Last-Event-ID` resumes after the last state it saw.
-- A media state is kept without the operation snapshot it was published with
-- (`step`): a snapshot per state would grow with the square of the files.
create table operation_progress_events (
    operation_id text not null,
    seq          integer not null,
    agency_id    text not null references agencies (id),
    is_sandbox   integer not null check (is_sandbox in (0, 1)),
    step         text not null,
    terminal     integer not null check (terminal in (0, 1)),
    recorded_at  integer not null,
    primary key (operation_id, seq)
) strict;

create index operation_progress_events_by_time on operation_progress_events (recorded_at);
