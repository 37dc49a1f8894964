//! "Did you mean ...?": the closest valid names to a misspelt one.

/// The candidates within a small edit distance of `input`, closest first (at most three).
pub(crate) fn closest<'a>(
    input: &str,
    candidates: impl IntoIterator<Item = &'a str>,
) -> Vec<&'a str> {
    let input_len = input.chars().count();
    let mut scored: Vec<(usize, &str)> = candidates
        .into_iter()
        .filter_map(|candidate| {
            let candidate_len = candidate.chars().count();
            let allowed = (input_len.max(candidate_len) / 3).max(1);
            // The lengths alone bound the distance from below: a name far longer or shorter
            // (a megabyte of "tool name") is dismissed without the quadratic comparison.
            if input_len.abs_diff(candidate_len) > allowed {
                return None;
            }
            let distance = edit_distance(input, candidate);
            (distance <= allowed).then_some((distance, candidate))
        })
        .collect();
    scored.sort();
    scored.into_iter().take(3).map(|(_, name)| name).collect()
}

/// A hint naming the closest candidates, or `None` when nothing is close.
pub(crate) fn did_you_mean<'a>(
    input: &str,
    candidates: impl IntoIterator<Item = &'a str>,
) -> Option<String> {
    let close = closest(input, candidates);
    (!close.is_empty()).then(|| {
        let names: Vec<String> = close.iter().map(|name| format!("`{name}`")).collect();
        format!("did you mean {}?", names.join(" or "))
    })
}

/// Levenshtein distance over Unicode scalar values, case-insensitive.
fn edit_distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().flat_map(char::to_lowercase).collect();
    let b: Vec<char> = b.chars().flat_map(char::to_lowercase).collect();
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
    fn finds_typos_and_ignores_strangers() {
        let names = ["delete_record", "create_invoice", "list_records"];
        assert_eq!(closest("delete_recrod", names), vec!["delete_record"]);
        assert_eq!(closest("DELETE_RECORD", names), vec!["delete_record"]);
        assert!(closest("transfer_funds", names).is_empty());
    }

    #[test]
    fn look_alike_characters_still_suggest_the_real_name() {
        // A Cyrillic "е" and a zero-width space: one edit each.
        let names = ["delete_record"];
        assert_eq!(closest("dеlete_record", names), vec!["delete_record"]);
        assert_eq!(
            closest("delete\u{200b}_record", names),
            vec!["delete_record"]
        );
    }

    #[test]
    fn huge_inputs_are_dismissed_by_length() {
        let huge = "a".repeat(1 << 20);
        assert!(closest(&huge, ["delete_record"]).is_empty());
    }

    #[test]
    fn hint_names_candidates() {
        assert_eq!(
            did_you_mean("recordid", ["record_id", "table_name"]).as_deref(),
            Some("did you mean `record_id`?")
        );
        assert_eq!(did_you_mean("zzz", ["record_id"]), None);
    }
}
