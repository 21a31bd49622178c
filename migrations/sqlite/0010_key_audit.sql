-- Every event in an API key's life, kept for good (also after revocation).
create table api_key_audit (
    id        text primary key,
    agency_id text not null references agencies (id),
    key_id    text not null references api_keys (id),
    action    text not null check (action in ('issued', 'rotated', 'revoked', 'expired')),
    detail    text,
    at        integer not null
) strict;

create index api_key_audit_by_agency on api_key_audit (agency_id, at);
