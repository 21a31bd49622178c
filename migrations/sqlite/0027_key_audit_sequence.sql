-- The key audit log gets an explicit sequence. Every API process follows the
-- log for keys ended by other processes, by position (storage/src/api_keys/
-- ended.rs); an implicit rowid may be renumbered by VACUUM, an integer
-- primary key never is. The log is only ever appended to, so a new row's
-- seq is one past the largest.
create table api_key_audit_sequenced (
    seq       integer primary key,
    id        text not null unique,
    agency_id text not null references agencies (id),
    key_id    text not null references api_keys (id),
    action    text not null check (action in ('issued', 'rotated', 'revoked', 'expired')),
    detail    text,
    at        integer not null
) strict;

insert into api_key_audit_sequenced (seq, id, agency_id, key_id, action, detail, at)
select rowid, id, agency_id, key_id, action, detail, at from api_key_audit order by rowid;

drop table api_key_audit;
alter table api_key_audit_sequenced rename to api_key_audit;
create index api_key_audit_by_agency on api_key_audit (agency_id, at);
