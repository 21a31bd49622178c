-- Photographers' weekly working hours, the base of shoot availability.
--
-- A photographer without rows works the default week (Monday to Friday, 09:00
-- to 17:00, America/Los_Angeles; see docs/decisions.md). Hours belong to the
-- agency's people, not to an environment: live and sandbox share them.
create table photographer_working_hours (
    agency_id    text not null references agencies (id),
    user_id      text not null,
    -- ISO weekday: Monday = 1 … Sunday = 7.
    weekday      integer not null check (weekday between 1 and 7),
    -- Minutes after local midnight; 1440 is the end of the day.
    start_minute integer not null check (start_minute >= 0),
    end_minute   integer not null check (end_minute <= 1440),
    -- The photographer's IANA time zone. Every row of one user carries the
    -- same zone: the rows are always replaced together.
    timezone     text not null,
    check (start_minute < end_minute),
    -- Several blocks per day are allowed (a split shift); one per start.
    primary key (user_id, weekday, start_minute),
    -- Hours can only be set for the agency's own people.
    foreign key (agency_id, user_id) references users (agency_id, id)
) strict;

create index working_hours_by_agency on photographer_working_hours (agency_id, user_id);

-- Availability reads a tenant's booked shoots in a time window.
create index appointments_by_tenant_time on appointments (agency_id, is_sandbox, scheduled_at);
