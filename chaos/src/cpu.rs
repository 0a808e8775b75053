//! CPU time of processes, read from `/proc`: what a benchmark cell cost the servers (a whole
//! process tree: `kuberaft cluster up` and its replicas) and the load generator itself, so
//! that a latency figure comes with the CPU budget it was reached in.

use std::collections::HashMap;

/// `(parent pid, user + system clock ticks)` from a `/proc/<pid>/stat` line.
fn parse_stat(stat: &str) -> Option<(u32, u64)> {
    // The command name is in parentheses and may itself contain them: fields start after the
    // last ')'. After it: state, ppid, …, utime (the 12th), stime (the 13th).
    let rest = stat.get(stat.rfind(')')? + 1..)?;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ppid = fields.get(1)?.parse().ok()?;
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    Some((ppid, utime + stime))
}

/// Clock ticks per second of `/proc`'s times.
fn ticks_per_second() -> f64 {
    // SAFETY: sysconf has no memory-safety preconditions.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if ticks > 0 {
        ticks as f64
    } else {
        100.0
    }
}

/// CPU seconds (user + system) used so far by the processes `roots` and every live
/// descendant of theirs.
pub fn tree_seconds(roots: &[u32]) -> f64 {
    let mut procs: HashMap<u32, (u32, u64)> = HashMap::new();
    if let Ok(dir) = std::fs::read_dir("/proc") {
        for entry in dir.flatten() {
            let Some(pid) = entry.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else {
                continue;
            };
            if let Some(parsed) = std::fs::read_to_string(entry.path().join("stat"))
                .ok()
                .and_then(|s| parse_stat(&s))
            {
                procs.insert(pid, parsed);
            }
        }
    }
    let mut children: HashMap<u32, Vec<u32>> = HashMap::new();
    for (pid, (ppid, _)) in &procs {
        children.entry(*ppid).or_default().push(*pid);
    }
    let mut ticks = 0;
    let mut frontier: Vec<u32> = roots.to_vec();
    while let Some(pid) = frontier.pop() {
        ticks += procs.get(&pid).map_or(0, |(_, t)| *t);
        frontier.extend(children.get(&pid).into_iter().flatten());
    }
    ticks as f64 / ticks_per_second()
}

/// CPU seconds (user + system) used so far by this process (all its threads, not the
/// processes it started).
pub fn own_seconds() -> f64 {
    std::fs::read_to_string("/proc/self/stat")
        .ok()
        .and_then(|s| parse_stat(&s))
        .map_or(0.0, |(_, ticks)| ticks as f64 / ticks_per_second())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_lines_give_parent_and_ticks_even_with_odd_names() {
        let line =
            "4242 (tokio (rt) worker) S 17 4242 4242 0 -1 4194560 100 0 0 0 250 31 0 0 20 0 3 0 100 0 0";
        assert_eq!(parse_stat(line), Some((17, 281)));
        assert_eq!(parse_stat("garbage"), None);
    }

    #[test]
    fn this_process_is_counted_after_it_works() {
        let before = tree_seconds(&[std::process::id()]);
        let start = std::time::Instant::now();
        let mut x = 0u64;
        while start.elapsed() < std::time::Duration::from_millis(300) {
            x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(7));
        }
        let spent = tree_seconds(&[std::process::id()]) - before;
        assert!(spent >= 0.1, "300 ms of spinning counted as {spent} s");
    }
}
