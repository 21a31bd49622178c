-- The people list's filters (a role, active or not, both) are each served by
-- an index in the list's order (created_at, id), and the list's total counts
-- the matching entries of that index (role, last, lets it skip platform roles
-- without reading the rows), not the agency's every user.
create index users_by_agency_role on users (agency_id, role, created_at, id);
create index users_by_agency_active on users (agency_id, is_active, created_at, id, role);
create index users_by_agency_role_active on users (agency_id, role, is_active, created_at, id);
