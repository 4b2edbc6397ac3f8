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

/// Levenshtein distance over characters; inputs are short names, and long ones are cut off so
/// that a huge identifier cannot make this quadratic in the file size.
fn distance(a: &str, b: &str) -> usize {
    const MAX: usize = 64;
    let a: Vec<char> = a.chars().take(MAX).collect();
    let b: Vec<char> = b.chars().take(MAX).collect();
    let mut previous: Vec<usize> = (0..=b.len()).collect();
    let mut current = vec![0; b.len() + 1];
    for (i, ca) in a.iter().enumerate() {
        current[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let substitution = previous[j] + usize::from(ca != cb);
            current[j + 1] = substitution.min(previous[j + 1] + 1).min(current[j] + 1);
        }
        std::mem::swap(&mut previous, &mut current);
    }
    previous[b.len()]
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
}
