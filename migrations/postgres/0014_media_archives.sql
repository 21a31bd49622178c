-- The media items an archive operation packs, in order (a JSON array of ids),
-- and the storage strategy its ZIP is written with.
alter table media_operations add column archive_media text;
alter table media_operations add column archive_size_bytes bigint;

-- The media sweep looks for items still queued long after their upload.
create index media_items_queued on media_items (status, created_at);
