//! A unified diff of a configuration before and after a rewrite, for `--dry-run`: the lines
//! the two share at the start and the end are set aside, the rest is matched line by line
//! (a longest common subsequence, bounded: past [`MAX_CELLS`] the changed middle is shown
//! as removed and added whole), and each run of changes is shown with three lines around it.

/// Largest table of the line matching, in cells.
const MAX_CELLS: usize = 4_000_000;

/// Lines of context around each change.
const CONTEXT: usize = 3;

/// One line of the diff.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Same,
    Removed,
    Added,
}

/// The unified diff of `before` and `after`, labelled `name`; empty when they are equal.
pub(crate) fn unified(name: &str, before: &str, after: &str) -> Vec<String> {
    if before == after {
        return Vec::new();
    }
    let a: Vec<&str> = before.lines().collect();
    let b: Vec<&str> = after.lines().collect();
    let ops = script(&a, &b);
    let mut out = vec![format!("--- {name}"), format!("+++ {name} (rewritten)")];
    // Indices into `ops` of the changes, grouped into hunks whose gaps are short.
    let changed: Vec<usize> = (0..ops.len()).filter(|i| ops[*i].0 != Op::Same).collect();
    let mut start = 0;
    while start < changed.len() {
        let mut end = start;
        while end + 1 < changed.len() && changed[end + 1] - changed[end] <= 2 * CONTEXT + 1 {
            end += 1;
        }
        let from = changed[start].saturating_sub(CONTEXT);
        let to = (changed[end] + CONTEXT + 1).min(ops.len());
        hunk(&ops[from..to], &mut out);
        start = end + 1;
    }
    out
}

/// Appends one hunk: its header, then its lines.
fn hunk(ops: &[(Op, usize, usize, &str)], out: &mut Vec<String>) {
    let Some(&(_, a0, b0, _)) = ops.first() else {
        return;
    };
    let a_len = ops.iter().filter(|o| o.0 != Op::Added).count();
    let b_len = ops.iter().filter(|o| o.0 != Op::Removed).count();
    out.push(format!("@@ -{},{a_len} +{},{b_len} @@", a0 + 1, b0 + 1));
    for (op, _, _, line) in ops {
        let mark = match op {
            Op::Same => ' ',
            Op::Removed => '-',
            Op::Added => '+',
        };
        out.push(format!("{mark}{line}"));
    }
}

/// The edit script from `a` to `b`: each line with what happens to it and the line numbers
/// (in `a` and in `b`) it stands at.
fn script<'a>(a: &[&'a str], b: &[&'a str]) -> Vec<(Op, usize, usize, &'a str)> {
    let prefix = a.iter().zip(b).take_while(|(x, y)| x == y).count();
    let suffix = a[prefix..]
        .iter()
        .rev()
        .zip(b[prefix..].iter().rev())
        .take_while(|(x, y)| x == y)
        .count();
    let (ma, mb) = (&a[prefix..a.len() - suffix], &b[prefix..b.len() - suffix]);
    let mut ops: Vec<(Op, usize, usize, &str)> =
        (0..prefix).map(|i| (Op::Same, i, i, a[i])).collect();
    match lcs(ma, mb) {
        Some(t) => {
            let (mut i, mut j) = (0, 0);
            while i < ma.len() || j < mb.len() {
                let (ai, bj) = (prefix + i, prefix + j);
                if i < ma.len() && j < mb.len() && ma[i] == mb[j] {
                    ops.push((Op::Same, ai, bj, ma[i]));
                    i += 1;
                    j += 1;
                } else if j < mb.len() && (i == ma.len() || t(i, j + 1) > t(i + 1, j)) {
                    ops.push((Op::Added, ai, bj, mb[j]));
                    j += 1;
                } else {
                    ops.push((Op::Removed, ai, bj, ma[i]));
                    i += 1;
                }
            }
        }
        None => {
            let b_at = prefix;
            ops.extend(
                ma.iter()
                    .enumerate()
                    .map(|(k, l)| (Op::Removed, prefix + k, b_at, *l)),
            );
            ops.extend(
                mb.iter()
                    .enumerate()
                    .map(|(k, l)| (Op::Added, prefix + ma.len(), prefix + k, *l)),
            );
        }
    }
    let (a_end, b_end) = (a.len() - suffix, b.len() - suffix);
    ops.extend((0..suffix).map(|k| (Op::Same, a_end + k, b_end + k, a[a_end + k])));
    ops
}

/// The lengths of the longest common subsequences of the suffixes `a[i..]` and `b[j..]`, as
/// a lookup; `None` when the table would be too large.
fn lcs(a: &[&str], b: &[&str]) -> Option<impl Fn(usize, usize) -> usize> {
    let (n, m) = (a.len(), b.len());
    if (n + 1).checked_mul(m + 1)? > MAX_CELLS {
        return None;
    }
    let width = m + 1;
    let mut t = vec![0usize; (n + 1) * width];
    for i in (0..n).rev() {
        for j in (0..m).rev() {
            t[i * width + j] = if a[i] == b[j] {
                t[(i + 1) * width + j + 1] + 1
            } else {
                t[(i + 1) * width + j].max(t[i * width + j + 1])
            };
        }
    }
    Some(move |i: usize, j: usize| t[i * width + j])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_changed_lines_are_marked_with_their_context() {
        let before = "a\nb\nc\nd\ne\nf\ng\nh\ni\n";
        let after = "a\nb\nc\nd\nE\nf\ng\nh\ni\n";
        let d = unified("f", before, after);
        assert_eq!(
            d,
            [
                "--- f",
                "+++ f (rewritten)",
                "@@ -2,7 +2,7 @@",
                " b",
                " c",
                " d",
                "-e",
                "+E",
                " f",
                " g",
                " h"
            ]
        );
        assert!(unified("f", before, before).is_empty());
    }
}
