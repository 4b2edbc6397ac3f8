//! Cloud regions: the one piece of a host the probe keeps, and how two of them compare.

use std::borrow::Cow;
use std::fmt;
use std::str::FromStr;

use serde::{Serialize, Serializer};

/// The cloud a [`Region`] belongs to.
///
/// Each cloud spells its regions differently (`eu-central-1`, `europe-west3`,
/// `germanywestcentral`), so the cloud follows from the code.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum Cloud {
    /// Amazon Web Services: `eu-central-1`, `us-gov-west-1`.
    Aws,
    /// Google Cloud: `us-central1`, `europe-west3`.
    Gcp,
    /// Microsoft Azure: `eastus2`, `germanywestcentral`.
    Azure,
}

impl Cloud {
    /// The cloud's short name, as printed and serialized: `aws`, `gcp`, `azure`.
    #[must_use]
    pub const fn id(self) -> &'static str {
        match self {
            Self::Aws => "aws",
            Self::Gcp => "gcp",
            Self::Azure => "azure",
        }
    }
}

impl fmt::Display for Cloud {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.id())
    }
}

impl Serialize for Cloud {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.id())
    }
}

/// A cloud region code such as `eu-central-1`.
///
/// A `Region` only ever holds a validated region code: one of the shapes AWS or
/// Google Cloud use, or an Azure region from a fixed table. Nothing else from a
/// host or a connection string can end up in one, which is what lets the
/// locality map be printed safely.
///
/// ```
/// use velocity_policy_delivery::locality::{Cloud, Region, RegionMatch};
///
/// let frankfurt: Region = "eu-central-1".parse()?;
/// assert_eq!(frankfurt.cloud(), Cloud::Aws);
/// assert_eq!(frankfurt.compare(&Region::parse("us-east-1")?), RegionMatch::Different);
/// assert!(Region::parse("db.example.com").is_err());
/// # Ok::<(), velocity_policy_delivery::locality::RegionError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Region {
    cloud: Cloud,
    code: Cow<'static, str>,
}

impl Region {
    /// Reads a region code of any supported cloud.
    ///
    /// # Errors
    ///
    /// [`RegionError`] when `code` is not shaped like an AWS or Google Cloud region
    /// and is not a known Azure region. The error never repeats the input.
    pub fn parse(code: &str) -> Result<Self, RegionError> {
        Self::aws(code)
            .or_else(|| Self::gcp(code))
            .or_else(|| Self::azure(code))
            .ok_or(RegionError { _private: () })
    }

    /// The region code, e.g. `eu-central-1`.
    #[must_use]
    pub fn code(&self) -> &str {
        &self.code
    }

    /// The cloud the region belongs to.
    #[must_use]
    pub const fn cloud(&self) -> Cloud {
        self.cloud
    }

    /// Whether `self` and `other` are the same region.
    ///
    /// Regions of two different clouds compare as [`RegionMatch::Unknown`]: the
    /// probe has no table of which regions of different clouds share a metro area.
    #[must_use]
    pub fn compare(&self, other: &Self) -> RegionMatch {
        if self.cloud != other.cloud {
            RegionMatch::Unknown
        } else if self.code == other.code {
            RegionMatch::Same
        } else {
            RegionMatch::Different
        }
    }

    /// An AWS region code (`eu-central-1`, `us-gov-west-1`, `cn-northwest-1`),
    /// checked against the shape AWS uses.
    pub(crate) fn aws(code: &str) -> Option<Self> {
        is_aws_region(code).then(|| Self {
            cloud: Cloud::Aws,
            code: Cow::Owned(code.to_owned()),
        })
    }

    /// An AWS region from one of the probe's own tables.
    pub(crate) const fn aws_static(code: &'static str) -> Self {
        Self {
            cloud: Cloud::Aws,
            code: Cow::Borrowed(code),
        }
    }

    /// A Google Cloud region code (`us-central1`, `europe-west3`), checked
    /// against the shape Google uses.
    pub(crate) fn gcp(code: &str) -> Option<Self> {
        is_gcp_region(code).then(|| Self {
            cloud: Cloud::Gcp,
            code: Cow::Owned(code.to_owned()),
        })
    }

    /// An Azure region name from the table below.
    pub(crate) fn azure(code: &str) -> Option<Self> {
        AZURE_REGIONS
            .iter()
            .find(|&&known| known == code)
            .map(|&known| Self {
                cloud: Cloud::Azure,
                code: Cow::Borrowed(known),
            })
    }
}

impl fmt::Display for Region {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.code)
    }
}

impl FromStr for Region {
    type Err = RegionError;

    fn from_str(code: &str) -> Result<Self, Self::Err> {
        Self::parse(code)
    }
}

impl Serialize for Region {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.code)
    }
}

/// A string that is not a region code of a supported cloud.
///
/// The message never contains the rejected text: it may have come from anywhere.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "not a cloud region code (expected an AWS, Google Cloud or Azure region such as `eu-central-1`)"
)]
pub struct RegionError {
    _private: (),
}

/// How two regions relate, as seen from what the environment reveals.
///
/// `policy locality --check` uses this to flag a blocking hop that crosses regions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum RegionMatch {
    /// Both sides are in the same region.
    Same,
    /// The two sides are in different regions of the same cloud: every round
    /// trip pays the distance.
    Different,
    /// At least one side's region is unknown, or they are in different clouds.
    Unknown,
}

impl RegionMatch {
    /// Compares two possibly unknown regions.
    ///
    /// ```
    /// use velocity_policy_delivery::locality::{Region, RegionMatch};
    ///
    /// let fra = Region::parse("eu-central-1").ok();
    /// assert_eq!(RegionMatch::between(fra.as_ref(), fra.as_ref()), RegionMatch::Same);
    /// assert_eq!(RegionMatch::between(fra.as_ref(), None), RegionMatch::Unknown);
    /// ```
    #[must_use]
    pub fn between(a: Option<&Region>, b: Option<&Region>) -> Self {
        match (a, b) {
            (Some(a), Some(b)) => a.compare(b),
            _ => Self::Unknown,
        }
    }

    /// The word printed for it: `same`, `different`, `unknown`.
    #[must_use]
    pub const fn id(self) -> &'static str {
        match self {
            Self::Same => "same",
            Self::Different => "different",
            Self::Unknown => "unknown",
        }
    }
}

impl fmt::Display for RegionMatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.id())
    }
}

impl Serialize for RegionMatch {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.id())
    }
}

/// The compass words AWS and Google use in region codes.
const DIRECTIONS: &[&str] = &[
    "north",
    "south",
    "east",
    "west",
    "central",
    "northeast",
    "southeast",
    "northwest",
    "southwest",
];

/// `<area>[-<partition>]-<direction>-<n>`: `eu-central-1`, `us-gov-west-1`.
fn is_aws_region(code: &str) -> bool {
    const AREAS: &[&str] = &[
        "us", "eu", "ap", "sa", "ca", "me", "af", "il", "mx", "cn", "eusc",
    ];
    const PARTITIONS: &[&str] = &["gov", "iso", "isob", "isoe", "isof"];
    let parts: Vec<&str> = code.split('-').collect();
    let (area, partition, direction, number) = match parts.as_slice() {
        [area, direction, number] => (*area, None, *direction, *number),
        [area, partition, direction, number] => (*area, Some(*partition), *direction, *number),
        _ => return false,
    };
    AREAS.contains(&area)
        && partition.is_none_or(|p| PARTITIONS.contains(&p))
        && DIRECTIONS.contains(&direction)
        && is_small_number(number)
}

/// `<area>-<direction><n>`: `us-central1`, `europe-west3`.
fn is_gcp_region(code: &str) -> bool {
    const AREAS: &[&str] = &[
        "us",
        "europe",
        "asia",
        "australia",
        "northamerica",
        "southamerica",
        "me",
        "africa",
    ];
    let Some((area, rest)) = code.split_once('-') else {
        return false;
    };
    let digits_at = rest
        .find(|c: char| c.is_ascii_digit())
        .unwrap_or(rest.len());
    let (direction, number) = rest.split_at(digits_at);
    AREAS.contains(&area) && DIRECTIONS.contains(&direction) && is_small_number(number)
}

/// One or two digits, no leading zero.
fn is_small_number(s: &str) -> bool {
    (1..=2).contains(&s.len()) && s.bytes().all(|b| b.is_ascii_digit()) && !s.starts_with('0')
}

/// Azure region names. Azure's names have no shape to check, so only these are
/// accepted.
const AZURE_REGIONS: &[&str] = &[
    "australiaeast",
    "australiasoutheast",
    "brazilsouth",
    "canadacentral",
    "canadaeast",
    "centralindia",
    "centralus",
    "eastasia",
    "eastus",
    "eastus2",
    "francecentral",
    "germanywestcentral",
    "israelcentral",
    "italynorth",
    "japaneast",
    "japanwest",
    "koreacentral",
    "mexicocentral",
    "newzealandnorth",
    "northcentralus",
    "northeurope",
    "norwayeast",
    "polandcentral",
    "qatarcentral",
    "southafricanorth",
    "southcentralus",
    "southeastasia",
    "southindia",
    "spaincentral",
    "swedencentral",
    "switzerlandnorth",
    "uaenorth",
    "uksouth",
    "ukwest",
    "westcentralus",
    "westeurope",
    "westindia",
    "westus",
    "westus2",
    "westus3",
];

/// The short region codes ElastiCache puts in its host names
/// (`name.xxxxxx.0001.euc1.cache.amazonaws.com`), and the regions they stand for.
///
/// The pattern is the region's initials: `eu-central-1` is `euc1`,
/// `ap-southeast-2` is `apse2`, `us-gov-west-1` is `usgw1`; China's Ningxia
/// region is `cnw1`. A code not in this table gives no region.
const ELASTICACHE_CODES: &[(&str, &str)] = &[
    ("afs1", "af-south-1"),
    ("ape1", "ap-east-1"),
    ("ape2", "ap-east-2"),
    ("apne1", "ap-northeast-1"),
    ("apne2", "ap-northeast-2"),
    ("apne3", "ap-northeast-3"),
    ("aps1", "ap-south-1"),
    ("aps2", "ap-south-2"),
    ("apse1", "ap-southeast-1"),
    ("apse2", "ap-southeast-2"),
    ("apse3", "ap-southeast-3"),
    ("apse4", "ap-southeast-4"),
    ("apse5", "ap-southeast-5"),
    ("apse7", "ap-southeast-7"),
    ("cac1", "ca-central-1"),
    ("caw1", "ca-west-1"),
    ("cnn1", "cn-north-1"),
    ("cnw1", "cn-northwest-1"),
    ("euc1", "eu-central-1"),
    ("euc2", "eu-central-2"),
    ("eun1", "eu-north-1"),
    ("eus1", "eu-south-1"),
    ("eus2", "eu-south-2"),
    ("euw1", "eu-west-1"),
    ("euw2", "eu-west-2"),
    ("euw3", "eu-west-3"),
    ("ilc1", "il-central-1"),
    ("mec1", "me-central-1"),
    ("mes1", "me-south-1"),
    ("mxc1", "mx-central-1"),
    ("sae1", "sa-east-1"),
    ("use1", "us-east-1"),
    ("use2", "us-east-2"),
    ("usge1", "us-gov-east-1"),
    ("usgw1", "us-gov-west-1"),
    ("usw1", "us-west-1"),
    ("usw2", "us-west-2"),
];

/// The AWS region an ElastiCache short code stands for, if the table knows it.
pub(crate) fn elasticache_region(short: &str) -> Option<Region> {
    lookup(ELASTICACHE_CODES, short).map(Region::aws_static)
}

/// Looks `key` up in a two-column table.
pub(crate) fn lookup(table: &[(&'static str, &'static str)], key: &str) -> Option<&'static str> {
    table.iter().find(|(k, _)| *k == key).map(|&(_, v)| v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aws_shapes() {
        for ok in [
            "eu-central-1",
            "us-east-1",
            "ap-southeast-2",
            "us-gov-west-1",
            "cn-northwest-1",
            "il-central-1",
            "ca-west-1",
        ] {
            assert!(is_aws_region(ok), "{ok}");
        }
        for bad in [
            "eu-central",
            "eu-central-01",
            "eu-middle-1",
            "xx-east-1",
            "eu-central-1-3",
            "us-central1",
            "",
            "eu--1",
        ] {
            assert!(!is_aws_region(bad), "{bad}");
        }
    }

    #[test]
    fn gcp_shapes() {
        for ok in [
            "us-central1",
            "europe-west3",
            "asia-northeast1",
            "northamerica-northeast2",
        ] {
            assert!(is_gcp_region(ok), "{ok}");
        }
        for bad in [
            "us-central",
            "us-central-1",
            "europe-west03",
            "mars-west1",
            "uscentral1",
        ] {
            assert!(!is_gcp_region(bad), "{bad}");
        }
    }

    #[test]
    fn parse_infers_the_cloud() {
        assert_eq!(
            Region::parse("eu-central-1").map(|r| r.cloud()),
            Ok(Cloud::Aws)
        );
        assert_eq!(
            Region::parse("europe-west3").map(|r| r.cloud()),
            Ok(Cloud::Gcp)
        );
        assert_eq!(
            Region::parse("germanywestcentral").map(|r| r.cloud()),
            Ok(Cloud::Azure)
        );
        assert!(Region::parse("acme").is_err());
    }

    #[test]
    fn every_elasticache_code_maps_to_a_valid_region() {
        for (short, full) in ELASTICACHE_CODES {
            assert!(is_aws_region(full), "{short} -> {full}");
            assert_eq!(
                elasticache_region(short).map(|r| r.code().to_owned()),
                Some((*full).to_owned())
            );
        }
        assert_eq!(elasticache_region("zzz9"), None);
    }

    #[test]
    fn comparing() {
        let fra = Region::aws_static("eu-central-1");
        let iad = Region::aws_static("us-east-1");
        let gcp = Region::gcp("europe-west3");
        assert_eq!(fra.compare(&fra.clone()), RegionMatch::Same);
        assert_eq!(fra.compare(&iad), RegionMatch::Different);
        assert_eq!(
            RegionMatch::between(Some(&fra), gcp.as_ref()),
            RegionMatch::Unknown
        );
        assert_eq!(RegionMatch::between(None, Some(&fra)), RegionMatch::Unknown);
    }
}
