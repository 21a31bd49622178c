-- The portal offers an agency's images that belong to no listing (a logo,
-- uploaded on its own) as the watermark of a delivery profile, newest
-- first: a partial index keeps that read off the agency's listing photos.
create index media_items_loose on media_items (agency_id, is_sandbox, id)
    where listing_id is null;

-- A profile's sweep over the agency's photos: a new round begins when its
-- outputs change or it is resumed, and the round's last batch records it
-- swept. An active profile whose round is not swept has a sweep to run:
-- should the push of its first batch have been lost, the maintenance pushes
-- it again (a sweep the queue still holds is the same job, and dropped).
alter table delivery_profiles add column sweep_round integer not null default 1;
alter table delivery_profiles add column swept_round integer not null default 0;
create index delivery_profiles_unswept on delivery_profiles (updated_at)
    where active and swept_round < sweep_round;
