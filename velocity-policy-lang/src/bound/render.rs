//! A tree as text, for `policy explain` and reports.

use std::fmt;
use std::time::Duration;

use super::{Node, Path, Tree};
use crate::units::format_duration;

fn bound_text(bound: Option<Duration>) -> String {
    bound.map_or_else(|| "unbounded".to_owned(), format_duration)
}

fn tightest_text(tightest: Option<&str>, entry: &str) -> String {
    match tightest {
        Some("request") => " (the request's deadline)".to_owned(),
        Some(op) if op == entry => format!(" (`{op}`'s own)"),
        Some(op) => format!(" (`{op}`)"),
        None => String::new(),
    }
}

impl Node {
    /// One line about this node: its numbers and how its call was seen.
    fn line(&self) -> String {
        if self.after_response {
            let class = self.class.map_or("deferred", |c| c.as_str());
            return format!(
                "{}: {class}, after the response: outside this bound (a tree of its own)",
                self.operation
            );
        }
        let mut parts = Vec::new();
        if self.cycle {
            parts.push("called again below itself: a cycle, not expanded".to_owned());
        } else if self.unknown {
            parts.push("no numbers in the policy".to_owned());
        } else if self.isolated {
            parts.push("isolated CPU work, waited for within its caller's deadline".to_owned());
        } else {
            parts.push(match self.deadline {
                Some(d) => format!("deadline {}", format_duration(d)),
                None => "no deadline of its own".to_owned(),
            });
            if self.attempts > 1 {
                parts.push(format!("{} attempts", self.attempts));
            }
        }
        parts.push(format!("bound {}", bound_text(self.bound)));
        if self.truncated {
            parts.push("not expanded further: too many calls".to_owned());
        }
        let mut line = format!("{}: {}", self.operation, parts.join(", "));
        if let Some(seen) = self.seen {
            line.push_str(&format!(" [{seen}]"));
        }
        line
    }

    fn write(
        &self,
        f: &mut fmt::Formatter<'_>,
        prefix: &str,
        last: bool,
        root: bool,
    ) -> fmt::Result {
        if root {
            writeln!(f, "  {}", self.line())?;
        } else {
            writeln!(
                f,
                "  {prefix}{} {}",
                if last { "└─" } else { "├─" },
                self.line()
            )?;
        }
        let below = if root {
            String::new()
        } else {
            format!("{prefix}{}", if last { "   " } else { "│  " })
        };
        for (i, child) in self.children.iter().enumerate() {
            child.write(f, &below, i + 1 == self.children.len(), false)?;
        }
        Ok(())
    }
}

impl fmt::Display for Path {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let entry = self.operations.first().map_or("", String::as_str);
        write!(
            f,
            "{}: {} with propagation{}, {} alone ({})",
            self.operations.join(" > "),
            bound_text(self.bound),
            tightest_text(self.tightest.as_deref(), entry),
            bound_text(self.alone),
            self.sum
        )?;
        if let Some(saved) = self.difference() {
            write!(f, ", {} saved", format_duration(saved))?;
        }
        Ok(())
    }
}

impl fmt::Display for Tree {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let class = self.root.class.map_or("an operation", |c| c.as_str());
        write!(f, "tree {}: {class}", self.entry())?;
        match (self.request, self.under_deadline) {
            (Some(request), _) => write!(f, ", within the request's {}", format_duration(request))?,
            (None, Some(true)) => f.write_str(", called with a deadline in scope")?,
            (None, Some(false)) => f.write_str(", called with no deadline in scope")?,
            (None, None) => {}
        }
        writeln!(f)?;
        self.root.write(f, "", true, true)?;
        writeln!(
            f,
            "  worst case with deadline propagation:    {}{}",
            bound_text(self.bound),
            tightest_text(self.tightest.as_deref(), self.entry())
        )?;
        writeln!(
            f,
            "  worst case if each timeout stood alone:  {} ({})",
            bound_text(self.alone),
            self.sum
        )?;
        if let Some(saved) = self.difference() {
            writeln!(
                f,
                "  what propagation saves:                  {}",
                format_duration(saved)
            )?;
        }
        if self.paths.len() > 1 || self.paths_left_out > 0 {
            writeln!(f, "  per path:")?;
            for path in &self.paths {
                writeln!(f, "    {path}")?;
            }
            if self.paths_left_out > 0 {
                writeln!(f, "    ... and {} more paths", self.paths_left_out)?;
            }
        }
        Ok(())
    }
}
