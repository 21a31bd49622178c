-- Each user's display preferences; a user without a row has the defaults.
create table user_preferences (
    user_id          text primary key references users (id),
    agency_id        text not null references agencies (id),
    date_time_format text not null check (date_time_format in ('friendly', 'us', 'uk')),
    timezone         text not null,
    language         text not null,
    measurement_unit text not null check (measurement_unit in ('imperial', 'metric')),
    theme            text not null check (theme in ('light', 'dark', 'system')),
    updated_at       bigint not null
);
