//! What an HTML attribute says, read as browsers read it: the asset audit's and the
//! image-dimensions layer's one reading of `width` and `height`.
//!
//! ```
//! use velocity_policy_delivery::html::dimension;
//!
//! assert_eq!(dimension(" 640px"), Some(640.0));
//! assert_eq!(dimension("50%"), None);
//! ```

/// A `width` or `height` attribute as browsers read it: leading digits and an optional
/// fraction (`640`, `640px`, `12.5`); `None` for a percentage or no number at all. Zero is a
/// number: callers that need a size refuse it.
#[must_use]
pub fn dimension(value: &str) -> Option<f64> {
    let value = value.trim_start();
    let end = value
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(value.len());
    let (number, rest) = value.split_at(end);
    if rest.starts_with('%') {
        return None;
    }
    number.parse::<f64>().ok().filter(|n| n.is_finite())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dimensions_parse_like_attributes() {
        assert_eq!(dimension("640"), Some(640.0));
        assert_eq!(dimension(" 640px"), Some(640.0));
        assert_eq!(dimension("12.5"), Some(12.5));
        assert_eq!(dimension("0"), Some(0.0));
        assert_eq!(dimension("50%"), None);
        assert_eq!(dimension("auto"), None);
        assert_eq!(dimension(""), None);
    }
}
