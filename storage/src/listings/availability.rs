//! Shoot availability: photographers' weekly working hours, and the free slots
//! those hours leave in a time window once booked shoots (with a travel buffer
//! on each side) are taken out. The slot arithmetic is the pure [`free_slots`];
//! the repository only gathers its inputs.

use std::str::FromStr;

use chrono::{Datelike, Duration, NaiveDate, NaiveTime, Offset, TimeZone, Utc};
use chrono_tz::Tz;

use crate::db::{in_transaction, on_pool};
use crate::ids::{AgencyId, UserId};
use crate::rules::packages::{self, CATALOG, Package};
use crate::{Entity, Result, StorageError, Store, Tenant, Timestamp};

/// Travel time kept free before and after every booked shoot.
pub const TRAVEL_BUFFER_MINUTES: i64 = 30;
/// Slots start every this many minutes, counted from the start of a block of
/// working hours.
pub const GRID_MINUTES: i64 = 30;
/// The time zone of the default week (and of availability responses).
pub const DEFAULT_TIMEZONE: &str = "America/Los_Angeles";
/// Minutes in a day: the latest `end_minute`.
pub const MINUTES_PER_DAY: u32 = 1440;

const MICROS_PER_MINUTE: i64 = 60_000_000;
const DAY_NAMES: [&str; 7] = ["mon", "tue", "wed", "thu", "fri", "sat", "sun"];

/// One block of working hours on one weekday, in the photographer's zone.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct WorkingHours {
    /// ISO weekday: Monday = 1 … Sunday = 7.
    pub weekday: u32,
    /// Minutes after local midnight the block starts.
    pub start_minute: u32,
    /// Minutes after local midnight the block ends (1440 = midnight after).
    pub end_minute: u32,
}

impl WorkingHours {
    /// Parses `DAY=HH:MM-HH:MM` (`mon=09:00-17:00`; DAY is mon … sun, and
    /// `24:00` ends a block at midnight).
    pub fn parse(text: &str) -> Option<Self> {
        let (day, span) = text.trim().split_once('=')?;
        let position = DAY_NAMES
            .iter()
            .position(|d| d.eq_ignore_ascii_case(day.trim()))?;
        let (start, end) = span.split_once('-')?;
        let hours = Self {
            weekday: u32::try_from(position).ok()? + 1,
            start_minute: parse_clock(start)?,
            end_minute: parse_clock(end)?,
        };
        hours.check().ok().map(|()| hours)
    }

    /// The block as `DAY=HH:MM-HH:MM`, the form [`WorkingHours::parse`] reads.
    pub fn to_spec(self) -> String {
        let day = DAY_NAMES
            .get(self.weekday.saturating_sub(1) as usize)
            .unwrap_or(&"?");
        let clock = |minute: u32| format!("{:02}:{:02}", minute / 60, minute % 60);
        format!(
            "{day}={}-{}",
            clock(self.start_minute),
            clock(self.end_minute)
        )
    }

    fn check(self) -> std::result::Result<(), String> {
        if !(1..=7).contains(&self.weekday) {
            return Err("weekday must be 1 (Monday) to 7 (Sunday)".to_owned());
        }
        if self.start_minute >= self.end_minute || self.end_minute > MINUTES_PER_DAY {
            return Err(format!(
                "{} must start before it ends, within one day",
                self.to_spec()
            ));
        }
        Ok(())
    }
}

/// `HH:MM` as minutes after midnight; `24:00` is allowed.
fn parse_clock(text: &str) -> Option<u32> {
    let (hours, minutes) = text.trim().split_once(':')?;
    if hours.len() != 2 || minutes.len() != 2 {
        return None;
    }
    let (hours, minutes): (u32, u32) = (hours.parse().ok()?, minutes.parse().ok()?);
    let total = hours * 60 + minutes;
    (minutes < 60 && total <= MINUTES_PER_DAY).then_some(total)
}

/// A photographer's week: blocks of working hours in one time zone.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WeeklyHours {
    /// The zone the blocks' wall-clock times are in.
    pub timezone: Tz,
    /// The blocks, by weekday and start.
    pub blocks: Vec<WorkingHours>,
}

impl WeeklyHours {
    /// The week of a photographer with no hours set: Monday to Friday, 09:00
    /// to 17:00, America/Los_Angeles.
    pub fn default_week() -> Self {
        Self {
            timezone: chrono_tz::America::Los_Angeles,
            blocks: (1..=5)
                .map(|weekday| WorkingHours {
                    weekday,
                    start_minute: 9 * 60,
                    end_minute: 17 * 60,
                })
                .collect(),
        }
    }

    /// Checks every block and that no two blocks of a day overlap (they would
    /// offer the same slot twice).
    pub fn validate(blocks: &[WorkingHours]) -> std::result::Result<(), String> {
        let mut sorted = blocks.to_vec();
        sorted.sort();
        for block in &sorted {
            block.check()?;
        }
        for pair in sorted.windows(2) {
            if let [a, b] = pair
                && a.weekday == b.weekday
                && b.start_minute < a.end_minute
            {
                return Err(format!("{} overlaps {}", a.to_spec(), b.to_spec()));
            }
        }
        Ok(())
    }
}

/// A half-open span of time `[start, end)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Span {
    /// First instant inside.
    pub start: Timestamp,
    /// First instant after.
    pub end: Timestamp,
}

/// The time a shoot booked at `scheduled_at` takes from its photographer: the
/// shoot itself plus the travel buffer before and after.
pub fn blocked_span(scheduled_at: Timestamp, shoot_minutes: u32) -> Span {
    let buffer = TRAVEL_BUFFER_MINUTES * MICROS_PER_MINUTE;
    let shoot = i64::from(shoot_minutes) * MICROS_PER_MINUTE;
    Span {
        start: Timestamp::from_micros(scheduled_at.as_micros() - buffer),
        end: Timestamp::from_micros(scheduled_at.as_micros() + shoot + buffer),
    }
}

/// The free slots of one photographer: `shoot_minutes` long, starting on the
/// 30-minute grid of each block of `week`, entirely inside the block and inside
/// `window`, not before `now`, and overlapping no `blocked` span. In order.
pub fn free_slots(
    week: &WeeklyHours,
    blocked: &[Span],
    window: Span,
    now: Timestamp,
    shoot_minutes: u32,
) -> Vec<Span> {
    let blocked = merged(blocked);
    let shoot = i64::from(shoot_minutes) * MICROS_PER_MINUTE;
    let earliest = window.start.max(now);
    let tz = week.timezone;
    // A block lies within its local day, so the local days of the window's ends
    // bound the days to visit.
    let first_day = window.start.to_datetime().with_timezone(&tz).date_naive();
    let last_day = window.end.to_datetime().with_timezone(&tz).date_naive();
    let mut slots = Vec::new();
    for day in first_day.iter_days().take_while(|day| *day <= last_day) {
        let weekday = day.weekday().number_from_monday();
        for block in week.blocks.iter().filter(|b| b.weekday == weekday) {
            let open = local_instant(tz, day, block.start_minute, Edge::Start);
            let close = local_instant(tz, day, block.end_minute, Edge::End);
            let mut start = open;
            while start + shoot <= close {
                let slot = Span {
                    start: Timestamp::from_micros(start),
                    end: Timestamp::from_micros(start + shoot),
                };
                if slot.start >= earliest && slot.end <= window.end && !overlaps(&blocked, slot) {
                    slots.push(slot);
                }
                start += GRID_MINUTES * MICROS_PER_MINUTE;
            }
        }
    }
    slots.sort();
    slots
}

/// Which end of a block a wall-clock time is.
#[derive(Clone, Copy)]
enum Edge {
    Start,
    End,
}

/// The instant (micros) `minute` minutes after local midnight of `day` in `tz`.
/// A time the clocks repeat (autumn) opens a block at its first occurrence
/// and closes one at its second, so the block holds every instant the wall
/// clock shows inside it; a time the clocks skip (spring) is read with the
/// offset before the change, which lands just after the gap.
fn local_instant(tz: Tz, day: NaiveDate, minute: u32, edge: Edge) -> i64 {
    let naive = day.and_time(NaiveTime::MIN) + Duration::minutes(i64::from(minute));
    let instant = match (tz.from_local_datetime(&naive), edge) {
        (chrono::LocalResult::Single(at), _)
        | (chrono::LocalResult::Ambiguous(at, _), Edge::Start)
        | (chrono::LocalResult::Ambiguous(_, at), Edge::End) => at.with_timezone(&Utc),
        (chrono::LocalResult::None, _) => {
            let before = tz
                .offset_from_utc_datetime(&(naive - Duration::days(1)))
                .fix();
            naive.and_utc() - Duration::seconds(i64::from(before.local_minus_utc()))
        }
    };
    instant.timestamp_micros()
}

/// Sorts spans and joins the overlapping ones, so ends ascend with starts.
fn merged(spans: &[Span]) -> Vec<Span> {
    let mut sorted = spans.to_vec();
    sorted.sort();
    let mut out: Vec<Span> = Vec::with_capacity(sorted.len());
    for span in sorted {
        match out.last_mut() {
            Some(last) if span.start <= last.end => last.end = last.end.max(span.end),
            _ => out.push(span),
        }
    }
    out
}

/// Whether `slot` overlaps any of the merged `blocked` spans (touching is fine).
fn overlaps(blocked: &[Span], slot: Span) -> bool {
    let next = blocked.partition_point(|b| b.end <= slot.start);
    blocked.get(next).is_some_and(|b| b.start < slot.end)
}

/// What to find slots for.
#[derive(Clone, Copy, Debug)]
pub struct SlotQuery {
    /// Slots start at or after this.
    pub from: Timestamp,
    /// Slots end at or before this.
    pub to: Timestamp,
    /// The package, whose shoot length sizes the slots.
    pub package: &'static Package,
}

/// A free slot of one photographer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Slot {
    /// When the shoot would start.
    pub start: Timestamp,
    /// When it would end.
    pub end: Timestamp,
    /// Who would shoot.
    pub photographer_id: UserId,
}

/// Availability repository; see [`Store::availability`].
pub struct Availability<'a> {
    pub(crate) store: &'a Store,
}

impl Store {
    /// Photographers' working hours and the free shoot slots they leave.
    pub fn availability(&self) -> Availability<'_> {
        Availability { store: self }
    }
}

/// A working-hours row: user, weekday, start and end minute, time zone.
type HoursRow = (UserId, i64, i64, i64, String);
/// A booked shoot: photographer, start, the listing's package key.
type BookedRow = (UserId, Timestamp, String);

impl Availability<'_> {
    /// The free slots of the tenant's active photographers in the query's
    /// window, by start and then photographer. Booked shoots of the tenant's
    /// environment block their photographer.
    pub async fn slots(&self, tenant: &Tenant, query: &SlotQuery) -> Result<Vec<Slot>> {
        let now = self.store.clock().now();
        let longest = CATALOG.iter().map(|p| p.shoot_minutes).max().unwrap_or(0);
        // Any shoot that starts in this range can reach into the window.
        let booked_after = query
            .from
            .plus_seconds(-(i64::from(longest) + TRAVEL_BUFFER_MINUTES) * 60);
        let booked_before = query.to.plus_seconds(TRAVEL_BUFFER_MINUTES * 60);
        let (photographers, hours, booked): (Vec<UserId>, Vec<HoursRow>, Vec<BookedRow>) = on_pool!(self.store.db(), pool => {
            let photographers = sqlx::query_scalar(
                "select id from users
                 where agency_id = $1 and role = 'photographer' and is_active = true order by id",
            )
            .bind(&tenant.agency_id)
            .fetch_all(pool)
            .await?;
            let hours = sqlx::query_as(
                "select user_id, weekday, start_minute, end_minute, timezone
                     from photographer_working_hours where agency_id = $1
                     order by user_id, weekday, start_minute",
            )
            .bind(&tenant.agency_id)
            .fetch_all(pool)
            .await?;
            let booked = sqlx::query_as(
                "select a.photographer_id, a.scheduled_at, l.package
                     from appointments a join listings l on l.id = a.listing_id
                     where a.agency_id = $1 and a.is_sandbox = $2 and a.status = 'scheduled'
                       and a.photographer_id is not null
                       and a.scheduled_at > $3 and a.scheduled_at < $4",
            )
            .bind(&tenant.agency_id)
            .bind(tenant.environment.is_sandbox())
            .bind(booked_after)
            .bind(booked_before)
            .fetch_all(pool)
            .await?;
            (photographers, hours, booked)
        });
        let window = Span {
            start: query.from,
            end: query.to,
        };
        let mut slots = Vec::new();
        for photographer in photographers {
            let own: Vec<&HoursRow> = hours.iter().filter(|r| r.0 == photographer).collect();
            let week = weekly_hours(&own)?;
            let blocked: Vec<Span> = booked
                .iter()
                .filter(|(id, _, _)| *id == photographer)
                .map(|(_, at, package)| {
                    // An unknown package (a hand-edited row) blocks the longest shoot.
                    let minutes = packages::find(package).map_or(longest, |p| p.shoot_minutes);
                    blocked_span(*at, minutes)
                })
                .collect();
            let free = free_slots(&week, &blocked, window, now, query.package.shoot_minutes);
            slots.extend(free.into_iter().map(|span| Slot {
                start: span.start,
                end: span.end,
                photographer_id: photographer.clone(),
            }));
        }
        slots.sort_by(|a, b| (a.start, &a.photographer_id).cmp(&(b.start, &b.photographer_id)));
        Ok(slots)
    }

    /// The photographer's week: the hours set for them, or the default week.
    pub async fn working_hours(
        &self,
        agency: &AgencyId,
        photographer: &UserId,
    ) -> Result<WeeklyHours> {
        let rows: Vec<HoursRow> = on_pool!(self.store.db(), pool => {
            sqlx::query_as(
                "select user_id, weekday, start_minute, end_minute, timezone
                 from photographer_working_hours where agency_id = $1 and user_id = $2
                 order by weekday, start_minute",
            )
            .bind(agency)
            .bind(photographer)
            .fetch_all(pool)
            .await?
        });
        weekly_hours(&rows.iter().collect::<Vec<_>>())
    }

    /// Replaces the photographer's working hours with `blocks` in `timezone`
    /// (an IANA name); no blocks restores the default week. Returns the week
    /// now in force.
    pub async fn set_working_hours(
        &self,
        agency: &AgencyId,
        photographer: &UserId,
        blocks: &[WorkingHours],
        timezone: &str,
    ) -> Result<WeeklyHours> {
        if Tz::from_str(timezone).is_err() {
            return Err(StorageError::Invalid {
                field: "timezone",
                reason: format!("{timezone:?} is not an IANA time zone"),
            });
        }
        WeeklyHours::validate(blocks).map_err(|reason| StorageError::Invalid {
            field: "hours",
            reason,
        })?;
        in_transaction!(self.store.db(), |tx| {
            let role: Option<String> =
                sqlx::query_scalar("select role from users where agency_id = $1 and id = $2")
                    .bind(agency)
                    .bind(photographer)
                    .fetch_optional(&mut *tx)
                    .await?;
            match role.as_deref() {
                None => return Err(StorageError::NotFound(Entity::User)),
                Some("photographer") => {}
                Some(_) => {
                    return Err(StorageError::Invalid {
                        field: "photographer",
                        reason: "is not a photographer".to_owned(),
                    });
                }
            }
            sqlx::query(
                "delete from photographer_working_hours where agency_id = $1 and user_id = $2",
            )
            .bind(agency)
            .bind(photographer)
            .execute(&mut *tx)
            .await?;
            for block in blocks {
                sqlx::query(
                    "insert into photographer_working_hours
                         (agency_id, user_id, weekday, start_minute, end_minute, timezone)
                     values ($1, $2, $3, $4, $5, $6)",
                )
                .bind(agency)
                .bind(photographer)
                .bind(i64::from(block.weekday))
                .bind(i64::from(block.start_minute))
                .bind(i64::from(block.end_minute))
                .bind(timezone)
                .execute(&mut *tx)
                .await?;
            }
        });
        self.working_hours(agency, photographer).await
    }
}

/// One photographer's rows as a week; no rows is the default week. The zone
/// is the first row's (every row of a user carries the same one).
fn weekly_hours(rows: &[&HoursRow]) -> Result<WeeklyHours> {
    let Some(first) = rows.first() else {
        return Ok(WeeklyHours::default_week());
    };
    let timezone = Tz::from_str(&first.4)
        .map_err(|_| StorageError::Corrupt(format!("working hours time zone {:?}", first.4)))?;
    let blocks = rows
        .iter()
        .map(|(_, weekday, start, end, _)| {
            let number = |value: i64| u32::try_from(value).ok();
            Some(WorkingHours {
                weekday: number(*weekday)?,
                start_minute: number(*start)?,
                end_minute: number(*end)?,
            })
        })
        .collect::<Option<Vec<_>>>()
        .ok_or_else(|| StorageError::Corrupt("working hours out of range".to_owned()))?;
    Ok(WeeklyHours { timezone, blocks })
}

#[cfg(test)]
mod tests {
    use chrono::{DateTime, NaiveDateTime};

    use super::*;

    fn at(rfc3339: &str) -> Timestamp {
        Timestamp::from(
            DateTime::parse_from_rfc3339(rfc3339)
                .unwrap()
                .with_timezone(&Utc),
        )
    }

    fn window(from: &str, to: &str) -> Span {
        Span {
            start: at(from),
            end: at(to),
        }
    }

    /// Slot starts as local wall-clock times in Los Angeles.
    fn local_starts(slots: &[Span]) -> Vec<String> {
        slots
            .iter()
            .map(|s| {
                let local: NaiveDateTime = s
                    .start
                    .to_datetime()
                    .with_timezone(&chrono_tz::America::Los_Angeles)
                    .naive_local();
                local.format("%a %H:%M").to_string()
            })
            .collect()
    }

    fn week(specs: &[&str]) -> WeeklyHours {
        WeeklyHours {
            timezone: chrono_tz::America::Los_Angeles,
            blocks: specs
                .iter()
                .map(|s| WorkingHours::parse(s).unwrap())
                .collect(),
        }
    }

    const LONG_AGO: Timestamp = Timestamp::from_micros(0);

    #[test]
    fn the_default_week_fills_weekdays_on_the_grid() {
        // Monday 2026-06-01 in Los Angeles (PDT, UTC-7).
        let w = window("2026-06-01T00:00:00-07:00", "2026-06-02T00:00:00-07:00");
        let slots = free_slots(&WeeklyHours::default_week(), &[], w, LONG_AGO, 90);
        // 09:00 … 15:30: the last one ends at 17:00.
        assert_eq!(slots.len(), 14);
        assert_eq!(slots[0].start, at("2026-06-01T16:00:00Z"));
        assert_eq!(slots[0].end, at("2026-06-01T17:30:00Z"));
        assert_eq!(slots[13].end, at("2026-06-02T00:00:00Z"));
        // Saturday and Sunday are off.
        let weekend = window("2026-06-06T00:00:00-07:00", "2026-06-08T00:00:00-07:00");
        assert!(free_slots(&WeeklyHours::default_week(), &[], weekend, LONG_AGO, 60).is_empty());
    }

    #[test]
    fn dst_changes_move_the_utc_instants_of_the_same_hours() {
        // Clocks spring forward on Sunday 2026-03-08 at 02:00 in Los Angeles.
        let w = window("2026-03-06T00:00:00Z", "2026-03-10T00:00:00Z");
        let slots = free_slots(&WeeklyHours::default_week(), &[], w, LONG_AGO, 480);
        let starts: Vec<Timestamp> = slots.iter().map(|s| s.start).collect();
        // 09:00 PST is 17:00Z on Friday; 09:00 PDT is 16:00Z on Monday.
        assert_eq!(
            starts,
            [at("2026-03-06T17:00:00Z"), at("2026-03-09T16:00:00Z")]
        );
    }

    #[test]
    fn a_block_across_the_spring_gap_holds_its_real_length() {
        // 01:00-04:00 on the change day is two real hours: 01:00 PST to 04:00 PDT.
        let sunday = week(&["sun=01:00-04:00"]);
        let w = window("2026-03-08T00:00:00-08:00", "2026-03-09T00:00:00-07:00");
        let slots = free_slots(&sunday, &[], w, LONG_AGO, 60);
        let starts: Vec<Timestamp> = slots.iter().map(|s| s.start).collect();
        assert_eq!(
            starts,
            [
                at("2026-03-08T09:00:00Z"),
                at("2026-03-08T09:30:00Z"),
                at("2026-03-08T10:00:00Z"),
            ]
        );
        // A block starting inside the gap opens just after it.
        let in_gap = week(&["sun=02:30-05:00"]);
        let slots = free_slots(&in_gap, &[], w, LONG_AGO, 60);
        assert_eq!(slots[0].start, at("2026-03-08T03:30:00-07:00"));
    }

    #[test]
    fn a_block_across_the_autumn_repeat_holds_every_repeated_minute() {
        // Clocks fall back on Sunday 2026-11-01 at 02:00: 01:00-03:00 is 3 hours.
        let sunday = week(&["sun=01:00-03:00"]);
        let w = window("2026-11-01T00:00:00-07:00", "2026-11-02T00:00:00-08:00");
        let slots = free_slots(&sunday, &[], w, LONG_AGO, 60);
        assert_eq!(slots.len(), 5);
        assert_eq!(slots[0].start, at("2026-11-01T01:00:00-07:00"));
        assert_eq!(slots[4].end, at("2026-11-01T03:00:00-08:00"));
    }

    #[test]
    fn a_booking_blocks_its_shoot_and_the_travel_buffer() {
        let w = window("2026-06-01T00:00:00-07:00", "2026-06-02T00:00:00-07:00");
        // A standard (90 minute) shoot at 12:00 blocks 11:30-14:00.
        let booked = blocked_span(at("2026-06-01T12:00:00-07:00"), 90);
        assert_eq!(booked.start, at("2026-06-01T11:30:00-07:00"));
        assert_eq!(booked.end, at("2026-06-01T14:00:00-07:00"));
        let slots = free_slots(&WeeklyHours::default_week(), &[booked], w, LONG_AGO, 60);
        assert_eq!(
            local_starts(&slots),
            [
                "Mon 09:00",
                "Mon 09:30",
                "Mon 10:00",
                "Mon 10:30", // ends at the buffer
                "Mon 14:00",
                "Mon 14:30",
                "Mon 15:00",
                "Mon 15:30",
                "Mon 16:00",
            ]
        );
    }

    #[test]
    fn the_grid_counts_from_the_start_of_the_block() {
        let monday = week(&["mon=09:15-11:00", "mon=13:00-14:00"]);
        let w = window("2026-06-01T00:00:00-07:00", "2026-06-02T00:00:00-07:00");
        let slots = free_slots(&monday, &[], w, LONG_AGO, 60);
        assert_eq!(
            local_starts(&slots),
            ["Mon 09:15", "Mon 09:45", "Mon 13:00"]
        );
    }

    #[test]
    fn past_slots_and_slots_outside_the_window_are_left_out() {
        let w = window("2026-06-01T00:00:00-07:00", "2026-06-01T12:00:00-07:00");
        let now = at("2026-06-01T10:10:00-07:00");
        let slots = free_slots(&WeeklyHours::default_week(), &[], w, now, 60);
        // 10:30 and 11:00; 11:30 would end after the window.
        assert_eq!(local_starts(&slots), ["Mon 10:30", "Mon 11:00"]);
    }

    #[test]
    fn working_hours_parse_and_print() {
        let block = WorkingHours::parse("Tue=08:30-24:00").unwrap();
        assert_eq!(
            block,
            WorkingHours {
                weekday: 2,
                start_minute: 510,
                end_minute: 1440
            }
        );
        assert_eq!(block.to_spec(), "tue=08:30-24:00");
        for bad in [
            "mon",
            "xyz=09:00-10:00",
            "mon=10:00-09:00",
            "mon=9:00-10:00",
            "sun=00:00-24:30",
        ] {
            assert!(WorkingHours::parse(bad).is_none(), "{bad}");
        }
        let overlapping = [
            WorkingHours::parse("mon=09:00-12:00").unwrap(),
            WorkingHours::parse("mon=11:00-13:00").unwrap(),
        ];
        assert!(WeeklyHours::validate(&overlapping).is_err());
        assert!(WeeklyHours::validate(&WeeklyHours::default_week().blocks).is_ok());
    }
}
