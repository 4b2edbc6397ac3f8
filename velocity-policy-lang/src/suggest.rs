//! "Did you mean": the closest known name to an unknown one.

/// The candidate closest to `input`, if it is close enough to be a likely typo.
#[must_use]
pub fn closest<'a>(input: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    let limit = (input.chars().count() / 3).max(1);
    candidates
        .into_iter()
        .map(|candidate| (distance(input, candidate), candidate))
        .filter(|(distance, _)| *distance <= limit)
        .min_by_key(|(distance, _)| *distance)
        .map(|(_, candidate)| candidate)
}

/// A help text: "did you mean `x`?" when a candidate is close, else the list of candidates.
#[must_use]
pub fn did_you_mean<'a>(
    input: &str,
    candidates: impl IntoIterator<Item = &'a str> + Clone,
    what: &str,
    otherwise: &str,
) -> String {
    match closest(input, candidates.clone()) {
        Some(candidate) => format!("did you mean `{candidate}`?"),
        None => {
            let list: Vec<String> = candidates
                .into_iter()
                .map(|candidate| format!("`{candidate}`"))
                .collect();
            if list.is_empty() {
                otherwise.to_owned()
            } else {
                format!("{what} are {}", list.join(", "))
            }
        }
    }
}

/// The edit distance (Levenshtein, over characters, from `strsim`); inputs are short names, and
/// long ones are cut to their first 64 characters so that a huge identifier cannot make this
/// quadratic in the file size.
fn distance(a: &str, b: &str) -> usize {
    strsim::levenshtein(cut(a), cut(b))
}

/// The first 64 characters of `s`.
fn cut(s: &str) -> &str {
    const MAX: usize = 64;
    s.char_indices()
        .nth(MAX)
        .and_then(|(at, _)| s.get(..at))
        .unwrap_or(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suggests_a_close_name() {
        assert_eq!(
            closest("bulkhed", ["breaker", "bulkhead", "retry"]),
            Some("bulkhead")
        );
        assert_eq!(closest("zzz", ["breaker", "bulkhead"]), None);
    }

    #[test]
    fn lists_candidates_when_nothing_is_close() {
        assert_eq!(
            did_you_mean("zzz", ["a1", "b1"], "settings", ""),
            "settings are `a1`, `b1`"
        );
    }

    #[test]
    fn long_names_are_compared_on_their_first_64_characters() {
        let known = format!("{}{}", "a".repeat(64), "tail");
        let typed = format!("{}{}", "a".repeat(64), "completely different");
        assert_eq!(distance(&typed, &known), 0);
        assert_eq!(closest(&typed, [known.as_str()]), Some(known.as_str()));
        // Multi-byte characters are cut on a character boundary, not a byte.
        assert_eq!(distance(&"é".repeat(70), &"é".repeat(64)), 0);
        assert_eq!(distance("kitten", "sitting"), 3);
    }
}
