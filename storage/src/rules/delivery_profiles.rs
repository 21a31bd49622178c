//! Delivery profiles: an agency's named sets of outputs, each rendered from
//! every photo beside the specification's six variants. What an output may
//! ask for (a box or an exact aspect, a format, a quality or a byte cap, a
//! metadata policy, a watermark), the bounds of each field, and the two
//! starting templates an agency copies. No SQL: the repository stores what
//! [`ProfileDraft::check`] accepts.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use crate::ids::MediaId;

/// Most profiles one agency keeps per environment.
pub const MAX_PROFILES: usize = 20;
/// Most outputs one profile renders.
pub const MAX_OUTPUTS: usize = 12;
/// Longest profile name, in characters.
pub const MAX_PROFILE_NAME_CHARS: usize = 100;
/// Longest output name, in characters (`[a-z0-9_-]`, it names a file).
pub const MAX_OUTPUT_NAME_CHARS: usize = 40;
/// Smallest width or height of an output, in pixels.
pub const MIN_SIDE: u32 = 16;
/// Largest width or height of an output, in pixels (the JPEG limit is
/// 65,500; a delivery box past 8K is a print job, which `print` serves).
pub const MAX_SIDE: u32 = 8192;
/// Smallest byte cap: below it even a small photo is a smear of blocks.
pub const MIN_MAX_BYTES: u64 = 10_000;
/// Largest byte cap (50 MB).
pub const MAX_MAX_BYTES: u64 = 50_000_000;
/// Smallest watermark scale (of the output's width).
pub const MIN_WATERMARK_SCALE: f64 = 0.02;
/// Largest watermark scale (the output's whole width).
pub const MAX_WATERMARK_SCALE: f64 = 1.0;

/// How an output's box is filled.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Fit {
    /// The whole photo inside `width` × `height`, its aspect kept, never
    /// enlarged.
    Contain,
    /// Exactly `width`:`height`, cropped around the photo's focal point, at
    /// most `width` × `height` (never enlarged: a smaller photo gives a
    /// smaller crop of the same aspect).
    Cover,
}

/// An output's encoding.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ProfileFormat {
    /// Baseline JPEG.
    Jpeg,
    /// Lossy WebP.
    Webp,
    /// AVIF (AV1 still image).
    Avif,
}

impl ProfileFormat {
    /// The quality an output of this format gets when it names none.
    pub const fn default_quality(self) -> u8 {
        match self {
            Self::Jpeg => 85,
            Self::Webp => 80,
            Self::Avif => 60,
        }
    }

    /// The wire name.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Jpeg => "jpeg",
            Self::Webp => "webp",
            Self::Avif => "avif",
        }
    }
}

/// What an output keeps of the original's metadata.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MetadataPolicy {
    /// Nothing: no EXIF, XMP or IPTC (MLS boards ask for this).
    Strip,
    /// The copyright notice and the author only; never location, camera
    /// serials or dates.
    Copyright,
}

/// Where a watermark sits on an output.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WatermarkPosition {
    /// Top left corner.
    TopLeft,
    /// Top edge, centred.
    Top,
    /// Top right corner.
    TopRight,
    /// Left edge, centred.
    Left,
    /// The centre.
    Center,
    /// Right edge, centred.
    Right,
    /// Bottom left corner.
    BottomLeft,
    /// Bottom edge, centred.
    Bottom,
    /// Bottom right corner.
    BottomRight,
}

impl WatermarkPosition {
    /// Every position, for messages.
    pub const ALL: [Self; 9] = [
        Self::TopLeft,
        Self::Top,
        Self::TopRight,
        Self::Left,
        Self::Center,
        Self::Right,
        Self::BottomLeft,
        Self::Bottom,
        Self::BottomRight,
    ];
}

/// An image the agency uploaded, laid over an output.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Watermark {
    /// The agency's uploaded image (a logo, ideally a PNG with alpha).
    pub media_id: MediaId,
    /// Where it sits.
    pub position: WatermarkPosition,
    /// Its width as a share of the output's width, 0.02 to 1.
    pub scale: f64,
    /// 0 (invisible) to 1 (opaque); more than 0.
    pub opacity: f64,
}

/// One output of a profile.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ProfileOutput {
    /// Its name, unique in the profile (`[a-z0-9_-]`, it names the file).
    pub name: String,
    /// A box or an exact aspect.
    pub fit: Fit,
    /// Pixels.
    pub width: u32,
    /// Pixels.
    pub height: u32,
    /// Encoding.
    pub format: ProfileFormat,
    /// 1 to 100; absent: the format's default, or the highest a byte cap
    /// allows.
    pub quality: Option<u8>,
    /// The most bytes the file may have: the encoder searches down from
    /// `quality` until it fits (see [`Self::quality_floor`]).
    pub max_bytes: Option<u64>,
    /// What is kept of the original's metadata.
    pub metadata: MetadataPolicy,
    /// A logo laid over it.
    pub watermark: Option<Watermark>,
}

impl ProfileOutput {
    /// The quality the encoder starts from: the one asked for, else the
    /// highest a byte cap may give (90: above it bytes grow much faster
    /// than what the eye sees), else the format's default.
    pub fn starting_quality(&self) -> u8 {
        match (self.quality, self.max_bytes) {
            (Some(quality), _) => quality,
            (None, Some(_)) => 90,
            (None, None) => self.format.default_quality(),
        }
    }

    /// The lowest quality a byte search goes to. When the output is still
    /// over its cap there, the photo is made smaller (its box shrunk by a
    /// tenth at a time) rather than failed.
    pub const fn quality_floor() -> u8 {
        30
    }
}

/// A profile as a client writes it: a name and its outputs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ProfileDraft {
    /// Unique among the agency's profiles.
    pub name: String,
    /// What it renders.
    pub outputs: Vec<ProfileOutput>,
}

/// Fields refused, by wire path (`outputs[1].width`), with why.
pub type FieldReasons = BTreeMap<String, String>;

impl ProfileDraft {
    /// The draft with its name trimmed, or every field it breaks.
    pub fn check(mut self) -> Result<Self, FieldReasons> {
        let mut refused = FieldReasons::new();
        self.name = self.name.trim().to_owned();
        let chars = self.name.chars().count();
        if chars == 0 || chars > MAX_PROFILE_NAME_CHARS {
            refused.insert(
                "name".to_owned(),
                format!("must be 1 to {MAX_PROFILE_NAME_CHARS} characters"),
            );
        }
        if self.outputs.is_empty() || self.outputs.len() > MAX_OUTPUTS {
            refused.insert(
                "outputs".to_owned(),
                format!("must list 1 to {MAX_OUTPUTS} outputs"),
            );
        }
        let mut names = BTreeSet::new();
        for (index, output) in self.outputs.iter().enumerate() {
            let mut refuse = |field: &str, reason: String| {
                refused.insert(format!("outputs[{index}].{field}"), reason);
            };
            if !valid_output_name(&output.name) {
                refuse(
                    "name",
                    format!(
                        "must be 1 to {MAX_OUTPUT_NAME_CHARS} of a-z, 0-9, _ and -, starting with a letter or digit"
                    ),
                );
            } else if !names.insert(output.name.as_str()) {
                refuse("name", "is used by another output of this profile".into());
            }
            for (field, side) in [("width", output.width), ("height", output.height)] {
                if !(MIN_SIDE..=MAX_SIDE).contains(&side) {
                    refuse(field, format!("must be {MIN_SIDE} to {MAX_SIDE} pixels"));
                }
            }
            if output.quality.is_some_and(|q| !(1..=100).contains(&q)) {
                refuse("quality", "must be 1 to 100".into());
            }
            if output
                .max_bytes
                .is_some_and(|cap| !(MIN_MAX_BYTES..=MAX_MAX_BYTES).contains(&cap))
            {
                refuse(
                    "max_bytes",
                    format!("must be {MIN_MAX_BYTES} to {MAX_MAX_BYTES} bytes"),
                );
            }
            if let Some(watermark) = &output.watermark {
                if !(MIN_WATERMARK_SCALE..=MAX_WATERMARK_SCALE).contains(&watermark.scale) {
                    refuse(
                        "watermark.scale",
                        format!(
                            "must be {MIN_WATERMARK_SCALE} to {MAX_WATERMARK_SCALE} (a share of the output's width)"
                        ),
                    );
                }
                if !(watermark.opacity > 0.0 && watermark.opacity <= 1.0) {
                    refuse(
                        "watermark.opacity",
                        "must be more than 0 and at most 1".into(),
                    );
                }
            }
        }
        if refused.is_empty() {
            Ok(self)
        } else {
            Err(refused)
        }
    }

    /// The images its watermarks name, each once.
    pub fn watermark_media(&self) -> Vec<&MediaId> {
        let mut ids: Vec<&MediaId> = self
            .outputs
            .iter()
            .filter_map(|output| output.watermark.as_ref().map(|w| &w.media_id))
            .collect();
        ids.sort_by(|a, b| a.as_str().cmp(b.as_str()));
        ids.dedup();
        ids
    }
}

/// An output name: it becomes part of a file name and an archive's folder.
fn valid_output_name(name: &str) -> bool {
    let mut chars = name.chars();
    let first_ok = chars
        .next()
        .is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit());
    first_ok
        && name.chars().count() <= MAX_OUTPUT_NAME_CHARS
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-')
}

/// A starting profile an agency copies and adapts.
#[derive(Clone, Debug, PartialEq)]
pub struct ProfileTemplate {
    /// Its stable key (`mls_unbranded`, `marketing_branded`).
    pub key: &'static str,
    /// What it is for.
    pub description: &'static str,
    /// The profile it proposes. A branded template's watermarks name no
    /// image yet: [`ProfileTemplate::needs_watermark`] says so, and the
    /// agency fills in its logo's `media_id` when it copies it.
    pub draft: ProfileDraft,
    /// Whether its outputs want the agency's logo.
    pub needs_watermark: bool,
}

/// The two starting templates.
pub fn templates() -> Vec<ProfileTemplate> {
    let output =
        |name: &str, fit, width, height, format, quality, max_bytes, metadata| ProfileOutput {
            name: name.to_owned(),
            fit,
            width,
            height,
            format,
            quality,
            max_bytes,
            metadata,
            watermark: None,
        };
    use Fit::{Contain, Cover};
    use MetadataPolicy::{Copyright, Strip};
    use ProfileFormat::{Jpeg, Webp};
    vec![
        ProfileTemplate {
            key: "mls_unbranded",
            description: "Unbranded MLS set: the photo whole at 2048 px on its long edge under 3 MB, \
                          and a 1.6 aspect crop at 840 x 525 under 300 KB for boards that resample \
                          anything larger; JPEG, no metadata, no watermark.",
            draft: ProfileDraft {
                name: "MLS (unbranded)".to_owned(),
                outputs: vec![
                    output(
                        "mls_full",
                        Contain,
                        2048,
                        2048,
                        Jpeg,
                        None,
                        Some(3_000_000),
                        Strip,
                    ),
                    output(
                        "mls_small",
                        Cover,
                        840,
                        525,
                        Jpeg,
                        None,
                        Some(300_000),
                        Strip,
                    ),
                ],
            },
            needs_watermark: false,
        },
        ProfileTemplate {
            key: "marketing_branded",
            description: "Branded marketing set: a 16:9 hero and a 1:1 square for social posts in \
                          WebP, and a 2560 px JPEG for print-ready web use, each with the agency's \
                          logo at the bottom right and its copyright kept.",
            draft: ProfileDraft {
                name: "Marketing (branded)".to_owned(),
                outputs: vec![
                    output("hero", Cover, 1920, 1080, Webp, Some(82), None, Copyright),
                    output("square", Cover, 1080, 1080, Webp, Some(82), None, Copyright),
                    output("full", Contain, 2560, 2560, Jpeg, Some(88), None, Copyright),
                ],
            },
            needs_watermark: true,
        },
    ]
}

/// The watermark the branded template proposes, once the logo is known.
pub fn template_watermark(media_id: MediaId) -> Watermark {
    Watermark {
        media_id,
        position: WatermarkPosition::BottomRight,
        scale: 0.18,
        opacity: 0.85,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn output() -> ProfileOutput {
        templates()[0].draft.outputs[0].clone()
    }

    #[test]
    fn the_templates_pass_their_own_rules() {
        for template in templates() {
            let mut draft = template.draft.clone();
            if template.needs_watermark {
                for output in &mut draft.outputs {
                    output.watermark = Some(template_watermark(MediaId::generate()));
                }
            }
            assert_eq!(draft.clone().check(), Ok(draft), "{}", template.key);
        }
    }

    #[test]
    fn every_broken_field_is_named_by_its_path() {
        let mut bad = output();
        bad.name = "Has Space".into();
        bad.width = 8;
        bad.height = 9000;
        bad.quality = Some(0);
        bad.max_bytes = Some(5);
        bad.watermark = Some(Watermark {
            media_id: MediaId::generate(),
            position: WatermarkPosition::Center,
            scale: 1.5,
            opacity: 0.0,
        });
        let mut twin = output();
        twin.name = "same".into();
        let draft = ProfileDraft {
            name: "  ".into(),
            outputs: vec![bad, twin.clone(), twin],
        };
        let refused = draft.check().unwrap_err();
        let fields: Vec<&str> = refused.keys().map(String::as_str).collect();
        assert_eq!(
            fields,
            [
                "name",
                "outputs[0].height",
                "outputs[0].max_bytes",
                "outputs[0].name",
                "outputs[0].quality",
                "outputs[0].watermark.opacity",
                "outputs[0].watermark.scale",
                "outputs[0].width",
                "outputs[2].name",
            ]
        );
        assert!(refused["outputs[2].name"].contains("another output"));
    }

    #[test]
    fn a_profile_has_one_to_twelve_outputs() {
        let none = ProfileDraft {
            name: "Empty".into(),
            outputs: vec![],
        };
        assert!(none.check().unwrap_err().contains_key("outputs"));
        let many = ProfileDraft {
            name: "Many".into(),
            outputs: (0..=MAX_OUTPUTS)
                .map(|i| ProfileOutput {
                    name: format!("o{i}"),
                    ..output()
                })
                .collect(),
        };
        assert!(many.check().unwrap_err().contains_key("outputs"));
    }

    #[test]
    fn the_starting_quality_follows_what_was_asked() {
        let mut asked = output();
        asked.quality = Some(70);
        assert_eq!(asked.starting_quality(), 70);
        asked.quality = None;
        assert_eq!(asked.starting_quality(), 90, "a byte cap starts high");
        asked.max_bytes = None;
        asked.format = ProfileFormat::Avif;
        assert_eq!(asked.starting_quality(), 60);
    }
}
