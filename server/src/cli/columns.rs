//! Aligned columns, as the CLI's tables print them (`endpoint status`, `member list`,
//! `snapshot status`): every cell padded to its column's widest, three spaces between columns,
//! the last cell of a line unpadded.

/// `rows` (the header first) as aligned lines joined by newlines, without a trailing one. Rows
/// may be shorter than others (e.g. an error message instead of a status).
pub fn align(rows: &[Vec<String>]) -> String {
    let cols = rows.iter().map(Vec::len).max().unwrap_or(0);
    let widths: Vec<usize> = (0..cols)
        .map(|c| {
            rows.iter()
                .filter_map(|r| r.get(c))
                .map(String::len)
                .max()
                .unwrap_or(0)
        })
        .collect();
    rows.iter()
        .map(|r| {
            r.iter()
                .enumerate()
                .map(|(i, c)| {
                    if i + 1 == r.len() {
                        c.clone()
                    } else {
                        format!("{c:<w$}", w = widths[i])
                    }
                })
                .collect::<Vec<_>>()
                .join("   ")
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_align_and_the_last_cell_is_not_padded() {
        let rows = vec![
            vec!["ID".to_string(), "ROLE".to_string(), "NOTE".to_string()],
            vec!["10".to_string(), "learner".to_string(), "x".to_string()],
            vec!["2".to_string(), "unreachable: down".to_string()],
        ];
        assert_eq!(
            align(&rows),
            "ID   ROLE                NOTE\n10   learner             x\n2    unreachable: down"
        );
    }
}
