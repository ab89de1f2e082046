//! Checks both Java key tables (the server's and the coordinator's) must pass.

use std::collections::BTreeSet;

use super::keys::{JavaKey, Treatment};

/// Each table is sorted (any case), names each key once, and says how every row is mapped
/// or why it is not.
pub(super) fn assert_sorted_with_reasons(table: &[JavaKey]) {
    for pair in table.windows(2) {
        assert!(
            pair[0].key.to_ascii_lowercase() < pair[1].key.to_ascii_lowercase(),
            "{} then {}: keep the table sorted, each key once",
            pair[0].key,
            pair[1].key
        );
    }
    for k in table {
        match k.treatment {
            Treatment::Mapped { how, absent, .. } => {
                assert!(!how.is_empty() && !absent.is_empty(), "{}", k.key)
            }
            Treatment::NotApplicable(why) | Treatment::Refused(why) => {
                assert!(!why.is_empty(), "{} needs its reason", k.key)
            }
        }
    }
}

/// The rows a mapper asked for (a family's member counts as the family's row) and the rows
/// `table` marks mapped: the two sets each table's mapper test compares.
pub(super) fn asked_and_mapped<'a>(
    asked: &'a [String],
    table: &'static [JavaKey],
    lookup: fn(&str) -> Option<&'static JavaKey>,
) -> (BTreeSet<&'a str>, BTreeSet<&'static str>) {
    let asked = asked
        .iter()
        .map(|k| lookup(k).map_or(k.as_str(), |row| row.key))
        .collect();
    let mapped = table
        .iter()
        .filter(|k| matches!(k.treatment, Treatment::Mapped { .. }))
        .map(|k| k.key)
        .collect();
    (asked, mapped)
}

/// Checks that docs/compatibility.md holds `table` between the `begin` and `end` markers,
/// or with `SPILLWAY_UPDATE_README` set writes it there; `test` is the test's name, for the
/// message. Both key tables (the server's and the coordinator's) are generated this way.
pub(super) fn assert_docs_section_is(
    begin: &str,
    end_marker: &str,
    table: &str,
    what: &str,
    test: &str,
) {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/docs/compatibility.md");
    let readme = std::fs::read_to_string(path).unwrap();
    let start = readme
        .find(begin)
        .unwrap_or_else(|| panic!("docs/compatibility.md has the {what}'s begin marker"))
        + begin.len();
    let end = readme[start..]
        .find(end_marker)
        .expect("and its end marker")
        + start;
    if readme[start..end] != *table {
        if std::env::var_os("SPILLWAY_UPDATE_README").is_some() {
            let updated = format!("{}{table}{}", &readme[..start], &readme[end..]);
            std::fs::write(path, updated).unwrap();
        } else {
            panic!(
                "docs/compatibility.md's {what} is stale: run SPILLWAY_UPDATE_README=1 cargo \
                 test --lib {test}"
            );
        }
    }
}
