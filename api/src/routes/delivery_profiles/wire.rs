//! The wire types of delivery profiles. Their limits are those of
//! `storage::rules::delivery_profiles` (held to them in
//! `routes/wire_limits.rs`); the enums mirror the domain's, value for value.

use serde::de::Error as _;
use serde::{Deserialize, Deserializer, Serialize};
use storage::ids::MediaId;
use storage::media::DeliveryProfile;
use storage::rules::delivery_profiles::{
    Fit, MetadataPolicy, ProfileDraft, ProfileFormat, ProfileOutput, ProfileTemplate, Watermark,
    WatermarkPosition,
};
use utoipa::ToSchema;

use crate::routes::webhooks::endpoint_rules::whole_number;

/// A whole number (`840` and `840.0` alike) that fits `T`.
fn whole<'de, D, T>(deserializer: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: TryFrom<i64>,
{
    let number = serde_json::Number::deserialize(deserializer)?;
    let value = whole_number(&number)
        .ok_or_else(|| D::Error::custom(format!("{number} is not a whole number")))?;
    T::try_from(value).map_err(|_| D::Error::custom(format!("{value} is out of range")))
}

/// [`whole`], or `null`.
fn whole_or_none<'de, D, T>(deserializer: D) -> Result<Option<T>, D::Error>
where
    D: Deserializer<'de>,
    T: TryFrom<i64>,
{
    Option::<serde_json::Number>::deserialize(deserializer)?
        .map(|number| {
            let value = whole_number(&number)
                .ok_or_else(|| D::Error::custom(format!("{number} is not a whole number")))?;
            T::try_from(value).map_err(|_| D::Error::custom(format!("{value} is out of range")))
        })
        .transpose()
}

/// Declares a wire enum that mirrors a domain enum, with conversions both
/// ways, so the document lists exactly the values the domain takes.
macro_rules! mirrored {
    ($(#[$doc:meta])* $wire:ident = $domain:ident { $($(#[$vdoc:meta])* $variant:ident),* $(,)? }) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
        #[serde(rename_all = "snake_case")]
        pub enum $wire { $($(#[$vdoc])* $variant),* }

        impl From<$wire> for $domain {
            fn from(value: $wire) -> Self {
                match value { $($wire::$variant => Self::$variant),* }
            }
        }

        impl From<$domain> for $wire {
            fn from(value: $domain) -> Self {
                match value { $($domain::$variant => Self::$variant),* }
            }
        }
    };
}

mirrored! {
    /// `contain`: the whole photo inside the box. `cover`: exactly the box's
    /// aspect, cropped around the photo's focal point.
    FitWire = Fit {
        /// The whole photo inside the box.
        Contain,
        /// Exactly the box's aspect, cropped around the focal point.
        Cover,
    }
}

mirrored! {
    /// The output's encoding.
    FormatWire = ProfileFormat {
        /// Baseline JPEG.
        Jpeg,
        /// Lossy WebP.
        Webp,
        /// AVIF (AV1).
        Avif,
    }
}

mirrored! {
    /// `strip`: no metadata at all. `copyright`: the copyright notice and the
    /// author only (never location, serials or dates).
    MetadataWire = MetadataPolicy {
        /// Nothing kept.
        Strip,
        /// The copyright notice and the author kept.
        Copyright,
    }
}

mirrored! {
    /// Where the watermark sits.
    PositionWire = WatermarkPosition {
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
}

/// A watermark: an image the agency uploaded, laid over the output.
#[derive(Clone, Debug, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct WatermarkWire {
    /// The agency's uploaded image (`med_…`), ideally a PNG with alpha.
    #[schema(value_type = String, example = "med_01JD3Z6X0S4XW8V2C9B5N7Q1RK")]
    pub media_id: MediaId,
    /// Where it sits.
    pub position: PositionWire,
    /// Its width as a share of the output's width.
    #[schema(minimum = 0.02, maximum = 1.0)]
    pub scale: f64,
    /// 0 (invisible, refused) to 1 (opaque).
    #[schema(exclusive_minimum = 0.0, maximum = 1.0)]
    pub opacity: f64,
}

/// One output of a profile.
#[derive(Clone, Debug, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct OutputWire {
    /// Unique in the profile; a-z, 0-9, `_` and `-` (it names the file).
    #[schema(pattern = "^[a-z0-9][a-z0-9_-]*$", min_length = 1, max_length = 40)]
    pub name: String,
    /// A box (`contain`) or an exact aspect (`cover`).
    pub fit: FitWire,
    /// Pixels.
    #[serde(deserialize_with = "whole")]
    #[schema(minimum = 16, maximum = 8192)]
    pub width: u32,
    /// Pixels.
    #[serde(deserialize_with = "whole")]
    #[schema(minimum = 16, maximum = 8192)]
    pub height: u32,
    /// `jpeg`, `webp` or `avif`.
    pub format: FormatWire,
    /// 1 to 100. Absent: the highest a byte cap allows (from 90), else the
    /// format's default (JPEG 85, WebP 80, AVIF 60).
    #[serde(default, deserialize_with = "whole_or_none")]
    #[schema(minimum = 1, maximum = 100)]
    pub quality: Option<u8>,
    /// The most bytes the file may have. The encoder searches quality down
    /// to 30; a photo still too large there is made smaller, never failed.
    #[serde(default, deserialize_with = "whole_or_none")]
    #[schema(minimum = 10000, maximum = 50000000)]
    pub max_bytes: Option<u64>,
    /// What is kept of the original's metadata.
    pub metadata: MetadataWire,
    /// A logo laid over the output.
    pub watermark: Option<WatermarkWire>,
}

impl From<OutputWire> for ProfileOutput {
    fn from(output: OutputWire) -> Self {
        Self {
            name: output.name,
            fit: output.fit.into(),
            width: output.width,
            height: output.height,
            format: output.format.into(),
            quality: output.quality,
            max_bytes: output.max_bytes,
            metadata: output.metadata.into(),
            watermark: output.watermark.map(Watermark::from),
        }
    }
}

impl From<ProfileOutput> for OutputWire {
    fn from(output: ProfileOutput) -> Self {
        Self {
            name: output.name,
            fit: output.fit.into(),
            width: output.width,
            height: output.height,
            format: output.format.into(),
            quality: output.quality,
            max_bytes: output.max_bytes,
            metadata: output.metadata.into(),
            watermark: output.watermark.map(WatermarkWire::from),
        }
    }
}

/// Body of `POST /delivery-profiles`, and of `PATCH` (which replaces the
/// name, the outputs, or both).
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ProfileIn {
    /// Unique among the agency's profiles.
    #[schema(min_length = 1, max_length = 100)]
    pub name: String,
    /// What it renders, 1 to 12 outputs.
    #[schema(min_items = 1, max_items = 12)]
    pub outputs: Vec<OutputWire>,
    /// Whether new photos are rendered to it and its outputs listed
    /// (default true).
    pub active: Option<bool>,
}

impl ProfileIn {
    /// The draft it asks for, and whether the profile is active.
    pub fn into_draft(self) -> (ProfileDraft, bool) {
        let draft = ProfileDraft {
            name: self.name,
            outputs: self.outputs.into_iter().map(ProfileOutput::from).collect(),
        };
        (draft, self.active.unwrap_or(true))
    }
}

/// Body of `PATCH /delivery-profiles/{profile_id}`: either field or both.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ProfilePatch {
    /// A new name.
    #[schema(min_length = 1, max_length = 100)]
    pub name: Option<String>,
    /// The new outputs, replacing the old ones whole.
    #[schema(min_items = 1, max_items = 12)]
    pub outputs: Option<Vec<OutputWire>>,
    /// Pause (`false`) or resume (`true`) the profile.
    pub active: Option<bool>,
}

/// A delivery profile.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct ProfileOut {
    /// Its id (`dpf_…`).
    pub id: String,
    /// Its name.
    pub name: String,
    /// What it renders.
    pub outputs: Vec<OutputWire>,
    /// Whether new photos are rendered to it and its outputs listed.
    pub active: bool,
    /// 1 at creation, one more at each change of its outputs.
    pub revision: i64,
    /// RFC 3339.
    pub created_at: String,
    /// RFC 3339.
    pub updated_at: String,
}

impl From<DeliveryProfile> for ProfileOut {
    fn from(profile: DeliveryProfile) -> Self {
        Self {
            id: profile.id.to_string(),
            name: profile.name,
            outputs: profile.outputs.into_iter().map(OutputWire::from).collect(),
            active: profile.active,
            revision: profile.revision,
            created_at: profile.created_at.to_rfc3339(),
            updated_at: profile.updated_at.to_rfc3339(),
        }
    }
}

/// A starting profile to copy: post its `profile` to `POST
/// /delivery-profiles`, after adding the agency's logo as each output's
/// `watermark` when the template suggests one.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct TemplateOut {
    /// `mls_unbranded` or `marketing_branded`.
    pub key: String,
    /// What it is for.
    pub description: String,
    /// The profile it proposes (without a watermark: the logo is the
    /// agency's own image).
    pub profile: TemplateProfileOut,
    /// For a branded template, the watermark each output takes once the
    /// logo's `media_id` is added; `null` for an unbranded one.
    pub suggested_watermark: Option<SuggestedWatermark>,
}

/// A template's profile.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct TemplateProfileOut {
    /// A name to start from.
    pub name: String,
    /// Its outputs.
    pub outputs: Vec<OutputWire>,
}

/// Where and how large a branded template puts the logo.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct SuggestedWatermark {
    /// Where it sits.
    pub position: PositionWire,
    /// Its width as a share of the output's width.
    pub scale: f64,
    /// 0 to 1.
    pub opacity: f64,
}

impl From<ProfileTemplate> for TemplateOut {
    fn from(template: ProfileTemplate) -> Self {
        let suggested_watermark = template.needs_watermark.then(|| {
            let w = storage::rules::delivery_profiles::template_watermark(MediaId::generate());
            SuggestedWatermark {
                position: w.position.into(),
                scale: w.scale,
                opacity: w.opacity,
            }
        });
        Self {
            key: template.key.to_owned(),
            description: template.description.to_owned(),
            profile: TemplateProfileOut {
                name: template.draft.name,
                outputs: template
                    .draft
                    .outputs
                    .into_iter()
                    .map(OutputWire::from)
                    .collect(),
            },
            suggested_watermark,
        }
    }
}

impl From<Watermark> for WatermarkWire {
    fn from(w: Watermark) -> Self {
        Self {
            media_id: w.media_id,
            position: w.position.into(),
            scale: w.scale,
            opacity: w.opacity,
        }
    }
}

impl From<WatermarkWire> for Watermark {
    fn from(w: WatermarkWire) -> Self {
        Self {
            media_id: w.media_id,
            position: w.position.into(),
            scale: w.scale,
            opacity: w.opacity,
        }
    }
}
