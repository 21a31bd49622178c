-- The listings list costs the same for a tenant of a million listings as for
-- one of a thousand: every filter is served by an index in the list's
-- keyset order (created_at, id), and the list's exact total is kept, not
-- counted.

create index listings_by_tenant_status
    on listings (agency_id, is_sandbox, status, created_at, id);
create index listings_by_tenant_agent_one
    on listings (agency_id, is_sandbox, agent_one_id, created_at, id);
create index listings_by_tenant_agent_two
    on listings (agency_id, is_sandbox, agent_two_id, created_at, id);
create index listings_by_tenant_agent_one_status
    on listings (agency_id, is_sandbox, agent_one_id, status, created_at, id);
create index listings_by_tenant_agent_two_status
    on listings (agency_id, is_sandbox, agent_two_id, status, created_at, id);

-- A tenant's listing totals, one row per filter the list takes: status ''
-- is every status, agent_id '' every agent; a listing counts under both of
-- its agents. Kept in the same transaction as every change to a listing's
-- status or agents (storage/src/listings/counts.rs).
create table listing_counts (
    agency_id  text not null references agencies (id),
    is_sandbox integer not null check (is_sandbox in (0, 1)),
    status     text not null,
    agent_id   text not null,
    -- No check (count >= 0): an upsert's proposed row (a -1 for a row that
    -- exists) is checked before its conflict is found.
    count      integer not null,
    primary key (agency_id, is_sandbox, status, agent_id)
) strict, without rowid;

insert into listing_counts (agency_id, is_sandbox, status, agent_id, count)
select agency_id, is_sandbox, status_key, agent_key, count(*)
from (
    select agency_id, is_sandbox, '' as status_key, '' as agent_key from listings
    union all
    select agency_id, is_sandbox, status, '' from listings
    union all
    select agency_id, is_sandbox, '', agent_one_id from listings
    union all
    select agency_id, is_sandbox, status, agent_one_id from listings
    union all
    select agency_id, is_sandbox, '', agent_two_id from listings where agent_two_id is not null
    union all
    select agency_id, is_sandbox, status, agent_two_id from listings where agent_two_id is not null
) as counted
group by agency_id, is_sandbox, status_key, agent_key;
