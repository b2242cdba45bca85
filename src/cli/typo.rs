//! A misspelt subcommand (`netsweep lsit`, `netsweep reprot x.json`): without this it would
//! be taken for the HOST of the default `run` and looked up in DNS, or confuse clap. A first
//! word that is not a subcommand but is within two edits of one, and does not look like an
//! address, is refused with the subcommand it was likely meant to be; a negative number, which
//! clap would take for a flag, is refused with its option.

use clap::CommandFactory;

/// The message for a first argument that looks like a misspelt subcommand, if it is one.
pub fn misspelt_subcommand(args: &[String]) -> Option<String> {
    let word = args.get(1)?;
    if word.starts_with('-') || word.contains(['.', ':', '/', '[']) {
        return None;
    }
    let cmd = super::Cli::command();
    let names: Vec<String> = cmd
        .get_subcommands()
        .flat_map(|c| {
            std::iter::once(c.get_name().to_string()).chain(c.get_all_aliases().map(str::to_string))
        })
        .chain(std::iter::once("help".to_string()))
        .collect();
    if names.iter().any(|n| n == word) {
        return None;
    }
    let best = names
        .iter()
        .map(|n| (edits(&word.to_lowercase(), n), n))
        .filter(|(d, n)| *d <= 2 && *d < n.len())
        .min_by_key(|(d, _)| *d)?;
    Some(format!(
        "'{word}' is not a subcommand: did you mean '{}'? (to measure against a host named \
         '{word}', write `netsweep run {word}`)",
        best.1
    ))
}

/// The message for a negative number among the options (`--sizes -5`): clap would take it
/// for a flag and suggest `-- -5`, which makes it the HOST. No option takes one.
pub fn negative_number(args: &[String]) -> Option<String> {
    if args.get(1).is_some_and(|a| a == "lab") && args.iter().any(|a| a == "exec") {
        return None;
    }
    let mut prev = "";
    for a in args.iter().skip(1) {
        if a == "--" {
            return None;
        }
        // -4 and -6 are flags (the address family), not numbers.
        let family_flag = a == "-4" || a == "-6";
        let mut c = a.chars();
        if !family_flag
            && c.next() == Some('-')
            && c.next().is_some_and(|d| d.is_ascii_digit() || d == '.')
        {
            let at = if prev.starts_with('-') {
                format!(" for {prev}")
            } else {
                String::new()
            };
            return Some(format!(
                "negative value '{a}'{at}: sizes, times, rates and counts are never negative"
            ));
        }
        prev = a;
    }
    None
}

/// Edits (insert, delete, substitute, swap two neighbours) from `a` to `b`.
fn edits(a: &str, b: &str) -> usize {
    let (a, b): (Vec<char>, Vec<char>) = (a.chars().collect(), b.chars().collect());
    let mut d = vec![vec![0usize; b.len() + 1]; a.len() + 1];
    for (i, row) in d.iter_mut().enumerate() {
        row[0] = i;
    }
    for (j, v) in d[0].iter_mut().enumerate() {
        *v = j;
    }
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut v = (d[i - 1][j] + 1)
                .min(d[i][j - 1] + 1)
                .min(d[i - 1][j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                v = v.min(d[i - 2][j - 2] + 1);
            }
            d[i][j] = v;
        }
    }
    d[a.len()][b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(words: &[&str]) -> Option<String> {
        let v: Vec<String> = std::iter::once("netsweep")
            .chain(words.iter().copied())
            .map(String::from)
            .collect();
        misspelt_subcommand(&v)
    }

    #[test]
    fn a_misspelt_subcommand_is_named_and_a_host_is_left_alone() {
        assert!(check(&["lsit"]).unwrap().contains("did you mean 'list'"));
        assert!(check(&["reprot", "x.json"]).unwrap().contains("'report'"));
        assert_eq!(check(&["list"]), None);
        assert_eq!(check(&["example.com"]), None);
        assert_eq!(check(&["10.0.0.1:7200"]), None);
        assert_eq!(check(&["-p", "rate"]), None);
        assert_eq!(check(&["storage-host"]), None);
        assert_eq!(check(&[]), None);
    }

    #[test]
    fn a_negative_number_is_named_with_its_option() {
        let v = |w: &[&str]| -> Vec<String> {
            std::iter::once("netsweep")
                .chain(w.iter().copied())
                .map(String::from)
                .collect()
        };
        let m = negative_number(&v(&["run", "--sizes", "-5"])).unwrap();
        assert!(m.contains("'-5' for --sizes"), "{m}");
        assert_eq!(
            negative_number(&v(&["run", "--sizes", "5", "-p", "rate"])),
            None
        );
        // -6 is IPv6, not minus six.
        assert_eq!(
            negative_number(&v(&["run", "-6", "::1", "--sizes", "64"])),
            None
        );
        assert_eq!(
            negative_number(&v(&["lab", "exec", "h1", "--", "ping", "-5"])),
            None
        );
    }
}
