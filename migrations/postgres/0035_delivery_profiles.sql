-- Delivery profiles (issue 40): an agency's named sets of outputs, rendered
-- from every photo beside the specification's six variants. The outputs are
-- kept as the JSON the API accepted (`storage::rules::delivery_profiles`);
-- `revision` moves on each change, so a rendered output says which version
-- of its profile it was made from.
create table delivery_profiles (
    id          text primary key,
    agency_id   text not null references agencies (id),
    is_sandbox  boolean not null,
    name        text not null,
    outputs     text not null,
    active      boolean not null default true,
    revision    bigint not null default 1,
    created_at  bigint not null,
    updated_at  bigint not null
);

-- A name is unique in its agency and environment; the list pages in
-- creation order.
create unique index delivery_profiles_by_name on delivery_profiles (agency_id, is_sandbox, name);
create index delivery_profiles_by_agency on delivery_profiles (agency_id, is_sandbox, created_at, id);

-- Where the cropped outputs centre: x and y from 0 to 1, from the top left
-- of the upright photo; `auto` (the worker's saliency measure) or `manual`
-- (PATCH /media/{media_id}). Null until a worker has looked at the photo.
alter table media_items add column focal_x double precision;
alter table media_items add column focal_y double precision;
alter table media_items add column focal_source text check (focal_source in ('auto', 'manual'));

-- A profile's sweep walks the agency's photos in id order.
create index media_items_by_agency on media_items (agency_id, is_sandbox, id);

-- One rendered output of a profile for a media item, ready or failed. An
-- output is current when it was made from its profile's revision (and, for
-- a `cover` crop, around the item's focal point, kept here); one that is
-- not, or has no row, is listed as pending until a worker renders it.
create table media_outputs (
    media_id         text not null references media_items (id),
    profile_id       text not null references delivery_profiles (id),
    name             text not null,
    profile_revision bigint not null,
    status           text not null check (status in ('ready', 'failed')),
    focal_x          double precision,
    focal_y          double precision,
    object_key       text,
    format           text not null,
    width            integer,
    height           integer,
    size_bytes       bigint,
    failure_reason   text,
    updated_at       bigint not null,
    primary key (media_id, profile_id, name)
);

-- A profile's outputs, to re-render or delete them with it.
create index media_outputs_by_profile on media_outputs (profile_id, media_id);

-- An archive of a profile's outputs instead of the originals
-- (`POST /media/archive` with `profile_id`).
alter table media_operations add column archive_profile_id text;
