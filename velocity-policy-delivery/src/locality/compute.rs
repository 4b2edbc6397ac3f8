//! The compute side: which platform runs this process, and in which region.

use std::fmt;

use serde::{Serialize, Serializer};

use super::region::{Region, lookup};

/// The platform the code runs on, recognised from the variables it sets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Platform {
    /// Vercel Functions (`VERCEL_REGION`, e.g. `fra1`).
    Vercel,
    /// Fly.io Machines (`FLY_REGION`, an airport code such as `fra`).
    Fly,
    /// AWS Lambda (`AWS_LAMBDA_FUNCTION_NAME` and `AWS_REGION`).
    AwsLambda,
    /// Amazon ECS, on Fargate or EC2 (`AWS_EXECUTION_ENV=AWS_ECS_*` and `AWS_REGION`).
    AwsEcs,
}

impl Platform {
    /// The identifier used in JSON: `vercel`, `fly`, `aws_lambda`, `aws_ecs`.
    #[must_use]
    pub const fn id(self) -> &'static str {
        match self {
            Self::Vercel => "vercel",
            Self::Fly => "fly",
            Self::AwsLambda => "aws_lambda",
            Self::AwsEcs => "aws_ecs",
        }
    }

    /// The name printed in the locality table: `Vercel`, `Fly.io`, `AWS Lambda`, `AWS ECS`.
    #[must_use]
    pub const fn name(self) -> &'static str {
        match self {
            Self::Vercel => "Vercel",
            Self::Fly => "Fly.io",
            Self::AwsLambda => "AWS Lambda",
            Self::AwsEcs => "AWS ECS",
        }
    }
}

impl fmt::Display for Platform {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl Serialize for Platform {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.id())
    }
}

/// Where the compute runs: the platform, its own region code, and the cloud
/// region that code stands for.
///
/// `region` is `None` exactly when `reason` says why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ComputeSite {
    platform: Platform,
    variable: &'static str,
    code: Option<String>,
    region: Option<Region>,
    #[serde(skip_serializing_if = "Option::is_none")]
    reason: Option<&'static str>,
}

impl ComputeSite {
    /// The platform, recognised from its variables.
    #[must_use]
    pub const fn platform(&self) -> Platform {
        self.platform
    }

    /// The variable the region code was read from, e.g. `VERCEL_REGION`.
    #[must_use]
    pub const fn variable(&self) -> &'static str {
        self.variable
    }

    /// The platform's own region code as set (`fra1` on Vercel, `fra` on Fly.io,
    /// `eu-central-1` on AWS), if the variable held a well-formed one.
    #[must_use]
    pub fn code(&self) -> Option<&str> {
        self.code.as_deref()
    }

    /// The cloud region the compute runs in (or, on Fly.io, beside).
    #[must_use]
    pub const fn region(&self) -> Option<&Region> {
        self.region.as_ref()
    }

    /// Why [`region`](Self::region) is `None`. Always a fixed sentence, never input.
    #[must_use]
    pub const fn reason(&self) -> Option<&'static str> {
        self.reason
    }

    /// Recognises the platform from a set of variables (the process environment
    /// or a given map), the same way [`LocalityMap::from_vars`] does.
    ///
    /// [`LocalityMap::from_vars`]: super::LocalityMap::from_vars
    ///
    /// ```
    /// use velocity_policy_delivery::locality::{ComputeSite, Platform};
    ///
    /// let site = ComputeSite::from_vars([("VERCEL", "1"), ("VERCEL_REGION", "fra1")]).unwrap();
    /// assert_eq!(site.platform(), Platform::Vercel);
    /// assert_eq!(site.code(), Some("fra1"));
    /// assert_eq!(site.region().map(|r| r.code()), Some("eu-central-1"));
    /// ```
    pub fn from_vars<I, K, V>(vars: I) -> Option<Self>
    where
        I: IntoIterator<Item = (K, V)>,
        K: AsRef<str>,
        V: AsRef<str>,
    {
        let mut seen = PlatformVars::default();
        for (name, value) in vars {
            seen.note(name.as_ref(), value.as_ref());
        }
        seen.site()
    }
}

/// The platform variables seen while scanning, each reduced to what the probe
/// keeps: a well-formed code or the fact that it was malformed. No raw value is held.
#[derive(Debug, Default)]
pub(crate) struct PlatformVars {
    vercel: bool,
    vercel_region: Option<Code>,
    fly_region: Option<Code>,
    aws_region: Option<Code>,
    aws_default_region: Option<Code>,
    lambda: bool,
    ecs: bool,
}

/// A platform region code as read: well-formed (and kept) or not.
#[derive(Debug, Clone)]
enum Code {
    WellFormed(String),
    Malformed,
}

impl PlatformVars {
    /// Looks at one variable; ignores it unless it is a platform variable.
    pub(crate) fn note(&mut self, name: &str, value: &str) {
        let value = value.trim();
        match name {
            "VERCEL" => self.vercel = !value.is_empty(),
            "VERCEL_REGION" => self.vercel_region = Some(code(value, is_vercel_code)),
            "FLY_REGION" => self.fly_region = Some(code(value, is_airport_code)),
            "AWS_REGION" => self.aws_region = Some(code(value, |v| Region::aws(v).is_some())),
            "AWS_DEFAULT_REGION" => {
                self.aws_default_region = Some(code(value, |v| Region::aws(v).is_some()));
            }
            "AWS_LAMBDA_FUNCTION_NAME" => self.lambda = true,
            "AWS_EXECUTION_ENV" => {
                self.lambda |= value.starts_with("AWS_Lambda");
                self.ecs |= value.starts_with("AWS_ECS");
            }
            "ECS_CONTAINER_METADATA_URI_V4" | "ECS_CONTAINER_METADATA_URI" => self.ecs = true,
            _ => {}
        }
    }

    /// The compute site these variables describe, by precedence: Vercel (whose
    /// functions also set `AWS_REGION`), then Fly.io, then AWS Lambda and ECS.
    ///
    /// A bare `AWS_REGION` is not a compute site: on a laptop or a CI runner it
    /// names the region the AWS SDK talks to, not where the code runs.
    pub(crate) fn site(&self) -> Option<ComputeSite> {
        if self.vercel || self.vercel_region.is_some() {
            return Some(self.vercel_site());
        }
        if let Some(fly) = &self.fly_region {
            return Some(fly_site(fly));
        }
        let platform = if self.lambda {
            Platform::AwsLambda
        } else if self.ecs {
            Platform::AwsEcs
        } else {
            return None;
        };
        Some(self.aws_site(platform))
    }

    fn vercel_site(&self) -> ComputeSite {
        let mut site = ComputeSite {
            platform: Platform::Vercel,
            variable: "VERCEL_REGION",
            code: None,
            region: None,
            reason: None,
        };
        match &self.vercel_region {
            None => site.reason = Some(reason::VERCEL_RUNTIME_ONLY),
            Some(Code::Malformed) => site.reason = Some(reason::NOT_A_CODE),
            Some(Code::WellFormed(code)) => {
                site.code = Some(code.clone());
                if code == "dev1" {
                    site.reason = Some(reason::VERCEL_DEV);
                } else if let Some(region) = lookup(VERCEL_REGIONS, code) {
                    site.region = Some(Region::aws_static(region));
                } else {
                    site.reason = Some(reason::VERCEL_UNKNOWN);
                }
            }
        }
        site
    }

    fn aws_site(&self, platform: Platform) -> ComputeSite {
        let (variable, code) = match (&self.aws_region, &self.aws_default_region) {
            (Some(code), _) => ("AWS_REGION", Some(code)),
            (None, Some(code)) => ("AWS_DEFAULT_REGION", Some(code)),
            (None, None) => ("AWS_REGION", None),
        };
        let mut site = ComputeSite {
            platform,
            variable,
            code: None,
            region: None,
            reason: None,
        };
        match code {
            None => site.reason = Some(reason::AWS_NO_REGION),
            Some(Code::Malformed) => site.reason = Some(reason::NOT_A_CODE),
            Some(Code::WellFormed(code)) => {
                site.region = Region::aws(code);
                site.code = Some(code.clone());
            }
        }
        site
    }
}

fn fly_site(code: &Code) -> ComputeSite {
    let mut site = ComputeSite {
        platform: Platform::Fly,
        variable: "FLY_REGION",
        code: None,
        region: None,
        reason: None,
    };
    match code {
        Code::Malformed => site.reason = Some(reason::NOT_A_CODE),
        Code::WellFormed(code) => {
            site.code = Some(code.clone());
            match lookup(FLY_SAME_METRO, code) {
                Some(region) => site.region = Some(Region::aws_static(region)),
                None => site.reason = Some(reason::FLY_NO_METRO),
            }
        }
    }
    site
}

/// Keeps `value` only if it is well-formed.
fn code(value: &str, well_formed: impl Fn(&str) -> bool) -> Code {
    if well_formed(value) {
        Code::WellFormed(value.to_owned())
    } else {
        Code::Malformed
    }
}

/// Vercel's codes: three letters and a digit (`fra1`, `iad1`).
fn is_vercel_code(value: &str) -> bool {
    value.len() == 4
        && value.bytes().take(3).all(|b| b.is_ascii_lowercase())
        && value.as_bytes().get(3).is_some_and(u8::is_ascii_digit)
}

/// Fly.io's codes: three-letter airport codes (`fra`, `iad`).
fn is_airport_code(value: &str) -> bool {
    value.len() == 3 && value.bytes().all(|b| b.is_ascii_lowercase())
}

/// Vercel's compute regions and the AWS regions they run in, as Vercel's
/// region list gives them.
const VERCEL_REGIONS: &[(&str, &str)] = &[
    ("arn1", "eu-north-1"),
    ("bom1", "ap-south-1"),
    ("cdg1", "eu-west-3"),
    ("cle1", "us-east-2"),
    ("cpt1", "af-south-1"),
    ("dub1", "eu-west-1"),
    ("fra1", "eu-central-1"),
    ("gru1", "sa-east-1"),
    ("hkg1", "ap-east-1"),
    ("hnd1", "ap-northeast-1"),
    ("iad1", "us-east-1"),
    ("icn1", "ap-northeast-2"),
    ("kix1", "ap-northeast-3"),
    ("lhr1", "eu-west-2"),
    ("pdx1", "us-west-2"),
    ("sfo1", "us-west-1"),
    ("sin1", "ap-southeast-1"),
    ("syd1", "ap-southeast-2"),
    ("yul1", "ca-central-1"),
];

/// Fly.io regions that share a metro area with an AWS region.
///
/// Fly.io runs its own hardware, so a Fly region is never *in* a cloud region.
/// Where an AWS region sits in the same metro area, a round trip between them
/// costs about what one inside a region does, and the probe reports that region.
/// Everywhere else (`ams`, `ord`, `sea`, `jnb`, ...) it reports no region: the
/// nearest AWS region is another city, and naming it would be a guess.
const FLY_SAME_METRO: &[(&str, &str)] = &[
    ("arn", "eu-north-1"),
    ("bom", "ap-south-1"),
    ("cdg", "eu-west-3"),
    ("fra", "eu-central-1"),
    ("gru", "sa-east-1"),
    ("hkg", "ap-east-1"),
    ("iad", "us-east-1"),
    ("lhr", "eu-west-2"),
    ("nrt", "ap-northeast-1"),
    ("sin", "ap-southeast-1"),
    ("sjc", "us-west-1"),
    ("syd", "ap-southeast-2"),
    ("yul", "ca-central-1"),
];

/// Why the compute region is unknown. Fixed sentences only.
mod reason {
    pub(super) const VERCEL_RUNTIME_ONLY: &str = "VERCEL_REGION is set only while functions run; the project setting is not in the environment";
    pub(super) const VERCEL_DEV: &str = "vercel dev: the local machine";
    pub(super) const VERCEL_UNKNOWN: &str = "Vercel region code not in the probe's table";
    pub(super) const FLY_NO_METRO: &str =
        "Fly.io runs its own hardware, and no cloud region shares this metro area";
    pub(super) const AWS_NO_REGION: &str = "neither AWS_REGION nor AWS_DEFAULT_REGION is set";
    pub(super) const NOT_A_CODE: &str = "the variable does not hold a region code";
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_table_entry_is_well_formed() {
        for (code, region) in VERCEL_REGIONS {
            assert!(is_vercel_code(code), "{code}");
            assert!(Region::aws(region).is_some(), "{region}");
        }
        for (code, region) in FLY_SAME_METRO {
            assert!(is_airport_code(code), "{code}");
            assert!(Region::aws(region).is_some(), "{region}");
        }
    }

    #[test]
    fn vercel_wins_over_the_aws_region_its_functions_also_set() {
        let site = ComputeSite::from_vars([
            ("AWS_REGION", "us-east-1"),
            ("AWS_LAMBDA_FUNCTION_NAME", "fn"),
            ("VERCEL", "1"),
            ("VERCEL_REGION", "fra1"),
        ]);
        assert_eq!(site.map(|s| s.platform), Some(Platform::Vercel));
    }
}
