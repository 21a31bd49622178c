//! The shoot packages an agency can order: price, currency and shoot length.
//! A fixed catalog; listings created without a package get `standard`.

/// A package.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Package {
    /// Its key, as sent by clients (`standard`).
    pub key: &'static str,
    /// Display name.
    pub name: &'static str,
    /// Price in minor units.
    pub amount: i64,
    /// ISO 4217 currency.
    pub currency: &'static str,
    /// How long the shoot takes, in minutes (availability sizes slots by it).
    pub shoot_minutes: u32,
}

/// Every package on offer.
pub const CATALOG: [Package; 3] = [
    Package {
        key: "essentials",
        name: "Essentials: photography",
        amount: 19_900,
        currency: "USD",
        shoot_minutes: 60,
    },
    Package {
        key: "standard",
        name: "Standard: photography and floorplan",
        amount: 29_900,
        currency: "USD",
        shoot_minutes: 90,
    },
    Package {
        key: "premium",
        name: "Premium: photography, video, 3D tour and floorplan",
        amount: 54_900,
        currency: "USD",
        shoot_minutes: 150,
    },
];

/// The package of a listing created without one.
pub const DEFAULT_PACKAGE: &str = "standard";

/// The package with this key.
pub fn find(key: &str) -> Option<&'static Package> {
    CATALOG.iter().find(|package| package.key == key)
}

/// The keys of every package, for error messages.
pub fn keys() -> Vec<&'static str> {
    CATALOG.iter().map(|package| package.key).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_package_exists() {
        assert!(find(DEFAULT_PACKAGE).is_some());
        assert!(find("gold").is_none());
        assert_eq!(keys(), ["essentials", "standard", "premium"]);
    }
}
