//! CPU time and memory of processes, read from `/proc`: what a benchmark cell cost the servers
//! (a whole process tree: `kuberaft cluster up` and its replicas, or one replica) and the load
//! generator itself, so that a latency figure comes with the CPU budget it was reached in.

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

/// The resident memory of process `pid` in bytes (`/proc/<pid>/statm`), `None` once it is gone.
pub fn rss_bytes(pid: u32) -> Option<u64> {
    let statm = std::fs::read_to_string(format!("/proc/{pid}/statm")).ok()?;
    let pages: u64 = statm.split_whitespace().nth(1)?.parse().ok()?;
    // SAFETY: sysconf has no memory-safety preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    Some(pages * u64::try_from(page).unwrap_or(4096))
}

/// The live (not zombie) child of `parent` one of whose command-line arguments ends with
/// `suffix`, e.g. the replica that `kuberaft cluster up` started with `node-2.yaml`.
pub fn child_with_arg(parent: u32, suffix: &str) -> Option<u32> {
    let dir = std::fs::read_dir("/proc").ok()?;
    for entry in dir.flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else {
            continue;
        };
        let Some(stat) = std::fs::read_to_string(entry.path().join("stat")).ok() else {
            continue;
        };
        if parse_stat(&stat).map(|(ppid, _)| ppid) != Some(parent) || is_zombie(&stat) {
            continue;
        }
        let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
        if cmdline
            .split(|b| *b == 0)
            .any(|arg| arg.ends_with(suffix.as_bytes()))
        {
            return Some(pid);
        }
    }
    None
}

/// Whether a `/proc/<pid>/stat` line is a zombie's (exited, not yet reaped).
fn is_zombie(stat: &str) -> bool {
    stat.rsplit(')')
        .next()
        .is_some_and(|rest| rest.trim_start().starts_with('Z'))
}

/// Whether `pid` names a live process (neither gone nor a zombie).
pub fn is_alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| !is_zombie(&stat))
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
        // The thread's own CPU clock, from the kernel's scheduler rather than /proc, so the
        // spin lasts 300 ms of CPU however busy the machine is.
        fn thread_cpu() -> std::time::Duration {
            let mut t = libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            };
            // SAFETY: `t` is a valid timespec for the call to fill.
            let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut t) };
            assert_eq!(rc, 0, "clock_gettime");
            std::time::Duration::new(t.tv_sec as u64, t.tv_nsec as u32)
        }
        let before = tree_seconds(&[std::process::id()]);
        let (cpu_start, wall_start) = (thread_cpu(), std::time::Instant::now());
        let mut x = 0u64;
        while thread_cpu() - cpu_start < std::time::Duration::from_millis(300)
            && wall_start.elapsed() < std::time::Duration::from_secs(60)
        {
            x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(7));
        }
        let spent = tree_seconds(&[std::process::id()]) - before;
        assert!(spent >= 0.25, "300 ms of CPU spent spinning counted as {spent} s");
    }

    #[test]
    fn a_child_is_found_by_its_argument_and_has_memory() {
        let mut child = std::process::Command::new("sleep").arg("30.123").spawn().unwrap();
        let me = std::process::id();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        let found = loop {
            if let Some(pid) = child_with_arg(me, ".123") {
                break pid;
            }
            assert!(std::time::Instant::now() < deadline, "the child was not found");
            std::thread::sleep(std::time::Duration::from_millis(20));
        };
        assert_eq!(found, child.id());
        assert!(child_with_arg(me, ".456").is_none());
        assert!(is_alive(found));
        assert!(rss_bytes(found).is_some_and(|b| b > 0));
        child.kill().unwrap();
        child.wait().unwrap();
        assert!(!is_alive(found));
        assert!(rss_bytes(found).is_none());
    }
}
